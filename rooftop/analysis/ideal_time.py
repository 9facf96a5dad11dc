"""The ideal time of a kernel (its roofline time) and the byte floors of attention.

Used by the gap-to-ideal analysis (how far is each measured kernel from physics) and by the
analytic predictor (`collectors/predict.py`), which lays such ideal kernels back to back.
All functions take scalars or numpy/pandas arrays and broadcast; NaN (unknown) propagates.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# The shortest a kernel lasts on the GPU timeline, however little it does: launch latency as the
# GPU sees it, scheduling one wave of blocks, and the tail. A few us per launch on H100
# (docs/definitions.md): "a few us of gap per launch"; an average Llama-3-8B decode kernel
# is 10-15 us). 2 us is the conservative end, so the floor never overstates the gap to ideal.
LAUNCH_FLOOR_NS = 2_000.0


def _num(x: Any) -> Any:
    """Scalars and arrays as float64, None as NaN (unknown)."""
    if x is None:
        return np.nan
    if isinstance(x, pd.Series):
        return pd.to_numeric(x, errors="coerce").astype("float64")
    if np.ndim(x) == 0:
        return np.nan if pd.isna(x) else float(x)
    return np.asarray(x, dtype="float64")


def _peak(x: Any) -> Any:
    """A peak of 0, negative or None is unknown, not infinitely slow."""
    x = _num(x)
    if np.ndim(x) == 0:
        return x if x > 0 else np.nan
    return x.where(x > 0) if isinstance(x, pd.Series) else np.where(x > 0, x, np.nan)


def _out(value: Any) -> Any:
    return float(value) if np.ndim(value) == 0 else value


def kernel_ideal_ns(flops: Any, bytes: Any, peak_flops: Any, peak_bw: Any,  # noqa: A002
                    launch_floor_ns: float = LAUNCH_FLOOR_NS) -> Any:
    """Roofline time of a kernel in ns: max(bytes / peak_bw, flops / peak_flops), nothing added.

    A kernel cannot be faster than the launch floor, so the result is at least `launch_floor_ns`
    (pass 0 for the pure roofline). FLOPs and bytes are a kernel's own (model or measured); give
    0 FLOPs for a pure copy. Unknown (NaN/None) inputs or peaks give NaN. Scalars in, float out;
    arrays in, arrays out (a Series keeps its index).
    """
    f, b = _num(flops), _num(bytes)
    pf, pb = _peak(peak_flops), _peak(peak_bw)
    roof = np.maximum(b / pb * 1e9, f / pf * 1e9)  # NaN-propagating, unlike fmax
    if launch_floor_ns:
        roof = np.maximum(roof, float(launch_floor_ns))
    return _out(roof)


def kernel_bound(flops: Any, bytes: Any, peak_flops: Any, peak_bw: Any,  # noqa: A002
                 launch_floor_ns: float = LAUNCH_FLOOR_NS) -> Any:
    """Which roof sets `kernel_ideal_ns`: "memory", "compute", "launch" (the floor), or None."""
    f, b = _num(flops), _num(bytes)
    pf, pb = _peak(peak_flops), _peak(peak_bw)
    t_mem, t_cmp = np.asarray(b / pb * 1e9), np.asarray(f / pf * 1e9)
    t_mem, t_cmp = np.broadcast_arrays(t_mem, t_cmp)
    known = ~(np.isnan(t_mem) | np.isnan(t_cmp))
    launch = np.maximum(t_mem, t_cmp) < (launch_floor_ns or 0)
    out = np.select([~known, launch, t_cmp > t_mem], [None, "launch", "compute"], "memory").astype(object)
    out[~known] = None
    if isinstance(flops, pd.Series) or isinstance(bytes, pd.Series):
        index = flops.index if isinstance(flops, pd.Series) else bytes.index
        return pd.Series(out, index=index, dtype=object)
    return out.item() if out.ndim == 0 else out


def attention_min_bytes(batch: Any, heads: Any, sq: Any, sk: Any, head_dim: Any, *,
                        kv_heads: Any = None, elem_bytes: float = 2, kv_bytes: float | None = None) -> Any:
    """IO-optimal attention traffic: read Q, K, V once and write O once (FlashAttention's ideal).

    Q and O: batch·sq·heads·head_dim elements each; K and V: batch·sk·kv_heads·head_dim each
    (GQA reads each KV head once). `kv_bytes` defaults to `elem_bytes` (set 1 for an fp8 cache).
    Llama-3-8B, S=2048, one sequence and layer: 41.9 MB (docs/definitions.md).
    """
    kvh = heads if kv_heads is None else kv_heads
    kvb = elem_bytes if kv_bytes is None else kv_bytes
    q_o = 2 * batch * sq * heads * head_dim * elem_bytes
    k_v = 2 * batch * sk * kvh * head_dim * kvb
    return q_o + k_v


def attention_materialized_bytes(batch: Any, heads: Any, sq: Any, sk: Any, head_dim: Any, *,
                                 kv_heads: Any = None, elem_bytes: float = 2, kv_bytes: float | None = None,
                                 score_bytes: float = 4) -> Any:
    """Traffic of attention that materializes the scores in HBM (QK^T GEMM, softmax, PV GEMM).

    The minimum plus the sq x sk score matrix per head written by QK^T, read and written (as
    probabilities) by softmax, and read by PV: 4·batch·heads·sq·sk·score_bytes (docs/definitions.md)
    3.2; scores are fp32 by default, as the softmax computes them). At S=2048 on Llama-3-8B shapes
    this is ~50x the minimum, growing with S.
    """
    extra = 4 * batch * heads * sq * sk * score_bytes
    return attention_min_bytes(batch, heads, sq, sk, head_dim, kv_heads=kv_heads, elem_bytes=elem_bytes,
                               kv_bytes=kv_bytes) + extra
