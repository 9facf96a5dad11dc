"""Rates from known work over span: achieved FLOP/s and bytes/s, MFU and MBU, each a verdict, a lower
bound or unknown by its coverage; the memory/compute bound from the arithmetic intensity. Definitions:
`metrics`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis.aggregate import where_positive


VERDICT_COVERAGE = 0.5  # a phase/step rate is a verdict only when it covers half the kernel time
MIN_COVERAGE = 0.05     # below this, a lower bound is noise ("MBU 3.9e-05%"): shown as unknown


_RATE_INPUTS = ("span_ns", "flops", "bytes", "flops_coverage", "bytes_coverage")
_STATUS = ("mfu_status", "mbu_status")  # object columns of text


def _frame(columns: dict, index: pd.Index) -> pd.DataFrame:
    """One frame of the arrays, the statuses as object columns of text."""
    return pd.DataFrame({k: pd.Series(v, index=index, dtype=object) if k in _STATUS else v
                         for k, v in columns.items()}, index=index)


def rate_arrays(cols, peak_flops, peak_bw) -> dict[str, np.ndarray]:
    """Span rates of steps or phases from the `_RATE_INPUTS` columns (float arrays): known work /
    span, null where the work covers less than MIN_COVERAGE of the kernel time; `*_status` says
    whether each is a verdict or a lower bound."""
    span_s = where_positive(cols["span_ns"]) / 1e9
    flops_cov, bytes_cov = cols["flops_coverage"], cols["bytes_coverage"]
    kf, kb = flops_cov >= MIN_COVERAGE, bytes_cov >= MIN_COVERAGE
    flops_s, bytes_s = cols["flops"] / span_s, cols["bytes"] / span_s
    nan = np.full(len(span_s), np.nan)
    return {"tflops": np.where(kf, flops_s / 1e12, np.nan), "tbps": np.where(kb, bytes_s / 1e12, np.nan),
            "mfu": np.where(kf, flops_s / peak_flops, np.nan) if peak_flops else nan,
            "mbu": np.where(kb, bytes_s / peak_bw, np.nan) if peak_bw else nan.copy(),
            "mfu_status": _status(flops_cov), "mbu_status": _status(bytes_cov)}


def _status(c: np.ndarray) -> np.ndarray:
    return np.where(c >= VERDICT_COVERAGE, "verdict", np.where(c >= MIN_COVERAGE, "lower bound", "unknown")).astype(object)


def _bound(ai: pd.Series, ridge: float | None, coverage: pd.Series | None = None) -> pd.Series:
    """memory/compute from the AI; None without a ridge, or where the AI covers less than
    VERDICT_COVERAGE of the kernel time (a verdict on a sliver of the time is no verdict)."""
    values = _bound_values(ai.to_numpy(dtype="float64", na_value=np.nan), ridge,
                           None if coverage is None else coverage.to_numpy(dtype="float64", na_value=np.nan))
    return pd.Series(values, index=ai.index, dtype=object)


def _bound_values(ai: np.ndarray, ridge: float | None, coverage: np.ndarray | None = None) -> np.ndarray:
    """`_bound` of arrays, as an object array."""
    if not ridge:
        return np.full(len(ai), None, dtype=object)
    judged = ~np.isnan(ai) if coverage is None else ~np.isnan(ai) & (coverage >= VERDICT_COVERAGE)
    return np.where(judged, np.where(ai < ridge, "memory", "compute"), None).astype(object)


def both_utilizations(phases: pd.DataFrame, peaks) -> pd.DataFrame:
    """MBU and MFU against the datasheet and against the measured (calibrated) ceilings, side by
    side: "% of datasheet" says how far from the spec, "% of measured" how far from what this GPU
    can really do. A column is null where that ceiling is unknown."""
    if phases.empty:
        return phases
    span_s = phases["span_ns"].astype("float64").where(phases["span_ns"] > 0) / 1e9
    bw = (phases["bytes"].astype("float64") / span_s).where(phases["bytes_coverage"] >= MIN_COVERAGE)
    fl = (phases["flops"].astype("float64") / span_s).where(phases["flops_coverage"] >= MIN_COVERAGE)
    for name, value, peak in (("mbu_datasheet", bw, peaks.datasheet_bw), ("mbu_measured", bw, peaks.measured_bw),
                              ("mfu_datasheet", fl, peaks.datasheet_flops), ("mfu_measured", fl, peaks.measured_flops)):
        phases[name] = value / peak if peak else np.nan
    return phases
