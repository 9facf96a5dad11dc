"""Screen 6: two runs side by side: what changed in the findings, phase metrics, kernel groups.

Read top to bottom at 80x24: the findings that changed (as `rooftop diff` words them), the phase
metrics with their change (fractions change by percentage points, other metrics by a percentage),
then the kernel groups, sorted by |Δ time| or |Δ bytes| (`s`), numbers before the name so a long
name is what gets cut. Enter on a group opens its A and B detail side by side.
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

from rooftop.columns import PHASES
from rooftop.format import fmt_ns, fmt_num, fmt_pct, fmt_rate, is_unknown
from tui.widgets.breadcrumb import RooftopScreen, trace_title
from tui.widgets.table import Col, FrameTable
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
GROUP_SORTS = {"time": "abs_time_change", "bytes": "abs_bytes_change"}

PHASE_COLS = [
    Col("phase", "phase", "text"), Col("metric", "metric", "text"), Col("a", "A", "text"), Col("b", "B", "text"),
    Col("delta", "Δ", "text"), Col("change", "B vs A", "text"),
]
# Numbers first: at 80 columns the name is cut, never A, B or Δ.
GROUP_COLS = [
    Col("time_delta", "Δ time µs", "ns", 0), Col("time_ns_a", "A µs", "ns", 0), Col("time_ns_b", "B µs", "ns", 0),
    Col("bytes_change", "Δ MB", "mb"), Col("status", "in", "text"), Col("key", "kernel group", "text"),
    Col("bytes_a", "A MB", "mb"), Col("bytes_b", "B MB", "mb"),
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


def group_rows(groups: pd.DataFrame) -> pd.DataFrame:
    """The diff's groups (`time_delta`, `bytes_change`: signed B − A, computed by the core) with the
    |change| the sort keys read and the status in short words."""
    g = groups.copy()
    g["abs_time_change"] = g["time_delta"].abs()
    g["abs_bytes_change"] = g["bytes_change"].abs()
    g["status"] = g["status"].map({"only in B": "B only", "only in A": "A only", "both": "both"}).fillna(g["status"])
    return g


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
    groups: pd.DataFrame


class CompareScreen(RooftopScreen):
    """A against B: findings changed, per-phase metrics with deltas, kernel groups by short name."""

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort |Δ|", id="compare.sort"),
    ]

    @dataclass
    class Ready(Message):
        compared: Compared

    BREADCRUMB = "Compare"
    EXPORT_NAME = "compare"
    # Which |Δ| the kernel groups are sorted by; the watcher re-sorts and retitles.
    sort: reactive[str] = reactive("time", init=False)

    def __init__(self, a, b, crumbs: list[str] | None = None) -> None:
        super().__init__(a, crumbs or [f"{trace_title(a)} vs {trace_title(b)}", self.BREADCRUMB])
        self.a, self.b = a, b
        self.diff = None

    def compose_body(self) -> ComposeResult:
        yield Static(self._head(), id="compare-head")
        with VerticalScroll(id="compare-findings-box"):
            yield FindingsDiff(id="compare-findings")
        yield FrameTable(PHASE_COLS, id="compare-phases")
        yield Static(self._groups_title(), id="compare-groups-title")
        yield FrameTable(GROUP_COLS, search_key="key", sort=(GROUP_SORTS["time"], True), id="compare-groups")

    def on_mount(self) -> None:
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

        d = compare(self.a, self.b)
        post_if_current(self, self.Ready(Compared(d, phase_rows(d.phases), group_rows(d.groups))))

    @on(Ready)
    async def _ready(self, message: Ready) -> None:
        c = message.compared
        self.diff = c.diff
        self.query_one("#compare-findings", FindingsDiff).show(c.diff)
        await self.query_one("#compare-phases", FrameTable).set_frame(c.phases)
        groups = self.query_one("#compare-groups", FrameTable)
        await groups.set_frame(c.groups)
        self.set_focus(groups.table)

    def _groups_title(self) -> Text:
        other = "bytes" if self.sort == "time" else "time"
        return Text(f"Kernel groups by |Δ {self.sort}| (s: |Δ {other}| · Enter: A beside B)",
                    no_wrap=True, overflow="ellipsis")

    def export_frame(self) -> pd.DataFrame | None:
        return None if self.diff is None else self.query_one("#compare-groups", FrameTable).view

    def action_cycle_sort(self) -> None:
        self.sort = "bytes" if self.sort == "time" else "time"

    async def watch_sort(self, sort: str) -> None:
        table = self.query_one("#compare-groups", FrameTable)
        table.sort_key, table.sort_desc = GROUP_SORTS[sort], True
        await table.refresh_view()
        self.query_one("#compare-groups-title", Static).update(self._groups_title())

    def name_target(self) -> tuple[str, list[str]] | None:
        row = self.query_one("#compare-groups", FrameTable).current()
        if row is None:
            return None
        key = str(row["key"])
        return key, self.a.full_names(key) or self.b.full_names(key) or [key]

    @on(FrameTable.Selected, "#compare-groups")
    def open_group(self, event: FrameTable.Selected) -> None:
        key = str(event.row["key"])
        self.drill(CompareDetailScreen(self.a, self.b, key, self.crumbs + [key]))


class CompareDetailScreen(RooftopScreen):
    """One kernel group in A and in B, metric by metric, side by side."""

    EXPORT_NAME = "compare-kernel"

    @dataclass
    class Ready(Message):
        rows: pd.DataFrame

    def __init__(self, a, b, key: str, crumbs: list[str]) -> None:
        super().__init__(a, crumbs)
        self.a, self.b, self.key = a, b, key
        self.rows: pd.DataFrame | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="compare-detail-body"):
            yield Static(safe_text(self.key), id="compare-detail-name", classes="section-title")
            yield Static(Text("computing…"), id="compare-detail-table")

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare-detail")
    def _compute(self) -> None:
        post_if_current(self, self.Ready(side_by_side(self.a.kernel_detail(self.key), self.b.kernel_detail(self.key))))

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

