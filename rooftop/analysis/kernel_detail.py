"""One kernel group's detail: (label, value with unit, source) for each number rooftop has about it, over
the whole trace or one scope."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from rooftop.present.format import fmt_bytes, fmt_flops, fmt_ns, fmt_num, fmt_pct, fmt_rate, is_unknown
from rooftop.trace import STALL_COLUMNS
from rooftop.analysis.identity import scope_name

if TYPE_CHECKING:
    from rooftop.analysis.facade import Analysis


def kernel_detail(analysis: Analysis, key: str, by: str = "short_name", phase: str | None = None,
                  step: int | None = None, rank: int | None = None,
                  device: int | None = None) -> list[tuple[str, str, str]]:
    """`Analysis.kernel_detail`: (label, value with unit, source) for one kernel group, over the whole
    trace or one scope (a phase, a step of a phase, a rank, a device): then every number is of that
    scope's launches only."""
    rows = analysis.kernels(key=key, by=by, phase=phase, step=step, rank=rank, device=device)
    g = analysis.scoped_groups(by, phase, step, rank, device)
    grow = g[g["key"] == key]
    if rows.empty or grow.empty:
        return []
    r = grow.iloc[0]
    bsrc = r["bytes_source"] if isinstance(r["bytes_source"], str) else None
    fsrc = r.get("flops_source") if isinstance(r.get("flops_source"), str) else bsrc

    def said(v, source: str | None) -> str:
        """Where a number came from; `unknown` for a number nobody knows (never "nan")."""
        return (source or "trace") if not is_unknown(v) else "unknown"

    dtype = r.get("dtype") if isinstance(r.get("dtype"), str) else None
    peak = r.get("peak_flops", analysis.peaks.flops)
    names = rows["name"].dropna().unique()
    out = [
        ("name", names[0] if len(names) == 1 else f"{len(names)} distinct names", "trace"),
        ("category", str(r["category"]), "rooftop"),
        ("phase", _phase_split(rows), "trace"),
        ("launches", fmt_num(r["count"]), "trace"),
        ("total time", fmt_ns(r["time_ns"]), "trace"),
        ("mean time", fmt_ns(r["mean_ns"]), "trace"),
        (f"share of {scope_name(phase, step, rank) or 'all'} kernel time", fmt_pct(r["time_share"]), "trace"),
        ("FLOPs", fmt_flops(r["flops"]), said(r["flops"], fsrc)),
        ("bytes", fmt_bytes(r["bytes"]), said(r["bytes"], bsrc)),
        ("arithmetic intensity", f"{fmt_num(r['ai'])} FLOP/B" if not is_unknown(r["ai"]) else "—", said(r["ai"], bsrc)),
        ("achieved", fmt_rate(r["tflops"] * 1e12 if not is_unknown(r["tflops"]) else None, "FLOP/s"), said(r["tflops"], fsrc)),
        ("achieved bandwidth", fmt_rate(r["tbps"] * 1e12 if not is_unknown(r["tbps"]) else None, "B/s"),
         said(r["tbps"], bsrc)),
        ("% of roof", fmt_pct(r["pct_of_roof"]),
         f"{bsrc} vs {analysis.peaks.source} peaks" if not is_unknown(r["pct_of_roof"]) and analysis.peaks.source else "unknown"),
        ("compute dtype", dtype or "unknown", _dtype_evidence(rows) if dtype else "unknown"),
        ("peak", fmt_rate(None if is_unknown(peak) or not peak else peak, "FLOP/s"), analysis.peaks.source or "unknown"),
        ("bound", _bound_words(r), "rooftop"),
    ]
    first = rows.iloc[0]
    for col, label in (("grid", "grid"), ("block", "block")):
        v = first.get(col)
        if not is_unknown(v):
            out.append((label, "x".join(str(int(x)) for x in v), "trace"))
    for col, label, fmt in (("registers", "registers/thread", fmt_num), ("shared_mem", "shared memory/block", fmt_bytes)):
        v = first.get(col)
        if not is_unknown(v):
            out.append((label, fmt(v), "trace"))
    for col, label in (("sm_pct", "SM throughput"), ("dram_pct", "DRAM throughput"), ("occupancy_pct", "achieved occupancy"),
                       ("l1_hit_pct", "L1 hit rate"), ("l2_hit_pct", "L2 hit rate")):
        v = rows[col].astype("float64")
        if v.notna().any():
            w = rows["dur_ns"].astype("float64").where(v.notna())
            out.append((label, f"{(v * w).sum() / w.sum():.1f}%", "counters"))
    if rows[list(STALL_COLUMNS)].notna().any().any():
        out.append(("counters", f"{int(rows['counters'].fillna(False).sum())} of {len(rows)} launches", "counters"))
    return out


_EVIDENCE = {"counters": "instruction counters", "name": "kernel name", "op": "op input types",
             "trace": "the trace's stated dtype"}


def _dtype_evidence(rows: pd.DataFrame) -> str:
    """Where a group's compute dtype came from: the evidence behind most of its launches."""
    if "dtype_from" not in rows.columns or not rows["dtype_from"].notna().any():
        return "unknown"
    return _EVIDENCE.get(str(rows["dtype_from"].astype(object).mode().iloc[0]), "trace")


def _bound_words(r) -> str:
    """A group's bound as the analysis states it: its mix's sentence, else its name, else a dash."""
    mix = r.get("bound_mix") if hasattr(r, "get") else None
    if isinstance(mix, dict) and isinstance(mix.get("text"), str):
        return mix["text"]
    b = r.get("bound") if hasattr(r, "get") else None
    return str(b) if isinstance(b, str) and b else "—"


def _phase_split(rows: pd.DataFrame) -> str:
    """`decode` or, for a group that runs in several phases, `decode 61% · prefill 39%` (by time)."""
    t = rows.groupby(rows["phase"].astype(object), sort=False)["dur_ns"].sum().sort_values(ascending=False)
    if len(t) == 1:
        return str(t.index[0])
    return " · ".join(f"{p} {fmt_pct(v / t.sum(), 0)}" for p, v in t.items())
