"""`rooftop collect --counters`: re-run a bounded subset of the workload under Nsight Compute.

The collector writes the timeline trace first, then calls `run_counters(args, trace_path)`.
That re-runs the same workload as a child process under `ncu`, profiling only the kernels inside
the chosen NVTX ranges (`--counter-steps`, by default one layer of one decode step:
`decode/step=0/layer=0/`), reads the report and joins the counters onto the timeline's kernels by
NVTX path and launch order, then rewrites the trace atomically. Before ncu starts, the kernels
under the filters are counted in the timeline and the replay estimate checked against the budget;
ncu runs in its own process group, stopped past the time limit. Whatever fails (no `ncu`,
restricted counters, over budget, a replay error, a hang, nothing joined), the timeline trace
stays as it was, the exit status is 3 and the message says what to do.

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

# One layer of one step by default: a Llama-3-8B decode step launches ~1,200 kernels, about
# 1,200 s of replay at the planning figures below; one layer is ~35 kernels, about 35 s.
DEFAULT_STEPS = "decode/step=0/layer=0/"
# The replay budget checked before ncu starts (`--counter-budget`), and the wall-clock limit of the
# whole ncu run on top of it: the child re-builds the model and runs its warm-up under ncu too.
DEFAULT_BUDGET_S = 240.0
CHILD_SETUP_S = 180.0
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

# `PHASE`, `PHASE:N`, `PHASE:N-M`, each optionally `/layer=L`; or the NVTX path itself,
# `PHASE/step=N/` or `PHASE/step=N/layer=L/`.
_STEP_ITEM = re.compile(r"^(prefill|decode)(?::(\d+)(?:-(\d+))?)?(?:/layer=(\d+))?/?$")
_PATH_ITEM = re.compile(r"^(prefill|decode)/step=(\d+)(?:/layer=(\d+))?/?$")


def parse_counter_steps(spec: str | None) -> list[str]:
    """`decode:0/layer=0` (the default, `decode/step=0/layer=0/`) -> NVTX push/pop include
    filters for `ncu --nvtx-include`.

    Items: `PHASE` (every step of it), `PHASE:N` or `PHASE:N-M` (steps N..M inclusive), each
    optionally narrowed to one layer with `/layer=L`; or an NVTX path `PHASE/step=N[/layer=L]/`.
    The Recorder pushes `PHASE`, `step=N`, `layer=L` as nested ranges in the default domain, so the
    filters are `decode/step=0/layer=0/`...; push/pop filters need the trailing slash.
    """
    spec = (spec or DEFAULT_STEPS).strip()
    filters: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        m = _PATH_ITEM.match(item)
        if m:
            phase, lo, hi, layer = m.group(1), m.group(2), None, m.group(3)
        else:
            m = _STEP_ITEM.match(item)
            if not m:
                raise NcuError(None, f"bad --counter-steps item {item!r}",
                               "use PHASE[:N[-M]][/layer=L] or an NVTX path, e.g. decode:0/layer=0")
            phase, lo, hi, layer = m.groups()
        if layer is not None and lo is None:
            raise NcuError(None, f"bad --counter-steps item {item!r}: a layer needs a step",
                           f"e.g. {phase}:0/layer={layer}")
        suffix = f"layer={int(layer)}/" if layer is not None else ""
        if lo is None:
            new = [f"{phase}/"]
        else:
            first, last = int(lo), int(hi if hi is not None else lo)
            if last < first:
                raise NcuError(None, f"bad --counter-steps range {item!r}: {last} < {first}")
            if last - first >= 64:
                raise NcuError(None, f"--counter-steps {item!r} asks for {last - first + 1} steps",
                               "profile a few steps: every kernel costs tens of replay passes")
            new = [f"{phase}/step={i}/{suffix}" for i in range(first, last + 1)]
        filters += [f for f in new if f not in filters]
    return filters


def _last_decode_step(filters: list[str]) -> int | None:
    """The last decode step the filters need, or None when all decode steps are wanted."""
    if "decode/" in filters:
        return None
    steps = [int(m.group(1)) for f in filters if (m := re.match(r"decode/step=(\d+)/", f))]
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


def filtered_kernels(events: pd.DataFrame, filters: list[str]) -> pd.Series:
    """Which rows are kernels inside one of the NVTX `filters` (each distinct path tested once)."""
    if "path" not in events.columns or events.empty:
        return pd.Series(False, index=events.index)
    kernel = (events["kind"].astype(object) == "kernel") if "kind" in events.columns else pd.Series(True, index=events.index)
    codes, uniques = pd.factorize(events["path"].astype(object), use_na_sentinel=True)
    hit = [_matches(u, filters) for u in uniques] + [False]
    return kernel & pd.Series(pd.array(hit, dtype=bool)[codes], index=events.index).astype(bool)


def count_filtered_kernels(events: pd.DataFrame, filters: list[str]) -> int:
    return int(filtered_kernels(events, filters).sum())


def check_budget(events: pd.DataFrame, filters: list[str], budget_s: float) -> tuple[int, float, str | None]:
    """Kernels under `filters`, their replay estimate, and why not to start ncu (None: go).

    Nothing matching is an error (ncu would profile 0 kernels); an estimate over the budget is one
    too, with the estimate of one layer of one step as the bounded alternative."""
    n = count_filtered_kernels(events, filters)
    est = estimate_replay_seconds(n)
    if n == 0:
        paths = events.loc[events["kind"].astype(object) == "kernel", "path"].dropna().astype(str) \
            if "path" in events.columns and "kind" in events.columns else pd.Series(dtype=object)
        seen = sorted({"/".join(p.split("/")[:3]) for p in paths.head(2000)})[:3]
        return n, est, (f"no kernel of the timeline trace lies inside {', '.join(filters)}: ncu would profile "
                        f"nothing (ranges seen: {', '.join(seen) or 'none'})")
    if est > budget_s:
        one = parse_counter_steps(DEFAULT_STEPS)
        n1 = count_filtered_kernels(events, one)
        hint = (f"; one layer of one step ({one[0]}: {n1} kernel(s)) takes about {estimate_replay_seconds(n1):.0f} s"
                if 0 < n1 < n else "")
        return n, est, (f"profiling {n} kernel(s) would take about {est:.0f} s of replay, over the budget of "
                        f"{budget_s:.0f} s (--counter-budget){hint}: narrow --counter-steps, "
                        f"e.g. --counter-steps decode:0/layer=0")
    return n, est, None


def counters_restricted(params: str | os.PathLike = "/proc/driver/nvidia/params",
                        status: str | os.PathLike = "/proc/self/status", euid: int | None = None) -> bool:
    """True when the driver keeps the performance counters to admins (RmProfilingAdminOnly: 1) and
    this process is neither root nor holds CAP_SYS_ADMIN (bit 21) or CAP_PERFMON (bit 38)."""
    try:
        text = Path(params).read_text(errors="replace")
    except OSError:
        return False  # not readable: leave it to ncu's own message
    m = re.search(r"RmProfilingAdminOnly:\s*(\d+)", text)
    if not m or m.group(1) == "0":
        return False
    euid = euid if euid is not None else (os.geteuid() if hasattr(os, "geteuid") else None)
    if euid == 0:
        return False
    try:
        cap = re.search(r"CapEff:\s*([0-9a-fA-F]+)", Path(status).read_text())
    except OSError:
        cap = None
    eff = int(cap.group(1), 16) if cap else 0
    return not (eff >> 21 & 1 or eff >> 38 & 1)


def run_bounded(cmd: list[str], timeout_s: float, env: dict | None = None) -> tuple[int | None, str]:
    """Run `cmd` in its own process group, output captured; past `timeout_s`, the whole group
    (ncu, the workload it launched, their children) is terminated, then killed. Returns (status,
    output); status None when it timed out."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                out, _ = proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                out = ""
        return None, out or ""


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


def _nothing_joined(rows: pd.DataFrame, summary: dict, filters: list[str]) -> str:
    """Why no counter row joined the timeline, naming the first range that did not match."""
    if rows is None or rows.empty:
        return (f"ncu profiled 0 kernels inside {', '.join(filters)}: were the NVTX ranges emitted in the re-run "
                "(the `nvtx` package installed)?")
    first = next(((p, st) for p, st in summary["paths"].items() if st["counters"] and not st["matched"]), None)
    where = (f"first unmatched range {first[0] or '(no NVTX range)'!r}: {first[1]['counters']} profiled kernel(s) "
             f"against {first[1]['timeline']} timeline kernel(s) there") if first else "no range matched"
    return f"none of the {len(rows)} profiled kernel(s) joined the timeline ({where})"


def run_counters(args: Any, trace_path: str | os.PathLike, *, ncu: str | None = None,
                 out: TextIO | None = None, check_permission: bool = True) -> int:
    """Profile the chosen steps under ncu and join the counters into the trace at `trace_path`.

    Returns EXIT_OK (0) when counters were joined, EXIT_NO_COUNTERS (3) when they could not be
    collected; in that case the trace is untouched and `out` (stderr) says what to do.
    """
    from rooftop.present.summary import write_summarized
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
    if check_permission and counters_restricted():
        return fail(PERMISSION_HELP)
    trace = load_trace(trace_path)
    report = trace_path.with_name(trace_path.name.removesuffix(".parquet") + ".ncu-rep")
    cmd = build_ncu_command(filters, report, child_command(args, filters), ncu=exe)
    budget = float(getattr(args, "counter_budget", None) or DEFAULT_BUDGET_S)
    n, est, why_not = check_budget(trace.events, filters, budget)
    if why_not:
        return fail(why_not)
    limit = float(getattr(args, "counter_timeout", None) or (budget + CHILD_SETUP_S))
    print(f"rooftop: profiling {n} kernel(s) x ~{PASSES_ESTIMATE} replay passes with Nsight Compute, "
          f"about {est:.0f} s (budget {budget:.0f} s, stopped at {limit:.0f} s):\n  {shlex.join(cmd)}",
          file=out, flush=True)
    try:
        status, output = run_bounded(cmd, limit, env={**os.environ, "LC_ALL": "C"})
    except OSError as exc:
        return fail(f"could not start {exe}: {exc.strerror or exc}")
    if status is None:
        return fail(f"ncu ran past {limit:.0f} s and was stopped (its process group killed): a hung replay or "
                    f"workload; {_error_lines(output) or 'no output'}")
    if "ERR_NVGPUCTRPERM" in output:
        return fail(PERMISSION_HELP)
    if status != 0:
        return fail(f"ncu exited with status {status}: {_error_lines(output)}")
    if not report.is_file():
        return fail(f"ncu wrote no report {report}: {_error_lines(output)}")
    try:
        from collectors.readers.ncu_rep import read_ncu_rep

        rows, rep_meta = read_ncu_rep(report)
    except NcuError as exc:
        return fail(f"{exc}: {_error_lines(output)}")

    joined, summary = join_counters(trace.events, rows)
    if not summary["matched"]:
        return fail(_nothing_joined(rows, summary, filters))
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
