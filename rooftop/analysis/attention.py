"""Is attention really fused? The verdict per phase over its attention calls (docs/definitions.md).

The unit is the attention call (one per layer per step). KV-cache writes are KV-cache work, never
calls; split-KV combine and scheduling kernels belong to the call they finish. Fused: FlashAttention-
like kernels (bytes near the minimum where counters exist). Materialized: the structure of unfused
attention (batched GEMM -> softmax -> batched GEMM on one stream, attention_structure.py), a softmax
inside an attention range, or bytes far above the minimum. The minimum is read Q, K, V once and
write O once, from the model shapes and the step metadata. A verdict is `confirmed` only where bytes
or op shapes back it; otherwise it says "by name".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rooftop.llm.shapes import ModelConfig
from rooftop.analysis import attention_structure as structure
from rooftop.analysis.step_entries import step_meta
from rooftop.analysis.work import elem_bytes, labelled

# Kernel (or CPU op) names of fused attention implementations (docs/definitions.md).
FUSED_RE = re.compile(
    r"flash|fmha|cutlassF|efficient_attention|sdpa.*fprop|fprop.*sdpa|paged_attention|xformers|"
    r"FlashAttn|mha_fwd|fused_attention|flashinfer|_flash_attention_for_cpu|attention_kernel|"
    r"(?:batch|single)_?(?:prefill|decode)_?with",
    re.IGNORECASE)
# KV-cache work, not attention calls: the kernels that write new K/V into the cache or move cache
# blocks. vLLM csrc/cache_kernels.cu (`reshape_and_cache_kernel`, `reshape_and_cache_flash_kernel`,
# `concat_and_cache_mla_kernel`, `copy_blocks_kernel`, swap_blocks); nano-vllm / SGLang-style Triton
# `store_kvcache_kernel`; SGLang `set_kv_buffer`; FlashInfer page.cuh `AppendPagedKVCacheKernel`.
KV_CACHE_RE = re.compile(
    r"reshape_and_cache|concat_and_cache|copy_blocks|swap_blocks|store_kv_?cache|set_kv_buffer|"
    r"append_?paged_?kv_?cache|kv_?cache_?(?:write|store|copy|append)|cache_?copy", re.IGNORECASE)
# Split-KV combine/reduce kernels: part of the attention call whose partial results they merge.
# flash-attention csrc `flash_fwd_splitkv_combine_kernel`, hopper/flash_fwd_combine_kernel.h
# `FlashAttnFwdCombine`; vLLM csrc/attention/merge_attn_states.cu `merge_attn_states_kernel` and
# paged_attention_v2's `paged_attention_v2_reduce_kernel`; FlashInfer attention/cascade.cuh
# `MergeStateKernel`/`MergeStatesKernel`/`VariableLengthMergeStatesKernel`; CUTLASS/vLLM SM100 MLA
# `sm100_fmha_mla_reduction`.
COMBINE_RE = re.compile(
    r"splitkv_combine|FwdCombine|attn_?combine|combine_attn|merge_?attn_?states|merge_?states?(?:kernel|_|\b)|"
    r"MergeState|attention_v2_reduce|mla_?reduction|flash_?decoding_?reduce", re.IGNORECASE)
# Scheduling/metadata kernels of an attention call (they do no attention work): FA3 hopper
# flash_prepare_scheduler.cu `prepare_varlen_num_blocks_kernel`, FlashMLA `get_mla_metadata`.
SCHEDULE_RE = re.compile(r"prepare_varlen_num_blocks|get_mla_metadata|mla_metadata_kernel|scheduler_metadata",
                         re.IGNORECASE)
# Names that match FUSED_RE but are not attention itself: KV-cache writes above, and the flash-named
# rotary helpers that FlashInfer/vLLM ship.
NOT_ATTENTION_RE = re.compile(KV_CACHE_RE.pattern + r"|rotary|rope", re.IGNORECASE)
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
    confirmed: bool = False  # True only where bytes or op shapes back the verdict (evidence_kind)
    # Attention calls (one per layer per step): fused calls plus (GEMM, softmax, GEMM) triples.
    calls: int | None = None
    # What the verdict rests on: "bytes" (DRAM bytes against the S x S scores or the IO minimum),
    # "shapes" (op shapes of the two batched GEMMs), "structure" (kernel order and launch grids),
    # "model" (a modeled trace: the model's own bytes), "names" (kernel names and ranges alone).
    # `confirmed` is true for the first two only.
    evidence_kind: str = "names"
    kv_cache_kernels: int = 0   # KV-cache writes seen beside attention: KV-cache work, not calls
    combine_kernels: int = 0    # split-KV combine and scheduling kernels, counted in their calls
    materialized_calls: int = 0  # (batched GEMM, softmax, batched GEMM) triples found


CONFIRMING = ("bytes", "shapes")


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
    cat = rows["category"] if "category" in rows.columns else pd.Series(None, index=rows.index, dtype=object)
    return {"sdpa": matches(op, SDPA_RE), "bmm": matches(op, BMM_RE),
            "path": matches(rows["path"], _attention_path), "softmax": matches(name, SOFTMAX_RE),
            "not_softmax": matches(name, NOT_SOFTMAX_RE) | matches(op, NOT_SOFTMAX_RE),
            "fused_name": matches(name, FUSED_RE),
            "not_attention": matches(name, NOT_ATTENTION_RE),
            "kv_cache": matches(name, KV_CACHE_RE),
            "combine": matches(name, COMBINE_RE) | matches(name, SCHEDULE_RE),
            "category": (cat == "attention").to_numpy(dtype=bool),
            "gemm": (cat == "gemm").to_numpy(dtype=bool),
            "routing": (cat == "routing").to_numpy(dtype=bool),
            "filler": cat.isin(structure.FILLER_CATEGORIES).to_numpy(dtype=bool)}


def _attention_mask(f: dict[str, np.ndarray]) -> np.ndarray:
    """Which rows are attention work by name, from `_name_flags` of one phase's rows: fused kernels
    and their split-KV combine kernels, SDPA ops, and softmaxes or batched GEMMs inside an attention
    range or SDPA op. KV-cache writes never are (they are KV-cache work). The (batched GEMM, softmax,
    batched GEMM) structure outside attention ranges is found apart (attention_structure)."""
    in_attention = f["path"] | f["sdpa"]
    soft = f["softmax"] & ~f["not_softmax"] & ~f["routing"] & in_attention
    mask = f["fused_name"] | f["combine"] | soft | f["sdpa"] | (f["bmm"] & in_attention) | (f["category"] & ~f["softmax"])
    return mask & ~f["not_attention"] & ~f["kv_cache"]


def attention_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The attention work among `rows` (by name, and the batched GEMM -> softmax -> batched GEMM
    structure)."""
    f = _name_flags(rows)
    mask = _attention_mask(f)
    triples = _triples(rows, f)
    mask[triples.ravel()] = True
    return rows[mask]


def _stream_order(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The rows' positions in stream order (rank, device, stream, phase, then start) and one integer
    per row naming its (rank, device, stream, phase)."""
    group = np.zeros(len(rows), dtype=np.int64)
    for c in ("rank", "device", "stream", "phase"):
        if c in rows.columns:  # (codes combined in numpy: a groupby over four keys is slow at 1M rows)
            col = rows[c]
            if isinstance(col.dtype, pd.CategoricalDtype):
                codes, n = col.cat.codes.to_numpy(), len(col.cat.categories)
            else:
                codes, uniq = pd.factorize(col, use_na_sentinel=True)
                n = len(uniq)
            group = group * (n + 1) + (codes.astype(np.int64) + 1)
    start = rows["start_ns"].to_numpy() if "start_ns" in rows.columns else np.arange(len(rows))
    if len(start) < 2 or bool((start[1:] >= start[:-1]).all()):
        order = np.argsort(group, kind="stable")  # rows already in time order (the usual case): ~3x faster
    else:
        order = np.lexsort((start, group))
    return order, group


def _triples(rows: pd.DataFrame, f: dict[str, np.ndarray]) -> np.ndarray:
    """(GEMM, softmax, GEMM) row positions of materialized attention, found on each stream."""
    soft = f["softmax"] & ~f["not_softmax"] & ~f["routing"] & ~f["kv_cache"]
    if not soft.any() or not f["gemm"].any():
        return np.empty((0, 3), dtype=np.int64)
    order, group = _stream_order(rows)
    op = rows["op"]  # (the ops are read only when a softmax and GEMMs are there to be ordered)
    gemm = f["gemm"] & ~matches(op, structure.PLAIN_OP_RE)
    filler = f["filler"] & ~soft & ~f["gemm"]
    grid = (lambda at: rows["grid"].iloc[order[at]]) if "grid" in rows.columns else None
    t = structure.find_triples(group[order], gemm[order], soft[order], filler[order], matches(op, structure.BATCHED_OP_RE)[order], grid)
    return order[t] if len(t) else t


def _calls(rows: pd.DataFrame, main: np.ndarray) -> int:
    """Fused attention calls: one per layer per step where every fused kernel has both, else one
    per fused kernel (the split-KV combine and scheduling kernels are never in `main`)."""
    if not main.any():
        return 0
    if "step" in rows.columns and "layer" in rows.columns:
        at = rows.iloc[np.flatnonzero(main)]
        if at["step"].notna().all() and at["layer"].notna().all():
            keys = [c for c in ("rank", "step", "layer") if c in at.columns]
            return int(at[keys].drop_duplicates().shape[0])
    return int(main.sum())


def min_attention_bytes(meta: dict, steps: pd.DataFrame | None = None) -> pd.Series:
    """Per phase, the IO-minimal attention bytes summed over its steps and layers; empty if unknown.
    `steps`: `step_meta(meta)` where the caller has it already."""
    cfg = ModelConfig.from_meta(meta.get("model"))
    steps = step_meta(meta) if steps is None else steps
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


def _scores_per_call(meta: dict, steps: pd.DataFrame) -> pd.Series:
    cfg = ModelConfig.from_meta(meta.get("model"))
    return structure.scores_bytes_per_call(steps, cfg.heads if cfg else None, elem_bytes(meta))


def _scores_checked(rows: pd.DataFrame, soft_at: np.ndarray, per_call: pd.Series) -> tuple[int, int, float | None]:
    """Of the triples' softmax rows (positions `soft_at`) with DRAM counters and a step whose S x S
    scores are known (`per_call`, by phase and step): how many, how many moved at least the scores
    through DRAM, and the smallest bytes/scores ratio."""
    if not len(soft_at) or "counters" not in rows.columns:
        return 0, 0, None
    if per_call.empty:
        return 0, 0, None
    sm = rows.iloc[soft_at]
    counted = sm["counters"].fillna(False).astype(bool).to_numpy() & sm["step"].notna().to_numpy()
    if not counted.any():
        return 0, 0, None
    sm = sm[counted]
    idx = pd.MultiIndex.from_arrays([sm["phase"].astype(object), sm["step"].astype("float64")])
    per_call = pd.Series(per_call.to_numpy(), index=pd.MultiIndex.from_arrays(
        [per_call.index.get_level_values(0).astype(object), per_call.index.get_level_values(1).astype("float64")]))
    scores = per_call.reindex(idx).to_numpy(dtype="float64")
    moved = (sm["dram_read"].fillna(0) + sm["dram_write"].fillna(0)).to_numpy(dtype="float64")
    known = ~np.isnan(scores) & (scores > 0)
    if not known.any():
        return 0, 0, None
    r = moved[known] / scores[known]
    return int(known.sum()), int((r >= 1.0).sum()), float(r.min())


# The name tests a phase's verdict reads (the others serve the structure search over all rows).
_PHASE_FLAGS = ("sdpa", "bmm", "path", "softmax", "not_softmax", "fused_name", "not_attention", "kv_cache",
                "combine", "category", "routing")


def verdicts(timed: pd.DataFrame, meta: dict, modeled: bool = False) -> list[Verdict]:
    """One verdict per phase over its attention calls (docs/definitions.md, "Attention verdict")."""
    rows = labelled(timed)
    steps = step_meta(meta)
    mins = min_attention_bytes(meta, steps)
    out: list[Verdict] = []
    if rows.empty:
        return out
    flags = _name_flags(rows)
    triples = _triples(rows, flags)
    in_triple = np.zeros(len(rows), dtype=bool)
    in_triple[triples.ravel()] = True
    soft_of_triple = np.zeros(len(rows), dtype=bool)
    soft_of_triple[triples[:, 1]] = True
    model_flops = (rows["model_flops"].to_numpy(dtype="float64", na_value=np.nan)
                   if "model_flops" in rows.columns and not modeled else np.full(len(rows), np.nan))
    positions = pd.Series(np.arange(len(rows)), index=rows.index)
    scores = None  # the S x S scores per call, by (phase, step): read from the metadata once, when needed
    for phase, at in positions.groupby(rows["phase"], sort=False):  # (the phases as rows.groupby gives them)
        at = at.to_numpy()
        f = {k: v[at] for k, v in flags.items() if k in _PHASE_FLAGS}
        in_phase = np.zeros(len(rows), dtype=bool)
        in_phase[at] = True
        mask = _attention_mask(f) | in_triple[at]
        kv = int((f["kv_cache"] & ~mask).sum())
        if not mask.any():
            continue
        att_at = at[mask]
        att = rows[[c for c in _VERDICT_COLUMNS if c in rows.columns]].iloc[att_at]
        combine = f["combine"] & mask & ~f["kv_cache"]
        main = (f["fused_name"] & mask & ~combine)
        fused = int(main.sum())
        fused_calls = _calls(rows[[c for c in ("rank", "step", "layer") if c in rows.columns]].iloc[at], main)
        ph_triples = triples[in_phase[triples[:, 1]]] if len(triples) else triples
        n_tri = len(ph_triples)
        loose = mask & f["softmax"] & ~f["not_softmax"] & ~soft_of_triple[at]
        n_loose = int(loose.sum())
        soft = n_tri + n_loose
        counted = att["counters"].fillna(False).astype(bool) if "counters" in att.columns else pd.Series(False, index=att.index)
        if len(counted) and counted.all():
            attn_bytes = float((att["dram_read"] + att["dram_write"]).sum())
            src = "measured"
        elif modeled and "model_bytes" in att.columns and att["model_bytes"].notna().any():
            attn_bytes = float(att["model_bytes"].sum())
            src = "modeled"
        else:
            attn_bytes, src = None, None
        mn = float(mins.get(phase, np.nan)) if phase in mins.index else None
        mn = mn if mn and mn > 0 and not np.isnan(mn) else None
        ratio = attn_bytes / mn if attn_bytes is not None and mn else None
        big = ratio is not None and ratio > RATIO_MATERIALIZED
        unfused = soft > 0 or (big and not fused)
        if fused and not soft and not big:
            verdict = "fused"
        elif unfused and not fused:
            verdict = "materialized"
        elif fused and (soft or big):
            verdict = "mixed"
        else:
            verdict = "unknown"
        if n_tri and scores is None:
            scores = _scores_per_call(meta, steps)
        n_checked, n_pass, worst = _scores_checked(rows, ph_triples[:, 1], scores) if n_tri else (0, 0, None)
        shapes = structure.shapes_agree(model_flops, ph_triples) if n_tri else False
        # what the verdict rests on (the strongest evidence that backs it)
        agree = (verdict == "fused" and not big) or (verdict in ("materialized", "mixed") and big)
        if ratio is not None and src == "measured" and agree:
            kind = "bytes"
        elif ratio is not None and src == "modeled" and agree:
            kind = "model"
        elif verdict == "materialized" and n_checked and n_pass == n_checked and not n_loose:
            kind = "bytes"
        elif verdict == "materialized" and shapes and not n_loose:
            kind = "shapes"
        elif verdict == "materialized" and n_tri and not n_loose:
            kind = "structure"
        else:
            kind = "names"
        parts = []
        calls = fused_calls + n_tri + n_loose
        if fused:
            parts.append(f"{fused_calls} fused call(s) ({fused} fused attention kernel(s))")
        if int(combine.sum()):
            parts.append(f"{int(combine.sum())} split-KV combine/scheduling kernel(s) counted in their calls")
        if n_tri:
            parts.append(f"{n_tri} call(s) as batched GEMM -> softmax -> batched GEMM on one stream "
                         "(the scores written to memory)")
        if n_loose:
            parts.append(f"{n_loose} separate softmax kernel(s) in attention ranges/ops")
        if kv:
            parts.append(f"{kv} KV-cache write(s) left out (KV-cache work, not attention calls)")
        if n_checked:
            parts.append(f"{n_pass} of {n_checked} measured softmax(es) moved at least the S x S scores through DRAM"
                         f" (lowest {worst:.1f}x)")
        if shapes:
            parts.append("op shapes: both batched GEMMs do the same FLOPs (Q K^T and P V)")
        if ratio is not None:
            parts.append(f"attention bytes {ratio:.1f}x the minimum ({src})")
        elif src is None and mn:
            parts.append("no counters: bytes vs minimum unknown")
        confirmed = kind in CONFIRMING
        if not confirmed:
            parts.append("by name: no bytes or op shapes back this" if kind == "names" else
                         "by name and kernel order: no bytes or op shapes back this")
        out.append(Verdict(phase, verdict, "; ".join(parts) or "no attention kernels recognised", fused, soft,
                           float(att["dur_ns"].sum()), attn_bytes, mn, ratio, src, confirmed,
                           calls=calls if calls else None, evidence_kind=kind, kv_cache_kernels=kv,
                           combine_kernels=int(combine.sum()), materialized_calls=n_tri))
    return out
