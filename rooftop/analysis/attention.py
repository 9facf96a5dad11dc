"""Is attention really fused? The verdict per phase, from kernel names and (with counters) bytes.

Attention verdict: fused (FlashAttention-like: one fused kernel, bytes near the minimum) or
materialized (separate QK^T GEMM, softmax and PV GEMM kernels, or bytes far above the minimum),
with the measured/minimum byte ratio when counters exist. The minimum is read Q, K, V once and
write O once (docs/definitions.md), computed from the model shapes and the step metadata.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..models import ModelConfig
from .metrics import elem_bytes, labelled, step_meta

# Kernel (or CPU op) names of fused attention implementations (docs/definitions.md).
FUSED_RE = re.compile(
    r"flash|fmha|cutlassF|efficient_attention|sdpa.*fprop|fprop.*sdpa|paged_attention|xformers|"
    r"FlashAttn|mha_fwd|fused_attention|flashinfer|_flash_attention_for_cpu|attention_kernel",
    re.IGNORECASE)
# Names that match FUSED_RE but are not attention itself: vLLM's KV-cache append is
# `reshape_and_cache_flash_kernel`; FlashInfer/vLLM also ship flash-named copy and rotary helpers.
NOT_ATTENTION_RE = re.compile(r"reshape_and_cache|copy_blocks|swap_blocks|rotary|rope", re.IGNORECASE)
SOFTMAX_RE = re.compile(r"softmax", re.IGNORECASE)
SDPA_RE = re.compile(r"scaled_dot_product")
BMM_RE = re.compile(r"^aten::(?:bmm|baddbmm)$")
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
NOT_SOFTMAX_RE = re.compile(r"log_?softmax|cross_?entropy|nll_loss", re.IGNORECASE)


def _attention_path(text: str) -> bool:
    """A path with an attention range (`.../attn`, `self_attention`, `sdpa`, `mha`) in it.
    Substring tests, not a regex: a long decode run has ~250k distinct paths."""
    low = text.lower()
    return "attn" in low or "attention" in low or "sdpa" in low or "mha" in low


_PATH_WORDS = ("attn", "attention", "sdpa", "mha")


def _attention_paths(values) -> np.ndarray:
    """`_attention_path` of each of `values` (a list, or Arrow text; anything but text: False),
    ASCII text tested in Arrow at once (a long decode run has ~340k distinct paths; lower-casing
    ASCII is the same in Arrow and in Python), any other text in Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, list):
        values = pa.array([v if isinstance(v, str) else None for v in values], type=pa.large_string())
    # one pass of a literal alternation (four `match_substring` passes took 4x as long)
    hit = pc.match_substring_regex(pc.ascii_lower(values), "|".join(_PATH_WORDS))
    ascii = pc.fill_null(pc.string_is_ascii(values), False).to_numpy(zero_copy_only=False)
    out = pc.fill_null(hit, False).to_numpy(zero_copy_only=False) & ascii
    for i in np.flatnonzero(~ascii & pc.is_valid(values).to_numpy(zero_copy_only=False)).tolist():
        out[i] = _attention_path(values[i].as_py())
    return out


def _arrow_text(index: pd.Index):
    """The Arrow array behind an Index of Arrow-backed text (a categorical's categories as a file
    is read), else None."""
    import pyarrow as pa

    try:
        arr = pa.array(index.array) if isinstance(index.dtype, pd.StringDtype) else None
    except (TypeError, ValueError, pa.ArrowException):
        return None
    return arr if arr is not None and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) else None


def matches(col: pd.Series, rx) -> np.ndarray:
    """`rx.search` (or a predicate) on each row, evaluated once per distinct value."""
    test = rx if callable(rx) and not isinstance(rx, re.Pattern) else rx.search
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, uniques = col.cat.codes.to_numpy(), col.cat.categories
        arrow = _arrow_text(uniques) if rx is _attention_path else None
        if arrow is not None:
            return np.append(_attention_paths(arrow), False)[codes]
    else:
        codes, uniques = pd.factorize(col.astype(object), use_na_sentinel=True)
    uniques = np.asarray(uniques, dtype=object).tolist()  # plain str: iterating Arrow-backed text is ~20x slower
    if rx is _attention_path:
        hit = np.append(_attention_paths(uniques), False)
    else:
        hit = np.array([bool(test(u)) if isinstance(u, str) else False for u in uniques] + [False], dtype=bool)
    return hit[codes]  # code -1 (missing) picks the trailing False


def _name_flags(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every name test the verdicts make, per row of `rows`, each evaluated once per distinct value
    of its column over all the rows (a phase's rows share their categories with the whole trace:
    tested per phase, the ~250k distinct paths of a long decode run were tested once per phase)."""
    name, op = rows["name"], rows["op"]
    return {"sdpa": matches(op, SDPA_RE), "bmm": matches(op, BMM_RE),
            "path": matches(rows["path"], _attention_path), "softmax": matches(name, SOFTMAX_RE),
            "not_softmax": matches(name, NOT_SOFTMAX_RE) | matches(op, NOT_SOFTMAX_RE),
            "fused_name": matches(name, FUSED_RE), "fused_op": matches(op, FUSED_RE),
            "not_attention": matches(name, NOT_ATTENTION_RE),
            "category": (rows["category"] == "attention").to_numpy(dtype=bool)}


def _attention_mask(f: dict[str, np.ndarray]) -> np.ndarray:
    """Which rows are attention work, from `_name_flags` of one phase's rows."""
    in_attention = f["path"] | f["sdpa"]
    soft = f["softmax"] & ~f["not_softmax"]
    soft &= in_attention | bool(f["bmm"].any())
    mask = f["fused_name"] | soft | f["sdpa"] | (f["bmm"] & in_attention) | (f["category"] & ~f["softmax"])
    return mask & ~f["not_attention"]


def attention_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The attention work among `rows` (one phase's: a softmax counts beside batched GEMMs of the
    same rows)."""
    return rows[_attention_mask(_name_flags(rows))]


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


# What a verdict reads of the attention rows (taken with these columns only: ~60 at 1M kernels).
_VERDICT_COLUMNS = ("counters", "dram_read", "dram_write", "model_bytes", "dur_ns")


def verdicts(timed: pd.DataFrame, meta: dict, modeled: bool = False) -> list[Verdict]:
    rows = labelled(timed)
    mins = min_attention_bytes(meta)
    out: list[Verdict] = []
    if rows.empty:
        return out
    flags = _name_flags(rows)
    positions = pd.Series(np.arange(len(rows)), index=rows.index)
    for phase, at in positions.groupby(rows["phase"], sort=False):  # (the phases as rows.groupby gives them)
        at = at.to_numpy()
        f = {k: v[at] for k, v in flags.items()}
        mask = _attention_mask(f)
        if not mask.any():
            continue
        att = rows[[c for c in _VERDICT_COLUMNS if c in rows.columns]].iloc[at[mask]]
        hinted = bool((f["path"][mask] | f["sdpa"][mask]).any())
        fused = int((f["fused_name"][mask] | f["fused_op"][mask]).sum())
        soft = int(f["softmax"][mask].sum())
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
