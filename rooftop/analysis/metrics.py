"""Per-step and per-phase time, work and utilisation: the definitions of DESIGN.md, vectorised.

- Step span: last kernel end minus first kernel start among the step's kernels. Busy: the union of
  kernel intervals. Idle = span - busy (launch gaps).
- Bytes: measured `dram_read + dram_write` where every kernel has counters; `model_bytes` where
  none has; a mix of the two (labelled "mixed") when some have. FLOPs likewise (`flops` where
  counters were measured, else `model_flops`).
- Achieved bandwidth = bytes / span; MBU = achieved / peak bandwidth. Achieved FLOP/s = flops /
  span; MFU = achieved / peak FLOP/s of the compute dtype.
- Model MBU (Databricks) for a decode step: (parameter bytes + KV-cache bytes read) / span / peak.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..models import ModelConfig, dtype_bytes

NO_PHASE = "run"  # label for timed rows that no phase range encloses (e.g. imported traces)


def work_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Per-row best-known bytes and FLOPs, and where each came from.

    Returns columns `bytes`, `bytes_src` ("measured"/"model"/None), `work_flops`, `flops_src`.
    """
    measured_b = rows["dram_read"].astype("float64") + rows["dram_write"].astype("float64")
    has_counters = rows["counters"].fillna(False).astype(bool).to_numpy() if "counters" in rows else np.zeros(len(rows), bool)
    mb = measured_b.where(has_counters)
    model_b = rows["model_bytes"].astype("float64")
    bytes_ = mb.where(mb.notna(), model_b)
    bsrc = np.where(mb.notna(), "measured", np.where(model_b.notna(), "model", None))
    mf = rows["flops"].astype("float64").where(has_counters)
    model_f = rows["model_flops"].astype("float64")
    flops = mf.where(mf.notna(), model_f)
    fsrc = np.where(mf.notna(), "measured", np.where(model_f.notna(), "model", None))
    return pd.DataFrame({"bytes": bytes_, "bytes_src": bsrc, "work_flops": flops, "flops_src": fsrc},
                        index=rows.index)


def _combine_sources(src: pd.Series, keys: list[pd.Series] | list[str], frame: pd.DataFrame) -> pd.Series:
    """Per group: "measured" if all known rows are measured, "model" if all are model, else "mixed"."""
    s = pd.DataFrame({"m": (src == "measured").astype(int), "o": (src == "model").astype(int)}, index=frame.index)
    g = s.groupby([frame[k] for k in keys], dropna=False, sort=False).sum()
    out = np.where((g["m"] > 0) & (g["o"] > 0), "mixed",
                   np.where(g["m"] > 0, "measured", np.where(g["o"] > 0, "model", None)))
    return pd.Series(out, index=g.index)


def busy_ns(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Union of [start, end) intervals per group (vectorised sweep: sort, running max of ends)."""
    d = frame[keys + ["start_ns", "end_ns"]].sort_values(keys + ["start_ns"], kind="stable")
    grp = [d[k] for k in keys]
    running_end = d.groupby(grp, dropna=False, sort=False)["end_ns"].cummax()
    prev_end = running_end.groupby(grp, dropna=False, sort=False).shift(1)
    start = d["start_ns"].astype("float64")
    lo = np.where(prev_end.isna(), start, np.maximum(start, prev_end.astype("float64")))
    contrib = np.clip(d["end_ns"].astype("float64").to_numpy() - lo, 0, None)
    return pd.Series(contrib, index=d.index).groupby(grp, dropna=False, sort=False).sum()


def _group_stats(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rows = rows.assign(end_ns=rows["start_ns"] + rows["dur_ns"])
    work = work_columns(rows)
    rows = pd.concat([rows, work], axis=1)
    g = rows.groupby(keys, dropna=False, sort=False)
    out = pd.DataFrame({
        "kernels": g.size(),
        "start_ns": g["start_ns"].min(),
        "end_ns": g["end_ns"].max(),
        "kernel_ns": g["dur_ns"].sum(),
        "flops": g["work_flops"].sum(min_count=1),
        "bytes": g["bytes"].sum(min_count=1),
    })
    out["busy_ns"] = busy_ns(rows, keys)
    out["bytes_source"] = _combine_sources(rows["bytes_src"], keys, rows)
    out["flops_source"] = _combine_sources(rows["flops_src"], keys, rows)
    # Share of kernel time whose bytes are known: model bytes cover GEMM/attention, not norms.
    known = rows["dur_ns"].where(rows["bytes"].notna(), 0)
    out["bytes_coverage"] = known.groupby([rows[k] for k in keys], dropna=False, sort=False).sum() / out["kernel_ns"].where(out["kernel_ns"] > 0)
    out["span_ns"] = out["end_ns"] - out["start_ns"]
    out["idle_ns"] = (out["span_ns"] - out["busy_ns"]).clip(lower=0)
    out["idle_frac"] = out["idle_ns"] / out["span_ns"].where(out["span_ns"] > 0)
    return out


def _rates(out: pd.DataFrame, peak_flops, peak_bw) -> pd.DataFrame:
    span_s = out["span_ns"].where(out["span_ns"] > 0) / 1e9
    out["tflops"] = out["flops"] / span_s / 1e12
    out["tbps"] = out["bytes"] / span_s / 1e12
    out["mfu"] = out["flops"] / span_s / peak_flops if peak_flops else np.nan
    out["mbu"] = out["bytes"] / span_s / peak_bw if peak_bw else np.nan
    out["ai"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
    return out


def _bound(ai: pd.Series, ridge: float | None) -> pd.Series:
    if not ridge:
        return pd.Series([None] * len(ai), index=ai.index, dtype=object)
    return pd.Series(np.where(ai.isna(), None, np.where(ai < ridge, "memory", "compute")), index=ai.index, dtype=object)


def step_meta(meta: dict) -> pd.DataFrame:
    """The `steps` metadata (batch, new tokens, context per step) as a frame keyed by phase/step."""
    steps = meta.get("steps") or []
    rows = []
    for s in steps:
        if not isinstance(s, dict):
            continue
        rows.append({"phase": s.get("phase"), "step": s.get("index", s.get("step")), "batch": s.get("batch"),
                     "new_tokens": s.get("new_tokens"), "tokens": s.get("tokens", s.get("new_tokens")),
                     "context": s.get("context")})
    cols = ["phase", "step", "batch", "new_tokens", "tokens", "context"]
    frame = pd.DataFrame(rows, columns=cols)
    for c in cols[1:]:
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
    return frame.drop_duplicates(["phase", "step"])


def labelled(timed: pd.DataFrame) -> pd.DataFrame:
    """Timed rows with a phase label (NO_PHASE where no phase range encloses them)."""
    phase = timed["phase"].astype(object).where(timed["phase"].notna(), NO_PHASE)
    return timed.assign(phase=phase)


def step_table(timed: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None, ridge=None) -> pd.DataFrame:
    """One row per (rank,) phase, step. Rows without a step number are left out."""
    rows = labelled(timed)
    rows = rows[rows["step"].notna()]
    keys = (["rank"] if "rank" in rows.columns and rows["rank"].notna().any() else []) + ["phase", "step"]
    if rows.empty:
        return pd.DataFrame(columns=keys + ["kernels", "span_ns", "busy_ns", "idle_ns", "mbu", "mfu"])
    out = _group_stats(rows, keys)
    out = _rates(out, peak_flops, peak_bw).reset_index()
    out["step"] = out["step"].astype("int64")
    sm = step_meta(meta)
    out = out.merge(sm, on=["phase", "step"], how="left") if not sm.empty else out.assign(
        batch=np.nan, new_tokens=np.nan, tokens=np.nan, context=np.nan)
    out["tokens_per_s"] = out["new_tokens"] / (out["span_ns"].where(out["span_ns"] > 0) / 1e9)
    out["model_mbu"] = model_mbu(out, meta, peak_bw)
    out["bound"] = _bound(out["ai"], ridge)
    return out.sort_values(keys[:-2] + ["start_ns"], kind="stable").reset_index(drop=True)


def model_mbu(steps: pd.DataFrame, meta: dict, peak_bw) -> pd.Series:
    """Databricks MBU per decode step: (parameter bytes + KV bytes read) / span / peak bandwidth."""
    cfg = ModelConfig.from_meta(meta.get("model"))
    nan = pd.Series(np.nan, index=steps.index)
    if cfg is None or not peak_bw or steps.empty:
        return nan
    dtype = (meta.get("model") or {}).get("dtype") or (meta.get("workload") or {}).get("dtype") or "bf16"
    kv_dtype = (meta.get("workload") or {}).get("kv_dtype") or dtype
    weights = cfg.decode_weight_bytes(dtype)
    kv = steps["batch"] * steps["context"] * cfg.kv_bytes_per_token(kv_dtype)
    span_s = steps["span_ns"].where(steps["span_ns"] > 0) / 1e9
    val = (weights + kv) / span_s / peak_bw
    return val.where(steps["phase"] == "decode")


def phase_table(timed: pd.DataFrame, steps: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None,
                ridge=None) -> pd.DataFrame:
    """One row per phase. Span and busy are summed over the phase's steps (time between steps —
    sampling, host work — is not the phase's); a phase without step numbers is one step."""
    rows = labelled(timed)
    if rows.empty:
        return pd.DataFrame(columns=["phase", "steps", "kernels", "span_ns", "busy_ns", "mbu", "mfu"])
    rows = rows.assign(_step=rows["step"].astype("float64").fillna(-1))
    if "rank" in rows.columns and rows["rank"].notna().any():
        # Multi-rank: the phase table is rank 0's (or the lowest rank's); per-rank tables are separate.
        rows = rows[rows["rank"] == rows["rank"].min()]
    per_step = _group_stats(rows, ["phase", "_step"]).reset_index()
    work = work_columns(rows)
    g = per_step.groupby("phase", sort=False)
    out = pd.DataFrame({
        "steps": g.size(),
        "kernels": g["kernels"].sum(),
        "span_ns": g["span_ns"].sum(),
        "busy_ns": g["busy_ns"].sum(),
        "kernel_ns": g["kernel_ns"].sum(),
        "flops": g["flops"].sum(min_count=1),
        "bytes": g["bytes"].sum(min_count=1),
        "first_ns": g["start_ns"].min(),
    })
    src = pd.concat([rows[["phase"]], work], axis=1)
    out["bytes_source"] = _combine_sources(src["bytes_src"], ["phase"], src)
    out["flops_source"] = _combine_sources(src["flops_src"], ["phase"], src)
    known = rows["dur_ns"].where(work["bytes"].notna(), 0).groupby(rows["phase"], sort=False).sum()
    out["bytes_coverage"] = known / out["kernel_ns"].where(out["kernel_ns"] > 0)
    out["idle_ns"] = (out["span_ns"] - out["busy_ns"]).clip(lower=0)
    out["idle_frac"] = out["idle_ns"] / out["span_ns"].where(out["span_ns"] > 0)
    out = _rates(out, peak_flops, peak_bw)
    # Tokens: from step metadata where the steps carry it.
    if not steps.empty and "tokens" in steps:
        tok = steps.groupby("phase")["tokens"].sum(min_count=1)
        out["tokens"] = tok.reindex(out.index)
    else:
        out["tokens"] = np.nan
    out["tokens_per_s"] = out["tokens"] / (out["span_ns"].where(out["span_ns"] > 0) / 1e9)
    if not steps.empty and "model_mbu" in steps:
        # Span-weighted mean of the per-step model MBU = total model bytes / total span / peak.
        w = steps.dropna(subset=["model_mbu"])
        mm = (w["model_mbu"] * w["span_ns"]).groupby(w["phase"]).sum() / w.groupby("phase")["span_ns"].sum()
        out["model_mbu"] = mm.reindex(out.index)
    else:
        out["model_mbu"] = np.nan
    out["bound"] = _bound(out["ai"], ridge)
    out = out.sort_values("first_ns").drop(columns=["first_ns"])
    return out.reset_index().rename(columns={"index": "phase"})


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


def dtype_of(meta: dict) -> str:
    return str((meta.get("model") or {}).get("dtype") or (meta.get("workload") or {}).get("dtype") or "bf16")


def elem_bytes(meta: dict) -> int:
    return dtype_bytes(dtype_of(meta))


def both_utilizations(phases: pd.DataFrame, peaks) -> pd.DataFrame:
    """MBU and MFU against the datasheet and against the measured (calibrated) ceilings, side by
    side: "% of datasheet" says how far from the spec, "% of measured" how far from what this GPU
    can really do. A column is null where that ceiling is unknown."""
    if phases.empty:
        return phases
    span_s = phases["span_ns"].astype("float64").where(phases["span_ns"] > 0) / 1e9
    bw = phases["bytes"].astype("float64") / span_s
    fl = phases["flops"].astype("float64") / span_s
    for name, value, peak in (("mbu_datasheet", bw, peaks.datasheet_bw), ("mbu_measured", bw, peaks.measured_bw),
                              ("mfu_datasheet", fl, peaks.datasheet_flops), ("mfu_measured", fl, peaks.measured_flops)):
        phases[name] = value / peak if peak else np.nan
    return phases
