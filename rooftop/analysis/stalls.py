"""Warp stall breakdowns from Nsight Compute's WarpStateStats counters.

Stall share of a reason = its warp cycles per issued instruction / the sum over reasons; aggregates
over kernels weight each kernel by its duration. (`selected` is not a stall — the warp issued — but
it is part of the partition of cycles per issued instruction, so it is kept, as ncu's chart does.)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.trace import STALL_COLUMNS, STALL_REASONS

# One line each, from the ncu_report.StallReason docstrings and the Nsight Compute profiling guide.
STALL_MEANING = {
    "long_scoreboard": "waiting on L1TEX (global/local memory) data: memory latency or bandwidth",
    "short_scoreboard": "waiting on MIO data (shared memory, special math, shuffles)",
    "mio_throttle": "MIO queue full: too many shared-memory / special-math instructions",
    "lg_throttle": "local/global memory queue full: too many memory instructions in flight",
    "wait": "fixed-latency dependency: waiting on a previous instruction's result",
    "barrier": "waiting at a __syncthreads barrier for other warps",
    "membar": "waiting on a memory barrier (fence)",
    "math_pipe_throttle": "math pipe busy: compute-bound on this pipe",
    "tex_throttle": "texture unit queue full",
    "not_selected": "eligible but another warp was picked: plenty of parallelism",
    "selected": "issuing an instruction (not a stall)",
    "dispatch_stall": "dispatcher could not issue: pipeline conflict",
    "drain": "waiting for memory stores to drain at exit",
    "imc_miss": "waiting on an immediate constant cache miss",
    "branch_resolving": "waiting for a branch target to resolve",
    "no_instruction": "instruction cache miss or no instruction fetched",
    "sleeping": "warp asleep (nanosleep / yield)",
    "misc": "miscellaneous hardware reason",
    "gmma": "waiting on warpgroup matrix-multiply (wgmma) results: tensor-core bound",
}


def with_counters(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows that carry at least one stall reason."""
    if not any(c in rows.columns for c in STALL_COLUMNS):
        return rows.iloc[0:0]
    return rows[counted(rows)]


def counted(rows: pd.DataFrame) -> np.ndarray:
    """Per row: whether it carries at least one stall reason (column by column: no frame of them)."""
    mask = np.zeros(len(rows), dtype=bool)
    for c in STALL_COLUMNS:
        if c in rows.columns:
            mask |= rows[c].notna().to_numpy(dtype=bool)
    return mask


def kernel_shares(rows: pd.DataFrame) -> pd.DataFrame:
    """Per kernel: each reason's share of its cycles per issued instruction (rows sum to 1)."""
    vals = rows[list(STALL_COLUMNS)].astype("float64").clip(lower=0)
    total = vals.sum(axis=1, min_count=1)
    shares = vals.div(total.where(total > 0), axis=0)
    shares.columns = list(STALL_REASONS)
    return shares


def stall_shares(rows: pd.DataFrame, by: str | None = None) -> pd.DataFrame | None:
    """Duration-weighted stall shares per group (index) and reason (columns); None without counters."""
    rows = with_counters(rows)
    if rows.empty:
        return None
    shares = kernel_shares(rows).fillna(0.0)
    w = rows["dur_ns"].astype("float64")
    weighted = shares.mul(w, axis=0)
    if by is None:
        total = weighted.sum() / w.sum()
        return total.to_frame("all").T
    key = rows[by].astype(object).where(rows[by].notna(), "(none)")
    num = weighted.groupby(key, sort=False).sum()
    den = w.groupby(key, sort=False).sum()
    out = num.div(den, axis=0)
    return out.loc[den.sort_values(ascending=False).index]


def top_kernels(rows: pd.DataFrame, reason: str, n: int = 5) -> pd.DataFrame:
    """The kernels (by short name) that spend the most time-weighted cycles in one reason."""
    rows = with_counters(rows)
    if rows.empty or reason not in STALL_REASONS:
        return pd.DataFrame(columns=["short_name", "time_ns", "share", "weight"])
    share = kernel_shares(rows)[reason].fillna(0.0)
    w = rows["dur_ns"].astype("float64")
    key = rows["short_name"].astype(object)
    frame = pd.DataFrame({"short_name": key, "time_ns": w, "weighted": share * w})
    g = frame.groupby("short_name", sort=False).sum()
    g["share"] = g["weighted"] / g["time_ns"].where(g["time_ns"] > 0)  # the group's own share of that reason
    g["weight"] = g["weighted"] / g["weighted"].sum() if g["weighted"].sum() > 0 else 0.0  # its part of the reason overall
    g = g.sort_values("weighted", ascending=False).head(n)
    return g.reset_index()[["short_name", "time_ns", "share", "weight"]]


def top_reason(shares_row: pd.Series, skip_selected: bool = True) -> tuple[str, float] | None:
    s = shares_row.drop(labels=["selected"]) if skip_selected and "selected" in shares_row.index else shares_row
    s = s.dropna()
    if s.empty or s.max() <= 0:
        return None
    return str(s.idxmax()), float(s.max())


def missing_reason(rows: pd.DataFrame, source: dict | None, modeled: bool) -> str:
    """Why a trace has no stall shares, and what would add them, for this file's kind.

    Stall reasons are Nsight Compute's WarpStateStats section (`smsp__pcsamp_warps_issue_stalled_*`
    and `smsp__average_warp_latency_issue_stalled_*`); an ncu report recorded without it still has
    its other sections' counters, so "no counters" would be wrong there."""
    tool = str((source or {}).get("tool") or "")
    if modeled:
        return ("This trace is MODELED (analytic roofline times): it has no hardware counters and no warp "
                "stalls. Collect a real run on the GPU: rooftop collect --counters ...")
    has_counters = "counters" in rows.columns and bool(rows["counters"].fillna(False).astype(bool).any())
    if tool == "ncu" or has_counters:
        return ("This Nsight Compute report has counters but no WarpStateStats section, which is where "
                "warp stall reasons come from. Profile again with it: ncu --section WarpStateStats "
                "(or --set full) -o run ...; then rooftop run.ncu-rep")
    if tool == "kineto":
        what = "This PyTorch profiler (Kineto) trace holds kernel times, not hardware counters"
    elif tool == "nsys":
        what = "This Nsight Systems trace holds kernel times, not per-kernel hardware counters"
    else:
        what = "This trace has no hardware counters"
    return (f"{what}: warp stall reasons come from Nsight Compute's WarpStateStats section. Collect them with "
            "rooftop collect --counters ... (it re-runs a few steps under Nsight Compute), or profile with "
            "ncu --section WarpStateStats -o run ... and open run.ncu-rep")
