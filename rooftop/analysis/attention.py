"""Is attention really fused? The verdict per phase, from kernel names and (with counters) bytes.

Attention verdict: fused (FlashAttention-like: one fused kernel, bytes near the minimum) or
materialized (separate QK^T GEMM, softmax and PV GEMM kernels, or bytes far above the minimum),
with the measured/minimum byte ratio when counters exist. The minimum is read Q, K, V once and
write O once (reference/roofline.md 3.2), computed from the model shapes and the step metadata.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..models import ModelConfig
from .metrics import elem_bytes, labelled, step_meta

# Kernel (or CPU op) names of fused attention implementations (reference/roofline.md 3.4).
FUSED_RE = re.compile(
    r"flash|fmha|cutlassF|efficient_attention|sdpa.*fprop|fprop.*sdpa|paged_attention|xformers|"
    r"FlashAttn|mha_fwd|fused_attention|flashinfer|_flash_attention_for_cpu|attention_kernel",
    re.IGNORECASE)
# Names that match FUSED_RE but are not attention itself: vLLM's KV-cache append is
# `reshape_and_cache_flash_kernel`; FlashInfer/vLLM also ship flash-named copy and rotary helpers.
NOT_ATTENTION_RE = re.compile(r"reshape_and_cache|copy_blocks|swap_blocks|rotary|rope", re.IGNORECASE)
SOFTMAX_RE = re.compile(r"softmax", re.IGNORECASE)
RATIO_MATERIALIZED = 3.0  # measured / minimum above this: the scores went through HBM


@dataclass
class Verdict:
    phase: str
    verdict: str            # "fused" | "materialized" | "mixed" | "unknown"
    evidence: str           # plain words
    fused_kernels: int
    softmax_kernels: int
    attn_ns: float
    attn_bytes: float | None
    min_bytes: float | None
    ratio: float | None
    bytes_source: str | None
    confirmed: bool = True  # False: kernel names alone, no attention range / SDPA op / byte ratio


# A softmax is attention evidence only inside attention: a classifier's (log_)softmax or a
# sampler's softmax over the vocabulary is not. "Inside" = an attention range on the path, an
# SDPA op, or batched GEMMs (QK^T, PV) in the same phase.
ATTN_PATH_RE = re.compile(r"(?:^|/)[^/]*(?:attn|attention|sdpa|mha)[^/]*(?:/|$)", re.IGNORECASE)
NOT_SOFTMAX_RE = re.compile(r"log_?softmax|cross_?entropy|nll_loss", re.IGNORECASE)


def attention_rows(rows: pd.DataFrame) -> pd.DataFrame:
    name = rows["name"].astype(str)
    op = rows["op"].astype(object).fillna("").astype(str)
    path = rows["path"].astype(object).fillna("").astype(str)
    sdpa = op.str.contains("scaled_dot_product", regex=False)
    bmm = op.isin(("aten::bmm", "aten::baddbmm"))
    in_attention = path.str.contains(ATTN_PATH_RE) | sdpa
    soft = name.str.contains(SOFTMAX_RE) & ~name.str.contains(NOT_SOFTMAX_RE) & ~op.str.contains(NOT_SOFTMAX_RE)
    soft &= in_attention | bool(bmm.any())
    mask = name.str.contains(FUSED_RE) | soft | sdpa | (bmm & in_attention) | \
        ((rows["category"] == "attention") & ~name.str.contains(SOFTMAX_RE))
    return rows[mask & ~name.str.contains(NOT_ATTENTION_RE)]


def min_attention_bytes(meta: dict) -> pd.Series:
    """Per phase, the IO-minimal attention bytes summed over its steps and layers; empty if unknown."""
    cfg = ModelConfig.from_meta(meta.get("model"))
    steps = step_meta(meta)
    if cfg is None or steps.empty:
        return pd.Series(dtype="float64")
    b = elem_bytes(meta)
    d, nh, nkv = cfg.d, cfg.heads, cfg.kv_heads
    batch = steps["batch"]
    new = (steps["new_tokens"] / batch.where(batch > 0)).where(steps["phase"] == "prefill", 1)
    ctx = steps["context"]
    # Q and O for the new tokens, K and V for the whole context, per layer.
    per_step = b * batch * (2 * new * nh * d + 2 * ctx * nkv * d) * cfg.layers
    return per_step.groupby(steps["phase"]).sum(min_count=1)


def verdicts(timed: pd.DataFrame, meta: dict, modeled: bool = False) -> list[Verdict]:
    rows = labelled(timed)
    mins = min_attention_bytes(meta)
    out: list[Verdict] = []
    for phase, prow in rows.groupby("phase", sort=False):
        att = attention_rows(prow)
        if att.empty:
            continue
        names = att["name"].astype(str) + " " + att["op"].astype(object).fillna("").astype(str)
        hinted = bool((att["path"].astype(object).fillna("").astype(str).str.contains(ATTN_PATH_RE)
                       | att["op"].astype(object).fillna("").astype(str).str.contains("scaled_dot_product", regex=False)).any())
        fused = int(names.str.contains(FUSED_RE).sum())
        soft = int(att["name"].astype(str).str.contains(SOFTMAX_RE).sum())
        counted = att["counters"].fillna(False).astype(bool)
        if counted.all():
            attn_bytes = float((att["dram_read"] + att["dram_write"]).sum())
            src = "measured"
        elif modeled and att["model_bytes"].notna().any():
            attn_bytes = float(att["model_bytes"].sum())
            src = "modeled"
        else:
            attn_bytes, src = None, None
        mn = float(mins.get(phase, np.nan)) if phase in mins.index else None
        mn = mn if mn and mn > 0 and not np.isnan(mn) else None
        ratio = attn_bytes / mn if attn_bytes is not None and mn else None
        big = ratio is not None and ratio > RATIO_MATERIALIZED
        if fused and not soft and not big:
            verdict = "fused"
        elif (soft and not fused) or (big and not fused):
            verdict = "materialized"
        elif fused and (soft or big):
            verdict = "mixed"
        else:
            verdict = "unknown"
        parts = []
        if fused:
            parts.append(f"{fused} fused attention kernel(s)")
        if soft:
            parts.append(f"{soft} separate softmax kernel(s) (scores written to memory)")
        if ratio is not None:
            parts.append(f"attention bytes {ratio:.1f}x the minimum ({src})")
        elif src is None and mn:
            parts.append("no counters: bytes vs minimum unknown")
        confirmed = fused > 0 or hinted or ratio is not None
        if not confirmed:
            parts.append("no attention range or SDPA op names these kernels, so this rests on kernel names alone")
        out.append(Verdict(phase, verdict, "; ".join(parts) or "no attention kernels recognised", fused, soft,
                           float(att["dur_ns"].sum()), attn_bytes, mn, ratio, src, confirmed))
    return out
