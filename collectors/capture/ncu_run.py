"""`rooftop collect --counters`: re-run a bounded subset of the workload under Nsight Compute.

The collector writes the timeline trace first, then calls `run_counters(args, trace_path)`.
That re-runs the same workload as a child process under `ncu`, profiling only the kernels inside
the chosen NVTX ranges (`--counter-steps prefill,decode:0-2`), reads the report and joins the
counters onto the timeline's kernels by NVTX path and launch order, then rewrites the trace
atomically. Whatever fails (no `ncu`, no permission, a replay error), the timeline trace stays as
it was and the message says what to do.

Contract with the collector (`collectors/capture/collect.py`): the child command is
`python -m rooftop collect <same workload options> --counters-child`, and `--counters-child` means
"run the workload with the Recorder's NVTX ranges but without the torch profiler, and write no
trace". The workload options read from `args` are: preset, batch, prompt_len, gen_len, dtype,
attn, cuda_graphs, device, counter_steps.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from collectors.readers.ncu import NcuError, join_counters

DEFAULT_STEPS = "prefill,decode:0-2"
EXIT_OK = 0
EXIT_NO_COUNTERS = 3  # the timeline trace was written, the counters could not be added

SECTIONS = ("LaunchStats", "Occupancy", "SpeedOfLight", "WarpStateStats", "MemoryWorkloadAnalysis",
            "SpeedOfLight_HierarchicalTensorRooflineChart")
# Extra metrics every arch since Volta has (an unknown name makes ncu abort, so no arch-specific
# ones here: the tensor-op and stall metrics come from the sections, which are arch-filtered).
METRICS = (
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg", "smsp__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
    "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
) + tuple(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "fhd" for op in ("add", "mul", "fma"))

# Replay cost: each profiled kernel is re-run once per pass after its memory is restored
# (42-47 passes for the full section set, 9 for basic). These sections
# are most of the full set. The per-pass and per-kernel seconds are a planning figure for
# small decode kernels, not a measurement.
PASSES_ESTIMATE = 40
SECONDS_PER_PASS = 0.02
SECONDS_PER_KERNEL = 0.2

PERMISSION_HELP = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM: since driver 418.43 they are "
    "admin-only by default). To enable them, either:\n"
    "  - run as root (sudo) or with CAP_SYS_ADMIN (CAP_PERFMON also works since driver R565); in a "
    "container, start it with --cap-add=SYS_ADMIN, or enable counters on the host;\n"
    "  - or allow all users: reload the driver with `sudo modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia "
    "&& sudo modprobe nvidia NVreg_RestrictProfilingToAdminUsers=0`, or persistently put "
    "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file in /etc/modprobe.d/, run "
    "`sudo update-initramfs -u` and reboot.\n"
    "  Check: `grep RmProfilingAdminOnly /proc/driver/nvidia/params` (1 = restricted). "
    "https://developer.nvidia.com/nvidia-development-tools-solutions-ERR_NVGPUCTRPERM-permission-issue-performance-counters"
)
NO_NCU_HELP = ("`ncu` (Nsight Compute CLI) is not on PATH. It ships with the CUDA toolkit "
               "(e.g. /usr/local/cuda/bin/ncu) or as NVIDIA's nsight-compute package; no PyPI package "
               "has it. Add it to PATH and run again with --counters.")

_STEP_ITEM = re.compile(r"^(prefill|decode)(?::(\d+)(?:-(\d+))?)?$")


def parse_counter_steps(spec: str | None) -> list[str]:
    """`prefill,decode:0-2` -> NVTX push/pop include filters for `ncu --nvtx-include`.

    Items: `PHASE` (every step of it), `PHASE:N` or `PHASE:N-M` (steps N..M inclusive). The
    Recorder pushes `PHASE`, then `step=N`, as nested ranges in the default domain, so the filters
    are `prefill/` and `decode/step=0/`...; push/pop filters need the trailing slash.
    """
    spec = (spec or DEFAULT_STEPS).strip()
    filters: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        m = _STEP_ITEM.match(item)
        if not m:
            raise NcuError(None, f"bad --counter-steps item {item!r}",
                           "use PHASE or PHASE:N or PHASE:N-M, e.g. prefill,decode:0-2")
        phase, lo, hi = m.group(1), m.group(2), m.group(3)
        if lo is None:
            new = [f"{phase}/"]
        else:
            first, last = int(lo), int(hi if hi is not None else lo)
            if last < first:
                raise NcuError(None, f"bad --counter-steps range {item!r}: {last} < {first}")
            if last - first >= 64:
                raise NcuError(None, f"--counter-steps {item!r} asks for {last - first + 1} steps",
                               "profile a few steps: every kernel costs tens of replay passes")
            new = [f"{phase}/step={i}/" for i in range(first, last + 1)]
        filters += [f for f in new if f not in filters]
    return filters


def _last_decode_step(filters: list[str]) -> int | None:
    """The last decode step the filters need, or None when all decode steps are wanted."""
    if "decode/" in filters:
        return None
    steps = [int(m.group(1)) for f in filters if (m := re.match(r"decode/step=(\d+)/$", f))]
    return max(steps) if steps else -1


def child_command(args: Any, filters: list[str] | None = None) -> list[str]:
    """The workload re-run for ncu: the same options, `--counters-child`, and no more decode
    steps than the filters need (later steps would run unprofiled, for nothing)."""
    filters = filters if filters is not None else parse_counter_steps(getattr(args, "counter_steps", None))
    cmd = [sys.executable, "-m", "rooftop", "collect"]
    for opt, attr in (("--preset", "preset"), ("--batch", "batch"), ("--prompt-len", "prompt_len"),
                      ("--gen-len", "gen_len"), ("--dtype", "dtype"), ("--attn", "attn"),
                      ("--device", "device")):
        value = getattr(args, attr, None)
        if attr == "gen_len":
            last = _last_decode_step(filters)
            if last is not None and value is not None:
                value = min(int(value), max(last + 1, 1))
        if value is not None:
            cmd += [opt, str(value)]
    graphs = getattr(args, "cuda_graphs", None)
    if graphs is not None:
        cmd.append("--cuda-graphs" if graphs else "--no-cuda-graphs")
    cmd.append("--counters-child")
    return cmd


def build_ncu_command(filters: list[str], report: str | os.PathLike, child: list[str],
                      ncu: str = "ncu") -> list[str]:
    """The ncu command line: NVTX filters, the sections and metrics rooftop reads, unlocked clocks
    (`--clock-control none`: the run's own clocks, not base clocks), export to `report`."""
    cmd = [ncu, "--nvtx"]
    for f in filters:
        cmd += ["--nvtx-include", f]
    cmd += ["--target-processes", "all", "--clock-control", "none"]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += ["--metrics", ",".join(METRICS), "--export", str(report), "--force-overwrite"]
    return cmd + list(child)


def estimate_replay_seconds(n_kernels: int, n_passes: int = PASSES_ESTIMATE) -> float:
    """Rough wall time of profiling `n_kernels` kernels at `n_passes` replay passes each."""
    return max(0, int(n_kernels)) * (max(1, int(n_passes)) * SECONDS_PER_PASS + SECONDS_PER_KERNEL)


def _matches(path: Any, filters: list[str]) -> bool:
    if not isinstance(path, str):
        return False
    segs = path.split("/")
    for f in filters:
        want = f.rstrip("/").split("/")
        if any(segs[i:i + len(want)] == want for i in range(len(segs) - len(want) + 1)):
            return True
    return False


def count_filtered_kernels(events: pd.DataFrame, filters: list[str]) -> int:
    kernels = events[events["kind"].astype(object) == "kernel"] if "kind" in events.columns else events
    return int(sum(_matches(p, filters) for p in kernels["path"])) if "path" in kernels.columns else 0


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else (out.strip().splitlines() or [None])[-1]


def _error_lines(output: str, limit: int = 5) -> str:
    errs = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
    lines = errs or [ln.strip() for ln in output.splitlines() if ln.strip()]
    return " | ".join(lines[-limit:])


def run_counters(args: Any, trace_path: str | os.PathLike, *, ncu: str | None = None,
                 out: TextIO | None = None) -> int:
    """Profile the chosen steps under ncu and join the counters into the trace at `trace_path`.

    Returns EXIT_OK (0) when counters were joined, EXIT_NO_COUNTERS (3) when they could not be
    collected; in that case the trace is untouched and `out` (stderr) says what to do.
    """
    from rooftop.summary import write_summarized
    from rooftop.trace import load_trace

    out = out or sys.stderr
    trace_path = Path(trace_path)

    def fail(message: str) -> int:
        print(f"rooftop: counters not collected; the timeline trace {trace_path} is complete without them.\n"
              f"{message}", file=out)
        return EXIT_NO_COUNTERS

    try:
        filters = parse_counter_steps(getattr(args, "counter_steps", None))
    except NcuError as exc:
        return fail(str(exc))
    exe = ncu or shutil.which("ncu")
    if exe is None:
        return fail(NO_NCU_HELP)
    trace = load_trace(trace_path)
    report = trace_path.with_name(trace_path.name.removesuffix(".parquet") + ".ncu-rep")
    cmd = build_ncu_command(filters, report, child_command(args, filters), ncu=exe)
    n = count_filtered_kernels(trace.events, filters)
    print(f"rooftop: profiling {n} kernel(s) x ~{PASSES_ESTIMATE} replay passes with Nsight Compute, "
          f"about {estimate_replay_seconds(n):.0f} s:\n  {shlex.join(cmd)}", file=out, flush=True)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", env={**os.environ, "LC_ALL": "C"})
    except OSError as exc:
        return fail(f"could not start {exe}: {exc.strerror or exc}")
    if "ERR_NVGPUCTRPERM" in proc.stdout:
        return fail(PERMISSION_HELP)
    if proc.returncode != 0:
        return fail(f"ncu exited with status {proc.returncode}: {_error_lines(proc.stdout)}")
    if not report.is_file():
        return fail(f"ncu wrote no report {report}: {_error_lines(proc.stdout)}")
    try:
        from collectors.readers.ncu_rep import read_ncu_rep

        rows, rep_meta = read_ncu_rep(report)
    except NcuError as exc:
        return fail(f"{exc}: {_error_lines(proc.stdout)}")

    joined, summary = join_counters(trace.events, rows)
    meta = dict(trace.meta)
    device = dict(meta.get("device") or {})
    peaks = dict(device.get("peaks") or {})
    peaks["ncu"] = rep_meta["device"]["peaks"]["ncu"]
    device["peaks"] = peaks
    meta["device"] = device
    source = dict(meta.get("source") or {})
    source["counters"] = {"tool": "ncu", "version": ncu_version(exe), "command": shlex.join(cmd),
                          "report": str(report), "filters": filters,
                          **{k: summary[k] for k in ("matched", "mismatched", "unmatched_counters")}}
    meta["source"] = source
    warnings = list(meta.get("warnings") or [])
    if summary["mismatched"] or summary["unmatched_counters"]:
        warnings.append(f"ncu counters: {summary['matched']} kernel(s) joined, {summary['mismatched']} name "
                        f"mismatch(es) and {summary['unmatched_counters']} unmatched counter row(s) left unjoined")
    meta["warnings"] = warnings
    write_summarized(trace_path, joined, meta)  # the summary in the footer: `report` answers at once
    print(f"rooftop: counters joined onto {summary['matched']} of {len(rows)} profiled kernel(s) "
          f"(report kept at {report})", file=out)
    return EXIT_OK
