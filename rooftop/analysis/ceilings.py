"""Which compute ceiling a kernel is judged against: the peak of the dtype it computes in.

A trace mixes dtypes: an FP8 or NVFP4 GEMM runs against a peak 2-4x the bf16 one, a TF32 GEMM
against the TF32 tensor peak, an fp32 elementwise kernel against the non-tensor FP32 rate. One
trace-wide peak would make an FP4 GEMM look 4x better than it is. The dtype is read from the
kernel name (CUTLASS, cuBLAS/cuBLASLt, nvjet, DeepGEMM, FlashAttention and torch spellings), else
from the launching op's input types where the trace has them, else it is the trace's own dtype.
Integer (int8) work has no FLOP/s ceiling: its MFU is unknown, not 0.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import Peaks

# Checked in order: the first that matches names the dtype. Lower precisions come first because
# a name also carries its accumulator/epilogue types (`..._e4m3_..._bf16_...` is an FP8 GEMM with
# a bf16 output; `gemv<__nv_bfloat16, float>` a bf16 GEMV accumulating in float).
_B = r"(?<![a-z0-9])"   # token start: not inside a longer word or number
_E = r"(?![a-z0-9])"
_RULES: tuple[tuple[str, re.Pattern], ...] = tuple((d, re.compile(p)) for d, p in (
    # Blackwell's `kind::f8f6f4` MMA runs at the FP8 rate whatever its operands (e2m1 included);
    # the FP4 rate needs the mxf4/mxf4nvf4 kinds.
    ("fp8", r"f8f6f4"),
    # not "float4": in CUDA that is a vector of four floats
    ("fp4", r"nvfp4|mxfp4|mxf4|nvf4|e2m1|" + _B + r"fp4" + _E),
    ("fp8", r"e4m3|e5m2|float8|fp8|__nv_fp8|" + _B + r"f8" + _E + r"|qmma|qgmma"),
    ("int8", r"int8|imma|igmma|signed char|" + _B + r"[isu]8(?![0-9])"),
    ("bf16", r"bf16|bfloat16"),
    ("fp16", r"fp16|float16|__half|" + _B + r"half" + _E + r"|(?<![a-z0-9b])f16|" + _B + r"h(884|1688|16816)gemm|hgemm|hmma|hgmma"),
    ("tf32", r"tf32|xf32|" + _B + r"s1688gemm"),
    ("fp32", r"sgemm|fp32|" + _B + r"f32" + _E + r"|" + _B + r"float" + _E),
))
# cuBLASLt's nvjet kernels spell their types as one letter each: `nvjet_tst_...` (bf16 in/out,
# fp32 compute), `nvjet_hsh_...` (fp16), `nvjet_qqtst_...` (e4m3 inputs), as seen in cuBLAS 12.x
# traces. An all-`s` name may run in fp32 or TF32: left unknown.
_NVJET = re.compile(r"nvjet_([a-z]{3,6})_")
_NVJET_LETTERS = (("q", "fp8"), ("o", "fp8"), ("t", "bf16"), ("h", "fp16"))

# torch op input types (Kineto "Input type") -> dtype, for names that say nothing.
_TORCH = (("float8", "fp8"), ("float4", "fp4"), ("bfloat16", "bf16"), ("half", "fp16"),
          ("qint8", "int8"), ("signed char", "int8"), ("double", "fp64"), ("float", "fp32"))


def name_dtype(name: str | None) -> str | None:
    """The compute dtype a kernel name spells, or None when it spells none."""
    if not isinstance(name, str) or not name:
        return None
    text = name.lower()
    m = _NVJET.search(text)
    if m:
        letters = m.group(1)
        for letter, dtype in _NVJET_LETTERS:
            if letter in letters:
                return dtype
    for dtype, pattern in _RULES:
        if pattern.search(text):
            return dtype
    return None


def op_dtype(inputs: str | None) -> str | None:
    """The dtype of an op from its input types (`['c10::BFloat16', 'c10::BFloat16', '']`)."""
    if not isinstance(inputs, str) or not inputs:
        return None
    text = inputs.lower()
    # the first input's type; at one position the longer spelling ("float8" over "float") wins
    found = [(text.find(token), rank, dtype) for rank, (token, dtype) in enumerate(_TORCH) if token in text]
    return min(found)[2] if found else None


def kernel_dtypes(names: pd.Series, ops: pd.Series | None = None) -> pd.Series:
    """Per row, the compute dtype from the kernel name, else from `ops` (the launching op's input
    types, aligned with `names`), else missing. Classifies each distinct name once; a categorical
    Series (a million rows cost their codes, not a million strings)."""
    names = pd.Series(names)
    codes, uniques = _codes(names)
    per_name = [name_dtype(u) for u in uniques]
    if ops is not None:
        ops = pd.Series(ops, index=names.index)
        o_codes, o_uniques = _codes(ops)
        per_op = np.array([op_dtype(u) for u in o_uniques] + [None], dtype=object)
        by_name = np.array(per_name + [None], dtype=object)[codes]
        values = np.where(pd.isna(by_name), per_op[o_codes], by_name)
        return pd.Series(pd.Categorical(values), index=names.index, name="dtype")
    cats = sorted({d for d in per_name if d is not None})
    lookup = np.array([cats.index(d) if d is not None else -1 for d in per_name] + [-1], dtype=np.int8)
    return pd.Series(pd.Categorical.from_codes(lookup[codes], categories=cats), index=names.index, name="dtype")


def _codes(values: pd.Series) -> tuple[np.ndarray, list]:
    """Integer codes (-1 for missing) and the distinct values: a categorical's own, else factorized."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(), list(values.cat.categories)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return codes, list(uniques)


def row_peak_flops(rows: pd.DataFrame, peaks: Peaks) -> pd.Series:
    """Per row, the peak FLOP/s of its compute dtype (`Peaks.flops_for`); rows whose dtype is
    unknown get the trace's own peak; int8 rows and dtypes the GPU lacks get NaN."""
    dtypes = rows["dtype"] if "dtype" in rows.columns else kernel_dtypes(rows["name"])
    codes, uniques = _codes(dtypes)
    default = peaks.flops if peaks.flops else np.nan
    # one lookup per distinct dtype; the trailing entry (code -1: dtype unknown) is the trace's peak
    table = np.array([peaks.flops_for(d) or np.nan for d in uniques] + [default], dtype="float64")
    return pd.Series(table[codes], index=rows.index, name="peak_flops")


def group_peak(flops: np.ndarray, row_peak: np.ndarray, gid: np.ndarray, n: int,
               dur: np.ndarray | None = None) -> np.ndarray:
    """A group's effective peak when its rows have different peaks: the rate at which its FLOPs
    would run if every row ran at its own peak (sum of FLOPs / sum of FLOPs/peak). A group with
    no known FLOPs takes the peak of its longest row with a known peak; NaN where none is known."""
    f = np.where(np.isfinite(flops) & np.isfinite(row_peak) & (row_peak > 0), flops, 0.0)
    ideal_s = np.bincount(gid, weights=np.divide(f, row_peak, out=np.zeros_like(f), where=f > 0), minlength=n)
    total = np.bincount(gid, weights=f, minlength=n)
    eff = np.divide(total, ideal_s, out=np.full(n, np.nan), where=ideal_s > 0)
    need = np.isnan(eff)
    if not need.any():
        return eff
    fallback = np.full(n, np.nan)
    known = np.flatnonzero(np.isfinite(row_peak) & need[gid])  # (rows of the groups that need one)
    if dur is not None:
        d = np.asarray(dur, dtype="float64")[known]
        if np.isnan(d).any():  # (never, for validated rows) sorted: NaN counts as the longest
            known = known[np.argsort(d, kind="stable")]
        else:
            # the longest row of each group, the last one among equals (what a stable sort by
            # duration and a last-write-wins assignment picked, without sorting a million rows)
            longest = np.full(n, -np.inf)
            np.maximum.at(longest, gid[known], d)
            known = known[d == longest[gid[known]]]
    # fancy assignment keeps the last write per group: the longest row's peak
    fallback[gid[known]] = row_peak[known]
    return np.where(np.isnan(eff), fallback, eff)


def mixed(rows: pd.DataFrame, row_peak: pd.Series, trace_peak: float | None) -> bool:
    """Whether any kernel with known FLOPs is judged against another peak than the trace's."""
    has = np.isfinite(rows["work_flops"].to_numpy(dtype="float64"))
    peak = row_peak.reindex(rows.index).to_numpy(dtype="float64")[has]
    ref = np.nan if not trace_peak else float(trace_peak)
    return bool(len(peak)) and not np.all(peak == ref)


def dtype_mfu(table: pd.DataFrame, rows: pd.DataFrame, row_peak: pd.Series, keys: list[str]) -> pd.Series:
    """MFU per row of `table` (one row per `keys` group of `rows`) with every kernel at the peak of
    its own dtype: the time its FLOPs would take at those peaks, over the group's span. Equal to
    FLOPs / span / peak when all kernels share one dtype; integer (int8) work, which has no FLOP/s
    peak, is left out. NaN where no kernel's FLOPs and peak are both known."""
    flops = rows["work_flops"].to_numpy(dtype="float64")
    peak = row_peak.reindex(rows.index).to_numpy(dtype="float64")
    ok = np.isfinite(flops) & np.isfinite(peak) & (peak > 0)
    ideal_s = pd.Series(np.divide(flops, peak, out=np.full(len(flops), np.nan), where=ok), index=rows.index)
    by = [rows[k].astype(object) if k == "phase" else rows[k] for k in keys]
    total = ideal_s.groupby(by, sort=False, dropna=False).sum(min_count=1)
    idx = pd.MultiIndex.from_frame(table[keys].astype(object)) if len(keys) > 1 else pd.Index(table[keys[0]].astype(object))
    if len(keys) == 1:
        total.index = pd.Index(total.index.astype(object))
    got = total.reindex(idx).to_numpy(dtype="float64")
    span_s = table["span_ns"].to_numpy(dtype="float64") / 1e9
    return pd.Series(np.divide(got, span_s, out=np.full(len(got), np.nan), where=span_s > 0), index=table.index)
