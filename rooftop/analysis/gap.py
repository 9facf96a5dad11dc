"""Gap to ideal: where a step's measured time goes beyond the time physics allows.

measured span = ideal + slow kernels + extra bytes + launch gaps + edge idle + unmodeled kernels +
host copies, per step, on
one rank (with concurrent streams the kernel parts add up to summed kernel time, not busy time).
Each step is split on one of two bases (`basis`):

- "kernels", where per-kernel costs cover at least half the step's kernel time (host and peer
  copies excluded: they are `copies`, judged against their link, never slow kernels):
  - ideal: each modeled kernel at its roofline time, max(model bytes / bw, model FLOPs / peak) plus
    the launch floor (`rooftop.analysis.ideal_time.kernel_ideal_ns`, the same model `rooftop predict` uses);
  - extra bytes: for kernels with counters, the roofline time of the measured bytes above that of
    the minimum (model) bytes;
  - slow kernels: the rest of the modeled kernels' time (running below their roof);
  - unmodeled: kernels without a cost (norms, elementwise, copies), reported, not judged.
- "model", where per-kernel costs are missing (CUDA-graph replays, custom kernels) and the step's
  model-level bytes are known (`model_cost`): ideal = max(model bytes / bw, model FLOPs / peak),
  the whole step at the roof; slow kernels = busy time - ideal; nothing is unmodeled.

Below half, without model bytes, the step has no basis: its parts are unknown (null) and
`basis_reason` says why, with the coverage.

In all, edge idle = the idle before the step's first and after its last compute kernel (a lone late
copy, a capture's tail), launch gaps = span - busy - edge idle (the GPU idle between kernels of the
work), copies = time of host/peer copies, and a step faster than its "ideal" counts its ideal at
its busy time (so the parts always add up).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis.ideal_time import kernel_ideal_ns
from rooftop.present.columns import GAP_STEPS
from rooftop.analysis.step_entries import first_positions, taken
from rooftop.analysis.work import LINK_COPY, labelled
from rooftop.analysis.per_device import headline

MIN_KERNEL_COVERAGE = 0.5  # below this share of kernel time with costs, per-kernel ideals say too little
PARTS = ("ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns", "unmodeled_ns")
STEP_GAP_KEYS = GAP_STEPS.keys  # declared in columns.py, with PARTS in this order


def _per_kernel(rows: pd.DataFrame, peak_flops, peak_bw, row_peaks: pd.Series | None = None) -> dict[str, np.ndarray]:
    """Each kernel's ideal, extra-bytes, slow and unmodeled time (they add up to its duration).
    `row_peaks` (by the rows' index): each kernel's FLOP/s peak for its own dtype (an fp32 GEMM's
    ideal is at the fp32 peak, not the bf16 tensor peak); the trace's peak where it has none."""
    if row_peaks is not None:
        own = row_peaks.reindex(rows.index).to_numpy(dtype="float64", na_value=np.nan)
        peak_flops = np.where(np.isfinite(own) & (own > 0), own, float(peak_flops))
    mf = rows["model_flops"].to_numpy(dtype="float64", na_value=np.nan)
    mb = rows["model_bytes"].to_numpy(dtype="float64", na_value=np.nan)
    modeled = ~np.isnan(mf) | ~np.isnan(mb)
    ideal = np.asarray(kernel_ideal_ns(np.nan_to_num(mf), np.nan_to_num(mb), peak_flops, peak_bw))
    counters = (rows["counters"].to_numpy(dtype=bool, na_value=False) if "counters" in rows
                else np.zeros(len(rows), bool))
    dur = rows["dur_ns"].to_numpy(dtype="float64")
    # Host and peer copies run at their link's speed (PCIe, NVLink-C2C, NVLink): never judged
    # against HBM, never slow kernels; their time is a part of its own.
    link = (rows["copy_class"].to_numpy() == LINK_COPY) if "copy_class" in rows else np.zeros(len(rows), bool)
    modeled &= ~link
    # A kernel faster than its "ideal" (bytes served from L2, a launch floor set too high) is
    # counted at its own duration: the parts of each kernel always add up to its duration.
    ideal = np.where(modeled, np.minimum(ideal, dur), 0.0)
    extra = np.zeros(len(rows))
    if counters.any():  # (without counters no kernel has measured bytes: the temporaries are skipped)
        measured_b = (rows["dram_read"].to_numpy(dtype="float64", na_value=np.nan)
                      + rows["dram_write"].to_numpy(dtype="float64", na_value=np.nan))
        counted = counters & ~np.isnan(measured_b) & modeled
        real = np.asarray(kernel_ideal_ns(np.nan_to_num(mf), np.nan_to_num(measured_b), peak_flops, peak_bw))
        extra = np.where(counted, np.minimum(np.clip(real - ideal, 0, None), dur - ideal), 0.0)
    slow = np.where(modeled, np.clip(dur - ideal - extra, 0, None), 0.0)
    return {"ideal_ns": ideal, "extra_bytes_ns": extra, "slow_kernels_ns": slow,
            "unmodeled_ns": np.where(modeled | link, 0.0, dur), "copies_ns": np.where(link, dur, 0.0),
            "modeled_ns": np.where(modeled, dur, 0.0), "kernel_ns": np.where(link, 0.0, dur)}


def _split(timed: pd.DataFrame, peak_flops, peak_bw, steps: pd.DataFrame | None,
           edges: pd.DataFrame | None = None, row_peaks: pd.Series | None = None) -> pd.DataFrame | None:
    """One row per (phase, step) of the lowest rank (step -1: kernels outside any step). A step's
    span and busy time come from the step table (computed there once), so this adds one pass of
    per-kernel arithmetic and a grouped sum."""
    if not peak_flops or not peak_bw or timed.empty:
        return None
    rows = labelled(timed)
    rows = headline(rows)  # the same rank (and device) the phase table describes
    step_key = rows["step"].to_numpy(dtype="float64", na_value=-1.0)
    # One group per (phase, step): factorize both and combine the codes (cheaper than a 2-key groupby).
    phase = rows["phase"]
    if isinstance(phase.dtype, pd.CategoricalDtype):  # the usual case: codes are free
        pcode, phases_u = phase.cat.codes.to_numpy(), np.append(np.asarray(phase.cat.categories, dtype=object), None)
        pcode = np.where(pcode < 0, len(phases_u) - 1, pcode)
    else:
        pcode, phases_u = pd.factorize(phase, use_na_sentinel=False)
    scode, steps_u = pd.factorize(step_key)
    gid, combos = pd.factorize(pcode.astype(np.int64) * (len(steps_u) + 1) + scode)
    n = len(combos)
    per = _per_kernel(rows, peak_flops, peak_bw, row_peaks)
    # the columns as arrays, made into one frame at the end (each pandas operation on a few hundred
    # steps cost more than its arithmetic)
    out = {c: np.bincount(gid, weights=v, minlength=n) for c, v in per.items()}
    out["phase"] = np.asarray(phases_u, dtype=object)[combos // (len(steps_u) + 1)]
    out["_step"] = np.asarray(steps_u, dtype="float64")[combos % (len(steps_u) + 1)]
    out["kernel_coverage"] = out["modeled_ns"] / np.where(out["kernel_ns"] > 0, out["kernel_ns"], np.nan)
    for col in ("span_ns", "busy_ns", "model_ideal_ns"):
        out[col] = np.full(n, np.nan)
    if steps is not None and not steps.empty:
        st = headline(steps)
        # each (phase, step)'s row of the step table (its first, if any repeats)
        at = first_positions(zip(st["phase"].astype(object).tolist(), st["step"].astype("float64").tolist()),
                             zip(out["phase"].tolist(), out["_step"].tolist()))
        for col in ("span_ns", "busy_ns", "model_ideal_ns"):
            if col in st.columns:
                out[col] = taken(st[col].to_numpy(dtype="float64", na_value=np.nan), at)
    busy = out["busy_ns"]
    by_model = ~np.isnan(out["model_ideal_ns"]) & ~np.isnan(busy) & ~(out["kernel_coverage"] >= MIN_KERNEL_COVERAGE)
    ideal_m = np.minimum(out["model_ideal_ns"], busy)
    out["ideal_ns"] = np.where(by_model, ideal_m, out["ideal_ns"])
    out["slow_kernels_ns"] = np.where(by_model, np.clip(busy - ideal_m - out["copies_ns"], 0, None), out["slow_kernels_ns"])
    for col in ("extra_bytes_ns", "unmodeled_ns"):
        out[col] = np.where(by_model, 0.0, out[col])
    # No basis below half: per-kernel ideals of a fraction of the work say nothing of the rest
    # (issue 33: "basis kernels" was printed at 0.011%-37% coverage); then the model, else unknown.
    by_kernels = ~by_model & (out["kernel_coverage"] >= MIN_KERNEL_COVERAGE)
    out["basis"] = np.where(by_model, "model", np.where(by_kernels, "kernels", None))
    unknown = ~by_model & ~by_kernels
    for col in ("ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "unmodeled_ns"):
        out[col] = np.where(unknown, np.nan, out[col])
    out["basis_reason"] = np.where(unknown, [_why(c) for c in out["kernel_coverage"]], None)
    out["measured_ns"] = out["span_ns"]
    gaps = out["span_ns"] - busy
    gaps = np.where((gaps >= 0) | np.isnan(gaps), gaps, 0.0)  # (pandas' clip(lower=0))
    # idle before the first / after the last compute kernel of the step is edge idle, not launch gaps
    out["edge_idle_ns"] = np.full(n, np.nan)
    if edges is not None and not edges.empty:
        at = first_positions(zip(edges["phase"].astype(object).tolist(), edges["step"].astype("float64").tolist()),
                             zip(out["phase"].tolist(), out["_step"].tolist()))
        out["edge_idle_ns"] = np.fmin(taken(edges["edge_ns"].to_numpy(dtype="float64"), at), gaps)
    out["launch_gaps_ns"] = gaps - np.nan_to_num(out["edge_idle_ns"])
    out["ideal_frac"] = out["ideal_ns"] / np.where(out["measured_ns"] > 0, out["measured_ns"], np.nan)
    return pd.DataFrame(out)


def split(timed: pd.DataFrame, peak_flops, peak_bw, steps: pd.DataFrame | None = None,
          edges: pd.DataFrame | None = None, row_peaks: pd.Series | None = None) -> pd.DataFrame | None:
    """The per-step split `gap_steps` and `gap_table` are made from (computed once, given to both:
    `split=`); None without peaks or kernels. `edges`: per (phase, step) of the same rank, the
    edge idle `edge_ns` (`idle.Causes`), taken out of the launch gaps. `row_peaks`: each timed
    row's peak for its own dtype (`Analysis.row_peaks`)."""
    return _split(timed, peak_flops, peak_bw, steps, edges, row_peaks)


_NOT_GIVEN = object()


def gap_steps(timed: pd.DataFrame, peak_flops, peak_bw, steps: pd.DataFrame | None = None,
              split: pd.DataFrame | None = _NOT_GIVEN) -> pd.DataFrame | None:
    """The gap to ideal of every step (lowest rank), in time order within each phase; `split`: that
    of `split(timed, peak_flops, peak_bw, steps)`, when the caller has it."""
    out = _split(timed, peak_flops, peak_bw, steps) if split is _NOT_GIVEN else split
    if out is None:
        return None
    out = out[(out["_step"] >= 0) & out["measured_ns"].notna()].assign(step=lambda f: f["_step"].astype("int64"))
    return out[list(STEP_GAP_KEYS)].reset_index(drop=True)


def gap_table(timed: pd.DataFrame, phases: pd.DataFrame, peak_flops, peak_bw,
              steps: pd.DataFrame | None = None, split: pd.DataFrame | None = _NOT_GIVEN) -> pd.DataFrame | None:
    """The per-step split summed per phase; `basis` says "kernels", "model" or "mixed". A phase's
    measured time and launch gaps are the phase table's (its span and idle time), so the parts add
    up to what the phase table shows."""
    if phases.empty:
        return None
    out = _split(timed, peak_flops, peak_bw, steps) if split is _NOT_GIVEN else split
    if out is None:
        return None
    g = out.groupby("phase", sort=False)
    # (min_count: a phase none of whose steps has a basis keeps its parts unknown, not 0)
    sums = g[["ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "unmodeled_ns"]].sum(min_count=1)
    sums[["copies_ns", "modeled_ns", "kernel_ns"]] = g[["copies_ns", "modeled_ns", "kernel_ns"]].sum()
    sums["edge_idle_ns"] = g["edge_idle_ns"].sum(min_count=1)
    sums["basis"] = g["basis"].agg(_one_basis)
    sums["kernel_coverage"] = sums["modeled_ns"] / sums["kernel_ns"].where(sums["kernel_ns"] > 0)
    sums["basis_reason"] = [None if b is not None else _why(c) for b, c in zip(sums["basis"], sums["kernel_coverage"])]
    ph = phases.set_index("phase")[["span_ns", "idle_ns"]].rename(columns={"span_ns": "measured_ns",
                                                                           "idle_ns": "launch_gaps_ns"})
    res = ph.join(sums, how="inner")
    res["launch_gaps_ns"] = res["launch_gaps_ns"] - res["edge_idle_ns"].fillna(0).clip(upper=res["launch_gaps_ns"])
    res["ideal_frac"] = res["ideal_ns"] / res["measured_ns"].where(res["measured_ns"] > 0)
    return res.reset_index()[["phase", "measured_ns", "ideal_ns", "slow_kernels_ns", "extra_bytes_ns",
                              "launch_gaps_ns", "unmodeled_ns", "ideal_frac", "basis", "copies_ns", "edge_idle_ns",
                              "basis_reason", "kernel_coverage"]]


def _why(coverage) -> str:
    """Why a step or phase has no gap to ideal."""
    cov = "no kernel has" if not coverage or coverage != coverage else f"{coverage:.1%} of the kernel time has"
    return (f"{cov} per-kernel costs, under the {MIN_KERNEL_COVERAGE:.0%} a per-kernel ideal needs; "
            "--model gives the step's model bytes")


def _one_basis(b: pd.Series) -> str | None:
    kinds = set(b.dropna())
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
