"""`rooftop report`: the phase table, top kernel groups and findings, as text or one JSON object."""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .analysis import Analysis, compare
from .text import printable
from .format import fmt_bytes, fmt_ns, fmt_num, fmt_pct, fmt_rate

PHASE_KEYS = ("phase", "steps", "kernels", "span_ns", "busy_ns", "idle_ns", "idle_frac", "flops", "bytes",
              "bytes_source", "bytes_coverage", "flops_source", "tflops", "tbps", "mfu", "mbu", "model_mbu",
              "tokens", "tokens_per_s", "ai", "bound", "mbu_datasheet", "mbu_measured", "mfu_datasheet",
              "mfu_measured")
STEP_KEYS = ("rank", "phase", "step", "kernels", "start_ns", "span_ns", "busy_ns", "idle_ns", "idle_frac", "flops",
             "bytes", "bytes_source", "tflops", "tbps", "mfu", "mbu", "model_mbu", "batch", "new_tokens", "context",
             "tokens_per_s", "bound")
GROUP_KEYS = ("key", "category", "phase", "count", "time_ns", "time_share", "mean_ns", "flops", "bytes",
              "bytes_source", "ai", "tflops", "tbps", "pct_of_roof", "bound")


def _clean(v: Any) -> Any:
    """JSON-safe scalar: NaN/NA -> None, numpy -> python."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def records(df: pd.DataFrame | None, keys) -> list[dict]:
    if df is None or df.empty:
        return []
    keys = [k for k in keys if k in df.columns]
    return [{k: _clean(v) for k, v in zip(keys, row)} for row in df[keys].itertuples(index=False, name=None)]


def report_dict(a: Analysis, top: int = 10) -> dict:
    t = a.trace
    p = a.peaks
    timed = a.timed
    span = int(timed["start_ns"].add(timed["dur_ns"]).max() - timed["start_ns"].min()) if len(timed) else 0
    out = {
        "trace": {"path": t.path, "source": t.source.get("tool"), "source_detail": t.source or None,
                  "modeled": t.modeled, "incomplete": bool(t.meta.get("incomplete")), "counters": a.has_counters,
                  "model": t.meta.get("model"), "workload": t.meta.get("workload"), "ranks": t.ranks or None},
        "device": {"name": t.device_meta.get("name"), "matched": p.gpu.name if p.gpu is not None else None,
                   "peak_flops": p.flops, "peak_bw": p.bw, "peaks_source": p.source, "peaks_reason": p.reason,
                   "datasheet": {"flops": p.datasheet_flops, "bw": p.datasheet_bw},
                   "measured": {"flops": p.measured_flops, "bw": p.measured_bw},
                   "ridge": a.ridge, "dtype": p.dtype},
        "totals": {"kernels": int(len(timed)), "kernel_time_ns": int(timed["dur_ns"].sum()) if len(timed) else 0,
                   "span_ns": span, "timed_kind": str(timed["kind"].iloc[0]) if len(timed) else None},
        "phases": records(a.phases, PHASE_KEYS),
        "steps": records(a.steps, STEP_KEYS),
        "top_kernels": records(a.groups("short_name").head(top), GROUP_KEYS),
        "categories": records(a.groups("category"), GROUP_KEYS),
        "attention": [{k: _clean(v) for k, v in vars(v).items()} for v in a.attention],
        "gap": records(a.gap, ("phase", "measured_ns", "ideal_ns", "slow_kernels_ns", "extra_bytes_ns",
                              "launch_gaps_ns", "unmodeled_ns", "ideal_frac")),
        "findings": [f.to_dict() for f in a.findings],
        "warnings": list(t.warnings),
    }
    if a.rank_steps is not None:
        out["ranks"] = {"phases": records(a.rank_phases, ("rank",) + PHASE_KEYS),
                        "steps": records(a.rank_steps, ("phase", "step", "ranks", "min_ns", "median_ns", "max_ns",
                                                        "straggler", "spread"))}
    if a.has_counters:
        sh = a.stalls("phase")
        out["stalls"] = {str(ph): {k: _clean(v) for k, v in row.items()} for ph, row in sh.iterrows()} if sh is not None else None
    return out


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right if right is not None else set(range(1, len(headers)))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _printable(s: Any) -> str:
    """Trace text for a terminal: controls, bidi and invisible characters shown escaped (rooftop.text)."""
    return printable(s, missing="None")


def report_text(a: Analysis, top: int = 10) -> str:
    t = a.trace
    p = a.peaks
    ident = a.identity
    lines = []
    badge = "  [MODELED: analytic roofline times, not a measurement]" if t.modeled else ""
    lines.append(f"rooftop report: {_printable(t.path or t.label)}{badge}")
    if ident["incomplete"]:
        lines.append("  INCOMPLETE capture: the run stopped early; what was recorded is shown")
    for label, key in (("model", "model"), ("workload", "workload"), ("device", "device"), ("source", "source")):
        if ident.get(key):
            lines.append(f"  {label:9s}{_printable(ident[key])}")
    if p.flops or p.bw:
        gpu = f" {p.gpu.name}" if p.gpu is not None else ""
        lines.append(f"  peaks    {p.source}{gpu}: {fmt_rate(p.flops, 'FLOP/s')} ({p.dtype}), {fmt_rate(p.bw, 'B/s')}"
                     f", ridge {fmt_num(a.ridge)} FLOP/B")
    else:
        lines.append(f"  peaks    none: {p.reason}")
    if t.ranks:
        lines.append(f"  ranks    {len(t.ranks)} ({', '.join(map(str, t.ranks[:16]))}{'…' if len(t.ranks) > 16 else ''})")
    lines.append("")
    ph = a.phases
    if not ph.empty:
        rows = []
        for r in ph.itertuples():
            rows.append([str(r.phase), fmt_num(r.steps), fmt_num(r.kernels), fmt_ns(r.span_ns), fmt_pct(r.idle_frac, 0),
                         fmt_num(r.tokens_per_s), fmt_num(r.tflops), fmt_num(r.tbps), fmt_pct(r.mfu), fmt_pct(r.mbu),
                         fmt_pct(r.model_mbu), str(r.bound or "—"), str(r.bytes_source or "—")])
        lines.append(_table(["phase", "steps", "kernels", "time", "gaps", "tok/s", "TFLOP/s", "TB/s", "MFU", "MBU",
                             "modelMBU", "bound", "bytes"], rows, right=set(range(1, 11))))
        if p.measured_bw and p.datasheet_bw:
            for r in ph.itertuples():
                lines.append(f"  {r.phase}: MBU {fmt_pct(r.mbu_datasheet)} of datasheet, {fmt_pct(r.mbu_measured)} of measured;"
                             f" MFU {fmt_pct(r.mfu_datasheet)} of datasheet, {fmt_pct(r.mfu_measured)} of measured")
        lines.append("")
    g = a.groups("short_name").head(top)
    if not g.empty:
        rows = [[_printable(r.key)[:48], str(r.category), str(r.phase), fmt_num(r.count), fmt_ns(r.time_ns),
                 fmt_pct(r.time_share), fmt_num(r.ai), fmt_pct(r.pct_of_roof), str(r.bound or "—")] for r in g.itertuples()]
        lines.append(f"top {len(g)} kernel groups by time")
        lines.append(_table(["kernel", "category", "phase", "count", "time", "share", "AI", "% roof", "bound"], rows,
                            right={3, 4, 5, 6, 7}))
        lines.append("")
    if a.gap is not None and not a.gap.empty:
        rows = [[str(r.phase), fmt_ns(r.measured_ns), fmt_ns(r.ideal_ns), fmt_ns(r.slow_kernels_ns),
                 fmt_ns(r.extra_bytes_ns), fmt_ns(r.launch_gaps_ns), fmt_ns(r.unmodeled_ns)] for r in a.gap.itertuples()]
        lines.append("gap to ideal (roofline time of each modeled kernel)")
        lines.append(_table(["phase", "measured", "ideal", "slow kernels", "extra bytes", "launch gaps", "unmodeled"], rows))
        lines.append("")
    if a.rank_steps is not None:
        rs = a.rank_steps
        worst = rs.sort_values("spread", ascending=False).head(5)
        rows = [[str(r.phase), fmt_num(r.step), fmt_ns(r.min_ns), fmt_ns(r.median_ns), fmt_ns(r.max_ns), fmt_pct(r.spread),
                 fmt_num(r.straggler)] for r in worst.itertuples()]
        lines.append("rank-to-rank spread of step time (worst steps)")
        lines.append(_table(["phase", "step", "min", "median", "max", "spread", "straggler"], rows))
        lines.append("")
    lines.append("findings")
    sym = {"info": "·", "warn": "!", "bad": "✗"}
    for f in a.findings:
        lines.append(f"  {sym.get(f.severity, '·')} {_printable(f.title)}")
        lines.append(f"      {_printable(f.detail)}")
    if t.warnings:
        lines.append("")
        lines.append("warnings")
        for w in t.warnings[:20]:
            lines.append(f"  ! {_printable(w)}")
    return "\n".join(lines)


def diff_text(a: Analysis, b: Analysis, top: int = 10) -> str:
    d = compare(a, b)
    lines = [f"rooftop diff: A = {_printable(d.label_a)}{' [MODELED]' if a.trace.modeled else ''}"
             f"  B = {_printable(d.label_b)}{' [MODELED]' if b.trace.modeled else ''}", ""]
    rows = []
    for r in d.phases.to_dict(orient="records"):
        for m, f in (("span_ns", fmt_ns), ("tokens_per_s", fmt_num), ("tbps", fmt_num), ("mbu", fmt_pct), ("mfu", fmt_pct)):
            ratio = r.get(f"{m}_ratio")
            rows.append([str(r["phase"]), m, f(r.get(f"{m}_a")), f(r.get(f"{m}_b")),
                         "—" if ratio is None or ratio != ratio else f"{ratio:.2f}x"])
    lines.append(_table(["phase", "metric", "A", "B", "B/A"], rows, right={2, 3, 4}))
    lines.append("")
    rows = [[_printable(r["key"])[:48], fmt_ns(r["time_ns_a"]), fmt_ns(r["time_ns_b"]),
             ("+" if r["time_delta"] > 0 else "") + fmt_ns(r["time_delta"]), fmt_bytes(r["bytes_delta"]), r["status"]]
            for r in d.groups.head(top).to_dict(orient="records")]
    lines.append("kernel groups with the largest time change")
    lines.append(_table(["kernel", "A", "B", "Δ time", "Δ bytes", ""], rows, right={1, 2, 3, 4}))
    lines.append("")
    lines.append("findings")
    for f in d.findings_added:
        lines.append(f"  + {_printable(f.title)}")
    for f in d.findings_removed:
        lines.append(f"  - {_printable(f.title)}")
    for x, y in d.findings_changed:
        lines.append(f"  ~ {_printable(x.title)}  ->  {_printable(y.title)}")
    if not (d.findings_added or d.findings_removed or d.findings_changed):
        lines.append("  (no change)")
    return "\n".join(lines)
