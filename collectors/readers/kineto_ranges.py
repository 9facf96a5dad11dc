"""Kineto's own word: the device, each op's input dtypes, and CUPTI range-profiler traces.

An op's `Input type` names the dtype its kernels compute in where their names say none
(`op_dtype_codes`: the launching op's first input; the importer's `dtype` column, which the
analysis ranks below a kernel name that spells a dtype: an fp32 `aten::mm` with TF32 enabled runs
a `..._tf32` kernel).

`deviceProperties` (one entry per GPU: name, computeMajor/Minor, numSms, totalGlobalMem) names the
device even when the trace has no kernel rows to pick one by: when every entry names the same GPU
(8 A100s), that GPU is the device.

Range-profiler mode (libkineto `CuptiRangeProfiler.cpp`, ActivityType `CUDA_PROFILER_RANGE`: torch
profiler with `experimental_config=_ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)`) writes no `kernel` events. Each profiled range is an `X` event of
category `cuda_profiler_range`, named for its kernel (auto-range mode; `__missing__` when CUPTI
lost the name), with one `args` entry per metric (`smsp__sass_thread_inst_executed_op_ffma_pred_on.sum`
and the rest of `kineto__cuda_core_flops`, `sm__inst_executed_pipe_tensor.sum` ...), on `pid` =
the device. Its times are not measured: `addRangeEvents` splits the profiling window evenly across
the ranges ("the actual times do not really matter here"). Those ranges become kernel rows with
the FLOPs and compute dtype their counters give (`ncu.flops_from_metrics`, `ncu.pipe_dtype`: the
same metric names Nsight Compute uses) and a warning that their durations are placeholders.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# The compute dtypes an op's input types can name (`Input type`: "c10::BFloat16", "float", ...).
OP_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "fp64", "int8")


def op_dtype_codes(shape_ids: np.ndarray, shapes: list) -> np.ndarray:
    """Per op instance, the code (into OP_DTYPES; -1 unknown) of the dtype its input types name
    (`ceilings.op_dtype`: the first input's type), once per distinct input signature."""
    from rooftop.analysis.ceilings import op_dtype

    ids = np.asarray(shape_ids, dtype=np.int64)
    out = np.full(len(ids), -1, np.int64)
    if not len(ids):
        return out
    uniq, inverse = np.unique(ids, return_inverse=True)
    codes = np.full(len(uniq), -1, np.int64)
    for j, si in enumerate(uniq.tolist()):
        if 0 <= si < len(shapes) and shapes[si] is not None and len(shapes[si]) > 1 and shapes[si][1]:
            d = op_dtype(str(shapes[si][1]))
            codes[j] = OP_DTYPES.index(d) if d in OP_DTYPES else -1
    return codes[inverse]


CATEGORY = "cuda_profiler_range"
MAX_BYTES = 2 << 30  # a range-profiler trace holds a few thousand ranges; bigger files are not re-read
TIMES_WARNING = ("Kineto range-profiler trace: {n} kernel(s) with measured instruction counters, but no "
                 "measured times (Kineto splits the profiling window evenly across the ranges): durations, "
                 "rates, MFU/MBU and the timeline of these rows are placeholders")


def device_meta(props: Any, dev: int | None) -> dict:
    """meta["device"] from `deviceProperties`: the entry of device `dev`, or where no kernel names a
    device, the GPU every entry names (with how many there are); unknown when they differ."""
    entries = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    entry = next((p for p in entries if p.get("id") == dev), None) if dev is not None else None
    count = None
    if entry is None and dev is None and entries:
        names = {p.get("name") for p in entries}
        if len(names) == 1 and isinstance(next(iter(names)), str):
            entry, count = entries[0], len(entries)
    if not entry:
        return {"index": dev, "name": None}
    cc = (f"{entry['computeMajor']}.{entry['computeMinor']}"
          if "computeMajor" in entry and "computeMinor" in entry else None)
    out = {"index": dev, "name": entry.get("name"), "cc": cc, "sms": entry.get("numSms"),
           "memory_bytes": entry.get("totalGlobalMem")}
    if count is not None:
        out["count"] = count  # identified from deviceProperties alone: the GPU all of them are
    return out


def _open(path: Path):
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _mentions(path: Path) -> bool:
    """Whether the file holds the category's name at all (read in chunks, nothing decoded)."""
    needle, tail = CATEGORY.encode(), b""
    try:
        with _open(path) as fh:
            while chunk := fh.read(1 << 22):
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except (OSError, EOFError):
        return False
    return False


def range_events(path: Path) -> list[dict]:
    """The `cuda_profiler_range` events of a Kineto file ([] when it has none or cannot be read)."""
    try:
        if path.stat().st_size > MAX_BYTES or not _mentions(path):
            return []
        with _open(path) as fh:
            doc = json.load(fh)
    except (OSError, EOFError, ValueError, RecursionError):
        return []
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return []
    return [e for e in events if isinstance(e, dict) and e.get("cat") == CATEGORY and e.get("ph") == "X"]


def _ns(v: Any) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(round(f * 1000)) if np.isfinite(f) else None


def range_rows(events: list[dict], origin_us: float | None = None) -> pd.DataFrame:
    """Kernel rows from range events: name, start/dur (placeholders, as the file has them), device
    (the event's pid), FLOPs, integer ops and compute dtype from the counter args."""
    from collectors.readers.ncu import _int_tensor_ops, flops_from_metrics, pipe_dtype

    rows = []
    for e in events:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        start, dur = _ns(e.get("ts")), _ns(e.get("dur"))
        if start is None or dur is None or dur < 0:
            continue
        name = e.get("name") if isinstance(e.get("name"), str) and e.get("name") != "__missing__" else None
        pid = e.get("pid")
        rows.append({"kind": "kernel", "name": name or "(range: kernel name lost)", "start_ns": start, "dur_ns": dur,
                     "device": pid if isinstance(pid, int) and 0 <= pid < 1 << 16 else None,
                     "flops": flops_from_metrics(args), "int_ops": _int_tensor_ops(args) or None,
                     "dtype": pipe_dtype(args), "counters": True})
    frame = pd.DataFrame(rows, columns=["kind", "name", "start_ns", "dur_ns", "device", "flops", "int_ops",
                                        "dtype", "counters"])
    if len(frame) and origin_us is not None:
        frame["start_ns"] -= int(round(origin_us * 1000))
    return frame


_LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def _with_launches(extra: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The ranges' launching op and correlation from the kernel launches on the host: in auto-range
    mode CUPTI profiles each launched kernel in launch order, so where the trace holds exactly as
    many launch calls as ranges, the k-th range is the k-th launch (HTA's CuptiCounterAnalysis
    pairs them the same way). Otherwise they stay unknown."""
    if not len(rows) or "kind" not in rows.columns or "name" not in rows.columns:
        return extra
    rt = rows[(rows["kind"].astype(object) == "runtime").to_numpy()]
    launches = rt[rt["name"].astype(object).isin(_LAUNCH).to_numpy()].sort_values("start_ns", kind="stable")
    if len(launches) != len(extra):
        return extra
    order = np.argsort(extra["start_ns"].to_numpy(), kind="stable")
    extra = extra.copy()
    for col in ("op", "correlation"):
        if col in launches.columns:
            values = np.full(len(extra), None, dtype=object)
            values[order] = launches[col].astype(object).to_numpy()
            extra[col] = values
    return extra


def add_range_rows(rows: pd.DataFrame, meta: dict, path: Path, origin_ns: int | None) -> tuple[pd.DataFrame, dict]:
    """`rows` with the range-profiler kernels added where the trace has no GPU rows of its own;
    unchanged otherwise. `origin_ns`: the file-clock time of start 0 of the rows already read (the
    reader's origin), so the ranges sit on the same clock; where nothing was read, the first range."""
    kinds = rows["kind"].astype(object) if "kind" in rows.columns else pd.Series(dtype=object)
    if len(rows) and kinds.isin(("kernel", "memcpy", "memset")).any():
        return rows, meta
    events = range_events(Path(path))
    extra = range_rows(events) if events else pd.DataFrame()
    if extra.empty:
        return rows, meta
    extra["start_ns"] -= int(origin_ns) if origin_ns is not None and len(rows) else int(extra["start_ns"].min())
    extra["device"] = pd.array(extra["device"], dtype="Int64")
    extra = _with_launches(extra, rows)
    if "id" in rows.columns and len(rows):
        top = pd.to_numeric(rows["id"], errors="coerce").max()
        first = int(top) + 1 if pd.notna(top) else 0
        extra.insert(0, "id", np.arange(first, first + len(extra), dtype="int64"))
    out = pd.concat([rows.reset_index(drop=True), extra], ignore_index=True) if len(rows) else extra
    meta = dict(meta)
    meta["warnings"] = list(meta.get("warnings") or []) + [TIMES_WARNING.format(n=len(extra))]
    return out, meta
