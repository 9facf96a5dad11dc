"""Group coverage and rates on the columns' arrays: the same numbers as the pandas expressions they
replaced (kept here as the reference), on random groups with every edge: no time, no bytes, AI 0,
unknown FLOPs, link copies, one peak or each group's own, a dtype without a FLOP/s peak."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis.groups import LATENCY_NS, LATENCY_ROOF_FRAC, rate_columns
from rooftop.analysis.aggregate import coverages
from rooftop.analysis.rates import VERDICT_COVERAGE
from rooftop.hardware.gpus import ridge_point


def reference(out: pd.DataFrame, peak_flops, peak_bw) -> pd.DataFrame:
    def share(num, den):
        return out[num] / out[den].astype("float64").where(out[den] > 0)
    out["bytes_coverage"] = share("hbm_known_ns", "hbm_ns")
    out["flops_coverage"] = share("flops_ns", "compute_ns")
    out["ai_coverage"] = share("both_ns", "compute_ns")
    out["ai"] = out["both_flops"] / out["both_bytes"].where(out["both_bytes"] > 0)
    for c in ("time_ns", "flops", "bytes", "mean_ns"):
        out[c] = out[c].astype("float64")

    def per_s(x, ns):
        return x / (out[ns].astype("float64").where(out[ns] > 0) / 1e9)
    out["tflops"] = per_s(out["flops"], "flops_ns") / 1e12
    out["tbps"] = per_s(out["bytes"], "bytes_ns") / 1e12
    link = out["hbm_ns"] < 0.5 * out["time_ns"]
    if peak_flops is not None and np.any(np.asarray(peak_flops, dtype="float64") > 0) and peak_bw:
        peak_flops = np.asarray(peak_flops, dtype="float64")
        ai = out["ai"]
        attainable = np.minimum(peak_flops, peak_bw * ai)
        pct = (per_s(out["both_flops"], "both_ns") / attainable).where(ai > 0,
                                                                       per_s(out["bytes"], "bytes_ns") / peak_bw)
        pct = pct.where(~link)
        out["pct_of_roof"] = pct
        ridge = np.asarray(ridge_point(peak_flops, peak_bw), dtype="float64")
        by_ai = ai.notna() & (out["ai_coverage"] >= VERDICT_COVERAGE)
        by_bytes = ai.isna() & out["bytes"].notna() & out["flops_coverage"].isna() \
            & (out["bytes_coverage"] >= VERDICT_COVERAGE)
        bound = np.where(by_ai, np.where(np.isnan(ridge), None, np.where(ai < ridge, "memory", "compute")),
                         np.where(by_bytes, "memory", None))
        latency = (out["mean_ns"] < LATENCY_NS) & (pct < LATENCY_ROOF_FRAC) & (by_ai | by_bytes)
        bound = np.where(latency, "latency", bound)
        bound = np.where(link, None, bound)
        out["bound"] = pd.Series(bound, index=out.index, dtype=object).where(pd.notna(bound), None)
    else:
        out["pct_of_roof"] = np.nan
        out["bound"] = pd.Series([None] * len(out), index=out.index, dtype=object)
    return out


def groups(seed: int, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def pick(values, p_nan=0.2, p_zero=0.2):
        v = np.asarray(values, dtype="float64")
        r = rng.random(n)
        return np.where(r < p_nan, np.nan, np.where(r < p_nan + p_zero, 0.0, v))
    time_ns = rng.integers(0, 10_000_000, n) * np.where(rng.random(n) < 0.5, 1e-3, 1.0)  # short groups too
    frame = pd.DataFrame({
        "count": rng.integers(1, 100, n), "time_ns": time_ns,
        "flops": pick(10 ** rng.uniform(2, 12, n)), "bytes": pick(10 ** rng.uniform(2, 10, n)),
        "both_flops": pick(10 ** rng.uniform(2, 12, n)), "both_bytes": pick(10 ** rng.uniform(2, 10, n)),
        "flops_ns": pick(time_ns * rng.random(n), 0, 0.3), "bytes_ns": pick(time_ns * rng.random(n), 0, 0.3),
        "both_ns": pick(time_ns * rng.random(n), 0, 0.3), "hbm_known_ns": pick(time_ns * rng.random(n), 0, 0.3),
        "hbm_ns": pick(time_ns * rng.random(n), 0, 0.3), "compute_ns": pick(time_ns * rng.random(n), 0, 0.3),
    }, index=[f"k{i}" for i in range(n)])
    frame["mean_ns"] = frame["time_ns"] / frame["count"]
    return frame


@pytest.mark.parametrize("peaks", ["one", "per group", "none", "zero"])
@pytest.mark.parametrize("seed", range(4))
def test_coverage_and_rates_are_the_pandas_expressions_numbers(seed, peaks):
    g = groups(seed)
    bw = 3.35e12
    peak = {"one": 989e12, "none": None, "zero": 0.0,
            "per group": np.where(np.random.default_rng(seed).random(len(g)) < 0.2, np.nan, 989e12)}[peaks]
    want = reference(g.copy(), peak, bw)
    got = g.copy()
    columns = {c: g[c].to_numpy(dtype="float64") for c in g.columns}
    added = coverages(columns)
    columns.update(added)
    added.update({c: columns[c] for c in ("time_ns", "flops", "bytes", "mean_ns")}, **rate_columns(columns, peak, bw))
    for c, v in added.items():
        got[c] = pd.Series(v, index=got.index, dtype=object) if c == "bound" else v
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    if peaks in ("one", "per group"):  # the test reaches every verdict
        assert {"memory", "compute", "latency"} <= set(want["bound"].dropna())
