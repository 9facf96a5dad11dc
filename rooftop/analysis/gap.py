"""Gap to ideal: where the measured time goes beyond each kernel's roofline time.

measured span = ideal + slow kernels + extra bytes + launch gaps + unmodeled kernels (exactly, on one
stream; with concurrent streams the kernel parts add up to summed kernel time, not busy time), where
- ideal: each modeled kernel at its roofline time, max(model bytes / bw, model FLOPs / peak) plus
  the launch floor (`rooftop.ideal.kernel_ideal_ns`, the same model `rooftop predict` uses);
- extra bytes: for kernels with counters, the roofline time of the measured bytes above that of
  the minimum (model) bytes;
- slow kernels: the rest of the modeled kernels' busy time (running below their roof);
- launch gaps: span - busy (the GPU idle between kernels);
- unmodeled: kernels without a model cost (norms, elementwise, copies), reported, not judged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..ideal import kernel_ideal_ns
from .metrics import labelled


def gap_table(timed: pd.DataFrame, phases: pd.DataFrame, peak_flops, peak_bw) -> pd.DataFrame | None:
    if not peak_flops or not peak_bw or timed.empty or phases.empty:
        return None
    rows = labelled(timed)
    if "rank" in rows.columns and rows["rank"].notna().any():
        rows = rows[rows["rank"] == rows["rank"].min()]  # the same rank the phase table describes
    mf = rows["model_flops"].astype("float64")
    mb = rows["model_bytes"].astype("float64")
    modeled = mf.notna() | mb.notna()
    if not modeled.any():
        return None
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
    per = pd.DataFrame({
        "ideal_ns": ideal.fillna(0.0), "extra_bytes_ns": extra, "slow_kernels_ns": slow,
        "unmodeled_ns": dur.where(~modeled, 0.0),
    }).groupby(rows["phase"], sort=False).sum()
    out = phases.set_index("phase")[["span_ns", "busy_ns", "idle_ns"]].join(per, how="left")
    out = out.rename(columns={"span_ns": "measured_ns", "idle_ns": "launch_gaps_ns"})
    out["ideal_frac"] = out["ideal_ns"] / out["measured_ns"].where(out["measured_ns"] > 0)
    return out.reset_index()[["phase", "measured_ns", "ideal_ns", "slow_kernels_ns", "extra_bytes_ns",
                              "launch_gaps_ns", "unmodeled_ns", "ideal_frac"]]
