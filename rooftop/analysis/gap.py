"""Gap to ideal: where a step's measured time goes beyond the time physics allows.

measured span = ideal + slow kernels + extra bytes + launch gaps + unmodeled kernels, per step, on
one rank (with concurrent streams the kernel parts add up to summed kernel time, not busy time).
Each step is split on one of two bases (`basis`):

- "kernels", where per-kernel costs cover at least half the step's kernel time:
  - ideal: each modeled kernel at its roofline time, max(model bytes / bw, model FLOPs / peak) plus
    the launch floor (`rooftop.ideal.kernel_ideal_ns`, the same model `rooftop predict` uses);
  - extra bytes: for kernels with counters, the roofline time of the measured bytes above that of
    the minimum (model) bytes;
  - slow kernels: the rest of the modeled kernels' time (running below their roof);
  - unmodeled: kernels without a cost (norms, elementwise, copies), reported, not judged.
- "model", where per-kernel costs are missing (CUDA-graph replays, custom kernels) and the step's
  model-level bytes are known (`model_cost`): ideal = max(model bytes / bw, model FLOPs / peak),
  the whole step at the roof; slow kernels = busy time - ideal; nothing is unmodeled.

In both, launch gaps = span - busy (the GPU idle between kernels), and a step faster than its
"ideal" counts its ideal at its busy time (so the parts always add up).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..ideal import kernel_ideal_ns
from .metrics import _group_stats, labelled

MIN_KERNEL_COVERAGE = 0.5  # below this share of kernel time with costs, per-kernel ideals say too little
PARTS = ("ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns", "unmodeled_ns")
STEP_GAP_KEYS = ("phase", "step", "measured_ns", *PARTS, "ideal_frac", "basis", "kernel_coverage")


def _per_kernel(rows: pd.DataFrame, peak_flops, peak_bw) -> pd.DataFrame:
    """Each kernel's ideal, extra-bytes, slow and unmodeled time (they add up to its duration)."""
    mf = rows["model_flops"].astype("float64")
    mb = rows["model_bytes"].astype("float64")
    modeled = mf.notna() | mb.notna()
    ideal = pd.Series(kernel_ideal_ns(mf.fillna(0).to_numpy(), mb.fillna(0).to_numpy(), peak_flops, peak_bw),
                      index=rows.index).where(modeled)
    counted = rows["counters"].fillna(False).astype(bool) & rows["dram_read"].notna() & rows["dram_write"].notna()
    measured_b = (rows["dram_read"] + rows["dram_write"]).astype("float64")
    real = pd.Series(kernel_ideal_ns(mf.fillna(0).to_numpy(), measured_b.fillna(0).to_numpy(), peak_flops, peak_bw),
                     index=rows.index)
    dur = rows["dur_ns"].astype("float64")
    # A kernel faster than its "ideal" (bytes served from L2, a launch floor set too high) is
    # counted at its own duration: the parts of each kernel always add up to its duration.
    ideal = np.minimum(ideal, dur).where(modeled)
    extra = np.minimum((real - ideal).clip(lower=0), dur - ideal).where(counted & modeled, 0.0)
    slow = (dur - ideal - extra).clip(lower=0).where(modeled, 0.0)
    return pd.DataFrame({"ideal_ns": ideal.fillna(0.0), "extra_bytes_ns": extra, "slow_kernels_ns": slow,
                         "unmodeled_ns": dur.where(~modeled, 0.0), "modeled_ns": dur.where(modeled, 0.0)})


def _split(timed: pd.DataFrame, peak_flops, peak_bw, steps: pd.DataFrame | None) -> pd.DataFrame | None:
    """One row per (phase, step) of the lowest rank (step -1: kernels outside any step)."""
    if not peak_flops or not peak_bw or timed.empty:
        return None
    rows = labelled(timed)
    if "rank" in rows.columns and rows["rank"].notna().any():
        rows = rows[rows["rank"] == rows["rank"].min()]  # the same rank the phase table describes
    rows = rows.assign(_step=rows["step"].to_numpy(dtype="float64", na_value=-1.0))
    stats = _group_stats(rows, ["phase", "_step"])
    per = _per_kernel(rows, peak_flops, peak_bw).groupby([rows["phase"], rows["_step"]], sort=False).sum()
    out = stats[["span_ns", "busy_ns", "kernel_ns"]].join(per, how="left").reset_index()
    out["kernel_coverage"] = out["modeled_ns"] / out["kernel_ns"].where(out["kernel_ns"] > 0)
    model_ideal = pd.Series(np.nan, index=out.index)
    if steps is not None and not steps.empty and "model_ideal_ns" in steps:
        st = steps
        if "rank" in st.columns and st["rank"].notna().any():
            st = st[st["rank"] == st["rank"].min()]
        ideal_of = st.set_index([st["phase"].astype(object), st["step"].astype("float64")])["model_ideal_ns"]
        ideal_of = ideal_of[~ideal_of.index.duplicated()]
        key = pd.MultiIndex.from_arrays([out["phase"].astype(object), out["_step"]])
        model_ideal = pd.Series(ideal_of.reindex(key).to_numpy(dtype="float64"), index=out.index)
    by_model = model_ideal.notna() & ~(out["kernel_coverage"] >= MIN_KERNEL_COVERAGE)
    busy = out["busy_ns"].astype("float64")
    ideal_m = np.minimum(model_ideal, busy)
    out["ideal_ns"] = out["ideal_ns"].where(~by_model, ideal_m)
    out["slow_kernels_ns"] = out["slow_kernels_ns"].where(~by_model, busy - ideal_m)
    for col in ("extra_bytes_ns", "unmodeled_ns"):
        out[col] = out[col].where(~by_model, 0.0)
    out["basis"] = np.where(by_model, "model", np.where(out["kernel_coverage"] > 0, "kernels", None))
    out["measured_ns"] = out["span_ns"].astype("float64")
    out["launch_gaps_ns"] = (out["span_ns"] - out["busy_ns"]).clip(lower=0).astype("float64")
    out["ideal_frac"] = out["ideal_ns"] / out["measured_ns"].where(out["measured_ns"] > 0)
    if not out["basis"].notna().any():
        return None
    return out


def gap_steps(timed: pd.DataFrame, peak_flops, peak_bw, steps: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The gap to ideal of every step (lowest rank), in time order within each phase."""
    out = _split(timed, peak_flops, peak_bw, steps)
    if out is None:
        return None
    out = out[out["_step"] >= 0].assign(step=lambda f: f["_step"].astype("int64"))
    return out[list(STEP_GAP_KEYS)].reset_index(drop=True)


def gap_table(timed: pd.DataFrame, phases: pd.DataFrame, peak_flops, peak_bw,
              steps: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The per-step split summed per phase; `basis` says "kernels", "model" or "mixed". A phase's
    measured time and launch gaps are the phase table's (its span and idle time), so the parts add
    up to what the phase table shows."""
    if phases.empty:
        return None
    out = _split(timed, peak_flops, peak_bw, steps)
    if out is None:
        return None
    g = out.groupby("phase", sort=False)
    sums = g[["ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "unmodeled_ns"]].sum()
    sums["basis"] = g["basis"].agg(_one_basis)
    ph = phases.set_index("phase")[["span_ns", "idle_ns"]].rename(columns={"span_ns": "measured_ns",
                                                                           "idle_ns": "launch_gaps_ns"})
    res = ph.join(sums, how="inner")
    res["ideal_frac"] = res["ideal_ns"] / res["measured_ns"].where(res["measured_ns"] > 0)
    return res.reset_index()[["phase", "measured_ns", "ideal_ns", "slow_kernels_ns", "extra_bytes_ns",
                              "launch_gaps_ns", "unmodeled_ns", "ideal_frac", "basis"]]


def _one_basis(b: pd.Series) -> str | None:
    kinds = set(b.dropna())
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
