"""Layers of CUDA-graph replays, inferred from the replay structure.

A graph replay is one `cudaGraphLaunch`: every kernel it runs carries that call's correlation id, so
a correlation shared by several kernels of one device is one replay (an eager launch runs one
kernel). The kernels of a replay have the path of the launch (the step), not of the layers they
were captured in. Where the trace does not say the layer, the structure of the replays gives it,
labelled `inferred` (`layer_source`):

- piecewise graphs (vLLM, SGLang: the model cut at attention, several replays per step): replay j
  of a step (in start order) is layer j; eager kernels between replay j and replay j + 1 (the
  attention run outside the graphs) are layer j too; those before the first or after the last
  replay (input preparation, sampling) get none;
- one whole-model graph (one replay per step): the kernel sequence repeats once per layer; the
  shortest period p (at least MIN_PERIOD kernels) whose repeating stretch holds at least COVER of
  the kernels gives layer = (position - start of the stretch) // p, over that stretch only.

Rows whose layer the trace names keep it (`layer_source` "trace").
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis import intervals as iv

MIN_PERIOD = 3     # a layer is more than a couple of kernels (norm, GEMMs, attention, activation)
MIN_LAYERS = 2     # a sequence that does not repeat twice says nothing of layers
COVER = 0.5        # the repeating stretch holds at least half the replay's kernels

PIECEWISE, WHOLE = "inferred: piecewise replays", "inferred: repeating sequence"


def replays(rows: pd.DataFrame) -> np.ndarray:
    """Per row, whether it is a kernel of a graph replay (its correlation shared by several
    kernels of the same rank and device)."""
    if not len(rows) or "correlation" not in rows.columns:
        return np.zeros(len(rows), bool)
    kind = rows["kind"].astype(object).to_numpy() if "kind" in rows.columns else np.full(len(rows), "kernel", object)
    corr = rows["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    ok = (kind == "kernel") & ~np.isnan(corr)
    if not ok.any():
        return np.zeros(len(rows), bool)
    key = corr[ok].astype(np.int64)
    for k in ("rank", "device"):  # the same correlation on another rank or device is another launch
        if k in rows.columns:
            key = key * 4099 + rows[k].to_numpy(dtype="float64", na_value=-1.0)[ok].astype(np.int64) + 1
    codes, _ = pd.factorize(key)
    out = np.zeros(len(rows), bool)
    out[np.flatnonzero(ok)] = np.bincount(codes)[codes] > 1
    return out


def period(codes: np.ndarray) -> tuple[int, int, int] | None:
    """(period, first, end) of the repeating stretch of a kernel-name sequence, or None: the
    smallest period p >= MIN_PERIOD whose longest run of positions equal to the one p later makes
    a periodic stretch of at least MIN_LAYERS periods covering at least COVER of the sequence."""
    n = len(codes)
    for p in range(MIN_PERIOD, n // MIN_LAYERS + 1):  # a loop over periods, each one vector compare
        same = np.concatenate([[False], codes[:-p] == codes[p:], [False]])
        edges = np.flatnonzero(np.diff(same.astype(np.int8)))
        if not len(edges):
            continue
        starts, ends = edges[::2], edges[1::2]  # runs of matches [start, end) in positions
        k = int(np.argmax(ends - starts))
        first, length = int(starts[k]), int(ends[k] - starts[k])
        span = (length + p) // p * p  # whole periods of the stretch
        if span // p >= MIN_LAYERS and length + p >= COVER * n:
            return p, first, first + span
    return None


def replay_layers(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(layer, layer_source) per row: the trace's layer where it has one ("trace"), else the layer
    the replay structure gives (see the module doc), else NaN / None."""
    n = len(rows)
    layer = rows["layer"].to_numpy(dtype="float64", na_value=np.nan) if "layer" in rows.columns else np.full(n, np.nan)
    source = np.where(np.isnan(layer), None, "trace").astype(object)
    rep = replays(rows)
    if not rep.any():
        return layer, source
    kernel = (rows["kind"].astype(object).to_numpy() == "kernel") if "kind" in rows.columns else np.ones(n, bool)
    gid, keys = iv.windows(rows)
    windowed = keys["step"].to_numpy() >= 0
    start = rows["start_ns"].to_numpy(dtype=np.int64)
    corr = rows["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    # each replay: its window and first start; replays numbered in start order within the window
    rpos = np.flatnonzero(rep)
    rkey = pd.DataFrame({"w": gid[rpos], "c": corr[rpos], "s": start[rpos]})
    first = rkey.groupby(["w", "c"], sort=False)["s"].min().reset_index().sort_values(["w", "s"], kind="stable")
    first["j"] = first.groupby("w").cumcount()
    count = first.groupby("w")["j"].transform("size").to_numpy()
    free = np.isnan(layer) & kernel & windowed[gid]
    # piecewise: windows with several replays
    pw = first[count >= 2]
    if len(pw):
        stride = iv.stride_for(start, start + 1)
        at = pw["w"].to_numpy(np.int64) * stride + pw["s"].to_numpy(np.int64)
        order = np.argsort(at, kind="stable")
        at, j, w_of = at[order], pw["j"].to_numpy()[order], pw["w"].to_numpy()[order]
        last_j = pw.groupby("w")["j"].max()
        q = gid.astype(np.int64) * stride + start
        i = np.searchsorted(at, q, side="right") - 1
        ic = i.clip(0)
        hit = (i >= 0) & (w_of[ic] == gid)
        # eager kernels after the last replay of the step (sampling, logits) are no layer's
        tail = hit & ~rep & (j[ic] == last_j.reindex(w_of[ic]).to_numpy())
        take = free & hit & ~tail
        layer[take] = j[ic][take]
        source[take] = PIECEWISE
    # whole-model: windows with one replay
    whole = first[count == 1]
    for w, c in zip(whole["w"].tolist(), whole["c"].tolist()):  # a loop over steps, not kernels
        pos = np.flatnonzero(rep & (gid == w) & (corr == c))
        pos = pos[np.argsort(start[pos], kind="stable")]
        names = rows["name"].iloc[pos].astype(object).to_numpy()
        codes, _ = pd.factorize(names)
        found = period(codes)
        if found is None:
            continue
        p, lo, hi = found
        sel = pos[lo:hi]
        ok = free[sel]
        layer[sel[ok]] = ((np.arange(lo, hi) - lo) // p)[ok]
        source[sel[ok]] = WHOLE
    return layer, source


def with_layers(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `layer` filled from the replay structure and `layer_source` added, where any
    replay's layer was inferred; the same frame otherwise (no copy)."""
    if "correlation" not in rows.columns or not len(rows):
        return rows
    layer, source = replay_layers(rows)
    inferred = np.isin(source, [PIECEWISE, WHOLE])
    if not inferred.any():
        return rows
    return rows.assign(layer=pd.array(np.where(np.isnan(layer), None, layer), dtype="Int32"),
                       layer_source=pd.Series(source, index=rows.index, dtype=object))
