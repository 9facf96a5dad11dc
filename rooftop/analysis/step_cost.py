"""Model-level accounting: the bytes and FLOPs a step must move and do, from the model's description
and the step's workload, not from per-kernel attribution (docs/definitions.md, "Model MBU").

Per step, on one rank (`--tp`/`--ep` shares):
- weights, read once per step at their stored precision (block scales included): every layer's
  attention, dense MLP, shared experts and router, the final norm and the LM head; of the routed
  experts, those the step touches: E_rank·(1-(1-k/E)^T) expected for T tokens under uniform
  routing (k experts per token, E experts). The input embedding is a gather of T rows and counts
  as activations;
- KV cache read: every sequence's context (tokens it attends to, this step's own included), per
  layer, capped by the window on sliding-window layers; KV written: one entry per new token;
- activations (hidden states between kernels, logits, the embedding gather) are not counted:
  they are T·hidden-sized, under 0.1% of the weights for decode;
- FLOPs: 2 x active parameters x tokens (the LM head once per sequence, as serving engines compute
  logits for the last position only) + attention 4·heads·head_dim per (query, key) pair, causal.

Model MBU = model bytes / step span / peak bandwidth (Databricks); over busy time = / union of
kernel intervals. Model MFU likewise with FLOPs and the peak FLOP/s. A step whose workload is
unknown gets null with the reason (`model_reason`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import trace_dtype
from rooftop.llm.shapes import FORMATS, ModelConfig, ModelSpec, weight_format
from rooftop.analysis.step_entries import first_positions, step_records, taken

STEP_COLUMNS = ("model_weight_bytes", "model_kv_read_bytes", "model_kv_write_bytes", "model_bytes", "model_flops",
                "experts_touched", "model_mbu", "model_mbu_busy", "model_mfu", "model_mfu_busy", "model_ideal_ns",
                "model_reason", "workload_source", "model_bound")
PHASE_COLUMNS = ("model_steps", "model_bytes", "model_bytes_per_step", "model_flops", "model_mbu", "model_mbu_busy",
                 "model_mfu", "model_mfu_busy", "model_reason", "model_bound")
ACTIVATIONS_NOTE = ("activations (hidden states, logits, the embedding gather) are not counted: "
                    "T x hidden sized, negligible next to the weights in decode")


@dataclass(frozen=True)
class Workload:
    """`--batch/--context/--new-tokens`: fill in what a step's metadata does not say."""

    batch: int | None = None
    context: int | None = None
    new_tokens: int | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.batch, self.context, self.new_tokens))


def spec_from_meta(meta: dict) -> ModelSpec | None:
    """The model a Recorder/predict trace describes in its metadata (shapes and dtype), if any."""
    cfg = ModelConfig.from_meta(meta.get("model"))
    if cfg is None:
        return None
    dtype = trace_dtype(meta)
    base = weight_format(dtype) or FORMATS["bf16"]
    kv = (meta.get("workload") or {}).get("kv_dtype") or dtype
    return ModelSpec(cfg, base=base, kv_dtype=str(kv), source="trace metadata")


# --- the arithmetic ---------------------------------------------------------------------------------
def expected_experts(experts: int, k: int, tokens) -> np.ndarray:
    """Expected distinct experts T tokens touch when each picks k of E uniformly: E·(1-(1-k/E)^T)."""
    t = np.asarray(tokens, dtype="float64")
    if experts <= 0:
        return np.zeros_like(t)
    return experts * (1.0 - (1.0 - k / experts) ** np.clip(t, 0, None))


def _keys_upto(n, window: int) -> np.ndarray:
    """Σ_{x=1..n} min(x, W): keys seen by queries at positions 1..n (no window: W = inf)."""
    n = np.asarray(n, dtype="float64")
    if not window:
        return n * (n + 1) / 2
    w = float(window)
    return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)


def attended_pairs(queries, context, window: int = 0) -> np.ndarray:
    """(query, key) pairs of one sequence whose last `queries` tokens attend causally over
    `context` tokens (their own included): decode q=1 gives `context`; a fresh prefill q(q+1)/2."""
    q = np.asarray(queries, dtype="float64")
    c = np.maximum(np.asarray(context, dtype="float64"), q)
    return _keys_upto(c, window) - _keys_upto(c - q, window)


@dataclass(frozen=True)
class Parts:
    """Per-rank bytes of each part, once: what the step formulas multiply."""

    dense_layer: float  # attention + norms + dense MLP
    moe_layer_fixed: float  # attention + norms + router + shared experts
    expert: float  # one routed expert as this rank holds it
    experts_on_rank: float  # E / ep
    tail: float  # final norm + LM head
    kv_layer_token: float  # K and V of one token in one layer on this rank


def parts(spec: ModelSpec) -> Parts:
    c = spec.config
    tp, ep = spec.tp, spec.ep
    p = spec.precision
    attn = p("attn").nbytes(c.attn_matrix_params() / tp, 4) + spec.base.nbytes(c.attn_small_params())
    dense = attn + p("mlp").nbytes(c.mlp_params(c.ffn) / tp, 3)
    shared = (p("shared").nbytes(c.mlp_params(c.shared_ffn) / tp, 3) + spec.base.nbytes(c.shared_small_params())
              if c.shared_ffn else 0.0)
    moe_fixed = attn + spec.base.nbytes(c.router_params()) + shared
    # One expert: whole on its rank under expert parallelism, else split across the TP ranks.
    expert = (p("experts").nbytes(c.mlp_params(c.expert_ffn) / (1 if ep > 1 else tp), 3)
              + spec.base.nbytes(c.expert_small_params())) if c.moe else 0.0
    head = spec.base if c.tied_embeddings else p("lm_head")  # a tied head is the (unquantized) embedding
    tail = spec.base.nbytes(c.hidden) + head.nbytes(c.vocab * c.hidden / tp, 1)
    kv_heads = -(-c.kv_heads // tp)  # fewer KV heads than ranks: each rank keeps one (replicated)
    return Parts(dense, moe_fixed, expert, c.experts / ep if c.moe else 0.0, tail, 2.0 * kv_heads * c.d * spec.kv_bytes)


def weight_bytes(spec: ModelSpec, tokens) -> np.ndarray:
    """Weight bytes one rank reads in a step of T tokens (expected, for MoE)."""
    c, pt = spec.config, parts(spec)
    t = np.asarray(tokens, dtype="float64")
    touched = experts_touched(spec, t)
    return (c.dense_layer_count * pt.dense_layer + c.moe_layer_count * (pt.moe_layer_fixed + touched * pt.expert)
            + pt.tail) * np.where(t > 0, 1.0, np.nan)


def experts_touched(spec: ModelSpec, tokens) -> np.ndarray:
    """Expected routed experts one rank's MoE layer runs for T tokens (its E/ep experts)."""
    c = spec.config
    if not c.moe:
        return np.zeros_like(np.asarray(tokens, dtype="float64"))
    return expected_experts(c.experts, c.experts_per_tok, tokens) / spec.ep


def _layer_windows(c: ModelConfig) -> tuple[int, int]:
    """(layers that see the whole context, layers with the sliding window)."""
    n_slide = len(c.sliding_layers) if c.sliding_window else 0
    return c.layers - n_slide, n_slide


def kv_read_bytes(spec: ModelSpec, seqs, context) -> np.ndarray:
    c, pt = spec.config, parts(spec)
    full, slide = _layer_windows(c)
    ctx = np.asarray(context, dtype="float64")
    per_seq = full * ctx + (slide * np.minimum(ctx, c.sliding_window) if slide else 0.0)
    return np.asarray(seqs, dtype="float64") * per_seq * pt.kv_layer_token


def kv_write_bytes(spec: ModelSpec, tokens) -> np.ndarray:
    return np.asarray(tokens, dtype="float64") * spec.config.layers * parts(spec).kv_layer_token


def step_flops(spec: ModelSpec, tokens, groups: list[tuple]) -> np.ndarray:
    """FLOPs of one rank: 2 x active parameters x tokens, the LM head once per sequence, and
    attention over each group's (sequences, new tokens, context)."""
    c, tp, ep = spec.config, spec.tp, spec.ep
    t = np.asarray(tokens, dtype="float64")
    attn = c.attn_matrix_params() + c.attn_small_params()
    dense = (attn + c.mlp_params(c.ffn)) / tp
    moe = ((attn + c.mlp_params(c.shared_ffn) + c.shared_small_params()) / tp + c.router_params()
           + c.experts_per_tok * (c.mlp_params(c.expert_ffn) + c.expert_small_params()) / (ep if ep > 1 else tp)) \
        if c.moe else 0.0
    per_token = c.dense_layer_count * dense + c.moe_layer_count * moe + c.hidden
    seqs = sum(np.asarray(g[0], dtype="float64") for g in groups)
    linear = 2.0 * t * per_token + 2.0 * seqs * c.vocab * c.hidden / tp
    full, slide = _layer_windows(c)
    pairs = 0.0
    for n, q_tokens, ctx in groups:
        n = np.asarray(n, dtype="float64")
        q = np.asarray(q_tokens, dtype="float64") / np.where(n > 0, n, np.nan)
        per = full * attended_pairs(q, ctx) + (slide * attended_pairs(q, ctx, c.sliding_window) if slide else 0.0)
        pairs = pairs + np.where(n > 0, n * per, 0.0)
    return linear + 4.0 * (c.heads / tp) * c.d * pairs


# --- steps and phases -----------------------------------------------------------------------------
def _meta_workload(meta: dict) -> pd.DataFrame:
    """Every workload key the step metadata carries, one row per step entry (float64; phase as given)."""
    steps = [s for s in meta.get("steps") or [] if isinstance(s, dict)]
    return step_records(steps, {"phase": lambda s: s.get("phase"), "step": lambda s: s.get("index", s.get("step")),
                                **{k: (lambda s, k=k: s.get(k)) for k in WORKLOAD_FIELDS}}, floats=True)


WORKLOAD_FIELDS = ("batch", "new_tokens", "context", "prefill_requests", "prefill_tokens", "decode_requests",
                   "decode_tokens")


def _workload_columns(steps: pd.DataFrame, meta: dict) -> dict[str, np.ndarray]:
    """Per row of the step table, each workload field of its step's metadata entry (the first entry
    with that phase and step number; NaN where none has one), as new arrays."""
    wl = _meta_workload(meta)
    at = first_positions(((p, s) if not np.isnan(s) else None
                          for p, s in zip(wl["phase"].astype(object).tolist(), wl["step"].tolist())),
                         zip(steps["phase"].astype(object).tolist(), steps["step"].astype("float64").tolist()))
    return {k: taken(wl[k].to_numpy(dtype="float64"), at) for k in WORKLOAD_FIELDS}


@dataclass
class _Resolved:
    """A step table's workloads as two request groups per step: (sequences, tokens, context) of the
    decoding sequences (or the whole batch), and of the prefill requests (attending to their own tokens)."""

    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    batch: np.ndarray
    new_tokens: np.ndarray
    context: np.ndarray
    reason: np.ndarray  # None where the workload is known
    source: np.ndarray
    fresh: np.ndarray  # prefill steps whose sequences are unknown: bytes known, attention FLOPs not

    @property
    def tokens(self) -> np.ndarray:
        return self.groups[0][1] + self.groups[1][1]

    @property
    def known(self) -> np.ndarray:
        return self.reason == None  # noqa: E711 (object array)


def _resolve(steps: pd.DataFrame, meta: dict, workload: Workload, has_model: bool) -> _Resolved:
    n = len(steps)
    wl = _workload_columns(steps, meta)
    batch, new, ctx = wl["batch"], wl["new_tokens"], wl["context"]
    p_req, p_tok, d_req, d_tok = (wl[k] for k in ("prefill_requests", "prefill_tokens", "decode_requests",
                                                  "decode_tokens"))
    filled = np.zeros(n, bool)
    split = ~np.isnan(p_req) | ~np.isnan(d_req)  # engine markers: prefill and decode requests apart
    # Flags fill what the trace does not say (never override it).
    for arr, val in ((batch, workload.batch), (new, workload.new_tokens), (ctx, workload.context)):
        if val is not None:
            miss = np.isnan(arr)
            arr[miss] = val
            filled |= miss
    decode = (steps["phase"].astype(object) == "decode").to_numpy()
    guessed_new = np.isnan(new) & decode & ~np.isnan(batch) & ~split
    new = np.where(guessed_new, batch, new)  # a decode step makes one token per sequence
    n1 = np.where(split, np.nan_to_num(d_req), batch)
    t1 = np.where(split, np.where(np.isnan(d_tok), np.nan_to_num(d_req), d_tok), new)
    c1 = np.where(split & (n1 == 0), 0.0, ctx)
    n2 = np.where(split, np.nan_to_num(p_req), 0.0)
    # A prefill request's tokens: from the marker, else what the step's total leaves (TensorRT-LLM names
    # count requests only); unknown otherwise.
    p_left = np.where(~np.isnan(new) & (new > t1), new - t1, np.nan)
    t2 = np.where(split & (n2 > 0), np.where(np.isnan(p_tok), p_left, p_tok), 0.0)
    c2 = np.where(n2 > 0, t2 / np.where(n2 > 0, n2, 1.0), 0.0)
    # A prefill step whose tokens are known but not its requests (tokens inferred from kernel grids, a
    # `--steps` tokens group): a fresh prefill's KV read is its own tokens whatever the batch (Σ q_i = T),
    # so its bytes are known; its attention FLOPs are not (they depend on how T splits into sequences).
    prefill = (steps["phase"].astype(object) == "prefill").to_numpy()
    fresh = prefill & ~split & np.isnan(batch) & ~np.isnan(new) & (new > 0)
    n1, t1, c1 = (np.where(fresh, 0.0, x) for x in (n1, t1, c1))
    n2, t2, c2 = np.where(fresh, 1.0, n2), np.where(fresh, new, t2), np.where(fresh, new, c2)
    reason = np.full(n, None, dtype=object)
    if not has_model:
        reason[:] = "no model description (pass --model)"
    else:
        # every input the trace does not tell, named together (the flags that give them)
        missing = [(np.isnan(n1), "batch", "--batch B"), (np.isnan(t1) | np.isnan(t2), "new tokens", "--new-tokens T"),
                   (np.isnan(c1), "context", "--context C")]
        for i in np.flatnonzero(np.logical_or.reduce([m for m, _, _ in missing])).tolist():
            what = [(w, f) for m, w, f in missing if m[i]]
            reason[i] = (f"{', '.join(w for w, _ in what)} unknown (the trace does not say; pass "
                         f"{' '.join(f for _, f in what)})")
        reason = np.where((reason == None) & (t1 + t2 <= 0), "the step makes no tokens", reason)  # noqa: E711
    src = np.where(filled, "trace+flags", "trace").astype(object)
    src = np.where(guessed_new, src + ", one token per sequence", src)
    src = np.where(fresh, src + ", a fresh prefill (no cached prefix)", src)
    inferred = _inferred_workload(steps, meta)
    src = np.where(inferred, src + ", tokens from kernel grids", src)
    return _Resolved([(n1, t1, c1), (n2, t2, c2)], np.where(split, n1 + n2, batch), np.where(split, t1 + t2, new),
                     ctx, reason, src, fresh)


def _inferred_workload(steps: pd.DataFrame, meta: dict) -> np.ndarray:
    """Per step row: whether its workload came from its kernels (rooftop.trace.steps.infer_phases)."""
    seen = {(e.get("phase"), e.get("index")) for e in meta.get("steps") or []
            if isinstance(e, dict) and e.get("workload_inferred")}
    if not seen:
        return np.zeros(len(steps), bool)
    return np.array([(p, s) in seen for p, s in zip(steps["phase"].astype(object).tolist(), steps["step"].tolist())],
                    dtype=bool)


def add_step_costs(steps: pd.DataFrame, spec: ModelSpec | None, meta: dict, workload: Workload | None,
                   peak_flops, peak_bw) -> pd.DataFrame:
    """The step table with the model-level columns (`STEP_COLUMNS`) and the resolved workload."""
    out = steps.copy()
    n = len(out)
    if n == 0:
        for col in STEP_COLUMNS:
            out[col] = pd.Series(dtype="float64" if col not in ("model_reason", "workload_source", "model_bound")
                                 else object)
        return out
    r = _resolve(out, meta, workload or Workload(), spec is not None)
    known = r.known
    nan = np.full(n, np.nan)
    w = kr = kw = fl = touched = nan
    if spec is not None:
        t = np.where(known, r.tokens, np.nan)
        w = weight_bytes(spec, t)
        kr = sum(kv_read_bytes(spec, g[0], g[2]) for g in r.groups)
        kw = kv_write_bytes(spec, t)
        fl = step_flops(spec, t, r.groups)
        touched = experts_touched(spec, t) if spec.config.moe else nan
    w, kr, kw, fl, touched = (np.where(known, x, np.nan) for x in (w, kr, kw, fl, touched))
    fl = np.where(r.fresh, np.nan, fl)
    lower = ~known & (spec is not None)
    if lower.any():
        # what the trace cannot tell leaves a lower bound: the weights a step of T tokens reads (T >= 1
        # where unknown) and, where T is known, the KV it writes; the KV read is left out
        t = r.tokens
        t_lb = np.where(np.isnan(t) | (t <= 0), 1.0, t)
        w = np.where(lower, weight_bytes(spec, t_lb), w)
        kw = np.where(lower, np.where(np.isnan(t), 0.0, kv_write_bytes(spec, np.nan_to_num(t))), kw)
        kr = np.where(lower, np.nan, kr)
        if spec.config.moe:
            touched = np.where(lower, experts_touched(spec, t_lb), touched)
    mb = w + np.where(lower, 0.0, kr) + kw
    span = out["span_ns"].to_numpy(dtype="float64") / 1e9
    busy = out["busy_ns"].to_numpy(dtype="float64") / 1e9
    span = np.where(span > 0, span, np.nan)
    busy = np.where(busy > 0, busy, np.nan)
    bw = float(peak_bw) if peak_bw else np.nan
    pf = float(peak_flops) if peak_flops else np.nan
    out["batch"], out["new_tokens"], out["context"] = r.batch, r.new_tokens, r.context
    out["tokens"] = (out["tokens"].astype("float64").fillna(out["new_tokens"]) if "tokens" in out
                     else out["new_tokens"])
    out["tokens_per_s"] = out["new_tokens"] / span
    cols = {"model_weight_bytes": w, "model_kv_read_bytes": kr, "model_kv_write_bytes": kw, "model_bytes": mb,
            "model_flops": fl, "experts_touched": touched,
            "model_mbu": mb / span / bw, "model_mbu_busy": mb / busy / bw,
            "model_mfu": fl / span / pf, "model_mfu_busy": fl / busy / pf,
            "model_ideal_ns": np.fmax(mb / bw, fl / pf) * 1e9 * np.where(known, 1.0, np.nan)}
    for name, val in cols.items():
        out[name] = val
    out["model_reason"] = r.reason
    out["workload_source"] = np.where(known, r.source, None)
    out["model_bound"] = np.where(lower, ">=", None)
    return out


def add_phase_costs(phases: pd.DataFrame, steps: pd.DataFrame, peak_flops, peak_bw) -> pd.DataFrame:
    """Per phase, over the steps whose model bytes are known (rank 0's steps on a multi-rank run):
    total model bytes and FLOPs over total span (and busy time) and the peaks."""
    out = phases.copy()
    if out.empty or steps.empty or "model_bytes" not in steps:
        for col in PHASE_COLUMNS:
            out[col] = np.nan if col not in ("model_reason", "model_bound") else None
        return out
    from rooftop.analysis.per_device import headline

    st = headline(steps)  # the lowest rank's and device's, as the phase table
    known = st[st["model_bytes"].notna()]
    g = known.groupby("phase", sort=False)
    agg = pd.DataFrame({"model_steps": g.size(), "model_bytes": g["model_bytes"].sum(),
                        "model_flops": g["model_flops"].sum(), "_span": g["span_ns"].sum(), "_busy": g["busy_ns"].sum()})
    agg = agg.reindex(out["phase"])
    span = agg["_span"].where(agg["_span"] > 0) / 1e9
    busy = agg["_busy"].where(agg["_busy"] > 0) / 1e9
    bw = float(peak_bw) if peak_bw else np.nan
    pf = float(peak_flops) if peak_flops else np.nan
    out["model_steps"] = agg["model_steps"].fillna(0).astype("int64").to_numpy()
    out["model_bytes"] = agg["model_bytes"].to_numpy()
    out["model_bytes_per_step"] = (agg["model_bytes"] / agg["model_steps"]).to_numpy()
    out["model_flops"] = agg["model_flops"].to_numpy()
    out["model_mbu"] = (agg["model_bytes"] / span / bw).to_numpy()
    out["model_mbu_busy"] = (agg["model_bytes"] / busy / bw).to_numpy()
    out["model_mfu"] = (agg["model_flops"] / span / pf).to_numpy()
    out["model_mfu_busy"] = (agg["model_flops"] / busy / pf).to_numpy()
    # Why a phase has none: the most common reason among its steps.
    unknown = st[st["model_bytes"].isna() & st["model_reason"].notna()]
    why = unknown.groupby("phase")["model_reason"].agg(lambda s: s.value_counts().index[0])
    reason = why.reindex(out["phase"]).to_numpy(dtype=object)
    no_steps = np.where(out["model_steps"].to_numpy() == 0, reason, None)
    out["model_reason"] = [r if isinstance(r, str) else (None if s > 0 else "no steps with a workload")
                           for r, s in zip(no_steps, out["model_steps"])]
    # a phase with any lower-bound step is a lower bound; its reason: what that step lacks
    if "model_bound" in known:
        lb = known[known["model_bound"] == ">="]
        bound = lb.groupby("phase")["model_reason"].agg(lambda s: s.value_counts().index[0]) if len(lb) else None
        has = out["phase"].isin(lb["phase"]).to_numpy()
        out["model_bound"] = np.where(has, ">=", None)
        if bound is not None:
            out["model_reason"] = np.where(has, bound.reindex(out["phase"]).to_numpy(dtype=object), out["model_reason"])
    else:
        out["model_bound"] = None
    return out


def model_summary(spec: ModelSpec | None) -> dict | None:
    """The `model` section of the report: what was counted, from where, and how it is stored."""
    if spec is None:
        return None
    c = spec.config
    total_params = c.params()
    stored = (spec.precision("attn").nbytes(c.layers * c.attn_matrix_params(), 4 * c.layers)
              + spec.precision("mlp").nbytes(c.dense_layer_count * c.mlp_params(c.ffn), 3 * c.dense_layer_count)
              + spec.precision("experts").nbytes(c.moe_layer_count * c.experts * c.mlp_params(c.expert_ffn),
                                                 3 * c.moe_layer_count * c.experts)
              + spec.precision("shared").nbytes(c.moe_layer_count * c.mlp_params(c.shared_ffn),
                                                3 * c.moe_layer_count if c.shared_ffn else 0)
              + spec.base.nbytes(c.dense_layer_count * c.attn_small_params()
                                 + c.moe_layer_count * (c.attn_small_params() + c.router_params()
                                                        + c.experts * c.expert_small_params() + c.shared_small_params())
                                 + c.hidden + c.vocab * c.hidden)
              + (0 if c.tied_embeddings else spec.precision("lm_head").nbytes(c.vocab * c.hidden, 1)))
    decode_w = float(weight_bytes(spec, 1))
    return {
        "name": c.name, "source": spec.source, "parameters": total_params, "active_parameters": c.active_params(),
        "weight_bytes": stored, "bytes_per_param": stored / total_params,
        "weights": {"base": spec.base.name, "quantized": spec.quantized.name if spec.quantized else None,
                    "quantized_bits": spec.quantized.bits if spec.quantized else None,
                    "unquantized": sorted(spec.unquantized) if spec.quantized else None},
        "kv_dtype": spec.kv_dtype, "kv_bytes_per_token": float(kv_write_bytes(spec, 1)),
        "tp": spec.tp, "ep": spec.ep,
        "decode_weight_bytes_per_rank": decode_w,
        "layers": c.layers, "moe_layers": c.moe_layer_count, "experts": c.experts or None,
        "experts_per_tok": c.experts_per_tok or None,
        "sliding_window": c.sliding_window or None, "sliding_layers": len(c.sliding_layers) if c.sliding_window else None,
        "notes": [*spec.notes, ACTIVATIONS_NOTE],
    }
