"""Kernels (screen 3): grouped by short name or category, or every raw launch; sort, filter, search.

Keys: `g` raw launches <-> groups, `c` group by category, `s` next sort column, `S` reverse,
`/` filter by name (regex; a bad regex is taken literally), `n`/`N` next/previous match of the last
pattern (also after `Esc` cleared the filter), `Enter` kernel detail.
"""
from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static

from ..widgets.breadcrumb import RooftopScreen
from ..widgets.phase import phase_labels, trace_phases
from ..widgets.table import Col, FrameTable
from ..widgets.text import safe_text

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
        Binding("s", "cycle_sort", "Sort", id="kernels.sort"),
        Binding("S", "reverse_sort", "Reverse", id="kernels.reverse", show=False),
        # priority: the app runs it before forwarding the next key, so a burst like `/bold⏎` (tmux,
        # paste) types into the box instead of racing to the table, whose queue lags behind.
        Binding("slash", "filter", "Filter", id="kernels.filter", priority=True),
        Binding("n", "jump(True)", "Next match", id="kernels.next"),
        Binding("N", "jump(False)", "Prev match", id="kernels.prev", show=False),
    ]

    def __init__(self, analysis, crumbs: list[str] | None = None) -> None:
        super().__init__(analysis, crumbs)
        self.mode = "short_name"  # short_name | category | raw

    def compose_body(self) -> ComposeResult:
        yield Static("", id="kernels-status", classes="status")
        yield FrameTable(GROUP_COLS, self._groups("short_name"), search_key="key",
                         sort=("time_ns", True), id="kernels-table")
        yield FilterInput(placeholder="filter kernels by name (regex) — Enter applies, Esc clears",
                          id="kernels-filter", classes="-hidden")

    def _groups(self, by: str):
        """The analysis' groups with readable phases (`prefill+` -> `prefill (+decode)`)."""
        groups = self.analysis.groups(by=by)
        if "phase" in groups.columns:
            groups = groups.assign(phase=phase_labels(groups["phase"], trace_phases(self.analysis)))
        return groups

    def on_mount(self) -> None:
        self._status()
        self.table.query_one("DataTable").focus()

    @property
    def table(self) -> FrameTable:
        return self.query_one("#kernels-table", FrameTable)

    def _status(self, note: str = "") -> None:
        mode = {"short_name": "grouped by name", "category": "grouped by category", "raw": "raw launches"}[self.mode]
        table = self.table
        # Groups only (a few hundred rows): raw launches never carry a mixed phase.
        mixed = (self.mode != "raw" and "phase" in table.source.columns
                 and table.column("phase").astype(str).str.contains("(+", regex=False).any())
        legend = "phase a (+b): mostly a, also b" if mixed else ""
        # the filter is user-typed text and the note may quote a trace: never markup
        line = " · ".join(p for p in (mode, self.table.status(), note, legend) if p)
        self.query_one("#kernels-status", Static).update(safe_text(line))

    async def _show(self, mode: str) -> None:
        self.mode = mode
        if mode == "raw":
            # Raw launches can be a million rows: the Arrow table handles them; sort stays numeric.
            await self.table.set_frame(self.analysis.kernels(), RAW_COLS, "short_name", default_sort=("dur_ns", True))
        else:
            await self.table.set_frame(self._groups(mode), GROUP_COLS, "key", default_sort=("time_ns", True))
        self._status()

    async def action_toggle_raw(self) -> None:
        await self._show("short_name" if self.mode == "raw" else "raw")

    async def action_toggle_category(self) -> None:
        await self._show("short_name" if self.mode == "category" else "category")

    async def action_cycle_sort(self) -> None:
        await self.table.cycle_sort()
        self._status()

    async def action_reverse_sort(self) -> None:
        await self.table.reverse_sort()
        self._status()

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
        await self.table.set_filter(event.value.strip() or None)
        self.set_focus(self.table.query_one("DataTable"))
        self._status()

    @on(FrameTable.Selected, "#kernels-table")
    def open_detail(self, event: FrameTable.Selected) -> None:
        from .detail import KernelDetailScreen

        by = "short_name" if self.mode == "raw" else self.mode
        key = event.row["short_name"] if self.mode == "raw" else event.row["key"]
        self.drill(KernelDetailScreen(self.analysis, key, by, self.crumbs + [str(key)]))
