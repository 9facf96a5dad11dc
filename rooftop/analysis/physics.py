"""What physics allows a report to say: the checks behind issue 33's invariants.

- No peak in use (datasheet, measured, an ncu report's) above the device's dense datasheet peak at
  boost clock (`devices.physical_limits`, with its small slack).
- No phase or step rate or utilization above the ceiling it is measured against: a span rate is
  work / span, and the span holds at least the work's busy time, so MBU and MFU above 1 mean the
  bytes or FLOPs are not what ran (model bytes that count L2-resident data). Kernel groups may sit
  above their roof only where the above-roof finding says their numbers are not evidence.
- Unknown is never 0: a rate whose coverage is below the minimum is null, not 0.

`violations` lists every breach as a sentence; the report carries them (`physics`), and the tests
assert there are none on every trace the suite can produce.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import DTYPES, physical_limits
from rooftop.analysis.rates import MIN_COVERAGE

# a span rate is a share of the time the GPU could have worked: 1 is the ceiling (plus rounding)
UTIL_SLACK = 1.0 + 1e-9


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def peak_violations(peaks) -> list[str]:
    """Peaks above the dense datasheet peak of the identified device."""
    lim = physical_limits(peaks.gpu)
    if not lim:
        return []
    out = []
    checks = [("bw", "bandwidth in use", peaks.bw), ("bw", "ncu bandwidth", peaks.ncu_bw)]
    checks += [(d, f"{d} peak in use", peaks.table.get(d)) for d in DTYPES]
    checks += [(d, f"ncu {d} peak", peaks.ncu_table.get(d)) for d in DTYPES]
    if peaks.source != "user":  # (--peaks is the user's word, said on screen)
        checks.append((peaks.dtype, "FLOP/s peak in use", peaks.flops))
    for key, what, v in checks:
        v, cap = _num(v), lim.get(key)
        if v is not None and cap and v > cap:
            out.append(f"{what} {v:.4g} is above the device's dense datasheet peak {cap:.4g}")
    return out


def table_violations(table: pd.DataFrame | None, name: str) -> list[str]:
    """Phase or step rows: utilization above 1, and a rate stated where its coverage says unknown."""
    if table is None or table.empty:
        return []
    out = []
    for util in ("mbu", "mfu", "model_mbu", "model_mfu"):
        if util in table.columns:
            v = pd.to_numeric(table[util], errors="coerce")
            for i in np.flatnonzero((v > UTIL_SLACK).to_numpy()):
                out.append(f"{name} row {i}: {util} {v.iloc[i]:.3g} is above 1")
    for rate, cov in (("mbu", "bytes_coverage"), ("tbps", "bytes_coverage"), ("mfu", "flops_coverage"),
                      ("tflops", "flops_coverage")):
        if rate in table.columns and cov in table.columns:
            v = pd.to_numeric(table[rate], errors="coerce")
            c = pd.to_numeric(table[cov], errors="coerce")
            bad = v.notna() & ~(c >= MIN_COVERAGE)
            for i in np.flatnonzero(bad.to_numpy()):
                out.append(f"{name} row {i}: {rate} {v.iloc[i]:.3g} stated at {cov} {c.iloc[i]:.3g} (unknown, not a number)")
    return out


def violations(a) -> list[str]:
    """Every breach of the physics invariants in an Analysis (none expected)."""
    return peak_violations(a.peaks) + table_violations(a.phases, "phases") + table_violations(a.steps, "steps")
