"""Kernel groups (by short name or category) and their roofline points.

- AI = flops / bytes. Ridge = peak FLOP/s / peak bandwidth. Left of the ridge is memory-bound,
  right of it compute-bound; far under both roofs (< 10% of the attainable rate) and short
  (mean < 5 µs) is latency/launch-bound.
- % of roof = achieved rate / attainable rate at the group's AI, min(peak, bw · AI); for groups with
  bytes but no FLOPs (copies), achieved bandwidth / peak bandwidth.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import NO_PHASE, _combine_sources, work_columns

LATENCY_NS = 5_000
LATENCY_ROOF_FRAC = 0.10


def kernel_groups(timed: pd.DataFrame, by: str = "short_name", peak_flops=None, peak_bw=None) -> pd.DataFrame:
    """One row per group: key, category, phase (dominant by time), count, time, share, work, rates, bound."""
    cols = ["key", "category", "phase", "count", "time_ns", "time_share", "mean_ns", "flops", "bytes",
            "bytes_source", "ai", "tflops", "tbps", "pct_of_roof", "bound"]
    if timed.empty:
        return pd.DataFrame(columns=cols)
    work = work_columns(timed)
    rows = pd.concat([timed[[by, "category", "phase", "dur_ns"]].rename(columns={by: "key"})
                      if by != "category" else timed[["category", "phase", "dur_ns"]].assign(key=timed["category"]),
                      work], axis=1)
    rows["key"] = rows["key"].astype(object).where(rows["key"].notna(), "(unnamed)")
    rows["phase"] = rows["phase"].astype(object).where(rows["phase"].notna(), NO_PHASE)
    g = rows.groupby("key", sort=False)
    out = pd.DataFrame({
        "count": g.size(),
        "time_ns": g["dur_ns"].sum(),
        "flops": g["work_flops"].sum(min_count=1),
        "bytes": g["bytes"].sum(min_count=1),
    })
    # Dominant category and phase of each group, by time.
    for col in ("category", "phase"):
        t = rows.groupby(["key", col], sort=False)["dur_ns"].sum().reset_index()
        t = t.sort_values("dur_ns", ascending=False).drop_duplicates("key").set_index("key")[col]
        n = rows.groupby("key", sort=False)[col].nunique()
        val = t.reindex(out.index)
        if col == "phase":
            val = val.where(n.reindex(out.index) <= 1, val + "+")  # "decode+": mostly decode, some other
        out[col] = val
    out["bytes_source"] = _combine_sources(rows["bytes_src"], ["key"], rows)
    total = out["time_ns"].sum()
    out["time_share"] = out["time_ns"] / total if total else np.nan
    out["mean_ns"] = out["time_ns"] / out["count"]
    add_rates(out, peak_flops, peak_bw)
    out = out.reset_index().rename(columns={"index": "key"})
    return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)[cols]


def add_rates(out: pd.DataFrame, peak_flops=None, peak_bw=None) -> pd.DataFrame:
    """Add ai, tflops, tbps, pct_of_roof and bound to a frame with time_ns, flops, bytes, mean_ns."""
    for c in ("time_ns", "flops", "bytes", "mean_ns"):
        out[c] = out[c].astype("float64")
    t = out["time_ns"].where(out["time_ns"] > 0) / 1e9
    out["ai"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
    out["tflops"] = out["flops"] / t / 1e12
    out["tbps"] = out["bytes"] / t / 1e12
    if peak_flops and peak_bw:
        attainable = np.minimum(peak_flops, peak_bw * out["ai"])
        pct = (out["flops"] / t) / attainable
        pct = pct.where(out["ai"].notna(), (out["bytes"] / t) / peak_bw)
        out["pct_of_roof"] = pct
        ridge = peak_flops / peak_bw
        bound = np.where(out["ai"].isna(), np.where(out["bytes"].notna(), "memory", None),
                         np.where(out["ai"] < ridge, "memory", "compute"))
        latency = (out["mean_ns"] < LATENCY_NS) & (pct < LATENCY_ROOF_FRAC)
        out["bound"] = np.where(latency, "latency", bound)
        out["bound"] = out["bound"].astype(object).where(out["bound"].notna(), None)
    else:
        # Without peaks no bound can be judged (latency-bound also means "far under the roofs").
        out["pct_of_roof"] = np.nan
        out["bound"] = pd.Series([None] * len(out), index=out.index, dtype=object)
    return out


def roofline_points(groups: pd.DataFrame) -> pd.DataFrame:
    """Roofline points from kernel groups: rows with a known AI and FLOP rate, biggest time first."""
    pts = groups[groups["ai"].notna() & groups["tflops"].notna() & (groups["ai"] > 0) & (groups["tflops"] > 0)]
    pts = pts.assign(achieved_flops=pts["tflops"] * 1e12, achieved_bw=pts["tbps"] * 1e12)
    return pts[["key", "phase", "category", "ai", "achieved_flops", "achieved_bw", "time_ns", "time_share",
                "pct_of_roof", "bound"]].reset_index(drop=True)
