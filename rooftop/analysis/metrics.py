"""Per-step and per-phase time, work and utilisation: the definitions of docs/definitions.md, vectorised.

- Step span: last kernel end minus first kernel start among the step's kernels. Busy: the union of
  kernel intervals. Idle = span - busy (launch gaps).
- Bytes: measured `dram_read + dram_write` where every kernel has counters; `model_bytes` where
  none has; a mix of the two (labelled "mixed") when some have. FLOPs likewise (`flops` where
  counters were measured, else `model_flops`).
- Coverage: the share of kernel time whose bytes (`bytes_coverage`) or FLOPs (`flops_coverage`)
  are known. Copies do no FLOPs, so FLOPs and AI coverage are shares of the compute kernels' time;
  host/peer copies run at link speed, so bytes coverage is a share of the rest. Achieved bandwidth = known bytes / span, a lower bound when coverage < 1; MBU = that /
  peak bandwidth (likewise FLOP/s and MFU). A rate is a verdict (`mbu_status` "verdict") only where
  its coverage is at least VERDICT_COVERAGE; below that it is a "lower bound", and below
  MIN_COVERAGE it is unknown (null): a bound from a sliver of the time says nothing.
- AI = FLOPs / bytes over the kernels whose FLOPs and bytes are both known (`ai_coverage`); the
  bound (memory/compute) is judged only where that covers at least VERDICT_COVERAGE.
- Copies and memsets do no FLOPs (a known 0, whatever a reader attached); integer GEMMs have no
  FP FLOPs (unknown, never 0: counters count no FP instructions for them).
- Model MBU (Databricks): see `model_cost` (the bytes a step must move, from the model description).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.trace.codes import first_rows
from rooftop.trace.steps import OUTSIDE_STEPS
from rooftop.analysis.aggregate import SUM_COLUMNS, coverages, idle_columns, source_labels, _stat_arrays, _stat_columns, where_positive
from rooftop.analysis.rates import _RATE_INPUTS, _STATUS, _bound, _bound_values, _frame, rate_arrays
from rooftop.analysis.step_entries import step_meta, _with_phase_sources
from rooftop.analysis.device_rows import multi_device
from rooftop.analysis.work import prepare


def step_table(timed: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None, ridge=None) -> pd.DataFrame:
    """One row per (rank,) phase, step. Rows without a step number are left out."""
    rows = _stat_columns(prepare(timed))
    rows = rows[rows["step"].notna()]
    keys = (["rank"] if "rank" in rows.columns and rows["rank"].notna().any() else []) + ["phase", "step"]
    if multi_device(rows):  # one GPU at a time: a step's figures per device (per_device.py)
        keys.insert(len(keys) - 2, "device")
    if rows.empty:
        return pd.DataFrame(columns=keys + ["kernels", "span_ns", "busy_ns", "idle_ns", "mbu", "mfu"])
    columns, index, _ = _stat_arrays(rows, keys)
    columns.update(rate_arrays({c: np.asarray(columns[c], dtype="float64") for c in _RATE_INPUTS}, peak_flops, peak_bw))
    out = _frame(columns, index).reset_index()
    out["step"] = out["step"].astype("int64")
    sm = step_meta(meta)
    out = out.merge(sm, on=["phase", "step"], how="left") if not sm.empty else out.assign(
        batch=np.nan, new_tokens=np.nan, tokens=np.nan, context=np.nan)
    out["tokens_per_s"] = out["new_tokens"] / (out["span_ns"].where(out["span_ns"] > 0) / 1e9)
    out["bound"] = _bound(out["ai"], ridge, out["ai_coverage"])
    out = _with_phase_sources(out, meta)
    return out.sort_values(keys[:-2] + ["start_ns"], kind="stable").reset_index(drop=True)


def phase_table(timed: pd.DataFrame, steps: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None,
                ridge=None) -> pd.DataFrame:
    """One row per phase. Span and busy are summed over the phase's steps (time between steps —
    sampling, host work — is not the phase's); a phase without step numbers is one step."""
    rows = prepare(timed)
    if rows.empty:
        return pd.DataFrame(columns=["phase", "steps", "kernels", "span_ns", "busy_ns", "mbu", "mfu"])
    rows = _stat_columns(rows).assign(_step=rows["step"].to_numpy(dtype="float64", na_value=-1.0))
    if "rank" in rows.columns and rows["rank"].notna().any():
        # Multi-rank: the phase table is rank 0's (or the lowest rank's); per-rank tables are separate.
        rows = rows[rows["rank"] == rows["rank"].min()]
    if "device" in rows.columns and rows["device"].nunique() > 1:
        rows = rows[rows["device"] == rows["device"].min()]  # and of one GPU (per_device.py)
    per_step, index, gid = _stat_arrays(rows, ["phase", "_step"])
    # each (phase, step) group's phase, numbered as `groupby("phase", sort=False)` numbers them
    step_phase = index.get_level_values("phase")
    pcode, _ = pd.factorize(step_phase)
    phases = step_phase.take(first_rows(pcode))
    k = len(phases)
    # the float sums as pandas makes them (compensated: two grouped sums over all the columns, each
    # summed as alone), the integer ones and the first start exactly, in NumPy
    g = pd.DataFrame({c: per_step[c] for c in ("busy_ns", "kernel_ns", *SUM_COLUMNS, *_KNOWN)}).groupby(pcode, sort=False)
    sums = g[["busy_ns", "kernel_ns", *SUM_COLUMNS]].sum()
    known = g[list(_KNOWN)].sum(min_count=1)
    # rows outside any step (_step -1) are timed with the phase but are not a step
    out = {"steps": _int_sums(pcode, index.get_level_values("_step").to_numpy() >= 0, k),
           "kernels": _int_sums(pcode, per_step["kernels"], k), "span_ns": _int_sums(pcode, per_step["span_ns"], k),
           "busy_ns": sums["busy_ns"].to_numpy(), "kernel_ns": sums["kernel_ns"].to_numpy(),
           "flops": known["flops"].to_numpy(), "bytes": known["bytes"].to_numpy(),
           **{c: sums[c].to_numpy() for c in SUM_COLUMNS},
           "both_flops": known["both_flops"].to_numpy(), "both_bytes": known["both_bytes"].to_numpy()}
    first_ns = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(first_ns, pcode, per_step["start_ns"])
    out.update(coverages(out))
    # Work outside every step window (before the first, between, after the last: rooftop.trace.steps) is no
    # step, and its pieces lie between steps: no step count, no span across the run, its GPU time only.
    outside = np.asarray(phases.isin(OUTSIDE_STEPS), dtype=bool)
    if outside.any():
        out["steps"] = np.where(outside, 0, out["steps"])
        out["span_ns"] = np.where(outside, out["busy_ns"], out["span_ns"]).astype(out["span_ns"].dtype)
    row_phase = pcode[gid]
    out["bytes_source"] = source_labels(rows["bytes_src"].to_numpy(), row_phase, k)
    out["flops_source"] = source_labels(rows["flops_src"].to_numpy(), row_phase, k)
    span = out["span_ns"]
    out.update(idle_columns(span, out["busy_ns"]))
    out.update(rate_arrays({c: np.asarray(out[c], dtype="float64") for c in _RATE_INPUTS}, peak_flops, peak_bw))
    # Tokens: from step metadata where the steps carry it.
    if not steps.empty and "tokens" in steps:
        tok = steps.groupby("phase")["tokens"].sum(min_count=1)
        out["tokens"] = tok.reindex(phases).to_numpy(dtype="float64", na_value=np.nan)
    else:
        out["tokens"] = np.full(k, np.nan)
    out["tokens_per_s"] = out["tokens"] / (where_positive(span) / 1e9)
    if not steps.empty and "model_mbu" in steps:
        # Span-weighted mean of the per-step model MBU = total model bytes / total span / peak.
        w = steps.dropna(subset=["model_mbu"])
        mm = (w["model_mbu"] * w["span_ns"]).groupby(w["phase"]).sum() / w.groupby("phase")["span_ns"].sum()
        out["model_mbu"] = mm.reindex(phases).to_numpy(dtype="float64", na_value=np.nan)
    else:
        out["model_mbu"] = np.full(k, np.nan)
    out["bound"] = _bound_values(out["ai"], ridge, out["ai_coverage"])
    order = np.argsort(first_ns, kind="quicksort")  # (what `sort_values("first_ns")` does)
    objects = _STATUS + ("bound",)
    return pd.DataFrame({"phase": phases.take(order),
                         **{c: pd.Series(v[order], dtype=object) if c in objects else v[order] for c, v in out.items()}})


_KNOWN = ("flops", "bytes", "both_flops", "both_bytes")  # sums that are null where no row knows them


def _int_sums(codes: np.ndarray, values, n: int) -> np.ndarray:
    """Per code, the exact int64 sum of `values` (integers or booleans)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, codes, np.asarray(values, dtype=np.int64))
    return out


def per_rank_steps(steps: pd.DataFrame) -> pd.DataFrame | None:
    """Multi-rank runs: per step, the straggler rank and the rank-to-rank spread of step time."""
    if steps.empty or "rank" not in steps.columns or steps["rank"].nunique() < 2:
        return None
    g = steps.groupby(["phase", "step"], sort=False)
    idx = g["span_ns"].idxmax()
    out = pd.DataFrame({
        "ranks": g["rank"].nunique(),
        "min_ns": g["span_ns"].min(),
        "median_ns": g["span_ns"].median(),
        "max_ns": g["span_ns"].max(),
    })
    out["straggler"] = steps.loc[idx.to_numpy(), "rank"].to_numpy()
    out["spread"] = (out["max_ns"] - out["min_ns"]) / out["median_ns"].where(out["median_ns"] > 0)
    return out.reset_index()


def per_rank_phases(timed: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None, ridge=None) -> pd.DataFrame | None:
    if "rank" not in timed.columns or timed["rank"].nunique() < 2:
        return None
    frames = []
    for rank, rows in timed.groupby("rank", sort=True):
        pt = phase_table(rows.drop(columns=["rank"]), pd.DataFrame(), meta, peak_flops, peak_bw, ridge)
        frames.append(pt.assign(rank=int(rank)))
    return pd.concat(frames, ignore_index=True)
