"""Two multi-rank runs (directories of ranks) compared rank by rank, naming the rank that drives the total.

A step of a multi-rank run ends when its slowest rank does (the straggler): the run's step time is
the maximum over ranks. So per phase and rank: the rank's mean step span in A and in B and the
change; per step, which rank was the straggler. The rank driving the total is the one most often the
straggler on the slower side (B when B is slower, A when B is faster: the rank whose slowness the
faster run lost); ties go to the larger |change| of its own step time. Phases without steps compare
each rank's phase span instead (one unit of work per rank, no straggler count).
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def _per_rank(steps: pd.DataFrame, phase: str) -> pd.DataFrame:
    s = steps[(steps["phase"].astype(object) == phase) & steps["span_ns"].notna()]
    return s[["rank", "step", "span_ns"]].astype({"span_ns": "float64"})


def rank_table(a, b) -> pd.DataFrame | None:
    """Per phase and rank (in both runs): a_ns, b_ns (mean step span, or phase span without steps),
    change, and straggler_a / straggler_b (the steps of that side where the rank was the slowest).
    None unless both runs hold several ranks."""
    if len(a.trace.ranks) < 2 or len(b.trace.ranks) < 2:
        return None
    frames = []
    phases = [p for p in dict.fromkeys(list(a.phases["phase"].astype(object)) + list(b.phases["phase"].astype(object)))]
    for phase in phases:
        sa = _per_rank(a.steps, phase) if "rank" in a.steps.columns else pd.DataFrame()
        sb = _per_rank(b.steps, phase) if "rank" in b.steps.columns else pd.DataFrame()
        if len(sa) and len(sb):
            out = pd.DataFrame({"a_ns": sa.groupby("rank")["span_ns"].mean(), "b_ns": sb.groupby("rank")["span_ns"].mean()})
            for side, s in (("a", sa), ("b", sb)):
                slowest = s.loc[s.groupby("step")["span_ns"].idxmax().to_numpy(), "rank"]
                out[f"straggler_{side}"] = slowest.value_counts().reindex(out.index).fillna(0).astype(int)
            out["basis"] = "step"
        else:
            ra, rb = a.rank_phases, b.rank_phases
            if ra is None or rb is None:
                continue
            pa_ = ra[ra["phase"].astype(object) == phase].set_index("rank")["span_ns"]
            pb = rb[rb["phase"].astype(object) == phase].set_index("rank")["span_ns"]
            out = pd.DataFrame({"a_ns": pa_.astype("float64"), "b_ns": pb.astype("float64")})
            out["straggler_a"] = (out["a_ns"] == out["a_ns"].max()).astype(int)
            out["straggler_b"] = (out["b_ns"] == out["b_ns"].max()).astype(int)
            out["basis"] = "span"
        out["change"] = out["b_ns"] / out["a_ns"].where(out["a_ns"] > 0) - 1
        frames.append(out.reset_index().rename(columns={"index": "rank"}).assign(phase=phase))
    if not frames:
        return None
    t = pd.concat(frames, ignore_index=True)
    return t[["phase", "rank", "basis", "a_ns", "b_ns", "change", "straggler_a", "straggler_b"]]


def driving_ranks(table: pd.DataFrame | None, phase_change: dict[str, float | None]) -> list[dict]:
    """Per phase, the rank that drives the total (see the module docstring): phase, rank, its
    straggler count on the side that decides and that side's step count, its own change."""
    if table is None:
        return []
    out = []
    for phase, t in table.groupby("phase", sort=False):
        t = t.dropna(subset=["a_ns", "b_ns"])
        if t.empty:
            continue
        change = phase_change.get(phase)
        side = "a" if change is not None and change < 0 else "b"
        col = f"straggler_{side}"
        order = np.lexsort((-t["change"].abs().fillna(0).to_numpy(), -t[col].to_numpy()))
        top = t.iloc[order[0]]
        out.append({"phase": phase, "rank": int(top["rank"]), "side": side.upper(), "straggler_steps": int(top[col]),
                    "steps": int(t[col].sum()), "a_ns": float(top["a_ns"]), "b_ns": float(top["b_ns"]),
                    "change": None if pd.isna(top["change"]) else float(top["change"]), "basis": top["basis"]})
    return out
