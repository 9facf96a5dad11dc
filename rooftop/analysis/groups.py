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

from .ceilings import group_peak
from .metrics import _sum_known, prepare, source_labels

LATENCY_NS = 5_000
LATENCY_ROOF_FRAC = 0.10


def kernel_groups(timed: pd.DataFrame, by: str = "short_name", peak_flops=None, peak_bw=None) -> pd.DataFrame:
    """One row per group: key, category, phase (dominant by time), count, time, share, work, rates, bound."""
    cols = ["key", "category", "phase", "count", "time_ns", "time_share", "mean_ns", "flops", "bytes",
            "bytes_source", "ai", "tflops", "tbps", "pct_of_roof", "bound"]
    if timed.empty:
        return pd.DataFrame(columns=cols)
    timed = prepare(timed)
    key = timed[by]
    rows = pd.DataFrame({"key": key.astype(object).where(key.notna(), "(unnamed)") if key.isna().any() else key,
                         "category": timed["category"], "phase": timed["phase"], "dur_ns": timed["dur_ns"]})
    g = rows.groupby("key", sort=False)
    gid = g.ngroup().to_numpy()
    out = g.size().to_frame("count")
    n = len(out)
    out["time_ns"] = np.bincount(gid, weights=timed["dur_ns"].to_numpy(), minlength=n)
    out["flops"] = _sum_known(timed["work_flops"].to_numpy(), gid, n)
    out["bytes"] = _sum_known(timed["bytes"].to_numpy(), gid, n)
    # Dominant category and phase of each group, by time.
    for col in ("category", "phase"):
        by_col = pd.DataFrame({"gid": gid, col: rows[col].to_numpy(), "dur_ns": rows["dur_ns"].to_numpy()})
        t = by_col.groupby(["gid", col], sort=False, dropna=False)["dur_ns"].sum().reset_index()
        distinct = t.groupby("gid")[col].size().reindex(range(n)).to_numpy()
        top = t.sort_values("dur_ns", ascending=False, kind="stable").drop_duplicates("gid").set_index("gid")[col]
        val = top.reindex(range(n)).to_numpy(dtype=object)
        if col == "phase":  # "decode+": mostly decode, also in another phase
            val = np.where(distinct > 1, np.array([f"{v}+" for v in val], dtype=object), val)
        out[col] = val
    out["bytes_source"] = source_labels(timed["bytes_src"].to_numpy(), gid, n)
    total = out["time_ns"].sum()
    out["time_share"] = out["time_ns"] / total if total else np.nan
    out["mean_ns"] = out["time_ns"] / out["count"]
    if isinstance(peak_flops, pd.Series):
        # Per-row peaks (each kernel's compute dtype, see ceilings.py): each group is judged
        # against the peak of its own dtype, not the trace's.
        row_peak = peak_flops.reindex(timed.index).to_numpy(dtype="float64", na_value=np.nan)
        peak_flops = group_peak(timed["work_flops"].to_numpy(dtype="float64"), row_peak, gid, n,
                                timed["dur_ns"].to_numpy(dtype="float64"))
        out["peak_flops"] = peak_flops
        cols = cols + ["peak_flops"]
        if "dtype" in timed.columns:
            cols = cols + ["dtype"]
            out["dtype"] = _dominant(gid, timed["dtype"].to_numpy(dtype=object), timed["dur_ns"].to_numpy(), n)
    add_rates(out, peak_flops, peak_bw)
    out = out.reset_index().rename(columns={"index": "key"})
    return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)[cols]


def _dominant(gid: np.ndarray, values: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """The value with the most weight in each group (None where all are None)."""
    frame = pd.DataFrame({"gid": gid, "v": values, "w": weight}).dropna(subset=["v"])
    top = frame.groupby(["gid", "v"], sort=False)["w"].sum().reset_index()
    top = top.sort_values("w", ascending=False, kind="stable").drop_duplicates("gid").set_index("gid")["v"]
    return top.reindex(range(n)).to_numpy(dtype=object)


def add_rates(out: pd.DataFrame, peak_flops=None, peak_bw=None) -> pd.DataFrame:
    """Add ai, tflops, tbps, pct_of_roof and bound to a frame with time_ns, flops, bytes, mean_ns."""
    for c in ("time_ns", "flops", "bytes", "mean_ns"):
        out[c] = out[c].astype("float64")
    t = out["time_ns"].where(out["time_ns"] > 0) / 1e9
    out["ai"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
    out["tflops"] = out["flops"] / t / 1e12
    out["tbps"] = out["bytes"] / t / 1e12
    if peak_flops is not None and np.any(np.asarray(peak_flops, dtype="float64") > 0) and peak_bw:
        peak_flops = np.asarray(peak_flops, dtype="float64")
        attainable = np.minimum(peak_flops, peak_bw * out["ai"])
        pct = (out["flops"] / t) / attainable
        pct = pct.where(out["ai"].notna(), (out["bytes"] / t) / peak_bw)
        out["pct_of_roof"] = pct
        ridge = peak_flops / peak_bw
        # a group whose dtype has no FLOP/s peak (int8) has no ridge: its bound is unknown
        bound = np.where(out["ai"].isna(), np.where(out["bytes"].notna(), "memory", None),
                         np.where(np.isnan(ridge), None, np.where(out["ai"] < ridge, "memory", "compute")))
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
    extra = [c for c in ("peak_flops", "dtype") if c in pts.columns]  # the point's own ceiling
    return pts[["key", "phase", "category", "ai", "achieved_flops", "achieved_bw", "time_ns", "time_share",
                "pct_of_roof", "bound"] + extra].reset_index(drop=True)
