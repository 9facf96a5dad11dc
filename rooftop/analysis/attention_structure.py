"""Materialized attention found by its structure: batched GEMM -> softmax -> batched GEMM.

Unfused attention (`softmax(Q K^T) V`, eager PyTorch, GPT-2's `_attn`, SDPA's math backend) runs as
three kernels on one stream: a batched GEMM whose output is the S x S scores (Q K^T, batched over
batch x heads), a softmax over those scores, and a second batched GEMM over the same batch (P V).
Only elementwise and copy kernels (the 1/sqrt(d) scale, the causal mask, a dropout, a layout copy)
may sit between them. A softmax whose GEMMs are not batched (an MoE router: a linear layer over the
hidden state, a softmax over the expert logits, then the experts' GEMMs) is not attention.

A GEMM is batched when its op is a batched-GEMM op (`aten::bmm`, `aten::baddbmm`, `aten::matmul`)
or, where no op is known (an ncu report), when its launch grid spans z > 1 (cuBLAS puts the batch in
gridDim.z); an op that is a plain GEMM (`aten::mm`, `aten::addmm`, `aten::linear`) is never batched.
Where the grids decide, the two GEMMs must run over the same batch (the same grid z).

Op shapes back the structure when both GEMMs carry FLOPs from their op shapes: Q K^T and P V do
the same number of FLOPs (2 x batch.heads x Sq x Sk x d each), which a router's gate and its experts
do not. Bytes back it when the softmax's measured DRAM bytes are at least the S x S scores of its
step (it must read them: they went through HBM).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

# Kernels that may sit between the GEMMs and the softmax of one attention (scale, mask, dropout, copy).
FILLER_CATEGORIES = ("elementwise", "memory")
MAX_FILLERS = 3
BATCHED_OP_RE = re.compile(r"^aten::(?:bmm|baddbmm|matmul|einsum)$")
PLAIN_OP_RE = re.compile(r"^aten::(?:mm|addmm|linear|_int_mm|_scaled_mm)$")
SHAPE_FLOPS_TOLERANCE = 0.02  # Q K^T and P V FLOPs from op shapes agree to this share


def grid_z(grid: pd.Series) -> np.ndarray:
    """gridDim.z of each launch grid (NaN where unknown). Read per distinct value: grids repeat."""
    def z(g) -> float:
        try:
            return float(g[2]) if g is not None and len(g) == 3 and g[2] is not None else np.nan
        except (TypeError, ValueError):
            return np.nan
    keys = grid.map(lambda g: tuple(g) if g is not None and hasattr(g, "__len__") else None)
    codes, uniques = pd.factorize(keys, use_na_sentinel=True)
    vals = np.array([z(u) for u in uniques] + [np.nan], dtype="float64")
    return vals[codes]


def find_triples(order_keys: np.ndarray, is_gemm: np.ndarray, is_soft: np.ndarray, is_filler: np.ndarray,
                 op_batched: np.ndarray, grid=None) -> np.ndarray:
    """Positions (into the given rows, already in stream order) of (GEMM, softmax, GEMM) triples.

    `order_keys` is one integer per row naming its stream (rank, device, stream): a triple never
    spans two streams. `is_gemm` holds the GEMMs that may be batched (not a plain-GEMM op);
    `op_batched` those whose op says they are. `grid(positions)` (the launch grids of rows at those
    positions, a Series) decides the others, read only for the GEMMs next to a softmax. Returns an
    (n, 3) array."""
    n = len(is_gemm)
    empty = np.empty((0, 3), dtype=np.int64)
    if n < 3 or not is_soft.any():
        return empty
    sig = np.flatnonzero(~is_filler)            # the kernels that count; fillers are skipped
    if len(sig) < 3:
        return empty
    prev, mid, nxt = sig[:-2], sig[1:-1], sig[2:]
    ok = is_soft[mid] & is_gemm[prev] & is_gemm[nxt]
    ok &= (order_keys[prev] == order_keys[mid]) & (order_keys[mid] == order_keys[nxt])
    ok &= (mid - prev - 1 <= MAX_FILLERS) & (nxt - mid - 1 <= MAX_FILLERS)
    prev, mid, nxt = prev[ok], mid[ok], nxt[ok]
    if not len(mid):
        return empty
    # batched: by its op, else by a grid with z > 1; both grids known: the same batch (B x heads).
    # Grids are read only where an op does not already say both GEMMs are batched.
    by_op = op_batched[prev] & op_batched[nxt]
    zp = zn = np.full(len(mid), np.nan)
    ask = np.flatnonzero(~by_op)
    if grid is not None and len(ask):
        zp, zn = zp.copy(), zn.copy()
        zp[ask] = grid_z(grid(prev[ask]))
        zn[ask] = grid_z(grid(nxt[ask]))
    keep = (op_batched[prev] | (zp > 1)) & (op_batched[nxt] | (zn > 1))
    keep &= np.isnan(zp) | np.isnan(zn) | (zp == zn)
    return np.stack([prev[keep], mid[keep], nxt[keep]], axis=1)


def shapes_agree(model_flops: np.ndarray, triples: np.ndarray) -> bool:
    """Both GEMMs of every triple carry FLOPs from op shapes, and they agree (Q K^T and P V)."""
    if not len(triples):
        return False
    a, b = model_flops[triples[:, 0]], model_flops[triples[:, 2]]
    if np.isnan(a).any() or np.isnan(b).any() or (a <= 0).any() or (b <= 0).any():
        return False
    return bool((np.abs(a - b) <= SHAPE_FLOPS_TOLERANCE * np.maximum(a, b)).all())


def scores_bytes_per_call(meta_steps: pd.DataFrame, heads: int | None, elem: int) -> pd.Series:
    """The S x S scores of one attention call of each (phase, step): batch x heads x new x context
    elements (new = tokens per sequence of the step), indexed by (phase, step)."""
    if heads is None or meta_steps.empty:
        return pd.Series(dtype="float64")
    s = meta_steps
    batch = s["batch"].where(s["batch"] > 0)
    new = (s["new_tokens"] / batch).where(s["phase"] == "prefill", 1)
    out = elem * batch * heads * new * s["context"]
    return pd.Series(out.to_numpy(dtype="float64"), index=pd.MultiIndex.from_arrays([s["phase"], s["step"]]))
