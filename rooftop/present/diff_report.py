"""`rooftop diff` as words: the verdict lines, the hardware warning, the ranked causes and the matching,
in text (terminal), Markdown (a pull-request comment) or JSON (stable keys, for scripts).

The verdict line is the one sentence the CLI, the Markdown and the TUI's Compare screen all show
(`verdict_line`); the numbers come from `rooftop.analysis.verdict`.
"""
from __future__ import annotations

from typing import Any

from rooftop.present.format import fmt_ns, fmt_num, fmt_pct, is_unknown
from rooftop.present.text import printable

FORMATS = ("text", "markdown", "json")


def _p(s: Any) -> str:
    """Trace text (kernel and op names) made printable: escapes, never terminal controls."""
    return printable(s, missing="—")


def _pct(change) -> str:
    return "—" if is_unknown(change) else f"{100 * abs(change):.1f}%"


def _arrow(fmt, a, b) -> str:
    return f"{fmt(a)} → {fmt(b)}"


def noise_words(v: dict) -> str:
    """`outside noise (±3.2%)`, `within noise (±4.5%)`, `noise unknown`; empty for "no change"."""
    n = v.get("noise")
    if v.get("direction") == "no change":
        return ""
    if n is None:
        return "noise unknown"
    return f"{'within' if v.get('within_noise') else 'outside'} noise (±{100 * n:.1f}%)"


def verdict_line(v: dict) -> str:
    """One line, the most important words first (a narrow screen cuts the end):
    `decode: B 12.3% slower per step, outside noise (±2.1%): decode step time 1.23 ms → 1.38 ms;
    tokens/s …; MBU … [noise: step-to-step spread (16 and 16 steps)]`."""
    phase = _p(v["phase"])
    if v.get("change") is None:
        return f"{phase}: no verdict: {v.get('noise_basis') or 'nothing to compare'}"
    unit = "per step" if v.get("basis") == "step" else "per unit of work"
    extra = []
    r = v.get("work_ratio")
    if v.get("basis") == "work" and r is not None and abs(r - 1) > 0.005:
        extra.append(f"B's window holds {r:.2f}x A's work, normalized")
    extra.append(f"{_p(v.get('measure'))} {_arrow(fmt_ns, v.get('a_ns'), v.get('b_ns'))}")
    for col, fmt, words in (("tokens_per_s", fmt_num, "tokens/s"), ("model_mbu", fmt_pct, "model MBU"),
                            ("mbu", fmt_pct, "MBU"), ("mfu", fmt_pct, "MFU")):
        a, b = v.get(f"{col}_a"), v.get(f"{col}_b")
        if not (is_unknown(a) and is_unknown(b)):
            rank = "" if v.get("metrics_rank") is None else f" (rank {v['metrics_rank']})"
            extra.append(f"{words}{rank} {_arrow(fmt, a, b)}")
    if v.get("basis") == "work" and v.get("per_call_change") is not None:
        extra.append(f"per call of matched kernels {100 * v['per_call_change']:+.1f}%")
    if v["direction"] == "no change":
        head = f"{phase}: no change {unit}"
    else:
        head = f"{phase}: B {_pct(v['change'])} {v['direction']} {unit}"
    ma, mb = v.get("matched_share_a"), v.get("matched_share_b")
    if v.get("basis") == "step" and ma is not None and mb is not None and min(ma, mb) < 0.5:
        extra.append(f"only {100 * ma:.0f}% of A's and {100 * mb:.0f}% of B's kernel time matched: "
                     "the steps may hold different work")
    tail = noise_words(v)
    basis = f" [noise: {v['noise_basis']}]" if tail and v.get("noise_basis") else ""
    return head + (f", {tail}" if tail else "") + ": " + "; ".join(extra) + basis


def rank_lines(doc: dict) -> list[str]:
    """Per phase of a multi-rank pair: the rank driving the total, then every rank's own change."""
    out = []
    ranks = doc.get("ranks") or []
    for d in doc.get("drivers") or []:
        unit = "step time" if d["basis"] == "step" else "span"
        where = (f"the slowest rank in {d['straggler_steps']} of {d['steps']} steps of {d['side']}"
                 if d["basis"] == "step" else f"the slowest rank of {d['side']}")
        ch = "" if d["change"] is None else f" ({100 * d['change']:+.1f}%)"
        out.append(f"  rank {d['rank']} drives {_p(d['phase'])}: {where}; its {unit} "
                   f"{_arrow(fmt_ns, d['a_ns'], d['b_ns'])}{ch}")
        each = [f"rank {r['rank']} " + ("—" if r["change"] is None else f"{100 * r['change']:+.1f}%")
                for r in ranks if r["phase"] == d["phase"]]
        out.append("    per rank: " + ", ".join(each))
    return out


def modeled_line(doc: dict) -> list[str]:
    """`MODELED: A and B are the analytic model's traces, not measurements` where one is."""
    m = doc.get("modeled") or {}
    sides = [s.upper() for s in ("a", "b") if m.get(s)]
    if not sides:
        return []
    who = " and ".join(sides)
    return [f"MODELED: {who} {'is' if len(sides) == 1 else 'are'} the analytic model's "
            f"trace{'s' if len(sides) > 1 else ''}, not {'a measurement' if len(sides) == 1 else 'measurements'}"]


def hardware_lines(hw: list[dict]) -> list[str]:
    if not hw:
        return []
    out = ["DIFFERENT HARDWARE: raw times compare machines as well as code; read MBU/MFU (share of each "
           "run's own peak) beside them"]
    for h in hw:
        a = "unknown" if is_unknown(h["a"]) else _p(h["a"])
        b = "unknown" if is_unknown(h["b"]) else _p(h["b"])
        out.append(f"  {h['what']}: A {a}  B {b}")
    return out


def _calls(v) -> str:
    return "—" if is_unknown(v) else fmt_num(v)


def _has_roof(v: dict) -> bool:
    return any(not is_unknown(c.get("roof_a")) or not is_unknown(c.get("roof_b")) for c in v.get("causes", []))


def cause_head(v: dict) -> list[str]:
    return CAUSE_HEAD[:-1] + ["of roof A → B", CAUSE_HEAD[-1]] if _has_roof(v) else CAUSE_HEAD


def cause_rows(v: dict, top: int) -> list[list[str]]:
    """The ranked causes of one phase as table cells (with each family's share of its run's roof
    where known: raw times of two GPUs compare the GPUs too)."""
    rows = []
    roof = _has_roof(v)
    for c in v.get("causes", [])[:top]:
        if c.get("kind") == "idle":
            what = c["key"]
        else:
            what = _p(c["key"])
            if c.get("how") in ("op+path", "op", "path"):
                what += f"  [A {_p(c.get('name_a'))} ~ B {_p(c.get('name_b'))}]"
            elif c.get("status") != "both":
                what += f"  ({c['status']})"
        share = c.get("share")
        rows.append([("+" if (c.get("delta_ns") or 0) > 0 else "") + fmt_ns(c.get("delta_ns")),
                     "—" if is_unknown(share) else f"{100 * share:+.0f}%",
                     _calls(c.get("calls_a")) + " → " + _calls(c.get("calls_b")),
                     fmt_ns(c.get("mean_ns_a")) + " → " + fmt_ns(c.get("mean_ns_b")),
                     _p(c.get("category")), what]
                    + ([_arrow(fmt_pct, c.get("roof_a"), c.get("roof_b"))] if roof else []))
        if roof:  # the name last: a long one never pushes the numbers off
            rows[-1][-2], rows[-1][-1] = rows[-1][-1], rows[-1][-2]
    return rows


CAUSE_HEAD = ["Δ per unit", "share", "calls/unit A → B", "per call A → B", "category", "what"]


def category_line(v: dict, n: int = 6) -> str:
    parts = []
    for c in v.get("categories", [])[:n]:
        d = c.get("delta_ns")
        if is_unknown(d) or d == 0:
            continue
        parts.append(f"{_p(c['category'])} {'+' if d > 0 else ''}{fmt_ns(d)}")
    return "by category: " + (", ".join(parts) if parts else "no change")


def matching_lines(v: dict, n: int = 5, markdown: bool = False) -> list[str]:
    """How the families were paired: by op across names, and what is unmatched (names as code spans
    in Markdown)."""
    name = _code if markdown else _p
    fam = v.get("families")
    if fam is None or fam.empty:
        return []
    out = []
    by_op = fam[fam["how"].isin(["op+path", "op", "path"])]
    if len(by_op):
        out.append(f"matched by the launching op or the place in the model (names differ): {len(by_op)} families")
        for r in by_op.sort_values("time_ns_a", ascending=False).head(n).to_dict("records"):
            out.append(f"  {_p(r['key'])}: A {_p(r['name_a'])} ~ B {_p(r['name_b'])}")
    for status in ("only in A", "only in B"):
        side = fam[fam["status"] == status]
        if len(side):
            col = "time_ns_a" if status == "only in A" else "time_ns_b"
            names = ", ".join(name(_p(k)) for k in side.sort_values(col, ascending=False)["key"].head(3))
            out.append(f"unmatched, {status}: {len(side)} families, {fmt_ns(side[col].sum())} ({names}"
                       f"{', …' if len(side) > 3 else ''})")
    return out


def _table(headers, rows) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def verdict_text(doc: dict, top: int = 10, gate_reason: str | None = None) -> str:
    """The head of `rooftop diff`: hardware, verdict lines (overall first), then per phase its causes."""
    lines = modeled_line(doc) + hardware_lines(doc["hardware"])
    lines.append("verdict: " + verdict_line(doc["overall"]))
    for v in doc["phases"]:
        lines.append("  " + verdict_line(v))
    lines += rank_lines(doc)
    if gate_reason:
        lines.append(gate_reason)
    for v in doc["phases"]:
        rows = cause_rows(v, top)
        if not rows or v.get("direction") == "no change":
            continue  # a list of zeros says nothing
        lines += ["", f"{_p(v['phase'])}: causes per {'step' if v['basis'] == 'step' else 'unit of work'}, "
                      "largest change first (share of all causes' |Δ|)", _table(cause_head(v), rows),
                  category_line(v)]
        lines += matching_lines(v)
    return "\n".join(lines)


def _md(s: str) -> str:
    """A cell of a Markdown table: pipes and backticks would break it."""
    return s.replace("|", "\\|").replace("`", "'")


def _code(s: str) -> str:
    """Trace text as a Markdown code span (backticks inside replaced, pipes escaped for tables)."""
    return "`" + _md(s) + "`"


def verdict_markdown(doc: dict, label_a: str, label_b: str, top: int = 10, gate_reason: str | None = None) -> str:
    """The same as `verdict_text`, fit for a pull-request comment."""
    out = [f"### rooftop diff: `{_md(_p(label_a))}` → `{_md(_p(label_b))}`", ""]
    out += [f"> **{m}**" for m in modeled_line(doc)] + ([""] if modeled_line(doc) else [])
    hw = hardware_lines(doc["hardware"])
    if hw:
        out += [f"> **{_md(hw[0])}**"] + [f"> - {_md(h.strip())}" for h in hw[1:]] + [""]
    out.append(f"**Verdict:** {_md(verdict_line(doc['overall']))}")
    out.append("")
    out += [f"- {_md(verdict_line(v))}" for v in doc["phases"]]
    out += [f"- {_md(line.strip())}" for line in rank_lines(doc)]
    if gate_reason:
        out += ["", f"**{_md(gate_reason)}**"]
    for v in doc["phases"]:
        rows = cause_rows(v, top)
        if not rows or v.get("direction") == "no change":
            continue
        out += ["", f"#### {_md(_p(v['phase']))}: causes, largest change first", "",
                "| " + " | ".join(cause_head(v)) + " |", "|" + "---|" * len(cause_head(v))]
        # Names as code: `_`, `*` and `<…>` in kernel names would otherwise read as emphasis or HTML.
        out += ["| " + " | ".join([_md(x) for x in r[:-1]] + [_md(r[-1]) if c.get("kind") == "idle" else _code(r[-1])])
                + " |" for r, c in zip(rows, v["causes"])]
        out += ["", _md(category_line(v))]
        out += [f"  - {_code(m.strip())}" if m.startswith("  ") else f"- {m}" for m in matching_lines(v, markdown=True)]
    return "\n".join(out) + "\n"


def _clean(x):
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items() if k != "families"}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    if is_unknown(x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def verdict_json(doc: dict) -> dict:
    """The verdict as plain JSON values (per phase: measure, a_ns, b_ns, change, noise, within_noise,
    direction, causes, categories; overall; hardware), plus each phase's matched families."""
    out = _clean(doc)
    for v, src in zip(out["phases"], doc["phases"]):
        fam = src.get("families")
        if fam is not None:
            out_f = fam[["key", "how", "status", "category", "name_a", "name_b", "count_a", "count_b",
                         "time_ns_a", "time_ns_b", "mean_ns_a", "mean_ns_b"]]
            v["families"] = _clean(out_f.to_dict("records"))
        v["line"] = verdict_line(src)
    out["overall"]["line"] = verdict_line(doc["overall"])
    return out
