"""Kernels (screen 3): grouped by short name or category, or every raw launch; sort, filter, search.

Keys: `g` raw launches <-> groups, `c` group by category, `p` group by (name, phase): each row one
phase's numbers, and Enter opens that phase's detail; `s` next sort column, `S` reverse,
`/` filter by name (regex; a bad regex is taken literally), `n`/`N` next/previous match of the last
pattern (also after `Esc` cleared the filter), `Enter` kernel detail.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Static

from tui.widgets.breadcrumb import RooftopScreen
from tui.widgets.phase import phase_labels, trace_phases
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col
from tui.workers import post_if_current
from tui.widgets.text import safe_text

# Time first after the name: at 80 columns the right-hand columns scroll off, the time must not.
GROUP_COLS = [
    Col("key", "kernel", "text"), Col("time_ns", "time µs", "ns"), Col("time_share", "time %", "pct"),
    Col("count", "launches", "int"), Col("mean_ns", "mean µs", "ns", 2), Col("tflops", "TFLOP/s", "num", 2),
    Col("tbps", "TB/s", "num", 2), Col("ai", "AI FLOP/B", "num", 1), Col("pct_of_roof", "% roof", "pct"),
    Col("bound", "bound", "text"), Col("phase", "phase", "text"), Col("category", "category", "text"),
]
RAW_COLS = [
    Col("short_name", "kernel", "text"), Col("dur_ns", "time µs", "ns", 2), Col("phase", "phase", "text"),
    Col("step", "step", "int"), Col("layer", "layer", "int"), Col("start_ns", "start µs", "ns"),
    Col("category", "category", "text"), Col("path", "range", "text"), Col("stream", "stream", "int"),
]


class FilterInput(Input):
    BINDINGS = [Binding("escape", "clear", "Clear filter", id="kernels.filter-clear")]

    def action_clear(self) -> None:
        self.post_message(self.Submitted(self, ""))


class KernelsScreen(RooftopScreen):
    BREADCRUMB = "Kernels"
    EXPORT_NAME = "kernels"
    BINDINGS = [
        Binding("g", "toggle_raw", "Raw/grouped", id="kernels.raw"),
        Binding("c", "toggle_category", "By category", id="kernels.category"),
        Binding("p", "toggle_phase", "By phase", id="kernels.phase"),
        Binding("s", "cycle_sort", "Sort", id="kernels.sort"),
        Binding("S", "reverse_sort", "Reverse", id="kernels.reverse", show=False),
        # priority: the app runs it before forwarding the next key, so a burst like `/bold⏎` (tmux,
        # paste) types into the box instead of racing to the table, whose queue lags behind.
        Binding("slash", "filter", "Filter", id="kernels.filter", priority=True),
        Binding("n", "jump(True)", "Next match", id="kernels.next"),
        Binding("N", "jump(False)", "Prev match", id="kernels.prev", show=False),
    ]

    # What the table groups by; a watcher loads it (off the UI thread) whenever it changes.
    mode: reactive[str] = reactive("short_name", init=False)  # short_name | category | phase | raw

    @dataclass
    class FrameReady(Message):
        mode: str
        frame: pd.DataFrame

    def compose_body(self) -> ComposeResult:
        yield Static("", id="kernels-status", classes="status")
        yield FrameTable(GROUP_COLS, search_key="key", sort=("time_ns", True), on_view=self._status, id="kernels-table")
        yield FilterInput(placeholder="filter kernels by name (regex) — Enter applies, Esc clears",
                          id="kernels-filter", classes="-hidden")

    def _frame(self, mode: str) -> pd.DataFrame:
        """The rows for `mode` (blocking: a worker calls it): the analysis' groups with readable
        phases (`prefill+` -> `prefill (+decode)`), one row per name and phase, or every launch."""
        if mode == "raw":
            return self.analysis.kernels()
        if mode == "phase":
            return self.analysis.groups_by_phase("short_name")
        groups = self.analysis.groups(by=mode)
        if "phase" in groups.columns:
            groups = groups.assign(phase=phase_labels(groups["phase"], trace_phases(self.analysis)))
        return groups

    def on_mount(self) -> None:
        self.table.query_one("DataTable").focus()
        self._load(self.mode)

    def watch_mode(self, mode: str) -> None:
        self._load(mode)

    @work(thread=True, exclusive=True, exit_on_error=False, group="kernels")
    def _load(self, mode: str) -> None:
        post_if_current(self, self.FrameReady(mode, self._frame(mode)))

    @on(FrameReady)
    async def _show(self, message: FrameReady) -> None:
        if message.mode != self.mode:
            return  # a newer mode is on its way
        if message.mode == "raw":
            # Raw launches can be a million rows: the Arrow table handles them; sort stays numeric.
            await self.table.set_frame(message.frame, RAW_COLS, "short_name", default_sort=("dur_ns", True))
        else:
            await self.table.set_frame(message.frame, GROUP_COLS, "key", default_sort=("time_ns", True))

    @on(FrameTable.Changed, "#kernels-table")
    def _table_changed(self) -> None:  # (the status line follows the view through `on_view`)
        if self.focused is None and self.table.table is not None:  # the filtered table was rebuilt
            self.set_focus(self.table.table)

    @property
    def table(self) -> FrameTable:
        return self.query_one("#kernels-table", FrameTable)

    def _status(self, note: str = "") -> None:
        mode = {"short_name": "grouped by name", "category": "grouped by category", "phase": "grouped by name and phase",
                "raw": "raw launches"}[self.mode]
        table = self.table
        # Groups only (a few hundred rows): raw launches never carry a mixed phase.
        mixed = (self.mode != "raw" and "phase" in table.source.columns
                 and table.column("phase").astype(str).str.contains("(+", regex=False).any())
        legend = "phase a (+b): mostly a, also b" if mixed else ""
        # the filter is user-typed text and the note may quote a trace: never markup
        line = " · ".join(p for p in (mode, self.table.status(), note, legend) if p)
        # one line of fixed height (`.status`): no layout pass, which would repaint the whole table
        self.query_one("#kernels-status", Static).update(safe_text(line), layout=False)

    def action_toggle_raw(self) -> None:
        self.mode = "short_name" if self.mode == "raw" else "raw"

    def action_toggle_category(self) -> None:
        self.mode = "short_name" if self.mode == "category" else "category"

    def action_toggle_phase(self) -> None:
        self.mode = "short_name" if self.mode == "phase" else "phase"

    def action_cycle_sort(self) -> None:
        self.table.cycle_sort()  # the table's `sort` watcher rebuilds it; `on_view` updates the status

    def action_reverse_sort(self) -> None:
        self.table.reverse_sort()

    def action_filter(self) -> None:
        box = self.query_one("#kernels-filter", FilterInput)
        if self.focused is box:  # a priority binding sees `/` typed into the box too: it is text there
            box.insert_text_at_cursor("/")
            return
        box.remove_class("-hidden")
        box.value = self.table.filter or ""
        # Focus now, not on the next idle (`focus()` is deferred): keys typed right after `/`, as a
        # burst from tmux or a paste, must land in the box, and Enter must not open a kernel.
        self.set_focus(box)

    def action_jump(self, forward: bool) -> None:
        if not self.table.pattern:
            self._status("no search yet: press / to filter")
        elif not self.table.jump(forward):
            self._status(f"no match for /{self.table.pattern}/")

    @on(Input.Submitted, "#kernels-filter")
    async def apply_filter(self, event: Input.Submitted) -> None:
        box = self.query_one("#kernels-filter", FilterInput)
        box.add_class("-hidden")
        self.table.set_filter(event.value.strip() or None)
        self.set_focus(self.table.query_one("DataTable"))

    @on(FrameTable.Selected, "#kernels-table")
    def open_detail(self, event: FrameTable.Selected) -> None:
        from tui.screens.detail import KernelDetailScreen

        by = "short_name" if self.mode in ("raw", "phase") else self.mode
        key = event.row["short_name"] if self.mode == "raw" else event.row["key"]
        phase = event.row["phase"] if self.mode == "phase" else None
        self.drill(KernelDetailScreen(self.analysis, key, by, self.crumbs + [str(key)], phase=phase))
