"""Screen 6: two runs side by side, telling the story `rooftop diff` tells.

Read top to bottom at 80x24: which runs, the hardware warning when the machines differ, the verdict
lines (overall and per phase, the same words as `rooftop diff`: faster/slower per unit of work,
within or outside noise), the findings that changed, then for one phase (`p` cycles through them)
its metrics with their change and either its causes, kernel families matched across the runs as
the CLI matches them (by name, else by launching op), per unit of work and largest change first,
or (`t`) its steps, A beside B. Enter on a family opens its A and B detail side by side. Slower is
always "worse": time and per-step rows are judged with lower-is-better.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from rooftop.present.columns import PHASES
from rooftop.present.diff_report import rank_lines, verdict_line
from rooftop.present.format import fmt_ns, fmt_num, fmt_pct, fmt_rate, is_unknown
from tui.widgets.breadcrumb import RooftopScreen, trace_title
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col
from tui.widgets.text import safe_text
from tui.workers import post_if_current

# (phase column, whose stem names the columns of Diff.phases and whose words label the row;
# formatter; higher is better). A 0..1 fraction changes by points, anything else by a percentage.
PHASE_METRICS = (
    (PHASES["span_ns"], fmt_ns, False),
    (PHASES["tokens_per_s"], lambda v: fmt_rate(v, ""), True),
    (PHASES["tflops"], lambda v: _num(v), True),
    (PHASES["tbps"], lambda v: _num(v), True),
    (PHASES["mfu"], fmt_pct, True),
    (PHASES["mbu"], fmt_pct, True),
)

PHASE_COLS = [
    Col("phase", "phase", "text"), Col("metric", "metric", "text"), Col("a", "A", "text"), Col("b", "B", "text"),
    Col("delta", "Δ", "text"), Col("change", "B vs A", "text"),
]
# Numbers first: at 80 columns the name is cut, never A, B or Δ.
CAUSE_COLS = [
    Col("delta_ns", "Δ/unit µs", "ns", 1), Col("share_text", "share", "text"), Col("per_call", "per call A→B", "text"),
    Col("calls", "calls/unit A→B", "text"), Col("category", "category", "text"), Col("what", "kernel family", "text"),
    Col("roof", "of roof A→B", "text"),
]
STEP_COLS = [
    Col("step", "step", "text"), Col("a", "A", "text"), Col("b", "B", "text"), Col("delta", "Δ", "text"),
    Col("change", "B vs A", "text"),
]


def _num(v) -> str:
    """A rate whose unit the metric's name says (TFLOP/s, TB/s)."""
    return fmt_num(v)


def rel_change(a, b) -> float | None:
    """(b - a) / a, or None when either is unknown or a is 0."""
    if is_unknown(a) or is_unknown(b) or float(a) == 0:
        return None
    return (float(b) - float(a)) / float(a)


def verdict(a, b, higher_is_better: bool, tolerance: float = 0.01) -> str | None:
    """'better' / 'worse' for B against A, None when unknown or within `tolerance` (relative)."""
    r = rel_change(a, b)
    if r is None or abs(r) <= tolerance:
        return None
    return "better" if (r > 0) == higher_is_better else "worse"


def _signed(fmt, delta) -> str:
    if is_unknown(delta):
        return "—"
    s = fmt(abs(delta))
    return ("+" if delta > 0 else "−" if delta < 0 else "±") + s


def change_text(a, b, fraction: bool) -> str:
    """How B differs from A: a fraction (MFU 0.878 -> 0.574) in points (`−30.4 pts`), anything else
    relative (`+5.2%`)."""
    if is_unknown(a) or is_unknown(b):
        return "—"
    if fraction:
        return f"{100 * (float(b) - float(a)):+.1f} pts"
    r = rel_change(a, b)
    return "—" if r is None else f"{100 * r:+.1f}%"


def phase_rows(phases: pd.DataFrame) -> pd.DataFrame:
    """One row per phase and metric: A, B, Δ, the change (points or percent) and better/worse, as text."""
    out = []
    for row in phases.to_dict("records"):
        for column, fmt, higher in PHASE_METRICS:
            stem, fraction = column.key, column.unit == "fraction"
            if f"{stem}_a" not in row:
                continue
            a, b = row[f"{stem}_a"], row[f"{stem}_b"]
            delta = None if is_unknown(a) or is_unknown(b) else float(b) - float(a)
            fmt_delta = (lambda v: f"{100 * v:.1f} pts") if fraction else fmt
            out.append({"phase": row["phase"], "metric": column.words, "a": fmt(a), "b": fmt(b),
                        "delta": _signed(fmt_delta, delta),
                        "change": " ".join(x for x in (change_text(a, b, fraction), verdict(a, b, higher)) if x)})
    return pd.DataFrame(out, columns=[c.key for c in PHASE_COLS])


def _calls(v) -> str:
    return "—" if is_unknown(v) else fmt_num(v)


def cause_table(v: dict) -> pd.DataFrame:
    """One phase's causes (rooftop.analysis.verdict): Δ per unit of work, share, per-call and calls per
    unit A → B, category, and what (the family, with both names where it was matched by op)."""
    rows = []
    for c in v.get("causes", []):
        what = str(c["key"])
        if c.get("how") in ("op+path", "op", "path"):
            what += f"  [A {c.get('name_a')} ~ B {c.get('name_b')}]"
        elif c.get("kind") != "idle" and c.get("status") != "both":
            what += f"  ({c['status']})"
        share = c.get("share")
        rows.append({"delta_ns": c.get("delta_ns"), "abs_delta": abs(c.get("delta_ns") or 0),
                     "share_text": "—" if is_unknown(share) else f"{100 * share:+.0f}%",
                     "per_call": f"{fmt_ns(c.get('mean_ns_a'))}→{fmt_ns(c.get('mean_ns_b'))}",
                     "calls": f"{_calls(c.get('calls_a'))}→{_calls(c.get('calls_b'))}",
                     "category": str(c.get("category") or "—"), "what": what, "key": str(c["key"]),
                     "roof": f"{fmt_pct(c.get('roof_a'))}→{fmt_pct(c.get('roof_b'))}",
                     "name_a": c.get("name_a"), "name_b": c.get("name_b"), "kind": c.get("kind")})
    cols = ["delta_ns", "abs_delta", "share_text", "per_call", "calls", "category", "what", "roof", "key", "name_a",
            "name_b", "kind"]
    return pd.DataFrame(rows, columns=cols)


def step_rows(a, b, phase: str) -> pd.DataFrame:
    """The steps of one phase, A beside B by step index (the slowest rank's span in a multi-rank run):
    time, Δ and the change, judged lower-is-better (a slower step is "worse", never "better")."""
    from rooftop.analysis.verdict import step_times

    sa = step_times(a.steps, phase).set_index("step")["span_ns"]
    sb = step_times(b.steps, phase).set_index("step")["span_ns"]
    both = pd.concat([sa.rename("a"), sb.rename("b")], axis=1)
    out = []
    for step, r in both.iterrows():
        x, y = r["a"], r["b"]
        delta = None if is_unknown(x) or is_unknown(y) else float(y) - float(x)
        out.append({"step": str(step), "a": fmt_ns(x), "b": fmt_ns(y), "delta": _signed(fmt_ns, delta),
                    "change": " ".join(w for w in (change_text(x, y, False), verdict(x, y, higher_is_better=False)) if w)})
    return pd.DataFrame(out, columns=[c.key for c in STEP_COLS])


def changed_title(a: str, b: str) -> str:
    """`prefill attention is fused (…)` and `prefill attention is materialized: …` ->
    `prefill attention is fused (…) → materialized: …`: the shared words once, then what changed."""
    wa, wb = str(a).split(" "), str(b).split(" ")
    n = 0
    while n < min(len(wa), len(wb)) - 1 and wa[n] == wb[n]:
        n += 1
    return " ".join(wa) + " → " + " ".join(wb[n:])


def _numbers_only(a: str, b: str) -> bool:
    """Whether two titles differ only in their numbers."""
    strip = str.maketrans("", "", "0123456789.,%")
    return str(a).translate(strip) == str(b).translate(strip)


class FindingsDiff(Static):
    """What changed in the findings: changed ones first (the verdicts), then new in B, gone from A."""

    COMPONENT_CLASSES = {"compare--better", "compare--worse"}

    def __init__(self, diff=None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.diff = diff

    def on_mount(self) -> None:
        self.update(self._text())

    def show(self, diff) -> None:
        self.diff = diff
        self.update(self._text())

    def _text(self) -> Text:
        d = self.diff
        if d is None:
            return Text("Comparing…")
        t = Text()
        t.append("Findings: ", style="bold")
        if not (d.findings_added or d.findings_removed or d.findings_changed):
            t.append("no change")
            return t
        worse = self.get_component_rich_style("compare--worse", partial=True)
        better = self.get_component_rich_style("compare--better", partial=True)
        # A changed verdict (fused -> materialized) before a changed number (91.0% -> 90.4% MBU).
        for x, y in sorted(d.findings_changed, key=lambda xy: _numbers_only(xy[0].title, xy[1].title)):
            t.append("\n~ changed: ", style="bold")
            t.append_text(safe_text(changed_title(x.title, y.title)))
        for sign, items, style in (("+ new in B: ", d.findings_added, worse),
                                   ("− gone from A: ", d.findings_removed, better)):
            for f in items:
                t.append("\n")
                t.append(sign, style=style if f.severity != "info" else "")
                t.append(f"[{f.severity}] ")
                t.append_text(safe_text(f.title))
        return t


@dataclass(frozen=True)
class Compared:
    """The comparison, computed off the UI thread, with the rows the tables show."""

    diff: object
    phases: pd.DataFrame
    verdict: dict
    causes: dict            # phase -> cause_table
    steps: dict             # phase -> step_rows


class CompareScreen(RooftopScreen):
    """A against B: verdict, findings changed, per-phase metrics, and per phase its causes or its steps."""

    BINDINGS = [
        Binding("p", "next_phase", "Phase", id="compare.phase"),
        Binding("t", "toggle_steps", "Steps/Kernels", id="compare.steps"),
    ]

    @dataclass
    class Ready(Message):
        compared: Compared

    BREADCRUMB = "Compare"
    EXPORT_NAME = "compare"
    # Which phase the lower table is about (an index into the verdict's phases) and whether it lists
    # that phase's kernel families ("kernels") or its steps ("steps").
    phase_index: reactive[int] = reactive(0, init=False)
    lower: reactive[str] = reactive("kernels", init=False)

    def __init__(self, a, b, crumbs: list[str] | None = None) -> None:
        super().__init__(a, crumbs or [f"{trace_title(a)} vs {trace_title(b)}", self.BREADCRUMB])
        self.a, self.b = a, b
        self.diff = None
        self.compared: Compared | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(self._head(), id="compare-head")
        yield Static(Text(""), id="compare-hw")
        with VerticalScroll(id="compare-verdict-box"):
            yield Static(Text("Comparing…"), id="compare-verdict")
        with VerticalScroll(id="compare-findings-box"):
            yield FindingsDiff(id="compare-findings")
        yield FrameTable(PHASE_COLS, id="compare-phases")
        yield Static(Text(""), id="compare-groups-title")
        yield FrameTable(CAUSE_COLS, search_key="what", sort=("abs_delta", True), id="compare-groups")
        yield FrameTable(STEP_COLS, id="compare-steps")

    def on_mount(self) -> None:
        self.query_one("#compare-steps", FrameTable).display = False
        self.query_one("#compare-hw", Static).display = False
        self._compute()

    def _head(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        for side, an in (("A", self.a), ("B", self.b)):
            if side == "B":
                t.append("\n")
            t.append(f"{side}: ", style="bold")
            t.append_text(safe_text(an.identity.get("label") or an.trace.label))
            if an.trace.modeled:
                t.append(" [MODELED]", style="bold")
            workload = an.identity.get("workload")
            if workload:
                t.append("  ")
                t.append_text(safe_text(workload, style="dim"))
        return t

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def _compute(self) -> None:
        from rooftop.analysis import compare
        from rooftop.analysis.verdict import verdicts

        d = compare(self.a, self.b)
        v = verdicts(self.a, self.b)
        causes = {p["phase"]: cause_table(p) for p in v["phases"]}
        steps = {p["phase"]: step_rows(self.a, self.b, p["phase"]) for p in v["phases"]}
        post_if_current(self, self.Ready(Compared(d, phase_rows(d.phases), v, causes, steps)))

    @staticmethod
    def _hardware_text(v: dict) -> Text:
        """One line: `Different hardware: device A … B …; SMs A 80 B 108; …` (empty when the same)."""
        t = Text(no_wrap=True, overflow="ellipsis")
        if not v["hardware"]:
            return t
        t.append("Different hardware: ", style="bold")
        for i, h in enumerate(v["hardware"]):
            t.append(("; " if i else "") + f"{h['what']} A ")
            t.append_text(safe_text("unknown" if is_unknown(h["a"]) else str(h["a"])))
            t.append(" B ")
            t.append_text(safe_text("unknown" if is_unknown(h["b"]) else str(h["b"])))
        return t

    @staticmethod
    def _verdict_text(v: dict) -> Text:
        """The verdict lines `rooftop diff` opens with, one per line (cut at the screen's edge: the
        words that matter come first), then the ranks that drive each phase of a multi-rank pair."""
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("Verdict: ", style="bold")
        t.append_text(safe_text(verdict_line(v["overall"])))
        for p in v["phases"]:
            t.append("\n  ")
            t.append_text(safe_text(verdict_line(p)))
        for line in rank_lines(v):
            t.append("\n")
            t.append_text(safe_text(line))
        return t

    @on(Ready)
    async def _ready(self, message: Ready) -> None:
        c = message.compared
        self.diff, self.compared = c.diff, c
        hw = self.query_one("#compare-hw", Static)
        hw.update(self._hardware_text(c.verdict))
        hw.display = bool(c.verdict["hardware"])
        self.query_one("#compare-verdict", Static).update(self._verdict_text(c.verdict))
        self.query_one("#compare-findings", FindingsDiff).show(c.diff)
        # Start on decode where there is one: the phase a decode optimisation is judged by.
        names = self.phase_names
        if "decode" in names:
            self.phase_index = names.index("decode")
        await self._show_lower()

    @property
    def phase_names(self) -> list[str]:
        return [] if self.compared is None else [p["phase"] for p in self.compared.verdict["phases"]]

    @property
    def phase(self) -> str | None:
        names = self.phase_names
        return names[self.phase_index % len(names)] if names else None

    def _groups_title(self) -> Text:
        phase = self.phase
        if phase is None:
            return Text("")
        v = next(p for p in self.compared.verdict["phases"] if p["phase"] == phase)
        unit = "step" if v.get("basis") == "step" else "unit of work"
        what = (f"causes per {unit}, largest |Δ| first" if self.lower == "kernels" else "steps, A beside B")
        keys = "p: next phase · t: " + ("steps" if self.lower == "kernels" else "kernels")
        if self.lower == "kernels":
            keys += " · Enter: A beside B"
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append_text(safe_text(phase))
        t.append(f" ({self.phase_index % len(self.phase_names) + 1}/{len(self.phase_names)}): {what} ({keys})")
        return t

    async def _show_lower(self) -> None:
        if self.compared is None:
            return
        phase = self.phase
        groups = self.query_one("#compare-groups", FrameTable)
        steps = self.query_one("#compare-steps", FrameTable)
        empty_c, empty_s = cause_table({}), pd.DataFrame(columns=[c.key for c in STEP_COLS])
        await groups.set_frame(self.compared.causes.get(phase, empty_c) if phase is not None else empty_c)
        await steps.set_frame(self.compared.steps.get(phase, empty_s) if phase is not None else empty_s)
        groups.display, steps.display = self.lower == "kernels", self.lower == "steps"
        # The phase table follows: the metrics of the phase below it (all six fit at 80x24).
        ph = self.compared.phases
        await self.query_one("#compare-phases", FrameTable).set_frame(
            ph[ph["phase"].astype(object) == phase].reset_index(drop=True) if phase is not None else ph)
        self.query_one("#compare-groups-title", Static).update(self._groups_title())
        self.set_focus((groups if self.lower == "kernels" else steps).table)

    def action_next_phase(self) -> None:
        if self.phase_names:
            self.phase_index = (self.phase_index + 1) % len(self.phase_names)

    def action_toggle_steps(self) -> None:
        self.lower = "steps" if self.lower == "kernels" else "kernels"

    async def watch_phase_index(self, _: int) -> None:
        await self._show_lower()

    async def watch_lower(self, _: str) -> None:
        await self._show_lower()

    def export_frame(self) -> pd.DataFrame | None:
        if self.diff is None:
            return None
        return self.query_one("#compare-groups" if self.lower == "kernels" else "#compare-steps", FrameTable).view

    def name_target(self) -> tuple[str, list[str]] | None:
        if self.lower != "kernels":
            return None
        row = self.query_one("#compare-groups", FrameTable).current()
        if row is None or row.get("kind") == "idle":
            return None
        key = str(row["key"])
        names = [str(n) for n in (row.get("name_a"), row.get("name_b")) if not is_unknown(n)]
        full = [x for n in dict.fromkeys(names) for x in (self.a.full_names(n) or self.b.full_names(n))]
        return key, full or names or [key]

    @on(FrameTable.Selected, "#compare-groups")
    def open_group(self, event: FrameTable.Selected) -> None:
        row = event.row
        if row.get("kind") == "idle":
            return
        key = str(row["key"])
        self.drill(CompareDetailScreen(self.a, self.b, key, self.crumbs + [key],
                                       name_a=None if is_unknown(row.get("name_a")) else str(row["name_a"]),
                                       name_b=None if is_unknown(row.get("name_b")) else str(row["name_b"])))


class CompareDetailScreen(RooftopScreen):
    """One kernel group in A and in B, metric by metric, side by side."""

    EXPORT_NAME = "compare-kernel"

    @dataclass
    class Ready(Message):
        rows: pd.DataFrame

    def __init__(self, a, b, key: str, crumbs: list[str], name_a: str | None = None, name_b: str | None = None) -> None:
        super().__init__(a, crumbs)
        self.a, self.b, self.key = a, b, key
        # A family matched by its launching op has another kernel name on each side.
        self.name_a, self.name_b = name_a or key, name_b or key
        self.rows: pd.DataFrame | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="compare-detail-body"):
            yield Static(safe_text(self.key), id="compare-detail-name", classes="section-title")
            yield Static(Text("computing…"), id="compare-detail-table")

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare-detail")
    def _compute(self) -> None:
        post_if_current(self, self.Ready(side_by_side(self.a.kernel_detail(self.name_a),
                                                       self.b.kernel_detail(self.name_b))))

    @on(Ready)
    def _ready(self, message: Ready) -> None:
        self.rows = message.rows
        table = Table(box=None, pad_edge=False, header_style="bold", expand=False)
        table.add_column("metric", no_wrap=True)
        table.add_column("A", overflow="fold")
        table.add_column("B", overflow="fold")
        for r in message.rows.to_dict("records"):
            table.add_row(safe_text(r["metric"]), safe_text(r["a"]), safe_text(r["b"]))
        self.query_one("#compare-detail-table", Static).update(table)

    def name_target(self) -> tuple[str, list[str]] | None:
        return self.key, self.a.full_names(self.key) or self.b.full_names(self.key) or [self.key]

    def export_frame(self) -> pd.DataFrame | None:
        return self.rows


def side_by_side(rows_a: list[tuple[str, str, str]], rows_b: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Two `kernel_detail` lists as one table (metric, A, B); a metric one side lacks is `—`, a group
    one run lacks says so."""
    a = {label: value for label, value, _ in rows_a}
    b = {label: value for label, value, _ in rows_b}
    labels = list(dict.fromkeys([*a, *b]))
    if not labels:
        return pd.DataFrame(columns=["metric", "a", "b"])
    miss_a = "not in A" if not a else "—"
    miss_b = "not in B" if not b else "—"
    return pd.DataFrame({"metric": labels, "a": [a.get(k, miss_a) for k in labels],
                         "b": [b.get(k, miss_b) for k in labels]})

