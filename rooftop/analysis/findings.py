"""The diagnosis in plain words, each finding with the numbers it rests on.

Every finding says what it rests on (`evidence`) and what share of the kernel time that evidence
covers (`coverage`, 0..1, None where the share is not a kernel-time share). A phase MBU/MFU from
per-kernel costs is a verdict only where its coverage is at least `VERDICT_COVERAGE`; below that
it is stated as a lower bound with its coverage, never as "far from the roof". A modeled trace is
the ideal: its findings say what the ideal is (which roof each kernel sits on, which kernels sit on
the launch floor) and never tell it to improve.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from rooftop.present.format import fmt_bytes, fmt_ns, fmt_pct
from rooftop.analysis.ideal_time import LAUNCH_FLOOR_NS, kernel_bound
from rooftop.trace.steps import OUTSIDE_STEPS
from rooftop.analysis.attention import Verdict
from rooftop.analysis.rates import MIN_COVERAGE, VERDICT_COVERAGE
from rooftop.analysis.stalls import STALL_MEANING, top_reason

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
    evidence: str | None = None     # what the finding rests on, in words
    coverage: float | None = None   # share of the kernel time that evidence covers, 0..1

    def to_dict(self) -> dict:
        return asdict(self)


def _get(row: pd.Series, key: str):
    v = row.get(key)
    return None if v is None or (isinstance(v, float) and v != v) else v


def _cov(x) -> float | None:
    return None if x is None else float(x)


def phase_findings(phases: pd.DataFrame, peaks, meta: dict, verdicts: list[Verdict],
                   stalls: pd.DataFrame | None, modeled: bool, timed: pd.DataFrame | None = None,
                   idle: pd.DataFrame | None = None) -> list[Finding]:
    """`idle`: the idle time by cause per phase (`idle.per_phase`, one rank's devices summed), which
    takes edge idle out of the launch gaps and names what the gaps waited for."""
    out: list[Finding] = []
    if modeled:
        out.append(Finding("modeled", "info", "MODELED trace: analytic roofline times, not a measurement",
                           "Every kernel runs exactly at its roofline time, max(bytes / peak bandwidth, FLOPs / peak "
                           f"FLOP/s), or at the {fmt_ns(LAUNCH_FLOOR_NS)} launch floor when that is longer; it is the "
                           "ideal to compare a measured run against.",
                           "rooftop predict: each kernel's model FLOPs and bytes at the datasheet peaks", 1.0))
    if peaks.flops is None and peaks.bw is None:
        out.append(Finding("no-peaks", "info", "MBU and MFU are unknown for this run",
                           peaks.reason or "no peak bandwidth / FLOP rate for this device",
                           "the trace's device name against rooftop's spec table; no calibration in the trace"))
    graphs = bool((meta.get("workload") or {}).get("cuda_graphs"))
    for _, row in phases.iterrows():
        if modeled:
            out += _ideal_findings(row, peaks, timed)
        else:
            out += _utilization_findings(row, peaks)
        causes = None
        if idle is not None and not idle.empty:
            hit = idle[idle["phase"] == row["phase"]]
            causes = hit.iloc[0] if len(hit) else None
        out += _gap_findings(row, graphs, modeled, causes)
    for v in verdicts:
        if v.verdict == "unknown":
            continue
        out.append(_attention_finding(v, timed))
    if stalls is not None:
        for ph, shares in stalls.iterrows():
            top = top_reason(shares)
            if top:
                reason, share = top
                out.append(Finding(f"{ph}-stall", "info", f"{ph}: warps mostly stall on {reason} ({fmt_pct(share, 0)} of cycles)",
                                   STALL_MEANING.get(reason, reason),
                                   "warp-state counters (Nsight Compute), duration-weighted over the kernels that have them",
                                   _counter_coverage(timed, ph)))
    return out


def _attention_finding(v: Verdict, timed: pd.DataFrame) -> Finding:
    """The attention verdict in words: how many calls, which way, and what backs it ("by name"
    where neither bytes nor op shapes do)."""
    sev = {"fused": "info", "materialized": "bad", "mixed": "warn"}[v.verdict]
    calls = f" ({v.calls} call{'s' if v.calls != 1 else ''})" if v.calls else ""
    title = {"fused": f"{v.phase} attention is fused (FlashAttention-like){calls}",
             "materialized": f"{v.phase} attention is materialized{calls}: the S x S scores go through HBM",
             "mixed": f"{v.phase} attention is partly fused, partly materialized{calls}"}[v.verdict]
    backed = {"bytes": "from DRAM bytes", "shapes": "from op shapes"}
    if v.confirmed:
        title += f", {backed.get(v.evidence_kind, v.evidence_kind)}"
    elif v.evidence_kind == "model":
        title += ", modeled"  # the analytic model's own kernels and bytes: a prediction, not a proof
    else:
        sev = "warn" if sev == "bad" else sev
        looks = {"fused": f"{v.phase} attention looks fused (FlashAttention-like kernels){calls}",
                 "materialized": f"{v.phase} attention looks materialized (batched GEMM, softmax, batched GEMM){calls}",
                 "mixed": f"{v.phase} attention looks partly fused, partly materialized{calls}"}[v.verdict]
        title = looks + (", by name and kernel order" if v.evidence_kind == "structure" else ", by name")
    basis = {"bytes": f"attention bytes ({v.bytes_source or 'measured'}) against the S x S scores or the IO minimum",
             "shapes": "op shapes of the two batched GEMMs (Q K^T and P V do the same FLOPs)",
             "model": "the analytic model's bytes against the IO minimum (modeled trace)",
             "structure": "kernel order on the stream and launch grids; kernel names",
             "names": "kernel names alone"}[v.evidence_kind]
    return Finding(f"{v.phase}-attention", sev, title, v.evidence,
                   f"{v.calls or 0} attention calls: {v.fused_kernels} fused and {v.softmax_kernels} softmax kernels; "
                   f"{basis}", _phase_share(timed, v.phase, v.attn_ns))


def _utilization_findings(row: pd.Series, peaks) -> list[Finding]:
    """MBU/MFU of a measured phase: a verdict where the costed kernels cover at least half the
    kernel time, a lower bound with its coverage below that, and only the coverage below MIN_COVERAGE."""
    ph = row["phase"]
    mbu, mfu, idle = _get(row, "mbu"), _get(row, "mfu"), _get(row, "idle_frac")
    bound = _get(row, "bound")
    cov_b, cov_f = _get(row, "bytes_coverage"), _get(row, "flops_coverage")
    src = _get(row, "bytes_source") or "unknown"
    where = f"bytes: {src}; peaks: {peaks.source or 'none'}"
    n = _get(row, "kernels")
    evidence_b = (f"{fmt_bytes(_get(row, 'bytes'))} ({src}) over the {fmt_ns(row['span_ns'])} span of "
                  f"{int(n) if n is not None else '?'} kernels")
    evidence_f = f"{_get(row, 'flops') or 0:.3g} FLOPs ({_get(row, 'flops_source') or 'unknown'}) over the {fmt_ns(row['span_ns'])} span"
    out: list[Finding] = []
    if cov_b is not None and cov_b < VERDICT_COVERAGE and peaks.bw:
        known = (f"bytes known for {fmt_pct(cov_b, 0 if cov_b >= 0.1 else 1)} of kernel time" if cov_b > 0
                 else "no kernel has per-kernel bytes")
        if mbu is not None and cov_b >= MIN_COVERAGE:
            out.append(Finding(f"{ph}-mbu", "info", f"{ph}: >= {fmt_pct(mbu)} MBU ({known})",
                               "a lower bound, not a verdict: kernels without per-kernel bytes (CUDA-graph replays, "
                               "custom kernels, ops recorded without shapes) count as moving nothing; "
                               "the model-level MBU (a model config) needs no per-kernel bytes",
                               evidence_b, _cov(cov_b)))
        elif ph not in OUTSIDE_STEPS:  # work between or around steps: its unknown MBU is noise, not a finding
            out.append(Finding(f"{ph}-mbu", "info", f"{ph}: MBU unknown ({known})",
                               "too few kernels have per-kernel bytes to bound the bandwidth; the model-level MBU "
                               "(a model config) needs no per-kernel bytes", evidence_b, _cov(cov_b)))
        return out
    if bound == "memory" and mbu is not None and _get(row, "mbu_status") in (None, "verdict"):
        if mbu >= MBU_HEALTHY:
            verdict, sev = "healthy", "info"
        elif mbu >= MBU_FAR:
            verdict, sev = "room to improve", "warn"
        else:
            verdict, sev = "far from the roof", "bad"
        partial = "" if cov_b is None or cov_b >= 0.995 else f"; bytes known for {fmt_pct(cov_b, 0)} of kernel time (a lower bound)"
        out.append(Finding(f"{ph}-mbu", sev,
                           f"{ph} is memory-bound and running at {fmt_pct(mbu)} MBU ({verdict})",
                           f"{_mix_words(row)}; achieved {row['tbps']:.3g} TB/s; {where}{partial}",
                           evidence_b, _cov(cov_b)))
        if mfu is not None and mfu < MFU_LOW and (idle is None or idle < GAPS_BOUND):
            out.append(Finding(f"{ph}-mfu-gauge", "info",
                               f"MFU is the wrong gauge for {ph}: {fmt_pct(mfu)} MFU is low because the phase is memory-bound, not because the GPU is idle",
                               f"the GPU is busy {fmt_pct(1 - (idle or 0))} of the span; judge {ph} by MBU ({fmt_pct(mbu)}).",
                               "arithmetic intensity left of the ridge; busy time from the kernel intervals",
                               _cov(_get(row, "ai_coverage"))))
    elif bound == "compute" and mfu is not None and _get(row, "mfu_status") in (None, "verdict"):
        sev = "info" if mfu >= 0.4 else "warn"
        out.append(Finding(f"{ph}-mfu", sev, f"{ph} is compute-bound and running at {fmt_pct(mfu)} MFU",
                           f"{_mix_words(row)}; achieved {row['tflops']:.3g} TFLOP/s (each kernel's FLOPs against "
                           f"its own dtype's peak); {where}",
                           evidence_f, _cov(cov_f)))
    elif bound == "latency":
        out.append(Finding(f"{ph}-latency-bound", "warn", f"{ph} is latency-bound: {_mix_words(row)}",
                           "its kernels are short (< 5 us) and far under both roofs (< 10% of the rate their AI allows): "
                           "launch and scheduling latency, not bandwidth or FLOPs, sets their time; fuse kernels, "
                           "raise the batch, or replay them as CUDA graphs",
                           "per-kernel duration and ideal time against each kernel's own roof", _cov(_get(row, "ai_coverage"))))
    elif bound == "mixed":
        out.append(Finding(f"{ph}-bound-mix", "info", f"{ph} has no single bound: {_mix_words(row)}",
                           "each kernel is judged against the ridge of its own compute dtype; no bound holds for "
                           "two thirds of the judged time, so neither MBU nor MFU alone describes the phase",
                           "per-kernel AI against each kernel's own ridge, weighted by time", _cov(_get(row, "ai_coverage"))))
    return out


def _mix_words(row: pd.Series) -> str:
    """The phase's bound mix in words (bounds.mix_text), or its AI where no mix was computed."""
    mix = row.get("bound_mix") if hasattr(row, "get") else None
    if isinstance(mix, dict) and mix.get("text"):
        return str(mix["text"])
    ai = _get(row, "ai")
    return f"arithmetic intensity {ai:.3g} FLOP/B" if ai is not None else "arithmetic intensity unknown"


def _gap_findings(row: pd.Series, graphs: bool, modeled: bool = False, causes: pd.Series | None = None) -> list[Finding]:
    """Launch gaps: the idle between kernels of the work. Idle before the first and after the last
    kernel (a lone late copy, a capture's tail) is edge idle, said apart and never launch-bound."""
    ph, idle = row["phase"], _get(row, "idle_frac")
    out: list[Finding] = []
    if causes is not None and idle is not None and not modeled:
        edge = min(float(causes["edge_ns"]), float(row["idle_ns"]))
        span = float(row["span_ns"])
        if span > 0 and edge / span >= GAPS_NOTE:
            out.append(Finding(f"{ph}-edge-idle", "info",
                               f"{fmt_pct(edge / span, 0)} of the {ph} is edge idle: before its first or after its last kernel",
                               f"{fmt_ns(edge)} of {fmt_ns(span)} the GPU had not begun or had finished the work (a lone "
                               "late copy, the tail of the capture window); not launch gaps",
                               "idle stretches outside the first-to-last compute kernel of each step", 1.0))
        row = row.copy()
        row["idle_ns"] = float(row["idle_ns"]) - edge
        idle = row["idle_ns"] / span if span > 0 else None
        row["idle_frac"] = idle
    if idle is None or idle < GAPS_NOTE:
        return out
    return out + _launch_gap_findings(row, graphs, modeled, idle, causes)


def _why_idle(causes: pd.Series | None) -> str:
    """What the launch gaps waited for, largest first: ` Of the gaps: host-bound 60%, sync 20%.`"""
    if causes is None:
        return ""
    names = {"host": "host-bound (framework/Python work before the launch)", "sync": "synchronisation",
             "launch": "launch floor", "other": "queued behind other work"}
    parts = {c: float(causes[f"{c}_ns"]) for c in names}
    total = sum(parts.values())
    if total <= 0:
        return ""
    words = [f"{names[c]} {fmt_pct(v / total, 0)}" for c, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v > 0]
    return " Of the gaps: " + ", ".join(words[:3]) + "."


def _launch_gap_findings(row: pd.Series, graphs: bool, modeled: bool, idle: float, causes) -> list[Finding]:
    ph = row["phase"]
    steps = _get(row, "steps")
    evidence = (f"span minus the union of kernel intervals, over {int(steps)} step(s)" if steps
                else "span minus the union of kernel intervals (no step ranges: the whole phase is one span)")
    if modeled:  # the ideal's own gaps are part of what was modeled, not advice
        return [Finding(f"{ph}-gaps", "info", f"the {ph} ideal includes {fmt_pct(idle, 0)} idle time between kernels",
                        f"{fmt_ns(row['idle_ns'])} idle of {fmt_ns(row['span_ns'])} span, as modeled", evidence, 1.0)]
    if idle >= GAPS_BOUND and ph == "decode" and not graphs:
        return [Finding(f"{ph}-launch-bound", "bad",
                        f"launch-bound: {fmt_pct(idle, 0)} of each {ph} step is launch gaps; use CUDA graphs",
                        f"{fmt_ns(row['idle_ns'])} of {fmt_ns(row['span_ns'])} the GPU waits between kernels; "
                        "capture the decode step in a CUDA graph (torch.compile mode='reduce-overhead' or --cuda-graphs)."
                        + _why_idle(causes),
                        evidence, 1.0)]
    what = f"each {ph} step" if ph in ("prefill", "decode") and steps else f"the {ph}"
    return [Finding(f"{ph}-gaps", "warn" if idle >= GAPS_BOUND else "info",
                    f"{fmt_pct(idle, 0)} of {what} is launch gaps (GPU idle between kernels)",
                    f"{fmt_ns(row['idle_ns'])} idle of {fmt_ns(row['span_ns'])} span." + _why_idle(causes), evidence, 1.0)]


def _ideal_findings(row: pd.Series, peaks, timed: pd.DataFrame | None) -> list[Finding]:
    """What the ideal of a modeled phase is: its MBU/MFU at the roofline and which kernels sit on
    the launch floor instead of a roof (the only reason an ideal decode is under 100% MBU)."""
    ph = row["phase"]
    mbu, mfu, bound = _get(row, "mbu"), _get(row, "mfu"), _get(row, "bound")
    if mbu is None and mfu is None:
        return []
    headline = (f"{fmt_pct(mbu)} MBU" if bound != "compute" else f"{fmt_pct(mfu)} MFU")
    where = "no single bound" if bound == "mixed" else f"{bound}-bound"
    title = f"{ph} ideal: {headline}" + (f" ({where} at the roofline)" if bound else "")
    roofs = _roof_split(timed, ph, peaks)
    if roofs is None:
        detail, cov = "every kernel at its roofline time", None
    else:
        shares, n, total, names, cov = roofs
        split = ", ".join(f"{label} {fmt_pct(shares[key], 0)}" for key, label in
                          (("memory", "memory roof"), ("compute", "compute roof"), ("launch", "launch floor"))
                          if shares.get(key))
        detail = f"time by what sets each kernel's ideal: {split}. "
        if n:
            detail += (f"{n} of {total} kernels sit on the {fmt_ns(LAUNCH_FLOOR_NS)} launch floor, longer than "
                       f"their roofline time ({', '.join(names)}); every other kernel runs exactly at its roof")
        else:
            detail += "No kernel sits on the launch floor: every kernel runs exactly at its roof"
    idn = f"{ph}-mfu" if bound == "compute" else f"{ph}-mbu"
    return [Finding(idn, "info", title, detail, "each kernel's model FLOPs and bytes against the peaks", cov)]


def _roof_split(timed: pd.DataFrame | None, ph: str, peaks):
    """({roof: share of the phase's time}, kernels on the launch floor, kernels, up to 3 names of
    floor kernels by time, share of the time whose roof is known)."""
    if timed is None or "phase" not in timed or not peaks.flops or not peaks.bw:
        return None
    rows = timed[timed["phase"] == ph]
    dur = rows["dur_ns"].to_numpy(dtype="float64")
    if rows.empty or dur.sum() <= 0:
        return None
    b = kernel_bound(rows["model_flops"].astype("float64"), rows["model_bytes"].astype("float64"),
                     peaks.flops, peaks.bw).to_numpy(dtype=object)
    shares = {key: float(dur[b == key].sum() / dur.sum()) for key in ("memory", "compute", "launch")}
    on = b == "launch"
    col = "short_name" if "short_name" in rows else "name"
    names = rows.loc[on].groupby(col, sort=False)["dur_ns"].sum().sort_values(ascending=False).head(3).index
    return shares, int(on.sum()), len(rows), [str(x) for x in names], sum(shares.values())


def _phase_share(timed: pd.DataFrame | None, ph: str, ns) -> float | None:
    if timed is None or ns is None or "phase" not in timed:
        return None
    total = float(timed.loc[timed["phase"] == ph, "dur_ns"].sum())
    return float(ns) / total if total > 0 else None


def _counter_coverage(timed: pd.DataFrame | None, ph) -> float | None:
    if timed is None or "counters" not in timed or "phase" not in timed:
        return None
    rows = timed[timed["phase"] == ph]
    dur = rows["dur_ns"].to_numpy(dtype="float64")
    has = rows["counters"].fillna(False).to_numpy(dtype=bool)
    return float(dur[has].sum() / dur.sum()) if dur.sum() > 0 else None


ABOVE_ROOF = 1.2  # 20% over the datasheet roof: beyond boost-clock and timer slack, the costs are wrong


def above_roof_findings(groups: pd.DataFrame, peaks) -> list[Finding]:
    """Kernel groups that ran faster than the roof allows. Physics does not bend: their bytes are
    not all HBM traffic of this GPU (L2-resident data, host memory), their FLOPs count work that
    was skipped, or the device or its peaks are wrong. Said once, with the worst group, rather
    than shown silently as "1000% of roof"."""
    if groups is None or groups.empty or "pct_of_roof" not in groups:
        return []
    pct = pd.to_numeric(groups["pct_of_roof"], errors="coerce")
    over = groups[pct > ABOVE_ROOF]
    if over.empty:
        return []
    worst = over.loc[pd.to_numeric(over["pct_of_roof"]).idxmax()]
    n = len(over)
    share = pd.to_numeric(over.get("time_share"), errors="coerce").sum() if "time_share" in over else None
    title = (f"{n} kernel group{'s' if n > 1 else ''} ran above the roof: "
             f"{'their' if n > 1 else 'its'} bytes or FLOPs are not what ran")
    detail = (f"{worst['key']} at {fmt_pct(worst['pct_of_roof'], 0)} of the {peaks.source or ''} roof. Faster than "
              "the device allows: the bytes are not all HBM traffic (data resident in L2, host memory), the FLOPs "
              "count skipped work, or the device or its peaks are wrong (--gpu, --peaks). Its % of roof, AI "
              "and bound are not evidence.")
    evidence = f"achieved rate from {worst.get('bytes_source') or 'unknown'} bytes over the launches' time"
    return [Finding("above-roof", "warn", title, detail, evidence, float(share) if share == share else None)]


COPY_BOUND = 0.25    # host copies busy a quarter of a device's span: the run waits on its link
COMM_EXPOSED = 0.05  # exposed communication worth a word: 5% of the span


def _where(r) -> str:
    rank, dev = int(r["rank"]), int(r["device"])
    return (f"rank {rank} " if rank >= 0 else "") + (f"GPU {dev}" if dev >= 0 else "the GPU")


def copy_findings(copies: pd.DataFrame | None) -> list[Finding]:
    """A copy-bound finding where host/peer copies keep a device busy for at least COPY_BOUND of
    its span: their share of the time and their rate against the link (never against HBM)."""
    if copies is None or copies.empty:
        return []
    allr = copies[copies["direction"] == "all"].sort_values("share", ascending=False, kind="stable")
    bound = allr[allr["share"] >= COPY_BOUND]
    if bound.empty:
        return []
    r = bound.iloc[0]
    others = len(bound) - 1
    dirs = copies[(copies["rank"] == r["rank"]) & (copies["device"] == r["device"]) & (copies["direction"] != "all")]
    parts = []
    for d in dirs.sort_values("time_ns", ascending=False).to_dict("records"):
        rate = d.get("rate")
        link = (f", {fmt_pct(d['link_frac'], 0)} of {d['link']} ({d['link_bw'] / 1e9:.0f} GB/s per direction)"
                if d.get("link") and d.get("link_frac") == d.get("link_frac") and d.get("link_frac") is not None
                else " (link unknown for this device)")
        rate_s = f"{rate / 1e9:.3g} GB/s" if rate == rate and rate is not None else "rate unknown"
        parts.append(f"{d['direction']} {fmt_bytes(d['bytes'])} in {fmt_ns(d['time_ns'])} at {rate_s}{link}")
    title = (f"copy-bound: host/peer copies keep {_where(r)} busy {fmt_pct(r['share'], 0)} of the "
             f"{fmt_ns(r['span_ns'])} span" + (f" (and {others} other device{'s' if others > 1 else ''})" if others else ""))
    detail = ("; ".join(parts) + ". The copies run at the link's speed, not HBM's: pin host memory, overlap copies "
              "with compute on another stream, or keep the data on the GPU.")
    src = dirs["link_source"].dropna()
    evidence = "memcpy rows (direction from their names, bytes from the trace) over the device's span" + (
        f"; link: {src.iloc[0]}" if len(src) else "")
    return [Finding("copy-bound", "warn", title, detail, evidence, None)]


def comm_findings(per_device: pd.DataFrame | None, rank_steps: pd.DataFrame | None = None) -> list[Finding]:
    """Exposed communication of the worst device (comm kernel time not hidden by compute on other
    streams, `comm.Overlap`), and the straggler rank across steps where the run has ranks."""
    if per_device is None or per_device.empty:
        return []
    worst = per_device.sort_values("exposed_share", ascending=False, kind="stable").iloc[0]
    share, frac = _get(worst, "exposed_share"), _get(worst, "exposed_frac")
    if share is None or share < COMM_EXPOSED:
        return []
    title = (f"exposed communication: {fmt_pct(share, 0)} of {_where(worst)}'s time is communication "
             f"not hidden by compute")
    detail = (f"{fmt_ns(worst['exposed_ns'])} exposed of {fmt_ns(worst['comm_ns'])} communication kernel time "
              f"({fmt_pct(frac, 0)} exposed, {fmt_pct(1 - frac, 0)} overlapped by compute on other streams)")
    if rank_steps is not None and not rank_steps.empty and "straggler" in rank_steps:
        s = rank_steps["straggler"].dropna()
        if len(s):
            top = s.astype(int).value_counts()
            detail += (f"; the slowest rank is rank {top.index[0]} in {top.iloc[0]} of {len(s)} steps "
                       f"(spread up to {fmt_pct(rank_steps['spread'].max(), 0)})")
    evidence = ("interval arithmetic over the kernel rows: |comm ∪| - |comm ∩ compute| per step and device "
                "(Holistic Trace Analysis's comm/comp overlap)")
    return [Finding("comm-exposed", "warn" if share >= GAPS_BOUND / 3 else "info", title, detail, evidence, 1.0)]
