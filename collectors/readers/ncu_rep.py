"""Read an Nsight Compute report (`.ncu-rep`) through NVIDIA's `ncu_report` package.

`ncu_report` (PyPI `ncu-report`, the `rooftop[ncu]` extra) reads reports without a GPU. It is
imported only when a report is read. Quirks handled (ncu-report 2026.3.1; docs/formats.md):
a garbage file loads as a report with 0 ranges instead of raising; a metric the report did not
collect is `None`; a failed collection is NaN. Both become null here, never 0.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rooftop import limits

from collectors.readers.ncu import NcuError, device_meta, finish_rows, row_from_metrics, total_only_warning

INSTALL_HINT = "pip install 'rooftop[ncu]'"
DEFAULT_DOMAIN = "<default domain>"

# Metrics fetched from each kernel (a full-set report holds ~1,200; reading them all is slow).
_WANTED = {
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
    "launch__registers_per_thread", "launch__device_id", "launch__stream_id",
    "launch__shared_mem_per_block", "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "sm__cycles_elapsed.avg", "smsp__cycles_elapsed.avg",
    "sm__cycles_elapsed.avg.per_second", "dram__cycles_elapsed.avg.per_second",
    "dram__bytes.sum.peak_sustained",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm__inst_executed_pipe_tensor.sum",
    "device__attribute_display_name", "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor", "device__attribute_multiprocessor_count",
    "device__attribute_clock_rate", "device__attribute_memory_clock_rate",
    "profiler__replayer_passes", "device__attribute_total_memory",
    "gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second",
}
_WANTED_PREFIXES = (
    "launch__grid_dim_", "launch__block_dim_",
    "smsp__average_warps_issue_stalled_", "sm__ops_path_tensor_src_",
    "smsp__sass_thread_inst_executed_op_", "sm__sass_thread_inst_executed_op_",
)


def _load_module():
    try:
        import ncu_report  # noqa: PLC0415 - optional extra, imported only to read a report
    except ImportError:
        return None
    return ncu_report


def nvtx_path(action: Any) -> str | None:
    """The NVTX push/pop stack of a kernel, outermost first, joined by `/`.

    The default domain's stack comes first, then each named domain's stack in the report's
    order, without a domain prefix: a Recorder that pushes `decode`, `step=3`, `layer=0` (in any
    domain) gives `decode/step=3/layer=0`, the same path the torch profiler timeline carries.
    Start/end ranges are not part of a stack and are ignored.
    """
    state = action.nvtx_state()
    if state is None:
        return None
    domains = [state.domain_by_id(d) for d in state.domains()]
    domains.sort(key=lambda dom: dom.name() != DEFAULT_DOMAIN)  # stable: default first
    parts = [str(r) for dom in domains for r in dom.push_pop_ranges()]
    return "/".join(parts) if parts else None


def _metrics(action: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in action.metric_names():
        if name in _WANTED or name.startswith(_WANTED_PREFIXES):
            metric = action.metric_by_name(name)
            if metric is not None:
                out[name] = metric.value()
    return out


# The container seen in every report (Nsight Compute 2023-2025): "NVR\0", u32 2, u16 0x0708, then
# records, each a little-endian u32 length and that many bytes, up to the end of the file. A file
# whose records stop short of its end was cut: ncu_report loads what precedes the cut silently.
_CONTAINER = b"NVR\x00\x02\x00\x00\x00\x08\x07"


def truncated_at(path: Path) -> int | None:
    """The offset where a report's record chain breaks off (a cut file), or None when the chain
    ends exactly at the end of the file, or the container is not the one described above."""
    import struct

    with open(path, "rb") as fh:
        if fh.read(len(_CONTAINER)) != _CONTAINER:
            return None
        size = os.fstat(fh.fileno()).st_size
        offset = len(_CONTAINER)
        while offset < size:
            fh.seek(offset)
            head = fh.read(4)
            if len(head) < 4:
                return offset
            (length,) = struct.unpack("<I", head)
            if offset + 4 + length > size:
                return offset
            offset += 4 + length
    return None


def read_ncu_rep(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per profiled kernel (trace columns, `counters` true) and the metadata document.

    NVIDIA's reader aborts the whole process on some damaged reports (one inflated record length:
    a failed protobuf CHECK, SIGABRT, exit 134, no message). It therefore runs in a forked child
    (`_isolated`): whatever it does there, rooftop ends with one line."""
    path = Path(path)
    if not path.is_file():
        raise NcuError(path, "no such file" if not path.exists() else "not a file")
    if _load_module() is None:
        raise NcuError(path, "reading .ncu-rep needs NVIDIA's ncu-report package", INSTALL_HINT)
    if hasattr(os, "fork") and os.environ.get("ROOFTOP_NCU_IN_PROCESS") != "1":
        return _isolated(path)
    return _read(path)


def _isolated(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`_read(path)` in a forked child (the parent's imports are shared, so it starts in
    milliseconds), its result or its one-line error sent back pickled through a pipe. The child's
    stderr goes nowhere (the reader's abort prints a stack trace); a child that dies, whatever
    the signal, is one `NcuError`. Ctrl-C or SIGTERM in the parent stops and reaps the child."""
    import pickle
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the terminal's Ctrl-C is the parent's to answer)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.dup2(null, 1)
            try:
                result = ("ok", _read(path))
            except NcuError as exc:
                result = ("error", (exc.problem, exc.hint))
            except MemoryError:
                result = ("error", ("out of memory while reading the report", None))
            except Exception as exc:  # noqa: BLE001 - sent back, said in one line by the parent
                result = ("error", (f"NVIDIA's ncu_report reader failed: {exc.__class__.__name__}: {exc}", None))
            data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as out:
                out.write(data)
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    os.close(w)
    seconds = limits.ncu_rep_seconds(path.stat().st_size)
    try:
        data = _read_pipe(r, time.monotonic() + seconds)
        if data is None:  # past the budget: the reader is stopped, and said so
            raise NcuError(path, f"NVIDIA's ncu_report reader did not finish in {seconds} s (stopped): the report "
                                 f"may be damaged; {limits.NCU_REP_SECONDS_ENV} allows more time")
        _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    if os.WIFSIGNALED(status) or not data:
        how = (f"killed by signal {os.WTERMSIG(status)} ({signal.Signals(os.WTERMSIG(status)).name})"
               if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}")
        cut = truncated_at(path)
        where = f"; its records break off at byte {cut:,}" if cut is not None else ""
        raise NcuError(path, f"NVIDIA's ncu_report reader crashed on this report ({how}): it is damaged{where}",
                       "profile again, or copy the whole file")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise NcuError(path, value[0], value[1])
    return value


def _read_pipe(fd: int, deadline: float) -> bytes | None:
    """Everything written to the pipe `fd` until its writer closes it (then `fd` is closed too);
    None where the deadline (`time.monotonic()`) passes first."""
    import select

    parts = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
    finally:
        os.close(fd)


def _read(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`read_ncu_rep` in this process."""
    ncu_report = _load_module()
    try:
        ctx = ncu_report.load_report(str(path))
        n_ranges = ctx.num_ranges()
    except (OSError, RuntimeError, ValueError) as exc:
        raise NcuError(path, f"cannot load Nsight Compute report: {exc}") from None
    cut = truncated_at(path)
    if n_ranges == 0:
        if cut is not None:
            raise NcuError(path, f"truncated Nsight Compute report (ends inside a record at byte {cut:,}): "
                                 "no complete kernel result", "profile again, or copy the whole file")
        raise NcuError(path, "not an Nsight Compute report or empty (0 ranges)")

    rows: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    warnings: list[str] = []
    skipped = 0
    kernel_type = ncu_report.IAction.WorkloadType_KERNEL
    for r in range(n_ranges):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            action = rng.action_by_idx(i)
            if action.workload_type() != kernel_type:
                skipped += 1  # range/graph replay results have no per-kernel meaning here
                continue
            m = _metrics(action)
            row = row_from_metrics(m)
            row["name"] = action.name(ncu_report.IAction.NameBase_DEMANGLED) or action.name()
            row["path"] = nvtx_path(action)
            row["passes"] = m.get("profiler__replayer_passes")
            rows.append(row)
            metrics.append(m)
    if not rows:
        raise NcuError(path, "the report holds no kernel results", "profile with the default --replay-mode kernel")
    if cut is not None:
        warnings.append(f"truncated report (ends inside a record at byte {cut:,} of {path.stat().st_size:,}): "
                        "kernels profiled after the cut are missing")
    if skipped:
        warnings.append(f"{skipped} non-kernel result(s) (range or graph replay) skipped")
    warnings.append("ncu has no timeline: start_ns places the profiled kernels back to back")
    warnings += total_only_warning(metrics)
    derived = sum(1 for r in rows if r.pop("dur_derived", False))
    if derived:
        warnings.append(f"{derived} kernel(s) lack gpu__time_duration.sum: duration derived from "
                        "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second")
    frame = finish_rows(rows)
    meta = {
        "source": {"tool": "ncu", "version": None, "reader": f"ncu_report {ctx.get_version()}",
                   "file": path.name},
        "device": device_meta(metrics),
        "warnings": warnings,
        "modeled": False,
    }
    return frame, meta
