"""Kernel groups (by short name or category) and their roofline points.

- AI = flops / bytes. Ridge = peak FLOP/s / peak bandwidth. Left of the ridge is memory-bound,
  right of it compute-bound; far under both roofs (< 10% of the attainable rate) and short
  (mean < 5 µs) is latency/launch-bound.
- Rates are over the kernels that have the quantity: TFLOP/s = known FLOPs / time of the launches
  whose FLOPs are known, TB/s likewise; AI and % of roof use only the launches whose FLOPs and bytes
  are both known. `flops_coverage`/`bytes_coverage` say what share of the group's time that is.
- % of roof = achieved rate / attainable rate at the group's AI, min(peak, bw · AI); for groups that
  move bytes but do no FLOPs (copies, memsets: AI 0), achieved bandwidth / peak bandwidth. Host and
  peer copies run at PCIe/NVLink speed: no % of the HBM roof and no bound.
- A bound is judged only where the launches it rests on cover at least half the group's time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import ridge_point
from rooftop.analysis.ceilings import group_peak
from rooftop.present.columns import GROUPS, ROOFLINE
from rooftop.analysis.aggregate import coverages, grouped, known_sums, source_labels, where_positive
from rooftop.analysis.rates import VERDICT_COVERAGE
from rooftop.analysis.work import prepare

LATENCY_NS = 5_000
LATENCY_ROOF_FRAC = 0.10


def kernel_groups(timed: pd.DataFrame, by: str = "short_name", peak_flops=None, peak_bw=None) -> pd.DataFrame:
    """One row per group: key, category, phase (dominant by time), count, time, share, work, rates, bound."""
    # The published columns (columns.py); peak_flops and dtype only where each row has its dtype's peak.
    per_dtype = ("peak_flops", "dtype")
    cols = [k for k in GROUPS.keys if k not in per_dtype]
    if timed.empty:
        return pd.DataFrame(columns=cols)
    timed = prepare(timed)
    key = timed[by]
    key = key.astype(object).where(key.notna(), "(unnamed)") if key.isna().any() else key
    gid, sizes = grouped(key.to_frame("key"), ["key"])
    n = len(sizes)
    dur = timed["dur_ns"].to_numpy()
    time_ns = np.bincount(gid, weights=dur, minlength=n)
    columns = {"count": sizes.to_numpy(), "time_ns": time_ns, **known_sums(timed, gid, n)}
    # Dominant category and phase of each group, by time.
    for col in ("category", "phase"):
        val, distinct = top_by_weight(gid, timed[col], dur, n)
        if col == "phase":  # "decode+": mostly decode, also in another phase
            val = np.where(distinct > 1, np.array([f"{v}+" for v in val], dtype=object), val)
        columns[col] = val
    columns["bytes_source"] = source_labels(timed["bytes_src"].to_numpy(), gid, n)
    columns["flops_source"] = source_labels(timed["flops_src"].to_numpy(), gid, n)
    columns.update(coverages(columns))
    # the columns computed as arrays and made into one frame (a few hundred groups: each pandas
    # operation on them cost more than its arithmetic)
    total = time_ns.sum()
    columns["time_share"] = time_ns / total if total else np.full(n, np.nan)
    columns["mean_ns"] = time_ns / columns["count"]
    if isinstance(peak_flops, pd.Series):
        # Per-row peaks (each kernel's compute dtype, see ceilings.py): each group is judged
        # against the peak of its own dtype, not the trace's.
        row_peak = peak_flops.reindex(timed.index).to_numpy(dtype="float64", na_value=np.nan)
        peak_flops = group_peak(timed["work_flops"].to_numpy(dtype="float64"), row_peak, gid, n,
                                timed["dur_ns"].to_numpy(dtype="float64"))
        columns["peak_flops"] = peak_flops
        if "dtype" in timed.columns:
            columns["dtype"] = _dominant(gid, timed["dtype"], dur, n)
    columns.update(rate_columns(columns, peak_flops, peak_bw))
    order = np.argsort(-time_ns, kind="stable")  # the most time first (ties: as met)
    out = {"key": sizes.index.take(order)}
    for c in GROUPS.keys:
        if c in columns:
            v = columns[c][order]
            out[c] = pd.Series(v, dtype=object) if c == "bound" else v  # (bound: None, not NaN)
    return pd.DataFrame(out)


def top_by_weight(gid: np.ndarray, values, weight: np.ndarray, n: int,
                  dropna: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the value with the most weight (ties: the one met first in the rows), and how many
    distinct values the group holds. A missing value counts as one of them unless `dropna` (then a
    group of missing values only has NaN). Counted with bincounts over (group, value code) pairs,
    not a groupby on the values, whose hashing of a million object keys costs memory."""
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype) and (len(values.cat.categories) + 1) * n <= 1 << 21:
        # a categorical's own codes (no hashing of every row; an unused category is never present),
        # where its categories are few enough for the (group, value) table
        codes, uniques = values.cat.codes.to_numpy(), values.cat.categories
    else:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    k = len(uniques) + 1  # the last code is "missing"
    codes = np.where(codes < 0, k - 1, codes).astype(np.int64)
    pair = gid.astype(np.int64) * k + codes
    size = n * k
    w = np.bincount(pair, weights=np.asarray(weight, dtype="float64"), minlength=size).reshape(n, k)
    first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, pair, np.arange(len(pair), dtype=np.int64))
    first = first.reshape(n, k)
    present = first < np.iinfo(np.int64).max
    if dropna:
        present[:, -1] = False
    distinct = present.sum(axis=1)
    best = np.where(present, w, -np.inf).max(axis=1, keepdims=True)
    tied = present & (w == best)
    top = np.where(tied, first, np.iinfo(np.int64).max).argmin(axis=1)
    labels = np.empty(k, dtype=object)
    labels[:-1] = np.asarray(uniques, dtype=object)
    labels[-1] = None if dropna else np.nan
    val = labels[top]
    val[distinct == 0] = np.nan
    return val, distinct


def _dominant(gid: np.ndarray, values: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """The value with the most weight in each group (NaN where all are missing)."""
    return top_by_weight(gid, values, weight, n, dropna=True)[0]


_RATE_INPUTS = ("time_ns", "flops", "bytes", "mean_ns", "both_flops", "hbm_ns", "ai", "ai_coverage", "flops_coverage",
                "bytes_coverage", "flops_ns", "bytes_ns", "both_ns")


def rate_columns(columns, peak_flops=None, peak_bw=None) -> dict[str, np.ndarray]:
    """tflops, tbps, pct_of_roof and bound (None where unjudged) of groups, from the `known_sums`
    columns, mean_ns and the `coverages` (arrays): each rate over the time of the launches it
    rests on."""
    col = {c: np.asarray(columns[c], dtype="float64") for c in _RATE_INPUTS}

    def per_s(x, ns):
        return x / (where_positive(col[ns]) / 1e9)
    out = {"tflops": per_s(col["flops"], "flops_ns") / 1e12, "tbps": per_s(col["bytes"], "bytes_ns") / 1e12}
    # mostly host/peer copies: PCIe/NVLink-limited, not judged against the HBM roof
    link = col["hbm_ns"] < 0.5 * col["time_ns"]
    if peak_flops is not None and np.any(np.asarray(peak_flops, dtype="float64") > 0) and peak_bw:
        peak_flops = np.asarray(peak_flops, dtype="float64")  # one peak, or each group's dtype's
        ai = col["ai"]
        attainable = np.minimum(peak_flops, peak_bw * ai)
        # AI 0 (copies, memsets) or FLOPs unknown: judged by bandwidth alone (the division by an
        # attainable rate of 0 is the branch not taken, as silent as pandas kept it)
        with np.errstate(divide="ignore", invalid="ignore"):
            by_flops = per_s(col["both_flops"], "both_ns") / attainable
        pct = np.where(ai > 0, by_flops, per_s(col["bytes"], "bytes_ns") / peak_bw)
        pct = np.where(~link, pct, np.nan)
        out["pct_of_roof"] = pct
        ridge = np.asarray(ridge_point(peak_flops, peak_bw), dtype="float64")  # NaN: no ridge
        by_ai = ~np.isnan(ai) & (col["ai_coverage"] >= VERDICT_COVERAGE)
        # no FLOPs but bytes (copies): memory-bound, if the bytes cover the group's time
        by_bytes = np.isnan(ai) & ~np.isnan(col["bytes"]) & np.isnan(col["flops_coverage"]) \
            & (col["bytes_coverage"] >= VERDICT_COVERAGE)
        # a group whose dtype has no FLOP/s peak (int8) has no ridge: its bound is unknown
        bound = np.where(by_ai, np.where(np.isnan(ridge), None, np.where(ai < ridge, "memory", "compute")),
                         np.where(by_bytes, "memory", None))
        latency = (col["mean_ns"] < LATENCY_NS) & (pct < LATENCY_ROOF_FRAC) & (by_ai | by_bytes)
        bound = np.where(latency, "latency", bound)
        bound = np.where(link, None, bound).astype(object)
        out["bound"] = np.where(pd.notna(bound), bound, None)
    else:
        # Without peaks no bound can be judged (latency-bound also means "far under the roofs").
        out["pct_of_roof"] = np.full(len(link), np.nan)
        out["bound"] = np.full(len(link), None, dtype=object)
    return out


def roofline_points(groups: pd.DataFrame) -> pd.DataFrame:
    """Roofline points from kernel groups: rows with a known AI and FLOP rate, biggest time first."""
    pts = groups[groups["ai"].notna() & groups["tflops"].notna() & (groups["ai"] > 0) & (groups["tflops"] > 0)]
    # the point sits at the achieved rate of the launches whose FLOPs and bytes are both known
    pts = pts.assign(achieved_flops=pts["tflops"] * 1e12, achieved_bw=pts["tbps"] * 1e12)
    return pts[[k for k in ROOFLINE.keys if k in pts]].reset_index(drop=True)
