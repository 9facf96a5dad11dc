"""The text of `rooftop report`, rendered from the report document (`rooftop.present.report.report_dict`).

One renderer for both ways a report is made: from an analysis just computed, and from the summary
stored in a trace's footer (rooftop/present/summary.py). It needs no pandas, numpy or pyarrow, so a report
served from the summary starts in a fraction of a second. Every value from the document is JSON
(None is unknown); every text from the trace goes through `printable` (rooftop/present/text.py).
"""
from __future__ import annotations

import math
import re
from typing import Any

from rooftop.present.format import bounded_cell, fmt_bytes, fmt_ns, fmt_num, fmt_pct, fmt_rate, fmt_tera
from rooftop.present.text import printable


def _printable(s: Any) -> str:
    """Trace text for a terminal: controls, bidi and invisible characters shown escaped (rooftop.present.text)."""
    return printable(s, missing="None")


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right if right is not None else set(range(1, len(headers)))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _bounded(cell: str, status: Any, coverage: Any = None) -> str:
    """A phase rate from per-kernel costs: ">= x" where it is a lower bound (coverage below full);
    unknown where its status is (`format.fmt_bounded`, the formatter the TUI uses too)."""
    return "—" if status == "unknown" else bounded_cell(cell, status, coverage)


def _coverage_cell(cov: Any) -> str:
    return "—" if not _known(cov) else fmt_pct(cov, 0 if cov >= 0.1 or cov == 0 else 1)


def _word(v: Any) -> str:
    """A category, a bound or a source: its text, or a dash when unknown."""
    return printable(v) if _known(v) and v != "" else "—"


def bound_notes(phases: list[dict]) -> list[str]:
    """Per judged phase, its bound in words: the time-weighted mix of its kernels' own verdicts."""
    out = []
    for r in phases:
        mix = r.get("bound_mix")
        if isinstance(mix, dict) and mix.get("verdict") and isinstance(mix.get("text"), str):
            out.append(f"  {_printable(str(r.get('phase')))}: {_printable(mix['text'])}")
    return out


def coverage_notes(phases: list[dict], source: dict | None = None) -> list[str]:
    """One line per phase whose per-kernel bytes or FLOPs miss part of the kernel time: the
    utilisation where peaks are known, else the achieved rate; where none is known, once, what
    would add them for this kind of file (`source`: the trace's `source_detail`)."""
    from rooftop.present.hints import costs_hint
    hint = costs_hint(source) if source is not None else None
    said: set[str] = set()
    out = []
    for r in phases:
        g = r.get
        for what, cov, status, util, label, rate, unit in (
                ("bytes", g("bytes_coverage"), g("mbu_status"), g("mbu"), "MBU", g("tbps"), "TB/s"),
                ("FLOPs", g("flops_coverage"), g("mfu_status"), g("mfu"), "MFU", g("tflops"), "TFLOP/s")):
            if not _known(cov) or cov >= 0.995:
                continue
            known = f"{what} known for {_coverage_cell(cov)} of kernel time" if cov > 0 else f"no per-kernel {what}"
            if _known(util):
                value = f"{fmt_pct(util)} {label}"
            elif _known(rate):
                value = fmt_tera(rate, unit)
                value = value if value.endswith("/s") else f"{value} {unit}"
            else:
                value = None
            if value is None or status == "unknown":
                out.append(f"  {_printable(g('phase'))}: {label} unknown ({known})")
                if cov == 0 and hint and hint not in said:  # once: how to get them
                    said.add(hint)
                    out.append(f"    to get per-kernel {what}: {hint}")
            elif status == "lower bound":
                out.append(f"  {_printable(g('phase'))}: >= {value} ({known}): a lower bound, not a verdict")
            else:
                out.append(f"  {_printable(g('phase'))}: {value} ({known})")
    return out


def _at_least(cell: str, bound) -> str:
    """A model-level cell that is a lower bound (`model_bound` ">=") says so."""
    return f">={cell}" if bound == ">=" and cell != "—" else cell


def _identity_lines(doc: dict) -> list[str]:
    t, ident, dev = doc["trace"], doc.get("identity") or {}, doc["device"]
    badge = "  [MODELED: analytic roofline times, not a measurement]" if t.get("modeled") else ""
    lines = [f"rooftop report: {_printable(t.get('path') or ident.get('label'))}{badge}"]
    if t.get("incomplete"):
        lines.append("  INCOMPLETE capture: the run stopped early; what was recorded is shown")
    for label in ("model", "workload", "device", "source"):
        if ident.get(label):
            lines.append(f"  {label:9s}{_printable(ident[label])}")
    flops, bw = dev.get("peak_flops"), dev.get("peak_bw")
    if flops or bw:
        gpu = f" {_printable(dev['matched'])}" if dev.get("matched") is not None else ""
        how = ""
        if dev.get("override"):
            how = f" (from --{dev['override']})"
        elif dev.get("inferred"):
            how = f" (inferred from {', '.join(dev.get('matched_by') or [])}: the file names no device; --gpu overrides)"
        lines.append(f"  peaks    {_printable(dev.get('peaks_source'))}{gpu}{_printable(how)}: {fmt_rate(flops, 'FLOP/s')}"
                     f" ({_printable(dev.get('dtype'))}),"
                     f" {fmt_rate(bw, 'B/s')}, ridge {fmt_num(dev.get('ridge'))} FLOP/B")
        if dev.get("peaks_reason"):
            lines.append(f"           {_printable(dev['peaks_reason'])}")
        for d in dev.get("peaks_differ") or []:
            unit = "B/s" if d["what"] == "bw" else "FLOP/s"
            lines.append(f"           ncu measured {_printable(d['what'])} {fmt_rate(d['ncu'], unit)} vs datasheet "
                         f"{fmt_rate(d['datasheet'], unit)} ({fmt_pct(d['ratio'] - 1, 0)}; ncu locks clocks to base)")
    else:
        lines.append(f"  peaks    none: {_printable(dev.get('peaks_reason'))}")
    found = t.get("steps_found")
    if found:
        rule = f" by {_printable(found['rule'])}" if found.get("rule") else ""
        extra = [f"{found['inferred_phases']} phase(s) inferred from the steps' work"] if found.get("inferred_phases") else []
        extra += [f"{found['no_phase']} without a phase"] if found.get("no_phase") else []
        lines.append(f"  steps    {found['count']}{rule}{' (' + '; '.join(extra) + ')' if extra else ''}")
    ranks = t.get("ranks") or []
    if ranks:
        lines.append(f"  ranks    {len(ranks)} ({', '.join(map(_printable, ranks[:16]))}{'…' if len(ranks) > 16 else ''})")
    return lines


def _phase_lines(doc: dict) -> list[str]:
    ph = doc.get("phases") or []
    if not ph:
        return []
    rows = []
    for r in ph:
        g = r.get
        rows.append([_printable(g("phase")), fmt_num(g("steps")), fmt_num(g("kernels")), fmt_ns(g("span_ns")),
                     fmt_pct(g("idle_frac"), 0), fmt_num(g("tokens_per_s")),
                     _bounded(fmt_tera(g("tflops"), "TFLOP/s"), g("mfu_status"), g("flops_coverage")),
                     _bounded(fmt_tera(g("tbps"), "TB/s"), g("mbu_status"), g("bytes_coverage")),
                     _bounded(fmt_pct(g("mfu")), g("mfu_status"), g("flops_coverage")),
                     _bounded(fmt_pct(g("mbu")), g("mbu_status"), g("bytes_coverage")),
                     _at_least(fmt_pct(g("model_mbu")), g("model_bound")), _word(g("bound")),
                     _word(g("bytes_source")), _coverage_cell(g("bytes_coverage"))])
    lines = [_table(["phase", "steps", "kernels", "time", "gaps", "tok/s", "TFLOP/s", "TB/s", "MFU", "MBU",
                     "modelMBU", "bound", "bytes", "known"], rows, right=set(range(1, 11)) | {13})]
    lines += bound_notes(ph)
    lines += coverage_notes(ph, (doc.get("trace") or {}).get("source_detail") or {})
    dev = doc["device"]
    if (dev.get("measured") or {}).get("bw") and (dev.get("datasheet") or {}).get("bw"):
        for r in ph:
            g = r.get
            lines.append(f"  {_printable(g('phase'))}: MBU {fmt_pct(g('mbu_datasheet'))} of datasheet, {fmt_pct(g('mbu_measured'))}"
                         f" of measured; MFU {fmt_pct(g('mfu_datasheet'))} of datasheet, {fmt_pct(g('mfu_measured'))} of measured")
    return lines + [""]


def _group_lines(groups: list[dict]) -> list[str]:
    if not groups:
        return []
    rows = [[_printable(r.get("key")), _printable(r.get("category")), _printable(r.get("phase")), fmt_num(r.get("count")),
             fmt_ns(r.get("time_ns")), fmt_pct(r.get("time_share")), fmt_num(r.get("ai")), fmt_pct(r.get("pct_of_roof")),
             _word(r.get("bound")), _coverage_cell(r.get("ai_coverage") if _known(r.get("ai")) else r.get("bytes_coverage"))]
            for r in groups]
    return [f"top {len(groups)} kernel groups by time (known: share of the group's time whose AI, else bytes, is known;"
            " rates are over those launches)",
            _table(["kernel", "category", "phase", "count", "time", "share", "AI", "% roof", "bound", "known"],
                   rows, right={3, 4, 5, 6, 7, 9}), ""]


def _gap_lines(gap: list[dict]) -> list[str]:
    if not gap:
        return []
    rows = [[_printable(r.get("phase")), fmt_ns(r.get("measured_ns")), fmt_ns(r.get("ideal_ns")), fmt_ns(r.get("slow_kernels_ns")),
             fmt_ns(r.get("extra_bytes_ns")), fmt_ns(r.get("launch_gaps_ns")), fmt_ns(r.get("edge_idle_ns")),
             fmt_ns(r.get("copies_ns")), fmt_ns(r.get("unmodeled_ns")),
             _word(r.get("basis")) if r.get("basis") else "unknown"] for r in gap]
    why = [f"  {_printable(r.get('phase'))}: no basis: {_printable(r['basis_reason'])}" for r in gap if r.get("basis_reason")]
    return ["gap to ideal (basis: kernels = each costed kernel at its roofline time; model = the step's"
            " model bytes at the roof; host copies: judged against their link, not HBM)",
            _table(["phase", "measured", "ideal", "slow kernels", "extra bytes", "launch gaps", "edge idle",
                    "host copies", "unmodeled", "basis"], rows, right=set(range(1, 9)))] + why + [""]


def _idle_lines(idle: list[dict] | None) -> list[str]:
    """Idle time by cause per phase (shares of the time no compute kernel ran)."""
    if not idle:
        return []
    causes = (("comm", "comm"), ("copies", "copies"), ("edge", "edge"), ("host", "host"), ("sync", "sync"),
              ("launch", "floor"), ("other", "other"))
    rows = [[_printable(r.get("phase")), "all" if (r.get("device") or 0) < 0 else fmt_num(r.get("device")), fmt_ns(r.get("idle_ns"))]
            + [fmt_pct(r.get(f"{c}_frac"), 0) for c, _ in causes] for r in idle]
    return ["idle by cause (time no compute kernel ran; shares: comm/copies running, edge = before the first or after"
            " the last kernel, host = waiting on framework/Python work, sync = after a blocking call, floor = gaps"
            " under the launch floor)",
            _table(["phase", "device", "idle"] + [h for _, h in causes], rows, right=set(range(1, 10))), ""]


def _comm_lines(comm: dict | None) -> list[str]:
    """Exposed communication per device and the collectives that showed most."""
    if not comm or not comm.get("devices"):
        return []
    rows = [[fmt_num(r.get("rank")) if (r.get("rank") or 0) >= 0 else "—", fmt_num(r.get("device")),
             fmt_ns(r.get("comm_ns")), fmt_ns(r.get("overlapped_ns")), fmt_ns(r.get("exposed_ns")),
             fmt_pct(r.get("exposed_frac"), 0), fmt_pct(r.get("exposed_share"), 0)] for r in comm["devices"]]
    out = ["communication (kernel time, the part overlapped by compute on other streams, the exposed rest)",
           _table(["rank", "device", "comm", "overlapped", "exposed", "exposed %", "of span"], rows, right=set(range(7)))]
    for r in (comm.get("top_exposed") or [])[:5]:
        size = f", {fmt_bytes(r['bytes'])}" if r.get("bytes") is not None else ""
        out.append(f"  {_printable(r.get('name'))} step {fmt_num(r.get('step'))}: {fmt_ns(r.get('exposed_ns'))} exposed"
                   f" of {fmt_ns(r.get('dur_ns'))} ({fmt_num(r.get('calls'))} calls{size})")
    return out + [""]


def _spread_lines(rank_steps: list[dict] | None) -> list[str]:
    if rank_steps is None:
        return []
    # the worst five by spread, unknown spreads last, ties in step order
    worst = sorted(rank_steps, key=lambda r: -r["spread"] if _known(r.get("spread")) else math.inf)[:5]
    rows = [[_printable(r.get("phase")), fmt_num(r.get("step")), fmt_ns(r.get("min_ns")), fmt_ns(r.get("median_ns")),
             fmt_ns(r.get("max_ns")), fmt_pct(r.get("spread")), fmt_num(r.get("straggler"))] for r in worst]
    return ["rank-to-rank spread of step time (worst steps)",
            _table(["phase", "step", "min", "median", "max", "spread", "straggler"], rows), ""]


def render_report(doc: dict) -> str:
    """The report as text: identity and peaks, model accounting, phases, top kernel groups (by
    display name: `top_groups`), gap to ideal, rank spread, findings, the file's warnings."""
    lines = _identity_lines(doc) + [""]
    warnings = doc.get("warnings") or []
    first = [w for w in warnings if is_integrity(w)]
    if first:  # what the file lost or got wrong is read before any number made from it
        lines += ["warnings about the file (read these first)"] + [f"  ! {_printable(w)}" for w in first[:20]] + [""]
    if doc.get("model") is not None:
        lines += model_lines(doc) + [""]
    lines += _phase_lines(doc)
    lines += _device_lines(doc)
    lines += _group_lines(doc.get("top_groups") or [])
    lines += _gap_lines(doc.get("gap") or [])
    lines += _idle_lines(doc.get("idle_phases"))
    lines += _comm_lines(doc.get("comm"))
    lines += _spread_lines((doc.get("ranks") or {}).get("steps") if doc.get("ranks") else None)
    lines.append("findings")
    sym = {"info": "·", "warn": "!", "bad": "✗"}
    for f in doc.get("findings") or []:
        lines.append(f"  {sym.get(f.get('severity'), '·')} {_printable(f.get('title'))}")
        lines.append(f"      {_printable(f.get('detail'))}")
    rest = [w for w in warnings if not is_integrity(w)]
    if rest:
        lines += ["", "warnings"] + [f"  ! {_printable(w)}" for w in rest[:20]]
    return "\n".join(lines)


# A warning about the file itself: it ends early, rows were dropped or cut, clocks disagree.
_INTEGRITY = re.compile(r"truncat|\bcut\b|dropped|skew|\blost\b|not read|malformed|damaged|changed while", re.I)


def is_integrity(warning) -> bool:
    """Whether a warning says the file lost or misstates something (shown before the analysis)."""
    return bool(_INTEGRITY.search(str(warning)))


def _device_lines(doc: dict) -> list[str]:
    """One row per GPU where one rank drives several (`devices`): each device's own busy, idle and MBU,
    never one figure over the union of their timelines."""
    devs = doc.get("devices") or []
    if not devs:
        return []
    rows = [[("" if d.get("rank") is None else f"{d['rank']}/") + str(d.get("device")), fmt_num(d.get("kernels")),
             fmt_ns(d.get("span_ns")), fmt_ns(d.get("busy_ns")), fmt_pct(d.get("idle_frac")),
             _bounded(fmt_tera(d.get("tbps"), "TB/s"), d.get("mbu_status")), _bounded(fmt_pct(d.get("mbu")), d.get("mbu_status")),
             fmt_num(d.get("steps"))] for d in devs]
    out = [f"per device: {_printable(doc.get('devices_note') or '')}"]
    out.append(_table(["device", "kernels", "span", "busy", "idle", "TB/s", "MBU", "steps"], rows))
    return out + [""]


def _billions(n) -> str:
    return "—" if n is None else f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.1f} M"


def model_lines(doc: dict) -> list[str]:
    """The model-level headline: per phase (decode first), the bytes the steps must move over their
    time. Reads `model`, `phases`, `model_phases` and the device's bandwidth from the report document."""
    m = doc.get("model") or {}
    w = m.get("weights") or {}
    prec = w.get("base") if not w.get("quantized") else f"{w['quantized']} ({w['quantized_bits']:g} bits), rest {w['base']}"
    ranks = f", per rank of tp {m['tp']}" + (f" ep {m['ep']}" if m.get("ep", 1) > 1 else "") if m.get("tp", 1) * m.get("ep", 1) > 1 else ""
    moe = f", {_printable(m['experts'])} experts top-{_printable(m['experts_per_tok'])}" if m.get("experts") else ""
    out = [f"model-level accounting: {_printable(m.get('name'))} from {_printable(m.get('source'))}",
           f"  {_billions(m.get('parameters'))} params ({_billions(m.get('active_parameters'))} active per token){moe};"
           f" weights {fmt_bytes(m.get('weight_bytes'))} {_printable(prec)}; KV {_printable(m.get('kv_dtype'))}"
           f" {fmt_bytes(m.get('kv_bytes_per_token'))}/token{ranks}",
           "  bytes = weights read once per step (MoE: experts touched) + KV read for the context + KV written;"
           " activations not counted (negligible)"]
    ph = doc.get("phases") or []
    if not ph:
        return out
    means = {m.get("phase"): m for m in doc.get("model_phases") or []}
    dev = doc["device"]
    for r in sorted(ph, key=lambda r: r.get("phase") != "decode"):  # decode is the headline
        name = _printable(r.get("phase"))
        if not r.get("steps"):
            continue  # work outside any step: no step to account for
        if not r.get("model_steps"):
            out.append(f"  {name:8s} model MBU —: {_printable(r.get('model_reason') or 'unknown')}")
            continue
        if not dev.get("peak_bw"):
            out.append(f"  {name:8s} model MBU —: no peak bandwidth ({_printable(dev.get('peaks_reason'))});"
                       f" {fmt_bytes(r.get('model_bytes_per_step'))}/step over {int(r['model_steps'])} steps")
            continue
        m = means.get(r.get("phase")) or {}
        if r.get("model_bound") == ">=":  # what the trace cannot tell leaves a lower bound: say which
            out.append(f"  {name:8s} model MBU >= {fmt_pct(r.get('model_mbu'))} (of busy time >= "
                       f"{fmt_pct(r.get('model_mbu_busy'))}): a lower bound, weights and KV written only, "
                       f">= {fmt_bytes(r.get('model_bytes_per_step'))}/step; {_printable(r.get('model_reason'))}"
                       f" ({int(r['model_steps'])} of {int(r['steps'])} steps)")
            continue
        out.append(f"  {name:8s} model MBU {fmt_pct(r.get('model_mbu'))} (of busy time {fmt_pct(r.get('model_mbu_busy'))}),"
                   f" model MFU {fmt_pct(r.get('model_mfu'))}: {fmt_bytes(r.get('model_bytes_per_step'))}/step,"
                   f" ideal {fmt_ns(m.get('ideal_ns'))} vs {fmt_ns(m.get('span_ns'))} measured,"
                   f" {fmt_num(m.get('tokens_per_s'))} tok/s"
                   f" ({int(r['model_steps'])} of {int(r['steps'])} steps)")
        if _known(r.get("model_mbu")) and r["model_mbu"] > 1.0:  # faster than the roof: the description does not match
            out.append(f"  {'':8s} ! above the HBM roof: the model, its precision, --tp/--ep or the workload do not"
                       " match this trace")
    return out
