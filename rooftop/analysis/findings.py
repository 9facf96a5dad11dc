"""The diagnosis in plain words, each finding with the numbers it rests on."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..format import fmt_ns, fmt_pct
from .attention import Verdict
from .stalls import STALL_MEANING, top_reason

MBU_HEALTHY = 0.60   # Databricks reports 55-60% MBU at batch 1 with TensorRT-LLM
MBU_FAR = 0.30
MFU_LOW = 0.20
GAPS_NOTE = 0.10
GAPS_BOUND = 0.30


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # "info" | "warn" | "bad"
    title: str
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def _get(row: pd.Series, key: str):
    v = row.get(key)
    return None if v is None or (isinstance(v, float) and v != v) else v


def phase_findings(phases: pd.DataFrame, peaks, meta: dict, verdicts: list[Verdict],
                   stalls: pd.DataFrame | None, modeled: bool) -> list[Finding]:
    out: list[Finding] = []
    if modeled:
        out.append(Finding("modeled", "info", "MODELED trace: analytic roofline times, not a measurement",
                           "Every kernel runs exactly at its roofline time; use it as the ideal to compare a measured run against."))
    if peaks.flops is None and peaks.bw is None:
        out.append(Finding("no-peaks", "info", "MBU and MFU are unknown for this run",
                           peaks.reason or "no peak bandwidth / FLOP rate for this device"))
    graphs = bool((meta.get("workload") or {}).get("cuda_graphs"))
    for _, row in phases.iterrows():
        ph = row["phase"]
        mbu, mfu, idle = _get(row, "mbu"), _get(row, "mfu"), _get(row, "idle_frac")
        bound = _get(row, "bound")
        src = _get(row, "bytes_source") or "unknown"
        where = f"bytes: {src}; peaks: {peaks.source or 'none'}"
        if bound == "memory" and mbu is not None:
            if mbu >= MBU_HEALTHY:
                verdict, sev = "healthy", "info"
            elif mbu >= MBU_FAR:
                verdict, sev = "room to improve", "warn"
            else:
                verdict, sev = "far from the roof", "bad"
            out.append(Finding(f"{ph}-mbu", sev,
                               f"{ph} is memory-bound and running at {fmt_pct(mbu)} MBU ({verdict})",
                               f"arithmetic intensity {row['ai']:.3g} FLOP/B is left of the ridge "
                               f"({peaks.flops / peaks.bw:.0f} FLOP/B); achieved {row['tbps']:.3g} TB/s; {where}"))
            if mfu is not None and mfu < MFU_LOW and (idle is None or idle < GAPS_BOUND):
                out.append(Finding(f"{ph}-mfu-gauge", "info",
                                   f"MFU is the wrong gauge for {ph}: {fmt_pct(mfu)} MFU is low because the phase is memory-bound, not because the GPU is idle",
                                   f"the GPU is busy {fmt_pct(1 - (idle or 0))} of the span; judge {ph} by MBU ({fmt_pct(mbu)})."))
        elif bound == "compute" and mfu is not None:
            sev = "info" if mfu >= 0.4 else "warn"
            out.append(Finding(f"{ph}-mfu", sev, f"{ph} is compute-bound and running at {fmt_pct(mfu)} MFU",
                               f"arithmetic intensity {row['ai']:.3g} FLOP/B is right of the ridge; achieved {row['tflops']:.3g} TFLOP/s; {where}"))
        if idle is not None and idle >= GAPS_NOTE:
            if idle >= GAPS_BOUND and ph == "decode" and not graphs:
                out.append(Finding(f"{ph}-launch-bound", "bad",
                                   f"launch-bound: {fmt_pct(idle, 0)} of each {ph} step is launch gaps; use CUDA graphs",
                                   f"{fmt_ns(row['idle_ns'])} of {fmt_ns(row['span_ns'])} the GPU waits between kernels; "
                                   "capture the decode step in a CUDA graph (torch.compile mode='reduce-overhead' or --cuda-graphs)."))
            else:
                what = f"each {ph} step" if ph in ("prefill", "decode") else f"the {ph}"
                out.append(Finding(f"{ph}-gaps", "warn" if idle >= GAPS_BOUND else "info",
                                   f"{fmt_pct(idle, 0)} of {what} is launch gaps (GPU idle between kernels)",
                                   f"{fmt_ns(row['idle_ns'])} idle of {fmt_ns(row['span_ns'])} span"))
    for v in verdicts:
        if v.verdict == "unknown":
            continue
        sev = {"fused": "info", "materialized": "bad", "mixed": "warn"}[v.verdict]
        title = {"fused": f"{v.phase} attention is fused (FlashAttention-like)",
                 "materialized": f"{v.phase} attention is materialized: the S x S scores go through HBM",
                 "mixed": f"{v.phase} attention is partly fused, partly materialized"}[v.verdict]
        if not v.confirmed:
            sev = "warn"
            title = f"{v.phase} attention looks materialized (separate softmax and batched GEMMs, no fused kernel)"
        out.append(Finding(f"{v.phase}-attention", sev, title, v.evidence))
    if stalls is not None:
        for ph, shares in stalls.iterrows():
            top = top_reason(shares)
            if top:
                reason, share = top
                out.append(Finding(f"{ph}-stall", "info", f"{ph}: warps mostly stall on {reason} ({fmt_pct(share, 0)} of cycles)",
                                   STALL_MEANING.get(reason, reason)))
    return out
