"""Nsight Compute: read `.ncu-rep` and ncu CSV, join counters onto a timeline, run `ncu`.

This module holds what the readers share: `NcuError`, the mapping from ncu metric names (in base
units) to trace columns, and `join_counters`. The readers live in `ncu_rep.py` (`read_ncu_rep`)
and `ncu_csv.py` (`read_ncu_csv`), which import this module (never the other way round), so
importing `collectors.readers.ncu` costs nothing (no `ncu_report`, no torch). The runner that puts
a model under `ncu` is collection, not reading: `collectors.capture.ncu_run`.

Metric names and formulas (docs/formats.md), checked against NVIDIA's section
files. Everything is normalised to base units: bytes, ns, Hz, %; a metric the report lacks is
null, never 0.
"""
from __future__ import annotations

import difflib
import math
from typing import Any, Mapping

import pandas as pd

from rooftop.trace.names import short_name
from rooftop.trace import STALL_COLUMNS, STALL_REASONS, TraceError

__all__ = [
    "NcuError", "COUNTER_COLUMNS", "row_from_metrics", "flops_from_metrics", "join_counters",
]


class NcuError(TraceError):
    """An Nsight Compute file could not be read, or `ncu` could not be run."""


# The columns a counter row carries onto a timeline row (durations stay the timeline's own:
# ncu serialises kernels, flushes caches and replays them, so its durations are not the run's).
COUNTER_COLUMNS = ("flops", "int_ops", "dtype", "dram_read", "dram_write", "sm_pct", "dram_pct", "occupancy_pct",
                   "l1_hit_pct", "l2_hit_pct") + STALL_COLUMNS
# Launch columns copied only where the timeline does not know them.
LAUNCH_COLUMNS = ("grid", "block", "registers", "shared_mem")

_SIMPLE = {
    "dur_ns": ("gpu__time_duration.sum",),
    "dram_read": ("dram__bytes_read.sum",),
    "dram_write": ("dram__bytes_write.sum",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    # SpeedOfLight reads gpu__dram_throughput; dram__throughput is a valid --metrics name too.
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "registers": ("launch__registers_per_thread",),
    "device": ("launch__device_id",),
    "stream": ("launch__stream_id",),
}
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def _num(value: Any) -> float | None:
    """A finite float, or None (missing metric, NaN from a failed collection, a string)."""
    if value is None or isinstance(value, (str, bytes, bool)):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _first(m: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    for n in names:
        v = _num(m.get(n))
        if v is not None:
            return v
    return None


def _count(m: Mapping[str, Any], op: str) -> float | None:
    """Thread instructions of one SASS op: the `.sum` counter, else per-cycle x elapsed cycles."""
    for unit in ("smsp", "sm"):
        v = _num(m.get(f"{unit}__sass_thread_inst_executed_op_{op}_pred_on.sum"))
        if v is not None:
            return v
    # The roofline sections store only the rate; .sum.per_cycle_elapsed = .sum / cycles_elapsed.avg.
    rate = _num(m.get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"))
    cycles = _num(m.get("smsp__cycles_elapsed.avg"))
    return rate * cycles if rate is not None and cycles is not None else None


# Weights from NVIDIA's roofline sections: an FMA is 2 FLOP; half-precision instructions are
# packed half2, so HADD/HMUL count x2 and HFMA x4 (derived__..._hfma_pred_on_x4).
_FP_FAMILIES = {
    "fp32": (("ffma", 2.0), ("fadd", 1.0), ("fmul", 1.0)),
    "fp64": (("dfma", 2.0), ("dadd", 1.0), ("dmul", 1.0)),
    "fp16": (("hfma", 4.0), ("hadd", 2.0), ("hmul", 2.0)),
}
_TENSOR_PREFIX = "sm__ops_path_tensor_src_"


def _tensor_totals(m: Mapping[str, Any]) -> dict[str, float]:
    """Tensor ops per source type from the per-type `sm__ops_path_tensor_src_<type>[_dst_<type>]
    [_sparsity_{off,on}]` totals (per-instruction `..._op_hgmma_...` families split the same work
    again and are not summed). Where one total's name extends another's (`src_fp16` and
    `src_fp16_dst_fp32`), only the shorter, covering one counts. Keys are the names after `src_`."""
    found: dict[str, float] = {}
    for name, value in m.items():
        if not name.startswith(_TENSOR_PREFIX):
            continue
        base, _, suffix = name[len(_TENSOR_PREFIX):].partition(".")
        if suffix not in ("sum", "sum.per_cycle_elapsed"):
            continue
        v = _num(value)
        if v is None:
            continue
        if suffix == "sum.per_cycle_elapsed":
            cycles = _num(m.get("sm__cycles_elapsed.avg"))
            if cycles is None or base in found:
                continue
            v *= cycles
        found[base] = v
    return {b: found[b] for b in found if not any(o != b and b.startswith(o + "_") for o in found)}


def _tensor_ops(m: Mapping[str, Any]) -> float | None:
    """Floating-point tensor ops (`_tensor_totals` of the non-integer source types)."""
    keep = [v for b, v in _tensor_totals(m).items() if not b.startswith("int")]
    return sum(keep) if keep else None


def _int_tensor_ops(m: Mapping[str, Any]) -> float | None:
    """Integer tensor ops (IMMA/IGMMA: `sm__ops_path_tensor_src_int8`, `_int4`, `_int1`): integer
    operations, counted against the int8 TOPS peak, never as FLOPs."""
    keep = [v for b, v in _tensor_totals(m).items() if b.startswith("int")]
    return sum(keep) if keep else None


# The compute dtype of a tensor source type as ncu spells it (`src_bf16_dst_fp32`, `src_fp8_sparsity_off`,
# `src_fp4_fp6_fp8_dst_fp32` (Blackwell's mixed kinds run at the fp8 rate unless fp4 alone), `src_int8`).
def _tensor_dtype(base: str) -> str | None:
    src = base.split("_dst_")[0].replace("_sparsity_off", "").replace("_sparsity_on", "")
    if src.startswith("int"):
        return "int8"
    if src in ("fp4",):
        return "fp4"
    if "fp8" in src or "fp6" in src:
        return "fp8"
    return {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "fp64": "fp64"}.get(src)


def pipe_dtype(m: Mapping[str, Any]) -> str | None:
    """The compute dtype and pipe of a kernel from its instruction counters: the tensor source type
    with the most ops when the tensor pipe did any (tensor work dominates a kernel that has it), else
    the CUDA-core family (fp32 FFMA/FADD/FMUL, fp64 DFMA/DADD/DMUL) with the most FLOPs. None when the
    counters were not collected or count no work (half-precision CUDA-core math has no peak of its own
    in the spec table, so it names no dtype either)."""
    tensor = {b: v for b, v in _tensor_totals(m).items() if v and v > 0}
    if tensor:
        return _tensor_dtype(max(tensor, key=tensor.get))
    best, best_v = None, 0.0
    for family in ("fp32", "fp64"):
        got = [_count(m, op) for op, _ in _FP_FAMILIES[family]]
        v = sum(w * c for (_, w), c in zip(_FP_FAMILIES[family], got) if c is not None)
        if v > best_v:
            best, best_v = family, v
    return best


def _tensor_active(m: Mapping[str, Any]) -> bool:
    for name in ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__inst_executed_pipe_tensor.sum"):
        v = _num(m.get(name))
        if v:
            return True
    return False


def flops_from_metrics(m: Mapping[str, Any]) -> float | None:
    """FLOPs executed: fp32 + fp64 + fp16 (non-tensor, roofline weights) + tensor ops.

    None when no FLOP counter was collected, when the tensor pipe was busy but no tensor-op
    counter exists (an Ampere full-set report: a count without the tensor work would be wrong,
    not merely incomplete), and when only tensor counters exist and they read 0 (the kernel's
    FLOPs, if any, ran on CUDA cores that nothing counted).
    """
    total, any_found = 0.0, False
    for members in _FP_FAMILIES.values():
        for op, weight in members:
            c = _count(m, op)
            if c is not None:
                total += weight * c
                any_found = True
    tensor = _tensor_ops(m)
    if total == 0 and not tensor and (_int_tensor_ops(m) or 0) > 0:
        # integer tensor work (an int8 GEMM): its FLOPs are not 0 but none; its integer ops are
        # `int_ops`, judged against the int8 TOPS peak
        return None
    if tensor is not None and not any_found:
        # Only tensor-pipe counters: they see no CUDA-core FMA. Zero tensor ops then says nothing
        # about the FLOPs (a cuBLAS GEMV on CUDA cores would read "0 FLOPs, 0% MFU, AI 0"); a
        # positive count is the tensor work, which dominates any kernel that has it.
        return tensor if tensor > 0 else None
    if tensor is not None:
        return total + tensor
    if _tensor_active(m) or not any_found:
        return None
    return total


def _shape(m: Mapping[str, Any], what: str) -> list[int] | None:
    dims = [_num(m.get(f"launch__{what}_dim_{a}")) for a in "xyz"]
    return None if any(d is None for d in dims) else [int(d) for d in dims]


def row_from_metrics(m: Mapping[str, Any]) -> dict[str, Any]:
    """Trace columns of one profiled kernel from its metrics (name -> value in base units)."""
    row: dict[str, Any] = {c: _first(m, names) for c, names in _SIMPLE.items()}
    for reason, col in zip(STALL_REASONS, STALL_COLUMNS):
        row[col] = _num(m.get(STALL_METRIC.format(reason)))
    if row["dram_read"] is None and row["dram_write"] is None:
        # Only the total was collected (`--metrics dram__bytes.sum`, common in scripts): keep it
        # as read bytes with 0 written, so read + write is the measured total. The readers warn.
        total = _num(m.get("dram__bytes.sum"))
        if total is not None:
            row["dram_read"], row["dram_write"] = total, 0.0
    if row["dur_ns"] is None:
        # No gpu__time_duration.sum (a `--metrics` list without it): elapsed SM cycles over the SM
        # clock, as the roofline sections time a kernel. Labelled derived by the readers.
        cycles = _num(m.get("sm__cycles_elapsed.avg")) or _num(m.get("gpc__cycles_elapsed.max"))
        clock = _num(m.get("sm__cycles_elapsed.avg.per_second")) or _num(m.get("gpc__cycles_elapsed.avg.per_second"))
        if cycles is not None and clock:
            row["dur_ns"] = cycles / clock * 1e9
            row["dur_derived"] = True
    row["flops"] = flops_from_metrics(m)
    row["int_ops"] = _int_tensor_ops(m) or None
    row["dtype"] = pipe_dtype(m)
    row["grid"] = _shape(m, "grid")
    row["block"] = _shape(m, "block")
    static = _num(m.get("launch__shared_mem_per_block_static"))
    dynamic = _num(m.get("launch__shared_mem_per_block_dynamic"))
    # static + dynamic is what the program asked for (what torch's profiler reports); the
    # per-block total also includes the driver's reserved 1 KiB.
    row["shared_mem"] = static + dynamic if static is not None and dynamic is not None \
        else _num(m.get("launch__shared_mem_per_block"))
    return row


def _sparse_capable(m: Mapping[str, Any]) -> bool:
    """Whether the device has 2:4-sparse tensor paths (compute capability 8.0 and later)."""
    major = _num(m.get("device__attribute_compute_capability_major"))
    return major is None or major >= 8


def dense_tensor_peaks(m: Mapping[str, Any], sm_hz: float | None) -> dict[str, float]:
    """Dense tensor peaks in op/s per source type (`bf16_dst_fp32`, `fp8`, `int8` ...) at the run's
    SM clock.

    ncu's `sm__ops_path_tensor_*.sum.peak_sustained` is ops per cycle. A name ending
    `_sparsity_off` is the dense path, `_sparsity_on` the 2:4-sparse path (twice the rate); a
    per-type total without the suffix (`src_fp16`, `src_bf16_dst_fp32` on CC 9.0) covers both paths,
    so its peak is the sparse one: on a sparse-capable device (CC >= 8.0) its dense rate is half.
    The dense rate of a type is its `_sparsity_off` value where any name gives one (the total or the
    per-instruction `op_hgmma_`/`op_hmma_`/`op_imma_` families), else the halved total."""
    if not sm_hz:
        return {}
    off: dict[str, float] = {}
    total: dict[str, float] = {}
    for name in m:
        if not (name.startswith("sm__ops_path_tensor_") and name.endswith(".sum.peak_sustained")):
            continue
        v = _num(m.get(name))
        body = name[len("sm__ops_path_tensor_"):].split(".")[0]
        if v is None or "src_" not in body:
            continue
        src = body[body.index("src_") + 4:]
        if src.endswith("_sparsity_on"):
            continue
        if src.endswith("_sparsity_off"):
            key = src[: -len("_sparsity_off")]
            off[key] = max(off.get(key, 0.0), v)
        elif body.startswith("src_"):
            total[src] = v
    out = {k: v * sm_hz for k, v in off.items()}
    halve = 0.5 if _sparse_capable(m) else 1.0
    for k, v in total.items():
        # fp64 tensor math has no sparse path; every other type does from CC 8.0 on
        if k not in out and not any(o.startswith(k + "_") or k.startswith(o + "_") for o in off):
            out[k] = v * sm_hz * (1.0 if k.startswith("fp64") else halve)
    return out


def peaks_from_metrics(m: Mapping[str, Any]) -> dict[str, float | None]:
    """Peaks at the clocks ncu measured (roofline sections): bytes/s, dense FLOP/s per type and the
    dense int8 tensor op/s (`tensor_int8_ops`)."""
    def rate(per_cycle: str, clock: str, factor: float = 1.0) -> float | None:
        a, b = _num(m.get(per_cycle)), _num(m.get(clock))
        return a * b * factor if a is not None and b is not None else None

    sm_clock = "sm__cycles_elapsed.avg.per_second"
    peaks = {
        "bw": rate("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second"),
        "fp32_flops": rate("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", sm_clock, 2),
        "fp64_flops": rate("sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", sm_clock, 2),
        "fp16_flops": rate("sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained", sm_clock, 4),
    }
    for src, value in dense_tensor_peaks(m, _num(m.get(sm_clock))).items():
        if src.startswith("int8"):
            peaks["tensor_int8_ops"] = max(peaks.get("tensor_int8_ops") or 0.0, value)
        elif not src.startswith("int"):  # (int4/int1: no column of the spec table)
            peaks[f"tensor_{src}_flops"] = value
    # `flops` is the dense bf16 tensor peak, the one MFU uses by default.
    peaks["flops"] = next((peaks[k] for k in ("tensor_bf16_dst_fp32_flops", "tensor_bf16_flops",
                                              "tensor_fp16_dst_fp32_flops", "tensor_fp16_flops") if peaks.get(k)), None)
    return peaks


def _median(values: list[float | None]) -> float | None:
    vals = sorted(v for v in values if v is not None)
    return vals[len(vals) // 2] if vals else None


def bw_from_throughput(m: Mapping[str, Any], row: Mapping[str, Any] | None = None) -> float | None:
    """The peak DRAM bandwidth a kernel's counters imply: achieved bytes/s over the DRAM throughput
    percentage of peak. Files without `dram__bytes.sum.peak_sustained` (a CSV of a few `--metrics`)
    still tell the device's bandwidth this way; only kernels above 5% are used (the percentage is
    printed with two decimals)."""
    row = row or row_from_metrics(m)
    pct = row.get("dram_pct")
    moved = (row.get("dram_read") or 0.0) + (row.get("dram_write") or 0.0)
    dur = row.get("dur_ns")
    if not pct or pct < 5 or not moved or not dur:
        return None
    return moved / (dur / 1e9) / (pct / 100)


def device_meta(metrics: list[Mapping[str, Any]]) -> dict[str, Any]:
    """meta["device"] from the kernels' device__attribute_* and clock metrics (medians)."""
    first = metrics[0] if metrics else {}
    memory = _num(first.get("device__attribute_total_memory"))
    name = first.get("device__attribute_display_name")
    major = _num(first.get("device__attribute_compute_capability_major"))
    minor = _num(first.get("device__attribute_compute_capability_minor"))
    sms = _num(first.get("device__attribute_multiprocessor_count"))
    khz = _num(first.get("device__attribute_clock_rate"))
    mem_khz = _num(first.get("device__attribute_memory_clock_rate"))
    all_peaks = [peaks_from_metrics(m) for m in metrics]
    keys = sorted({k for p in all_peaks for k in p})
    return {
        "name": name if isinstance(name, str) else None,
        "cc": f"{int(major)}.{int(minor)}" if major is not None and minor is not None else None,
        "sms": int(sms) if sms is not None else None,
        "clocks": {
            "sm_hz": _median([_num(m.get("sm__cycles_elapsed.avg.per_second")) for m in metrics]),
            "dram_hz": _median([_num(m.get("dram__cycles_elapsed.avg.per_second")) for m in metrics]),
            "sm_max_hz": khz * 1e3 if khz is not None else None,
            "mem_max_hz": mem_khz * 1e3 if mem_khz is not None else None,
        },
        "memory_bytes": int(memory) if memory is not None else None,
        "peaks": {"ncu": {**{k: _median([p.get(k) for p in all_peaks]) for k in keys},
                          "bw_from_throughput": _median([bw_from_throughput(m) for m in metrics])}},
    }


def total_only_warning(metrics: list[Mapping[str, Any]]) -> list[str]:
    n = sum(1 for m in metrics if _num(m.get("dram__bytes.sum")) is not None
            and _num(m.get("dram__bytes_read.sum")) is None and _num(m.get("dram__bytes_write.sum")) is None)
    return [f"{n} kernel(s) have only dram__bytes.sum: the total is stored as dram_read, dram_write 0"] if n else []


_INT_MAX = 2.0 ** 62  # beyond this no count or time is real, and int64 arithmetic would overflow


def _int_range(values: pd.Series, low: float = -_INT_MAX) -> pd.Series:
    """Rounded floats, NaN where a value is not a number, not finite, or out of range (a damaged cell)."""
    num = pd.to_numeric(values, errors="coerce").astype("float64").round()
    return num.where((num >= low) & (num < _INT_MAX))


def finish_rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Counter rows as a frame: kind `kernel`, `counters` true, launch order as `id`.

    ncu has no timeline (it serialises and replays kernels), so `start_ns` places the kernels
    back to back in launch order; the readers say so in the warnings.
    """
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame.insert(0, "id", range(len(frame)))
    frame["kind"] = "kernel"
    frame["counters"] = True
    dur = _int_range(frame["dur_ns"], low=0)  # a negative or infinite duration is unknown
    frame["dur_ns"] = dur.astype("Int64")
    frame["start_ns"] = dur.fillna(0).cumsum().shift(fill_value=0).clip(upper=_INT_MAX).astype("int64")
    for c in ("device", "stream", "registers", "shared_mem"):
        frame[c] = _int_range(frame[c]).astype("Int64")
    return frame


# --- joining counters onto a timeline ---------------------------------------------------------

def _base(name: Any) -> str | None:
    """Short name without template arguments: `gemv<128>` and `gemv<>` are the same kernel."""
    if not isinstance(name, str) or not name:
        return None
    s = short_name(name) or name
    return s.split("<", 1)[0].strip() or s


def join_counters(timeline: pd.DataFrame, counters: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Put counter rows onto the timeline's kernel rows, matched by NVTX path and launch order.

    Within one path, the k-th kernel the ncu run launched matches the k-th kernel of the timeline
    (timeline order: `start_ns`, then `id`). The two sequences are aligned on kernel base names
    (short name without template arguments), which is exactly k-th-to-k-th when both runs
    launched the same kernels, and skips over an extra kernel on either side instead of shifting
    everything after it. A pair whose names differ is a mismatch: counted, left unjoined.

    Returns the timeline with counter columns filled and `counters = True` on joined rows, and a
    report: totals plus, per counter path, {timeline, counters, matched, mismatched,
    unmatched_counters, unmatched_timeline}.
    """
    out = timeline.copy()
    for col in COUNTER_COLUMNS + LAUNCH_COLUMNS + ("counters",):
        if col not in out.columns:
            out[col] = None
    report: dict[str, Any] = {"matched": 0, "mismatched": 0, "unmatched_counters": 0,
                              "unmatched_timeline": 0, "paths": {}}
    if counters is None or counters.empty:
        return out, report
    is_kernel = out["kind"].astype(object) == "kernel" if "kind" in out.columns else pd.Series(True, index=out.index)
    order = [c for c in ("start_ns", "id") if c in out.columns]
    kernels = out[is_kernel].sort_values(order, kind="stable") if order else out[is_kernel]
    t_groups = {p: g.index.tolist() for p, g in kernels.groupby(kernels["path"].fillna(""), sort=False)}
    c_sorted = counters.sort_values("id", kind="stable") if "id" in counters.columns else counters
    c_groups = {p: g for p, g in c_sorted.groupby(c_sorted["path"].fillna(""), sort=False)}

    pairs: list[tuple[Any, Any]] = []  # (timeline index, counter index)
    bases: dict = {}  # each distinct name's base name worked out once, not once per kernel row

    def base(n: Any) -> str | None:
        if not isinstance(n, str):
            return _base(n)
        b = bases.get(n)
        if b is None and n not in bases:
            b = bases[n] = _base(n)
        return b

    for path, cgroup in c_groups.items():
        t_idx = t_groups.get(path, [])
        t_names = [base(n) for n in out.loc[t_idx, "name"]]
        c_names = [base(n) for n in cgroup["name"]]
        stats = {"timeline": len(t_idx), "counters": len(cgroup), "matched": 0, "mismatched": 0}
        sm = difflib.SequenceMatcher(None, t_names, c_names, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                pairs.extend(zip(t_idx[i1:i2], cgroup.index[j1:j2]))
                stats["matched"] += i2 - i1
            elif tag == "replace":
                stats["mismatched"] += min(i2 - i1, j2 - j1)
        stats["unmatched_counters"] = stats["counters"] - stats["matched"]
        stats["unmatched_timeline"] = stats["timeline"] - stats["matched"]
        report["paths"][path] = stats
        for k in ("matched", "mismatched", "unmatched_counters"):
            report[k] += stats[k]
    report["unmatched_timeline"] = int(len(kernels)) - report["matched"]

    if pairs:
        t_ix = [t for t, _ in pairs]
        c_ix = [c for _, c in pairs]
        for col in COUNTER_COLUMNS:
            if col in counters.columns:
                out[col] = out[col].astype(object)
                out.loc[t_ix, col] = counters.loc[c_ix, col].astype(object).to_numpy()
        for col in LAUNCH_COLUMNS:
            if col in counters.columns:
                out[col] = out[col].astype(object)
                cur = out.loc[t_ix, col]
                new = counters.loc[c_ix, col].astype(object).to_numpy()
                missing = cur.map(lambda v: v is None or (isinstance(v, float) and math.isnan(v))).to_numpy()
                out.loc[[t for t, m in zip(t_ix, missing) if m], col] = pd.Series(
                    [v for v, m in zip(new, missing) if m], dtype=object).to_numpy()
        out["counters"] = out["counters"].astype(object)
        out.loc[t_ix, "counters"] = True
    return out, report
