"""Arrow-backed tables (textual-fastdatatable): a frame shown with keyboard sort, regex filter, search.

The stock DataTable freezes for seconds on 100k rows; fastdatatable with an Arrow backend mounts a
million in a fraction of a second (a plotext 5 quirk, measured here). What the cells show is
`table_values` (`Col`, display values), the order of a sort `row_order`. Text cells are rendered
without markup: names from traces are data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.worker import get_current_worker
from textual_fastdatatable import DataTable

from rooftop import speedups

from tui.widgets.frame_backend import FrameBackend
from tui.widgets.order_cache import OrderCache, compact
from tui.widgets.plain_cells import PlainCellTable
from tui.widgets.row_order import sort_order
from tui.widgets.table_values import Col, _codes, display_table, frame_cells


def compile_pattern(pattern: str) -> re.Pattern:
    """A case-insensitive regex; a bad regex falls back to a literal substring."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE)


def matches(values: pd.Series, pattern: str) -> np.ndarray:
    """Whether each row matches `pattern`, searched once per distinct value."""
    rx = compile_pattern(pattern)
    codes, uniques = _codes(values)
    hit = np.array([bool(rx.search(str(u))) for u in uniques] + [False], dtype=bool)
    return hit[codes]


class FrameTable(Vertical):
    """A DataFrame shown through fastdatatable, with keyboard sort, regex filter and n/N search.

    The frame is the state; the table widget shows a view of it through a `FrameBackend`. Another
    frame or other columns mount a new table widget; a sort or a filter (the same cells in another
    order) gives the mounted one a new backend in place. A big view keeps its last few orders and,
    once a sort is painted, computes the two a user asks for next (`s`, `S`) in a thread
    (`OrderCache`): a million-row sort then costs its repaint, not its ordering.
    """

    class _RowMessage(Message):
        def __init__(self, table: "FrameTable", row: pd.Series) -> None:
            super().__init__()
            self.table = table
            self.row = row  # the frame's row: all columns, not only the shown ones

        @property
        def control(self) -> "FrameTable":
            return self.table

    class Selected(_RowMessage):
        """Enter on a row."""

    class Highlighted(_RowMessage):
        """The cursor moved onto a row."""

    class Changed(Message):
        """The view was rebuilt (another frame, sort or filter): a screen's status line follows it."""

        def __init__(self, table: "FrameTable") -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> "FrameTable":
            return self.table

    # The state a user changes; the watchers rebuild the view. (sort column, descending) is one
    # value so that choosing a column and its direction is one rebuild, not two.
    # `repaint=False`: this container paints nothing of its own, and the table in it repaints
    # itself when it shows the new view; a repaint of the container, asked for at the key press,
    # drew the whole table region once with the new view and once more when the table's own
    # repaint came (two frames per sort at a million rows).
    sort: reactive[tuple[str | None, bool]] = reactive((None, False), init=False, repaint=False)
    filter: reactive[str | None] = reactive(None, init=False, repaint=False)

    # Views from this many rows derive their order (regex filter, argsort) in a thread worker,
    # which a newer sort or filter cancels; smaller ones inline (a few ms, and screens that await
    # `set_frame` see the table at once).
    DERIVE_IN_WORKER_FROM = 100_000
    # Such views also compute, once a sort is painted, the orders of `s` and `S` from it.
    PREFETCH_ORDERS = True

    @dataclass
    class OrderReady(Message):
        """A worker derived the view's row order for `state` (sort, filter, source)."""

        state: tuple
        order: np.ndarray
        keep_cursor: bool

    def __init__(self, cols: list[Col], frame: pd.DataFrame | None = None, *, search_key: str | None = None,
                 sort: tuple[str, bool] | None = None, on_view: Callable[[], None] | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        """`on_view`: called on the UI thread each time the view changes, right after the table is
        given it, before `Changed` is posted: a status line it updates is painted in the same frame
        as the rows (from the `Changed` message it came a frame after them)."""
        super().__init__(id=id, classes=classes)
        self.on_view = on_view
        self.cols = cols
        self.search_key = search_key or next((c.key for c in cols if c.kind == "text"), cols[0].key)
        self.set_reactive(FrameTable.sort, sort if sort else (None, False))
        self.pattern: str | None = None  # last search pattern: n/N jump between its matches
        self.source = frame if frame is not None else pd.DataFrame(columns=[c.key for c in cols])
        self._order: np.ndarray = np.arange(len(self.source))  # source positions, in view order
        self._view: pd.DataFrame | None = None
        self._serial = 0
        self._cells: list = []
        self._cells_key: tuple | None = None
        self._orders = OrderCache()  # big views: orders by `_state()`, for the frame shown

    def compose(self) -> ComposeResult:
        self._derive()
        yield self._make_table()

    # --- state -> view ------------------------------------------------------------------------
    # The view is `_order`, positions into the source: a million-row frame of ~60 columns is never
    # sorted or copied as a whole; only the shown columns are, as Arrow, and rows on demand.
    @property
    def sort_key(self) -> str | None:
        return self.sort[0]

    @sort_key.setter
    def sort_key(self, key: str | None) -> None:  # no rebuild: the caller refreshes (or sets `sort`)
        self.set_reactive(FrameTable.sort, (key, self.sort[1]))

    @property
    def sort_desc(self) -> bool:
        return self.sort[1]

    @sort_desc.setter
    def sort_desc(self, desc: bool) -> None:
        self.set_reactive(FrameTable.sort, (self.sort[0], desc))

    def _state(self) -> tuple:
        return (self.sort, self.filter, id(self.source), self.search_key)

    def _order_of(self, state: tuple | None = None, cancelled=lambda: False,
                  source: pd.DataFrame | None = None) -> np.ndarray | None:
        """Positions in `source` (the shown frame by default) in view order for `state` (`_state()`,
        the current one by default: the sort and filter), None if `cancelled()` says a newer state
        superseded this one."""
        (sort_key, sort_desc), pattern, _, search_key = state or self._state()
        src = self.source if source is None else source
        rows = None  # every row, in frame order (no array of positions made for them)
        if pattern and len(src):
            rows = np.flatnonzero(matches(src[search_key], pattern))
        if cancelled():
            return None
        if sort_key and sort_key in src.columns and len(src) and (rows is None or len(rows)):
            key = src[sort_key] if rows is None else src[sort_key].iloc[rows]
            order = sort_order(key, sort_desc, self._kind(sort_key))
            # over every row the sort's positions are the rows themselves: no second 1M-row array
            return order if rows is None else rows[order]
        return np.arange(len(src)) if rows is None else rows

    def _kept_order(self, view: tuple, cancelled=lambda: False) -> np.ndarray | None:
        """The order of `view` = (state, source, the cache's generation), all read together on the UI
        thread, through the table's `OrderCache` (blocking: for workers). The frame travels with
        the state: a worker never reads `self.source`, which another frame may have replaced."""
        state, source, generation = view
        return self._orders.get(state, lambda: self._order_of(state, cancelled, source), generation)

    def _view_key(self, state: tuple) -> tuple:
        return state, self.source, self._orders.generation

    def _derive(self) -> None:
        self._order, self._view = self._order_of(), None

    async def watch_sort(self) -> None:
        await self._rederive(keep_cursor=False)

    async def watch_filter(self, pattern: str | None) -> None:
        if pattern:
            self.pattern = pattern
        await self._rederive(keep_cursor=False)

    async def _rederive(self, keep_cursor: bool) -> None:
        if not self.is_mounted:
            return  # compose derives the first view
        if len(self.source) >= self.DERIVE_IN_WORKER_FROM:
            state = self._state()
            order = self._orders.peek(state)
            if order is not None:  # computed ahead (`_prefetch_orders`) or shown before
                self.workers.cancel_group(self, "frame-table-order")  # an older state's order, if any
                await self._rebuild(order, keep_cursor)
            else:
                self._derive_worker(self._view_key(state), keep_cursor)
        else:
            await self.refresh_view(keep_cursor)

    # `description`: without one, Textual names a worker by the repr of its arguments, and a view
    # carries its frame (the repr of a million-row frame, on the UI thread, per sort)
    @work(thread=True, exclusive=True, exit_on_error=False, group="frame-table-order", description="the view's order")
    def _derive_worker(self, view: tuple, keep_cursor: bool) -> None:
        worker = get_current_worker()
        order = self._kept_order(view, lambda: worker.is_cancelled)
        if order is not None and not worker.is_cancelled:
            self.post_message(self.OrderReady(view[0], order, keep_cursor))

    def _next_sort(self) -> tuple[str, bool]:
        """What `cycle_sort` sorts by next: the next column, numbers descending first (biggest on
        top), text ascending."""
        keys = [c.key for c in self.cols]
        i = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        col = self.cols[i % len(keys)]
        return col.key, col.kind != "text"

    def _reversed_sort(self) -> tuple[str, bool]:
        """What `reverse_sort` sorts by: the same column (the first if none), the other direction."""
        return self.sort_key or self.cols[0].key, not self.sort_desc

    def _prefetch_orders(self) -> None:
        """Start computing the orders of the next two likely keys, `s` and `S`, unless kept."""
        if not self.PREFETCH_ORDERS or not speedups.on("SORT_AHEAD") or not self.is_mounted or len(self.source) < self.DERIVE_IN_WORKER_FROM \
                or not self.cols:
            return
        _, pattern, source, search_key = self._state()
        states = [(sort, pattern, source, search_key)
                  for sort in (self._next_sort(), self._reversed_sort())]
        wanted = [state for state in states if state not in self._orders]
        if wanted:
            self._prefetch_worker([self._view_key(state) for state in wanted])

    @work(thread=True, exclusive=True, exit_on_error=False, group="frame-table-prefetch",
          description="the orders of s and S")
    def _prefetch_worker(self, views: list[tuple]) -> None:
        # Cancelled by the next prefetch (a newer view): the order being computed is finished (a key
        # may be waiting for it), the rest are skipped.
        worker = get_current_worker()
        for view in views:
            if worker.is_cancelled or view[1] is not self.source:
                return
            self._kept_order(view)

    @on(OrderReady)
    async def _order_ready(self, message: OrderReady) -> None:
        message.stop()
        if message.state != self._state():
            return  # superseded (another sort, filter or frame came after it)
        await self._rebuild(message.order, message.keep_cursor)

    def _kind(self, key: str) -> str:
        col = next((c for c in self.cols if c.key == key), None)
        if col is not None:
            return "text" if col.kind == "text" else "num"
        dtype = self.source[key].dtype
        return "num" if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else "text"

    @property
    def view(self) -> pd.DataFrame:
        """The rows as shown (filtered, sorted), every column; built on first use."""
        if self._view is None:
            self._view = self.source.iloc[self._order].reset_index(drop=True)
        return self._view

    @property
    def shown(self) -> int:
        """How many rows the view has."""
        return len(self._order)

    def row(self, i: int) -> pd.Series:
        """Row `i` of the view, all columns (without building the view)."""
        return self.source.iloc[int(self._order[i])]

    def column(self, key: str) -> pd.Series:
        """One column of the view."""
        return self.source[key].iloc[self._order].reset_index(drop=True)

    def _labels(self) -> list[str]:
        arrow = " ▼" if self.sort_desc else " ▲"
        return [c.label + (arrow if c.key == self.sort_key else "") for c in self.cols]

    def _widest(self) -> int:
        # Long kernel names must not push every number off an 80-column screen; the name column is
        # cut here, head…tail, so that two names never show the same text (the table's own cut
        # keeps only the head).
        return max(16, min(60, self.app.size.width - 48))

    def _cells_for(self, widest: int) -> tuple:
        """What identifies the shown cells: the source, the columns, the cut. A sort or a filter
        reorders rows and keeps them."""
        return (id(self.source), tuple(self.cols), self.search_key, widest)

    def _backend(self, widest: int) -> FrameBackend:
        # Cells are formatted when painted (FrameBackend): a million-row view costs its row order
        # and a float array per numeric column, never a million display values.
        key = self._cells_for(widest)
        if self._cells_key != key:
            self._cells, self._cells_key = frame_cells(self.source, self.cols, fit={self.search_key: widest}), key
        return FrameBackend([c.label for c in self.cols], self._cells,
                            None if self._is_identity() else self._order, len(self.source))

    def _make_table(self) -> DataTable:
        self._serial += 1
        widest = self._widest()
        # PlainCellTable: the library's table, plain cells painted without Rich's layout (a page of a
        # million-row view within a key's time; docs/speed.md)
        return PlainCellTable(backend=self._backend(widest), column_labels=self._labels(), cursor_type="row",
                         render_markup=False, null_rep="—", show_row_labels=False, zebra_stripes=True,
                         max_column_content_width=widest, id=f"{self.id or 'frame'}-table-{self._serial}")

    def _is_identity(self) -> bool:
        n = len(self.source)
        return len(self._order) == n and (n == 0 or (self._order[0] == 0 and bool((np.diff(self._order) == 1).all())))

    @property
    def table(self) -> DataTable | None:
        return next(iter(self.query(DataTable)), None)

    async def refresh_view(self, keep_cursor: bool = False) -> None:
        """Derive the order and rebuild now (on the UI thread)."""
        await self._rebuild(self._order_of(), keep_cursor)

    async def _rebuild(self, order: np.ndarray, keep_cursor: bool) -> None:
        old = self.table
        row = old.cursor_row if old is not None and keep_cursor else 0
        had_focus = old is not None and old.has_focus
        if len(self.source) >= self.DERIVE_IN_WORKER_FROM:
            order = compact(order)
            self._orders.put(self._state(), order)  # `S` twice comes back to it
            self.call_after_refresh(self._prefetch_orders)  # once this view is painted
        self._order, self._view = order, None
        # the same cells (the cut made for the mounted table's width included): a sort or a filter
        if isinstance(old, PlainCellTable) and self._cells_key == self._cells_for(self._widest()):
            self._show_in_place(old, row)
            return
        if old is not None:
            await old.remove()
        new = self._make_table()
        await self.mount(new)
        if had_focus:  # `g`, `c`, a sort: the rebuilt table keeps the keyboard
            self.screen.set_focus(new)
        if self.shown:
            new.move_cursor(row=min(row, self.shown - 1))
        self._view_changed()

    def _view_changed(self) -> None:
        if self.on_view is not None:
            self.on_view()
        self.post_message(self.Changed(self))

    def _show_in_place(self, table: PlainCellTable, row: int) -> None:
        """The same cells in another order (a sort, a filter): the mounted table shows the new view,
        keeping its focus and place in the layout."""
        self._serial += 1
        before = table.cursor_row
        table.show_view(self._backend(table.max_column_content_width), self._labels())
        if self.shown:
            table.move_cursor(row=min(row, self.shown - 1))
            if table.cursor_row == before:  # the cursor did not move, but the row under it changed
                self.post_message(self.Highlighted(self, self.row(table.cursor_row)))
        self._view_changed()

    async def set_frame(self, frame: pd.DataFrame, cols: list[Col] | None = None, search_key: str | None = None,
                        default_sort: tuple[str, bool] | None = None) -> None:
        """Show another frame; the sort stays if its column is still shown, else `default_sort`
        applies (set before the one rebuild: a million rows must not be laid out twice)."""
        self.source = frame
        self._orders.clear()
        if cols is not None:
            self.cols = cols
            if self.sort_key not in {c.key for c in cols}:
                self.sort_key = None
        if self.sort_key is None and default_sort is not None:
            self.sort_key, self.sort_desc = default_sort
        if search_key:
            self.search_key = search_key
        await self.refresh_view()

    def cycle_sort(self) -> str:
        """Next column becomes the sort column (numbers descending first: biggest on top); the
        watcher rebuilds the view."""
        self.sort = self._next_sort()
        return next(c.label for c in self.cols if c.key == self.sort_key)

    def reverse_sort(self) -> None:
        self.sort = self._reversed_sort()

    def set_filter(self, pattern: str | None) -> None:
        if pattern:
            self.pattern = pattern
        self.filter = pattern or None

    def jump(self, forward: bool = True) -> bool:
        """Move the cursor to the next/previous row matching the last pattern (wrapping)."""
        table = self.table
        if not self.pattern or table is None or not self.shown:
            return False
        hits = np.flatnonzero(matches(self.source[self.search_key], self.pattern)[self._order])
        if not len(hits):
            return False
        cur = table.cursor_row
        if forward:
            after = hits[hits > cur]
            target = after[0] if len(after) else hits[0]
        else:
            before = hits[hits < cur]
            target = before[-1] if len(before) else hits[-1]
        table.move_cursor(row=int(target))
        return True

    def current(self) -> pd.Series | None:
        table = self.table
        if table is None or not self.shown:
            return None
        return self.row(min(table.cursor_row, self.shown - 1))

    def status(self) -> str:
        parts = [f"{self.shown:,} of {len(self.source):,} rows" if self.filter else f"{self.shown:,} rows"]
        label = next((c.label for c in self.cols if c.key == self.sort_key), None)
        if label:
            parts.append(f"sort: {label} {'▼' if self.sort_desc else '▲'}")
        if self.filter:
            parts.append(f"filter: /{self.filter}/")
        return " · ".join(parts)

    def shown_frame(self) -> pd.DataFrame:
        """The rows as shown (filtered, sorted), with the shown columns under their labels."""
        return display_table(self.source, self.cols, self._order).to_pandas()

    # --- events -------------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < self.shown:
            self.post_message(self.Selected(self, self.row(event.cursor_row)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < self.shown:
            self.post_message(self.Highlighted(self, self.row(event.cursor_row)))
