"""`rooftop report`: the phase table, top kernel groups and findings, as text or one JSON object."""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .analysis import Analysis, columns, compare
from .analysis.gap import STEP_GAP_KEYS
from .text import printable
from .format import fmt_bytes, fmt_ns, fmt_num, fmt_pct, fmt_rate

# The published columns and their order come from the registry (rooftop/analysis/columns.py), the
# one place a table's columns are declared; `report --json` keys follow it.
PHASE_KEYS = columns.PHASES.keys
STEP_KEYS = columns.STEPS.keys
GAP_KEYS = columns.GAP.keys
# coverage: the share of the group's kernel time whose FLOPs/bytes (both, for ai) are known; the
# rates are over those launches only
GROUP_KEYS = columns.GROUPS.keys
RANK_STEP_KEYS = columns.RANK_STEPS.keys


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


def _clean_doc(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _clean_doc(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_clean_doc(v) for v in doc]
    return _clean(doc)


def records(df: pd.DataFrame | None, keys) -> list[dict]:
    if df is None or df.empty:
        return []
    keys = [k for k in keys if k in df.columns]
    return [{k: _clean(v) for k, v in zip(keys, row)} for row in df[keys].itertuples(index=False, name=None)]


def totals(timed: pd.DataFrame, span: int) -> dict:
    """Counts and summed durations per kind: `kernels` counts kernel launches only, never copies;
    memcpy and memset have their own keys (and `ops` on a CPU-only run, whose timed rows are ops)."""
    kinds = timed["kind"].astype(object) if len(timed) else pd.Series(dtype=object)
    agg = timed["dur_ns"].groupby(kinds.to_numpy(), sort=False).agg(["size", "sum"]) if len(timed) else None

    def part(kind: str) -> tuple[int, int]:
        if agg is None or kind not in agg.index:
            return 0, 0
        return int(agg.loc[kind, "size"]), int(agg.loc[kind, "sum"])

    out = {}
    for kind, count_key, time_key in (("kernel", "kernels", "kernel_time_ns"), ("memcpy", "memcpy", "memcpy_time_ns"),
                                      ("memset", "memset", "memset_time_ns")):
        out[count_key], out[time_key] = part(kind)
    if agg is not None and "op" in agg.index:
        out["ops"], out["op_time_ns"] = part("op")
    out["span_ns"] = span
    out["timed_kind"] = str(kinds.iloc[0]) if len(timed) else None
    return out


def top_kernels(a: Analysis, top: int) -> list[dict]:
    """The longest kernel groups, keyed by the WHOLE kernel name (a machine output never carries a
    cut name); `short_name` is the display name tables show."""
    g = a.groups("name").head(top)
    rows = records(g, GROUP_KEYS)
    timed = a.timed
    if rows and "short_name" in timed.columns:
        pairs = pd.DataFrame({"n": timed["name"].astype(object), "s": timed["short_name"].astype(object)})
        short = dict(pairs.drop_duplicates("n").itertuples(index=False, name=None))
        for r in rows:
            r["short_name"] = _clean(short.get(r["key"]))
    return rows


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
                   "ridge": a.ridge, "dtype": p.dtype,
                   # new keys: how the device was identified, every dtype's peak, ncu's own peaks
                   "key": p.gpu.key if p.gpu is not None else None, "cc": t.device_meta.get("cc"),
                   "matched_by": list(p.matched_by), "inferred": p.inferred, "override": p.override,
                   "confirmed": p.gpu.confirmed if p.gpu is not None else None,
                   "peak_flops_by_dtype": {k: v for k, v in p.table.items() if k != "int8"} or None,
                   "ncu": ({"flops": p.ncu_flops, "bw": p.ncu_bw, "flops_by_dtype": dict(p.ncu_table)}
                           if p.ncu_bw or any(p.ncu_table.values()) else None),
                   "peaks_differ": p.differences},
        "totals": totals(timed, span),
        "phases": records(a.phases, PHASE_KEYS),
        "steps": records(a.steps, STEP_KEYS),
        "top_kernels": top_kernels(a, top),
        "categories": records(a.groups("category"), GROUP_KEYS),
        "attention": [{k: _clean(v) for k, v in vars(v).items()} for v in a.attention],
        "gap": records(a.gap, GAP_KEYS),
        "gap_steps": records(a.gap_steps, STEP_GAP_KEYS),
        "model": _clean_doc(a.model_summary),
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


def _bounded(cell: str, status: Any) -> str:
    """A phase rate from per-kernel costs: ">= x" where it is only a lower bound (thin coverage)."""
    return f">={cell}" if status == "lower bound" and cell != "—" else cell


def _coverage_cell(cov: Any) -> str:
    return "—" if cov is None or cov != cov else fmt_pct(cov, 0 if cov >= 0.1 or cov == 0 else 1)


def _coverage_notes(ph: pd.DataFrame) -> list[str]:
    """One line per phase whose per-kernel bytes or FLOPs miss part of the kernel time: the
    utilisation where peaks are known, else the achieved rate."""
    out = []
    for r in ph.itertuples():
        for what, cov, status, util, label, rate, unit in (
                ("bytes", r.bytes_coverage, r.mbu_status, r.mbu, "MBU", r.tbps, "TB/s"),
                ("FLOPs", r.flops_coverage, r.mfu_status, r.mfu, "MFU", r.tflops, "TFLOP/s")):
            if cov is None or cov != cov or cov >= 0.995:
                continue
            known = f"{what} known for {_coverage_cell(cov)} of kernel time" if cov > 0 else f"no per-kernel {what}"
            if util == util and util is not None:
                value = f"{fmt_pct(util)} {label}"
            elif rate == rate and rate is not None:
                value = f"{fmt_num(rate)} {unit}"
            else:
                value = None
            if value is None or status == "unknown":
                out.append(f"  {r.phase}: {label} unknown ({known})")
            elif status == "lower bound":
                out.append(f"  {r.phase}: >= {value} ({known}): a lower bound, not a verdict")
            else:
                out.append(f"  {r.phase}: {value} ({known})")
    return out


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
        how = ""
        if p.override:
            how = f" (from --{p.override})"
        elif p.inferred:
            how = f" (inferred from {', '.join(p.matched_by)}: the file names no device; --gpu overrides)"
        lines.append(f"  peaks    {p.source}{gpu}{how}: {fmt_rate(p.flops, 'FLOP/s')} ({p.dtype}), {fmt_rate(p.bw, 'B/s')}"
                     f", ridge {fmt_num(a.ridge)} FLOP/B")
        if p.reason:
            lines.append(f"           {_printable(p.reason)}")
        for d in p.differences:
            unit = "B/s" if d["what"] == "bw" else "FLOP/s"
            lines.append(f"           ncu measured {d['what']} {fmt_rate(d['ncu'], unit)} vs datasheet "
                         f"{fmt_rate(d['datasheet'], unit)} ({fmt_pct(d['ratio'] - 1, 0)}; ncu locks clocks to base)")
    else:
        lines.append(f"  peaks    none: {_printable(p.reason)}")
    if t.ranks:
        lines.append(f"  ranks    {len(t.ranks)} ({', '.join(map(str, t.ranks[:16]))}{'…' if len(t.ranks) > 16 else ''})")
    lines.append("")
    if a.model is not None:
        lines.extend(model_lines(a))
        lines.append("")
    ph = a.phases
    if not ph.empty:
        rows = []
        for r in ph.itertuples():
            rows.append([str(r.phase), fmt_num(r.steps), fmt_num(r.kernels), fmt_ns(r.span_ns), fmt_pct(r.idle_frac, 0),
                         fmt_num(r.tokens_per_s), _bounded(fmt_num(r.tflops), r.mfu_status),
                         _bounded(fmt_num(r.tbps), r.mbu_status), _bounded(fmt_pct(r.mfu), r.mfu_status),
                         _bounded(fmt_pct(r.mbu), r.mbu_status), fmt_pct(r.model_mbu), str(r.bound or "—"),
                         str(r.bytes_source or "—"), _coverage_cell(r.bytes_coverage)])
        lines.append(_table(["phase", "steps", "kernels", "time", "gaps", "tok/s", "TFLOP/s", "TB/s", "MFU", "MBU",
                             "modelMBU", "bound", "bytes", "known"], rows, right=set(range(1, 11)) | {13}))
        lines += _coverage_notes(ph)
        if p.measured_bw and p.datasheet_bw:
            for r in ph.itertuples():
                lines.append(f"  {r.phase}: MBU {fmt_pct(r.mbu_datasheet)} of datasheet, {fmt_pct(r.mbu_measured)} of measured;"
                             f" MFU {fmt_pct(r.mfu_datasheet)} of datasheet, {fmt_pct(r.mfu_measured)} of measured")
        lines.append("")
    g = a.groups("short_name").head(top)
    if not g.empty:
        rows = [[_printable(r.key), str(r.category), str(r.phase), fmt_num(r.count), fmt_ns(r.time_ns),
                 fmt_pct(r.time_share), fmt_num(r.ai), fmt_pct(r.pct_of_roof), str(r.bound or "—"),
                 _coverage_cell(r.ai_coverage if r.ai == r.ai else r.bytes_coverage)] for r in g.itertuples()]
        lines.append(f"top {len(g)} kernel groups by time (known: share of the group's time whose AI, else bytes, is known;"
                     " rates are over those launches)")
        lines.append(_table(["kernel", "category", "phase", "count", "time", "share", "AI", "% roof", "bound", "known"],
                            rows, right={3, 4, 5, 6, 7, 9}))
        lines.append("")
    if a.gap is not None and not a.gap.empty:
        rows = [[str(r.phase), fmt_ns(r.measured_ns), fmt_ns(r.ideal_ns), fmt_ns(r.slow_kernels_ns),
                 fmt_ns(r.extra_bytes_ns), fmt_ns(r.launch_gaps_ns), fmt_ns(r.unmodeled_ns), str(r.basis or "—")]
                for r in a.gap.itertuples()]
        lines.append("gap to ideal (basis: kernels = each costed kernel at its roofline time; model = the step's"
                     " model bytes at the roof)")
        lines.append(_table(["phase", "measured", "ideal", "slow kernels", "extra bytes", "launch gaps", "unmodeled",
                             "basis"], rows, right=set(range(1, 7))))
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


def _billions(n) -> str:
    return "—" if n is None else f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.1f} M"


def model_lines(a: Analysis) -> list[str]:
    """The model-level headline: per phase (decode first), the bytes the steps must move over their time."""
    m = a.model_summary or {}
    w = m.get("weights") or {}
    prec = w.get("base") if not w.get("quantized") else f"{w['quantized']} ({w['quantized_bits']:g} bits), rest {w['base']}"
    ranks = f", per rank of tp {m['tp']}" + (f" ep {m['ep']}" if m.get("ep", 1) > 1 else "") if m.get("tp", 1) * m.get("ep", 1) > 1 else ""
    moe = f", {m['experts']} experts top-{m['experts_per_tok']}" if m.get("experts") else ""
    out = [f"model-level accounting: {_printable(m.get('name'))} from {_printable(m.get('source'))}",
           f"  {_billions(m.get('parameters'))} params ({_billions(m.get('active_parameters'))} active per token){moe};"
           f" weights {fmt_bytes(m.get('weight_bytes'))} {prec}; KV {m.get('kv_dtype')}"
           f" {fmt_bytes(m.get('kv_bytes_per_token'))}/token{ranks}",
           "  bytes = weights read once per step (MoE: experts touched) + KV read for the context + KV written;"
           " activations not counted (negligible)"]
    ph = a.phases
    if ph.empty:
        return out
    order = sorted(range(len(ph)), key=lambda i: ph["phase"].iloc[i] != "decode")  # decode is the headline
    st = a.steps
    if "rank" in st.columns and st["rank"].notna().any():
        st = st[st["rank"] == st["rank"].min()]
    for i in order:
        r = ph.iloc[i]
        name = _printable(r["phase"])
        if not r.get("steps"):
            continue  # work outside any step: no step to account for
        if not r.get("model_steps"):
            out.append(f"  {name:8s} model MBU —: {_printable(r.get('model_reason') or 'unknown')}")
            continue
        if not a.peaks.bw:
            out.append(f"  {name:8s} model MBU —: no peak bandwidth ({_printable(a.peaks.reason)});"
                       f" {fmt_bytes(r['model_bytes_per_step'])}/step over {int(r['model_steps'])} steps")
            continue
        known = st[(st["phase"] == r["phase"]) & st["model_bytes"].notna()]
        mean_span = known["span_ns"].mean()
        ideal = known["model_ideal_ns"].mean()
        tok = known["new_tokens"].sum() / (known["span_ns"].sum() / 1e9) if known["span_ns"].sum() > 0 else None
        out.append(f"  {name:8s} model MBU {fmt_pct(r['model_mbu'])} (of busy time {fmt_pct(r['model_mbu_busy'])}),"
                   f" model MFU {fmt_pct(r['model_mfu'])}: {fmt_bytes(r['model_bytes_per_step'])}/step,"
                   f" ideal {fmt_ns(ideal)} vs {fmt_ns(mean_span)} measured, {fmt_num(tok)} tok/s"
                   f" ({int(r['model_steps'])} of {int(r['steps'])} steps)")
        if r["model_mbu"] > 1.0:  # faster than the roof: the description does not match what ran
            out.append(f"  {'':8s} ! above the HBM roof: the model, its precision, --tp/--ep or the workload do not"
                       " match this trace")
    return out


def diff_text(a: Analysis, b: Analysis, top: int = 10) -> str:
    d = compare(a, b)
    lines = [f"rooftop diff: A = {_printable(d.label_a)}{' [MODELED]' if a.trace.modeled else ''}"
             f"  B = {_printable(d.label_b)}{' [MODELED]' if b.trace.modeled else ''}", ""]
    rows = []
    for r in d.phases.to_dict(orient="records"):
        metrics = [("span_ns", fmt_ns), ("tokens_per_s", fmt_num), ("tbps", fmt_num), ("mbu", fmt_pct), ("mfu", fmt_pct)]
        if a.model is not None or b.model is not None:
            metrics.append(("model_mbu", fmt_pct))
        for m, f in metrics:
            ratio = r.get(f"{m}_ratio")
            rows.append([str(r["phase"]), m, f(r.get(f"{m}_a")), f(r.get(f"{m}_b")),
                         "—" if ratio is None or ratio != ratio else f"{ratio:.2f}x"])
    lines.append(_table(["phase", "metric", "A", "B", "B/A"], rows, right={2, 3, 4}))
    lines.append("")
    rows = [[_printable(r["key"]), fmt_ns(r["time_ns_a"]), fmt_ns(r["time_ns_b"]),
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
