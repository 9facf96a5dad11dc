"""Screen 5: warp stall breakdowns per phase or per category, and the kernels behind the top reasons."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from rooftop.analysis.stalls import STALL_MEANING
from rooftop.present.format import fmt_ns, fmt_pct
from tui.widgets.breadcrumb import RooftopScreen
from tui.widgets.stall_bars import StallBars
from tui.widgets.text import safe_text
from tui.workers import post_if_current

GROUPINGS = ("phase", "category")
TOP_REASONS = 3

def top_reasons(stalls: pd.DataFrame, n: int = TOP_REASONS) -> list[str]:
    """The reasons with the largest share in any group; `selected` is issuing, not stalling."""
    best = stalls.drop(columns=["selected"], errors="ignore").max(axis=0)
    best = best[best > 0].sort_values(ascending=False, kind="stable")
    return [str(r) for r in best.index[:n]]


class StallsScreen(RooftopScreen):
    """Duration-weighted warp stall shares, as bars with what each reason means."""

    BINDINGS = [
        Binding("c", "toggle_grouping", "Phase/category", id="stalls.grouping"),
    ]

    @dataclass
    class Ready(Message):
        by: str
        stalls: pd.DataFrame | None
        tops: dict[str, pd.DataFrame]

    BREADCRUMB = "Stalls"
    EXPORT_NAME = "stalls"
    # What the bars are grouped by; the watcher recomputes (the screen shows `shown_by` until then).
    by: reactive[str] = reactive("phase", init=False)

    def __init__(self, analysis, crumbs: list[str] | None = None) -> None:
        super().__init__(analysis, crumbs)
        self.shown_by = "phase"
        self.stalls: pd.DataFrame | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id="stalls-title")
        yield VerticalScroll(Static(Text("Computing stall breakdown…")), id="stalls-body")

    def on_mount(self) -> None:
        self._update_title()
        self._compute(self.by)

    def _update_title(self) -> None:
        other = GROUPINGS[(GROUPINGS.index(self.shown_by) + 1) % len(GROUPINGS)]
        # The trace label goes last: a long file name must not cut what the screen is showing.
        t = Text(f"Warp stalls by {self.shown_by}", style="bold", no_wrap=True, overflow="ellipsis")
        t.append(f"  (c: by {other})  ", style="")
        t.append_text(safe_text(self.analysis.identity.get("label") or self.analysis.trace.label, style="dim"))
        self.query_one("#stalls-title", Static).update(t)

    @work(thread=True, exclusive=True, exit_on_error=False, group="stalls")
    def _compute(self, by: str) -> None:
        stalls = self.analysis.stalls(by=by)
        tops = {} if stalls is None else {r: self.analysis.stall_top_kernels(r, n=5) for r in top_reasons(stalls)}
        post_if_current(self, self.Ready(by, stalls, tops))

    @on(Ready)
    async def _ready(self, message: Ready) -> None:
        self.shown_by, self.stalls = message.by, message.stalls
        self._update_title()
        body = self.query_one("#stalls-body", VerticalScroll)
        await body.remove_children()
        if message.stalls is None:
            await body.mount(Static(Text(self.analysis.stalls_missing), id="stalls-none"))
            return
        widgets = []
        for group, row in message.stalls.iterrows():
            widgets.append(Static(safe_text(group), classes="stalls-group"))
            widgets.append(StallBars(row, top=8, classes="stalls-bars"))
        if message.tops:
            widgets.append(Static(Text("Kernels behind the top reasons"), classes="stalls-section"))
            for reason, kernels in message.tops.items():
                widgets.append(Static(_kernels_text(reason, kernels), classes="stalls-kernels"))
        await body.mount_all(widgets)

    def export_frame(self) -> pd.DataFrame | None:
        return None if self.stalls is None else self.stalls.reset_index()

    def action_toggle_grouping(self) -> None:
        self.by = GROUPINGS[(GROUPINGS.index(self.by) + 1) % len(GROUPINGS)]

    def watch_by(self, by: str) -> None:
        self._compute(by)


def _kernels_text(reason: str, kernels: pd.DataFrame) -> Text:
    t = Text()
    t.append(reason, style="bold")
    t.append(f" — {STALL_MEANING.get(reason, '')}", style="italic")
    for _, k in kernels.iterrows():
        t.append("\n  ")
        t.append(f"{fmt_ns(k.get('time_ns')):>10}  {fmt_pct(k.get('share')):>6} of its cycles  ")
        t.append_text(safe_text(k.get("short_name")))
    return t
