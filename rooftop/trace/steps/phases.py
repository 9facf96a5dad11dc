"""A phase from the step's own work, where its marker says none: tokens per step from the per-token
kernels' grids, CUDA-graph replays."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from rooftop.trace.steps.find import Steps
from rooftop.trace.steps.windows import assign_codes


# Kernels launched with one thread block per token, so their grid.x is the step's token count:
# vLLM's KV-cache writes (`reshape_and_cache[_flash]_kernel`, `concat_and_cache_mla_kernel`,
# csrc/cache_kernels.cu: `dim3 grid(num_tokens)`), RMS norms (`rms_norm_kernel`,
# `fused_add_rms_norm_kernel`, csrc/layernorm_kernels.cu: `dim3 grid(num_tokens)`) and rotary embeddings
# (`rotary_embedding_kernel`, csrc/pos_encoding_kernels.cu: `dim3 grid(num_tokens)`).
PER_TOKEN_KERNEL = re.compile(r"\b(?:reshape_and_cache(?:_flash)?_kernel|concat_and_cache_mla_kernel"
                              r"|(?:fused_add_)?rms_norm_kernel|rotary_embedding_kernel)\b")
# The largest batch vLLM captures a CUDA graph for by default (`max_cudagraph_capture_size`, 512):
# a step with more tokens than this per step is no decode step of a default deployment's graphs.
DECODE_MAX_TOKENS = 512


def infer_phases(steps: Steps, lo: np.ndarray, hi: np.ndarray, gpu_start: np.ndarray, name_codes: np.ndarray,
                 name_table: Sequence, grid_x: np.ndarray, replay: np.ndarray, compute: np.ndarray) -> None:
    """Give a phase to the steps whose marker says none, from their own GPU work (in place: `steps.phase`
    and each entry's `phase_source`, `phase_reason`, `inferred_tokens`, `graph_kernels`, `eager_kernels`).

    Tokens per step T: the median grid.x of the step's per-token kernels (`PER_TOKEN_KERNEL`). A decode
    step schedules one token per running sequence, a prefill step the prompt's tokens, so:
    - with several token levels among the steps: the steps at the smallest T are decode when that T is
      at most `DECODE_MAX_TOKENS`; the steps with more tokens are prefill (a mixed batch looks the same);
    - steps without per-token kernels that only replay CUDA graphs (no eager kernel) are decode: vLLM's
      default `FULL_AND_PIECEWISE` mode captures full graphs for uniform decode batches only;
    - one token level only: decode where the steps replay CUDA graphs, else unknown.
    Under a CUDA graph T is the captured (padded) batch. Steps whose marker has a phase are left alone
    (`phase_source: marker`)."""
    n = len(steps)
    for e in steps.entries:
        e["phase_source"] = "marker" if e.get("phase") is not None else None
    todo = np.array([p is None for p in steps.phase], dtype=bool)
    if not n or not todo.any() or not len(gpu_start):
        return
    _, slot_codes, _ = assign_codes(lo, hi, np.arange(n), list(range(n)), gpu_start)
    slot = np.where(slot_codes < n, slot_codes, -1)  # (codes past n: outside every step)
    name_codes = np.asarray(name_codes, dtype=np.int64)
    per_tok = np.zeros(len(name_table) + 1, dtype=bool)
    for i in np.unique(name_codes[name_codes >= 0]).tolist():
        label = name_table[i]
        per_tok[i] = isinstance(label, str) and bool(PER_TOKEN_KERNEL.search(label))
    gx = np.asarray(grid_x, dtype="float64")
    tok_rows = (slot >= 0) & per_tok[name_codes] & (gx > 0)
    tokens = np.full(n, np.nan)
    if tok_rows.any():
        med = pd.Series(gx[tok_rows]).groupby(slot[tok_rows]).median()
        tokens[med.index.to_numpy()] = med.to_numpy()
    comp = np.asarray(compute, dtype=bool) & (slot >= 0)
    graph = np.bincount(slot[comp & replay], minlength=n)[:n]
    eager = np.bincount(slot[comp & ~np.asarray(replay, dtype=bool)], minlength=n)[:n]
    levels = np.unique(tokens[todo & ~np.isnan(tokens)])
    phase = np.full(n, None, dtype=object)
    reason = np.full(n, None, dtype=object)
    if len(levels) >= 2 and levels[0] <= DECODE_MAX_TOKENS:
        low = todo & (tokens == levels[0])
        high = todo & (tokens > levels[0])
        phase[low], phase[high] = "decode", "prefill"
        reason[low] = (f"{levels[0]:g} token(s) per step (per-token kernels' grid), the run's fewest: one per "
                       "decoding sequence")
        reason[high] = [f"{t:g} tokens per step (per-token kernels' grid), more than the decode steps' "
                        f"{levels[0]:g}: a prefill (or mixed) step" for t in tokens[high].tolist()]
    elif len(levels) == 1:
        same = todo & (tokens == levels[0]) & (graph > 0)
        phase[same] = "decode"
        reason[same] = f"{levels[0]:g} token(s) per step, every step replays CUDA graphs"
    only_graphs = todo & (phase == None) & np.isnan(tokens) & (graph > 0) & (eager == 0)  # noqa: E711
    phase[only_graphs] = "decode"
    reason[only_graphs] = "replays CUDA graphs only (no eager kernel): a full-graph decode step"
    for i in np.flatnonzero(todo).tolist():
        e = steps.entries[i]
        e["graph_kernels"], e["eager_kernels"] = int(graph[i]), int(eager[i])
        if not np.isnan(tokens[i]):
            e["inferred_tokens"] = int(tokens[i])
        if phase[i] is None:
            continue
        steps.phase[i] = phase[i]
        e.update(phase=phase[i], phase_source="inferred", phase_reason=reason[i])
        t = e.get("inferred_tokens")
        if t is None:
            continue
        e.setdefault("new_tokens", t)
        if phase[i] == "decode":  # one token per sequence (a graph's padded batch)
            for k in ("batch", "decode_requests", "decode_tokens"):
                e.setdefault(k, t)
            e.setdefault("prefill_requests", 0)
            e.setdefault("prefill_tokens", 0)
        e["workload_inferred"] = True
