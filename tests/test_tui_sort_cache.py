"""Sorting big tables without waiting on the sort: orders kept and computed ahead (OrderCache,
FrameTable), a sort that repaints the table without a layout pass, and body lines painted one
segment per cell exactly as the library paints them."""
from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pandas as pd
import pytest

from tui.widgets.order_cache import OrderCache
from tui.widgets.row_order import _distinct_texts, sort_order
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col


# --- the distinct texts a text sort ranks ------------------------------------------------------

@pytest.fixture(autouse=True)
def sort_ahead_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    sort orders computed ahead."""
    monkeypatch.setenv("ROOFTOP_SORT_AHEAD", "1")


def test_distinct_texts_are_each_values_str_whatever_holds_them():
    arrow_backed = pd.Index(["b", "a", "é", "日本"], dtype=pd.StringDtype("pyarrow"))
    python_str = np.array(["b", "a", "é"], dtype=object)
    mixed = np.array([10, "9", 2.5], dtype=object)  # not all str: each value's str, as before
    for uniques in (arrow_backed, python_str, mixed, pd.Index([1, 20, 3])):
        assert _distinct_texts(uniques).to_pylist() == [str(u) for u in uniques]
    # a text sort of a categorical with number categories ranks their text: "10" < "3" < "9"
    s = pd.Series(pd.Categorical([9, 10, None, 3]))
    assert sort_order(s, False, "text").tolist() == [1, 3, 0, 2]


# --- OrderCache --------------------------------------------------------------------------------

def test_order_cache_computes_once_and_a_second_asker_waits_for_it():
    cache = OrderCache(keep=2)
    calls = []
    started = threading.Event()

    def slow():
        calls.append(1)
        started.set()
        time.sleep(0.2)
        return np.array([2, 0, 1], dtype=np.int64)

    got = {}
    first = threading.Thread(target=lambda: got.setdefault("first", cache.get("k", slow)))
    first.start()
    started.wait(5)
    assert "k" in cache and cache.peek("k") is None  # being computed: not kept yet
    second = cache.get("k", lambda: calls.append("again") or np.array([9]))  # waits for the first
    first.join(5)
    assert calls == [1]
    assert second is got["first"] and second.tolist() == [2, 0, 1] and second.dtype == np.int32
    assert cache.peek("k") is second


def test_order_cache_a_cancelled_order_is_computed_by_the_next_asker_and_old_ones_go():
    cache = OrderCache(keep=2)
    assert cache.get("a", lambda: None) is None and "a" not in cache  # cancelled: nothing kept
    assert cache.get("a", lambda: np.arange(3)).tolist() == [0, 1, 2]
    cache.get("b", lambda: np.arange(4))
    cache.peek("a")  # used: "b" is now the least recently used
    cache.put("c", np.arange(5))
    assert cache.peek("b") is None and cache.peek("a") is not None and len(cache) == 2
    cache.clear()
    assert len(cache) == 0 and cache.peek("a") is None


def test_order_cache_drops_an_order_computed_for_a_cleared_frame():
    cache = OrderCache()
    release = threading.Event()

    def stale():
        release.wait(5)
        return np.arange(3)

    t = threading.Thread(target=lambda: cache.get("k", stale))
    t.start()
    time.sleep(0.05)
    cache.clear()  # another frame shown meanwhile
    release.set()
    t.join(5)
    assert cache.peek("k") is None


# --- FrameTable: orders computed ahead ---------------------------------------------------------

COLS = [Col("name", "kernel", "text"), Col("t", "time µs", "num"), Col("step", "step", "int")]


def small_frame() -> pd.DataFrame:
    return pd.DataFrame({"name": pd.Categorical(["b", "a", "c", "ab", "a"]),
                         "t": [2.0, 1.0, np.nan, 4.0, 1.0],
                         "step": pd.array([1, 3, 2, None, 3], dtype="Int32")})


def test_a_sort_finds_its_order_computed_ahead_and_shows_the_same_rows(monkeypatch):
    """Once a sort is painted, the orders of `s` (the next column) and `S` (the other direction)
    are computed in a thread; pressing either shows its rows without deriving the order again,
    the same rows a fresh sort gives (stable, nulls last)."""
    from textual.app import App

    monkeypatch.setattr(FrameTable, "DERIVE_IN_WORKER_FROM", 0)  # "big": worker, cache and prefetch
    f = small_frame()
    derived: list[tuple] = []
    plain_order_of = FrameTable._order_of

    def counting(self, state=None, cancelled=lambda: False, source=None):
        derived.append((state or self._state())[0])
        return plain_order_of(self, state, cancelled, source)

    monkeypatch.setattr(FrameTable, "_order_of", counting)
    seen: dict = {}

    class T(App):
        def compose(self):
            yield FrameTable(COLS, f, sort=("t", True), id="t")

    def names(t):
        return [t.row(i)["name"] for i in range(t.shown)]

    async def main():
        app = T()
        async with app.run_test() as pilot:
            t = app.query_one(FrameTable)
            derived.clear()  # (the first view, made when composed)
            t.sort = ("t", False)  # through the worker; then `s` (step ▼) and `S` (t ▼) are computed
            await app.workers.wait_for_complete()
            await pilot.pause()
            await app.workers.wait_for_complete()
            seen["ascending"] = names(t)
            seen["derived"] = list(derived)
            state = t._state()
            seen["kept"] = {s[0] for s in [state, (("step", True),) + state[1:], (("t", True),) + state[1:]]
                            if t._orders.peek(s) is not None}
            derived.clear()
            t.cycle_sort()  # step ▼: found computed
            await pilot.pause()
            seen["step"] = names(t)
            seen["steps"] = [t.row(i)["step"] for i in range(t.shown)]
            await app.workers.wait_for_complete()
            await pilot.pause()
            await app.workers.wait_for_complete()
            seen["derived_for_step"] = list(derived)
            derived.clear()
            t.reverse_sort()  # step ▲: computed after step ▼ was painted
            await pilot.pause()
            seen["step_up"] = [t.row(i)["step"] for i in range(t.shown)]
            seen["derived_for_step_up"] = list(derived)
            seen["status"] = t.status()

    asyncio.run(main())
    # t ascending, NaN last, ties (a, a at 1.0) in frame order
    assert seen["ascending"] == ["a", "a", "b", "ab", "c"]
    assert seen["derived"] == [("t", False), ("step", True), ("t", True)]  # the sort, then `s` and `S` ahead
    assert seen["kept"] == {("t", False), ("step", True), ("t", True)}
    # step ▼ and step ▲ were not derived when pressed; after step ▼ was painted, `s` (wrapping to
    # the name column, text ascending) and `S` (step ▲) were computed ahead
    assert seen["derived_for_step"] == [("name", False), ("step", False)]
    assert ("step", False) not in seen["derived_for_step_up"]
    # step descending, ties (3, 3: rows 1 and 4) in frame order, null last
    assert seen["step"] == ["a", "a", "c", "b", "ab"]
    assert [None if pd.isna(v) else int(v) for v in seen["steps"]] == [3, 3, 2, 1, None]
    assert [None if pd.isna(v) else int(v) for v in seen["step_up"]] == [1, 2, 3, 3, None]
    assert seen["status"] == "5 rows · sort: step ▲"


def test_orders_computed_ahead_follow_the_filter_and_are_dropped_with_the_frame(monkeypatch):
    from textual.app import App

    monkeypatch.setattr(FrameTable, "DERIVE_IN_WORKER_FROM", 0)
    f = small_frame()
    seen: dict = {}

    class T(App):
        def compose(self):
            yield FrameTable(COLS, f, sort=("t", True), id="t")

    async def main():
        app = T()
        async with app.run_test() as pilot:
            t = app.query_one(FrameTable)
            t.filter = "^a"
            await app.workers.wait_for_complete()
            await pilot.pause()
            await app.workers.wait_for_complete()
            t.cycle_sort()  # step ▼ over the filtered rows, computed ahead
            await pilot.pause()
            seen["filtered"] = [(t.row(i)["name"], int(t.row(i)["step"]) if pd.notna(t.row(i)["step"]) else None)
                                for i in range(t.shown)]
            new = f.iloc[:2].copy()
            await t.set_frame(new)
            await app.workers.wait_for_complete()
            seen["kept_after_new_frame"] = {state[2] == id(new) for state in list(t._orders._done)}

    asyncio.run(main())
    assert seen["filtered"] == [("a", 3), ("a", 3), ("ab", None)]
    assert seen["kept_after_new_frame"] == {True}  # only orders of the new frame


# --- a sort repaints the table without a layout pass ---------------------------------------------

def test_a_sort_updates_the_scrollable_size_without_a_layout_pass(monkeypatch):
    """The sort arrow widens a header (`step ▼`): the scrollable width and the horizontal
    scrollbar follow, and the screen lays nothing out again; a filter that lets every row fit
    (the vertical scrollbar goes) still asks for a layout pass."""
    from textual.app import App
    from textual.screen import Screen

    layouts = []
    plain_layout = Screen._refresh_layout

    def counting(self, *args, **kwargs):
        layouts.append(1)
        return plain_layout(self, *args, **kwargs)

    monkeypatch.setattr(Screen, "_refresh_layout", counting)
    n = 200
    f = pd.DataFrame({"name": pd.Categorical([f"k{i % 7}" for i in range(n)]),
                      "t": np.arange(n, dtype=float), "step": pd.array(np.arange(n) % 5, dtype="Int32")})
    seen: dict = {}

    class T(App):
        CSS = "FrameTable { height: 1fr; } FrameTable > DataTable { height: 1fr; }"

        def compose(self):
            yield FrameTable(COLS, f, id="t")

    async def main():
        app = T()
        async with app.run_test(size=(24, 10)) as pilot:  # narrower than the columns: both scrollbars
            t = app.query_one(FrameTable)
            await pilot.pause()
            table = t.table
            seen["before"] = (table.virtual_size, table.show_horizontal_scrollbar, table.show_vertical_scrollbar)
            layouts.clear()
            t.sort = ("step", True)
            await pilot.pause()
            await pilot.pause()
            seen["sorted"] = (table.virtual_size, table.horizontal_scrollbar.window_virtual_size)
            seen["sort_layouts"] = len(layouts)
            seen["header"] = table.render_line(0).text
            layouts.clear()
            t.filter = "^k1$"  # 29 rows: still more than fit
            await pilot.pause()
            seen["filter_layouts"] = len(layouts)
            t.filter = "^nothing$"
            await pilot.pause()
            await pilot.pause()
            seen["empty_layouts"] = len(layouts)
            seen["empty"] = (table.virtual_size.height, table.show_vertical_scrollbar)

    asyncio.run(main())
    size, show_h, show_v = seen["before"]
    assert show_h and show_v
    # kernel (2 + 6) + time µs (2 + 7) + step (2 + 4), then "step ▼" is 6 wide: +2
    assert size.width == 8 + 9 + 6
    assert seen["sorted"] == (size._replace(width=size.width + 2), size.width + 2)
    assert seen["sort_layouts"] == 0 and seen["filter_layouts"] == 0
    assert seen["empty"] == (1, False) and seen["empty_layouts"] >= 1


# --- body lines, one segment per cell ------------------------------------------------------------

@pytest.mark.parametrize("cursor_type", ["row", "none"])
def test_body_lines_equal_the_librarys_with_every_kind_of_cell(cursor_type):
    """Lines holding cells the fast path paints and cells it leaves to the library (wide and
    combining characters, tabs, bools, a final backslash), with the cursor, hover, stripes and
    scrolled sideways: the same segments (text and style, meta included) as the library's."""
    from textual.app import App
    from textual.coordinate import Coordinate
    from textual_fastdatatable import ArrowBackend, DataTable

    from tui.widgets.plain_cells import PlainCellTable

    names = ["gemm<1>", "日本語カーネル", "e\u0301x", "tab\there", "ends\\", None, "flash_fwd_kernel<128, 64, true>", "µs"]
    backend = ArrowBackend.from_pydict({"name": names, "n": [1, None, 3, 4, 5, 6, 7, 8],
                                        "ok": [True, False, None, True, True, False, True, False],
                                        "x": [1.5, -2.25, None, 1e-5, 7.0, 8.0, 9.0, 10.0]})
    seen = {}

    class T(App):
        def compose(self):
            yield PlainCellTable(backend=backend, cursor_type=cursor_type, render_markup=False, null_rep="—",
                                 zebra_stripes=True, max_column_content_width=14, id="t")

    async def main():
        app = T()
        async with app.run_test(size=(40, 12)) as pilot:
            table = app.query_one(PlainCellTable)
            table.focus()
            table.move_cursor(row=3)
            table.hover_coordinate = Coordinate(5, 1)
            await pilot.pause()
            def lines():
                return [[(s.text, s.style, s.style.meta if s.style else None)
                         for s in table._render_line(y, x1, x1 + 40, table.rich_style)]
                        for x1 in (0, 3, 17) for y in range(len(names) + 1)]

            for cls in (PlainCellTable, DataTable):
                table.__class__ = cls
                table._clear_caches()
                seen[cls] = lines()
                seen[cls, "painted"] = [strip.text for strip in table.render_lines(table.region.reset_offset)]
            # the cursor and hover move with every line already painted: the lines they leave and
            # reach change, the rest come from the cache, all as the library paints them afresh
            table.__class__ = PlainCellTable
            lines()
            table.move_cursor(row=4)
            table.hover_coordinate = Coordinate(2, 0)
            seen[PlainCellTable, "moved"] = lines()
            table.__class__ = DataTable
            table._clear_caches()
            seen[DataTable, "moved"] = lines()
            table.__class__ = PlainCellTable

    asyncio.run(main())
    assert seen[PlainCellTable] == seen[DataTable]
    assert seen[PlainCellTable, "painted"] == seen[DataTable, "painted"]
    assert seen[PlainCellTable, "moved"] == seen[DataTable, "moved"]
    assert (seen[DataTable, "moved"] != seen[DataTable]) == (cursor_type == "row")  # no cursor: nothing shows it
    assert any("日本" in text for line in seen[DataTable] for text, _, _ in line)


def test_order_cache_keeps_nothing_asked_for_a_generation_cleared_since():
    cache = OrderCache()
    generation = cache.generation
    cache.clear()  # the frame the key was made for is gone
    got = cache.get("k", lambda: np.arange(3, dtype=np.int64), generation)
    assert got.tolist() == [0, 1, 2] and got.dtype == np.int32
    assert "k" not in cache and cache.peek("k") is None
    assert cache.get("k", lambda: np.arange(2), cache.generation).tolist() == [0, 1] and cache.peek("k") is not None
