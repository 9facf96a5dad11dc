"""Screen 6: two runs side by side: phase metrics, kernel groups and findings, with what changed."""
from __future__ import annotations

import math

import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from rooftop.format import fmt_bytes, fmt_ns, fmt_pct, fmt_rate
from tui.widgets.breadcrumb import RooftopScreen, trace_title
from tui.widgets.text import safe_text

# (column stem in Diff.phases, label, formatter, higher is better)
PHASE_METRICS = (
    ("span_ns", "time", fmt_ns, False),
    ("tokens_per_s", "tokens/s", lambda v: fmt_rate(v, "tok/s"), True),
    ("tflops", "TFLOP/s", lambda v: _num(v, "TFLOP/s"), True),
    ("tbps", "TB/s", lambda v: _num(v, "TB/s"), True),
    ("mfu", "MFU", fmt_pct, True),
    ("mbu", "MBU", fmt_pct, True),
)
GROUP_SORTS = ("time", "bytes")


def _num(v, unit: str) -> str:
    return "—" if _unknown(v) else f"{float(v):.3g} {unit}"


def _unknown(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def rel_change(a, b) -> float | None:
    """(b - a) / a, or None when either is unknown or a is 0."""
    if _unknown(a) or _unknown(b) or float(a) == 0:
        return None
    return (float(b) - float(a)) / float(a)


def verdict(a, b, higher_is_better: bool, tolerance: float = 0.01) -> str | None:
    """'better' / 'worse' for B against A, None when unknown or within `tolerance` (relative)."""
    r = rel_change(a, b)
    if r is None or abs(r) <= tolerance:
        return None
    return "better" if (r > 0) == higher_is_better else "worse"


def _signed(fmt, delta) -> str:
    if _unknown(delta):
        return "—"
    s = fmt(abs(delta))
    return ("+" if delta > 0 else "−" if delta < 0 else "±") + s


class CompareScreen(RooftopScreen):
    """A against B: per-phase metrics with deltas, kernel groups by short name, findings added/removed."""

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-head { height: auto; }
    CompareScreen #compare-phases { height: auto; max-height: 14; }
    CompareScreen #compare-groups-title { height: 1; text-style: bold; margin-top: 1; }
    CompareScreen #compare-groups { height: 1fr; min-height: 4; }
    CompareScreen #compare-findings { height: auto; max-height: 8; }
    CompareScreen > .compare--better { color: $success; }
    CompareScreen > .compare--worse { color: $error; }
    CompareScreen > .compare--badge { background: $warning; color: $background; text-style: bold; }
    """
    COMPONENT_CLASSES = {"compare--better", "compare--worse", "compare--badge"}

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort |Δ|", id="compare.sort"),
    ]

    class Ready(Message):
        def __init__(self, diff) -> None:
            super().__init__()
            self.diff = diff

    BREADCRUMB = "Compare"
    EXPORT_NAME = "compare"

    def __init__(self, a, b, crumbs: list[str] | None = None) -> None:
        super().__init__(a, crumbs or [f"{trace_title(a)} vs {trace_title(b)}", self.BREADCRUMB])
        self.a, self.b = a, b
        self.diff = None
        self.sort = "time"

    def compose_body(self) -> ComposeResult:
        yield Static(id="compare-head")
        yield DataTable(id="compare-phases", cursor_type="row", zebra_stripes=True)
        yield Static(id="compare-groups-title")
        yield DataTable(id="compare-groups", cursor_type="row", zebra_stripes=True)
        yield Static(id="compare-findings")

    def on_mount(self) -> None:
        self.query_one("#compare-head", Static).update(self._head())
        self.query_one("#compare-findings", Static).update(Text("Comparing…"))
        self._compute()

    def _style(self, name: str | None):
        return self.get_component_rich_style(f"compare--{name}", partial=True) if name else ""

    def _head(self) -> Text:
        t = Text()
        for side, an in (("A", self.a), ("B", self.b)):
            if side == "B":
                t.append("\n")
            t.append(f"{side}: ", style="bold")
            t.append_text(safe_text(an.identity.get("label") or an.trace.label))
            if an.trace.modeled:
                t.append(" ")
                t.append(" MODELED ", style=self._style("badge"))
            workload = an.identity.get("workload")
            if workload:
                t.append("  ")
                t.append_text(safe_text(workload, style="dim"))
        return t

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def _compute(self) -> None:
        from rooftop.analysis import compare

        self.post_message(self.Ready(compare(self.a, self.b)))

    @on(Ready)
    def _ready(self, message: Ready) -> None:
        self.diff = message.diff
        self._fill_phases(self.diff.phases)
        self._fill_groups()
        self.query_one("#compare-findings", Static).update(self._findings())

    def _fill_phases(self, phases: pd.DataFrame) -> None:
        table = self.query_one("#compare-phases", DataTable)
        table.clear(columns=True)
        table.add_columns("phase", "metric", "A", "B", "Δ", "Δ%")
        for _, row in phases.iterrows():
            for stem, label, fmt, higher in PHASE_METRICS:
                if f"{stem}_a" not in phases.columns:
                    continue
                a, b = row[f"{stem}_a"], row[f"{stem}_b"]
                delta = None if _unknown(a) or _unknown(b) else float(b) - float(a)
                style = self._style(verdict(a, b, higher))
                r = rel_change(a, b)
                table.add_row(safe_text(row["phase"]), label, fmt(a), fmt(b),
                              Text(_signed(fmt, delta), style=style),
                              Text("—" if r is None else f"{100 * r:+.1f}%", style=style))

    def _fill_groups(self) -> None:
        groups = self.diff.groups
        col = "time_delta" if self.sort == "time" else "bytes_delta"
        if not groups.empty:
            groups = groups.reindex(groups[col].abs().sort_values(ascending=False, kind="stable").index)
        table = self.query_one("#compare-groups", DataTable)
        table.clear(columns=True)
        table.add_columns("kernel group", "time A", "time B", "Δ time", "bytes A", "bytes B", "Δ bytes")
        for _, g in groups.iterrows():
            table.add_row(
                safe_text(g["key"]), fmt_ns(g.get("time_ns_a")), fmt_ns(g.get("time_ns_b")),
                Text(_signed(fmt_ns, g.get("time_delta")), style=self._style(verdict(g.get("time_ns_a"), g.get("time_ns_b"), False))),
                fmt_bytes(g.get("bytes_a")), fmt_bytes(g.get("bytes_b")),
                Text(_signed(fmt_bytes, g.get("bytes_delta")), style=self._style(verdict(g.get("bytes_a"), g.get("bytes_b"), False))),
            )
        self.query_one("#compare-groups-title", Static).update(
            Text(f"Kernel groups matched by short name, by |Δ {self.sort}|  (s: by |Δ {GROUP_SORTS[1 - GROUP_SORTS.index(self.sort)]}|)"))

    def _findings(self) -> Text:
        d = self.diff
        t = Text("Findings: ", style="bold")
        if not d.findings_added and not d.findings_removed:
            t.append("no change")
            return t
        for sign, items, style in (("+ new in B: ", d.findings_added, "worse"),
                                   ("− gone from A: ", d.findings_removed, "better")):
            for f in items:
                t.append("\n")
                t.append(sign, style=self._style(style if f.severity != "info" else None))
                t.append(f"[{f.severity}] ")
                t.append_text(safe_text(f.title))
        return t

    def export_frame(self) -> pd.DataFrame | None:
        return None if self.diff is None else self.diff.groups

    def action_cycle_sort(self) -> None:
        self.sort = GROUP_SORTS[(GROUP_SORTS.index(self.sort) + 1) % len(GROUP_SORTS)]
        if self.diff is not None:
            self._fill_groups()
