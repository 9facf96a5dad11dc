"""The shared table's lazy backend (FrameBackend): the same cells and column widths as the Arrow
backend built from every display value, for any order; and a million-row view that builds no
per-row display values."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rich.style import Style
from textual_fastdatatable import ArrowBackend

from textual_fastdatatable.format import measure_width

from tui.widgets.frame_backend import FrameBackend, NumberCells, TextCells
from tui.widgets.table_values import Col, display_table, frame_cells

COLS = [Col("name", "kernel", "text"), Col("t", "time µs", "ns", 2), Col("share", "share %", "pct"),
        Col("n", "launches", "int"), Col("big", "bytes", "num"), Col("tiny", "tiny", "num", 1),
        Col("wee", "wee", "num", 1), Col("gone", "missing", "num")]


def frame() -> pd.DataFrame:
    names = pd.Categorical(["gemm<1>", "a[bold]b", None, "flash_fwd_kernel<128, 64>", "gemm<1>", "x\x1b[31m"])
    return pd.DataFrame({
        "name": names,
        "t": [1234.5, np.nan, 5.0, 999_999_999.0, -20.25, 0.0],  # ns: shown in µs
        "share": [0.5, 0.004, np.nan, 1.0, 0.0, 0.25],
        "n": pd.array([3, None, 1, 1_000_000, 7, 0], dtype="Int64"),
        "big": [1.0, 2e6, np.nan, 5.5, 3.0, -4e6],          # reaches a million: whole numbers
        "tiny": [0.00031, 0.5, np.nan, 0.0, 12.0, 0.02],     # below 0.05: more decimals, still a number
        "wee": [7.97e-05, 1.0, 2.0, np.nan, 0.0, 3.0],       # below 1e-4: fixed-point text
    })


@pytest.mark.parametrize("order", [None, [3, 1, 5, 0], [5, 4, 3, 2, 1, 0], [2], []])
def test_lazy_cells_and_widths_match_the_arrow_backend(order):
    f = frame()
    fit = {"name": 16}
    arrow = ArrowBackend(display_table(f, COLS, None if order is None else np.array(order, dtype=np.int64), fit=fit))
    lazy = FrameBackend([c.label for c in COLS], frame_cells(f, COLS, fit=fit),
                        None if order is None else np.array(order, dtype=np.int64), len(f))
    for b in (arrow, lazy):
        b.render_markup = False
    assert lazy.row_count == arrow.row_count == (len(f) if order is None else len(order))
    for i in range(lazy.row_count):
        assert lazy.get_row_at(i) == arrow.get_row_at(i), i
    # The Arrow backend measures a numeric column by its max and min alone, which cuts a cell that
    # keeps more decimals (0.00031 in a column of 12 and 0): the lazy one fits every cell.
    rows = [lazy.get_row_at(i) for i in range(lazy.row_count)]
    for j, (got, theirs) in enumerate(zip(lazy.column_content_widths, arrow.column_content_widths)):
        cells = [measure_width(r[j], render_markup=False) for r in rows if r[j] is not None]
        assert got == max([theirs, *cells]), (COLS[j].label, got, theirs, cells)


def test_lazy_values_by_hand():
    f = frame()
    lazy = FrameBackend([c.label for c in COLS], frame_cells(f, COLS), np.array([3, 5]), len(f))
    # row 3: 999,999,999 ns = 999,999.999 µs, rounded to 2 digits (the column stays under a
    # million); share 100 %; 1M launches; bytes whole (the column reaches 4e6); tiny 0.0; wee null
    assert lazy.get_row_at(0) == ["flash_fwd_kernel<128, 64>", 1_000_000.0, 100.0, 1_000_000, 6, 0.0, None, None]
    # fixed-point text with 6 decimals: 1 - floor(log10(7.97e-05)) = 6 gives its 2 significant digits
    assert lazy.get_row_at(1)[6] == "3.000000"
    assert "\x1b" not in lazy.get_cell_at(-1, 0)  # terminal escapes never reach a cell
    with pytest.raises(IndexError):
        lazy.get_row_at(2)


def test_million_rows_build_no_per_row_text():
    n = 1_000_000
    f = pd.DataFrame({"name": pd.Categorical.from_codes(np.arange(n) % 3, ["a", "bb", "ccc"]),
                      "t": np.arange(n, dtype=np.float64)})
    cells = frame_cells(f, [Col("name", "kernel", "text"), Col("t", "time µs", "ns")])
    assert cells[0].labels == ["a", "bb", "ccc"] and cells[0].codes.dtype.itemsize == 1  # the codes, not strings
    order = np.argsort(-f["t"].to_numpy(), kind="stable")
    b = FrameBackend(["kernel", "time µs"], cells, order, n)
    # 999,999 ns = 999.999 µs, shown to the column's 1 decimal; the column's 0.001 µs (1 ns) keeps
    # its own two significant digits instead of reading 0, and sets the width
    assert b.get_row_at(0) == ["a", 1000.0] and b.get_row_at(n - 2) == ["bb", 0.001]
    assert list(b.column_content_widths) == [3, len("0.001")]


def test_sort_and_filter_are_reactive_and_a_superseded_order_is_dropped(monkeypatch):
    """Setting `sort`/`filter` rebuilds the view through the watchers; with the order derived in a
    worker (big views), an order for an older state never replaces a newer one."""
    import asyncio

    from textual.app import App

    from tui.widgets.table import FrameTable

    monkeypatch.setattr(FrameTable, "DERIVE_IN_WORKER_FROM", 0)  # every view through the worker
    f = pd.DataFrame({"name": ["b", "a", "c", "ab"], "t": [2.0, 1.0, 3.0, 4.0]})
    cols = [Col("name", "kernel", "text"), Col("t", "time µs", "num")]
    seen = {}

    class T(App):
        def compose(self):
            yield FrameTable(cols, f, id="t")

    async def main():
        app = T()
        async with app.run_test() as pilot:
            t = app.query_one(FrameTable)
            changed = []
            t.watch(t, "sort", lambda *_: changed.append("sort"), init=False)
            t.sort = ("t", True)
            t.sort = ("name", False)  # supersedes the first before its worker reports
            await app.workers.wait_for_complete()
            await pilot.pause()
            seen["names"] = [t.row(i)["name"] for i in range(t.shown)]
            seen["changed"] = changed
            stale = FrameTable.OrderReady((("t", True), None, id(f), "name"), np.array([3, 2, 1, 0]), False)
            t.post_message(stale)
            await pilot.pause()
            seen["after_stale"] = [t.row(i)["name"] for i in range(t.shown)]
            t.filter = "^a"
            await app.workers.wait_for_complete()
            await pilot.pause()
            seen["filtered"] = [t.row(i)["name"] for i in range(t.shown)]
            seen["status"] = t.status()
            seen["pattern"] = t.pattern
    asyncio.run(main())
    assert seen["names"] == ["a", "ab", "b", "c"] and seen["changed"] == ["sort", "sort"]
    assert seen["after_stale"] == ["a", "ab", "b", "c"]
    assert seen["filtered"] == ["a", "ab"] and seen["pattern"] == "^a"
    assert seen["status"] == "2 of 4 rows · sort: kernel ▲ · filter: /^a/"


def test_a_sort_or_filter_shows_the_new_view_in_the_mounted_table():
    """A sort or a filter keeps the mounted table widget and gives it the new view: the painted
    header and rows, the scrollable height and the focus follow; the row under the cursor is
    announced (Highlighted) even when the cursor stays on row 0. Another frame mounts a new one."""
    import asyncio

    from textual.app import App

    from tui.widgets.table import FrameTable

    f = pd.DataFrame({"name": ["b", "a", "c", "ab"], "t": [2.0, 1.0, 3.0, 4.0]})
    cols = [Col("name", "kernel", "text"), Col("t", "time µs", "num")]
    seen: dict = {}

    class T(App):
        def compose(self):
            yield FrameTable(cols, f, id="t")

        def on_frame_table_highlighted(self, message: FrameTable.Highlighted) -> None:
            seen.setdefault("highlighted", []).append(message.row["name"])

    def painted(table) -> list[str]:
        return [table.render_line(y).text.split() for y in range(table.virtual_size.height)]

    async def main():
        app = T()
        async with app.run_test() as pilot:
            t = app.query_one(FrameTable)
            widget = t.table
            widget.focus()
            await pilot.pause()
            seen.clear()
            t.sort = ("t", True)
            await pilot.pause()
            seen["sorted"] = painted(t.table)
            seen["same"] = t.table is widget
            seen["focus"] = t.table.has_focus
            t.filter = "^a"
            await pilot.pause()
            seen["filtered"] = painted(t.table)
            seen["height"] = t.table.virtual_size.height
            await t.set_frame(f.iloc[:2].copy())
            await pilot.pause()
            seen["new_frame_new_widget"] = t.table is not widget
    asyncio.run(main())
    assert seen["same"] and seen["focus"] and seen["new_frame_new_widget"]
    assert seen["sorted"] == [["kernel", "time", "µs", "▼"], ["ab", "4"], ["c", "3"], ["b", "2"], ["a", "1"]]
    assert seen["filtered"] == [["kernel", "time", "µs", "▼"], ["ab", "4"], ["a", "1"]] and seen["height"] == 3
    # the cursor stayed on row 0 through both, over "ab" then "ab": each view announced its row
    assert seen["highlighted"][:2] == ["ab", "ab"]


# Values a cell can hold: names (cut, spaced, bracketed, with a final backslash, non-ASCII, wide,
# control), numbers of every shape the table shows (rounded, whole, fixed-point text), nulls, bools.
PLAIN_VALUES = ["gemm<1>", "flash_fwd_kernel<128, 64>", "a[bold]b[/]", "ends\\", "", " ", "two  spaces",
                "trail  ", " lead", "cut…tail", "µs", "日本語", "e\u0301", "tab\there", None, True,
                0, 7, -3, 1_000_000, 12.5, -0.25, 1234567.0, 1e-05, float("nan"), "0.000080", "3.000000"]


def test_plain_cells_paint_exactly_what_the_library_paints():
    """The fast path's segments (text, style, meta) equal the library's `_render_cell` for every value
    at every width, with and without the cursor, zebra rows and hover; values it does not handle go
    to the library."""
    import asyncio

    from textual.app import App
    from textual_fastdatatable import DataTable

    from tui.widgets.plain_cells import PlainCellTable, plain_value

    backend = ArrowBackend.from_pydict({"v": [repr(v) for v in PLAIN_VALUES]})
    seen = {"cells": 0, "fast": 0}

    class T(App):
        def compose(self):
            yield PlainCellTable(backend=backend, cursor_type="row", render_markup=False, null_rep="—",
                                 zebra_stripes=True, max_column_content_width=40, id="t")

    async def main():
        app = T()
        async with app.run_test() as pilot:
            await pilot.pause()
            table = app.query_one(PlainCellTable)
            styles = [Style(), Style(bgcolor="grey11"), Style(color="red", bold=True)]
            for value in PLAIN_VALUES:
                table.backend.get_cell_at = lambda row, col, v=value: v  # the cell under test, at (row 1, col 0)
                for width in range(4, 16):
                    for base in styles:
                        for cursor, hover in ((False, False), (True, False), (False, True)):
                            args = (1, 0, base, width, cursor, hover, False)
                            table._cell_render_cache.clear()
                            mine = table._render_cell(*args)
                            table._cell_render_cache.clear()
                            theirs = DataTable._render_cell(table, *args)
                            assert [[(s.text, s.style, s.style.meta if s.style else None) for s in line] for line in mine] == \
                                   [[(s.text, s.style, s.style.meta if s.style else None) for s in line] for line in theirs], \
                                   (value, width, base, cursor, hover)
                            seen["cells"] += 1
                if plain_value(value, table.null_rep) is not None:
                    seen["fast"] += 1

    asyncio.run(main())
    assert seen["cells"] == len(PLAIN_VALUES) * 12 * 9
    # names with tabs, control, wide or combining characters or a final backslash, and bools, take the library's path
    assert seen["fast"] == len(PLAIN_VALUES) - 5


@pytest.mark.parametrize("how,digits", [("round", 2), ("round", 0), ("round", 6), ("int", 0), ("fixed", 6)])
def test_block_of_cells_equals_cell_by_cell(how, digits):
    """The backend makes a page's cells a block at a time: the same values `value()` gives one by
    one (NumPy's rounding of an array and of a scalar agree, ties and NaN included)."""
    rng = np.random.default_rng(1)
    vals = np.concatenate([rng.normal(0, 1e3, 500), rng.random(200) * 1e-4, np.arange(-5, 5) + 0.5,
                           np.arange(-5, 5) * 0.005 + 0.0025, [np.nan, 0.0, -0.0, 1e12, -1e12]])
    cells = NumberCells(vals, how, digits)
    text = TextCells(np.array([0, -1, 1] * (len(vals) // 3) + [0] * (len(vals) % 3)), ["x", "y"])
    order = rng.permutation(len(vals))
    b = FrameBackend(["n", "t"], [cells, text], order, len(vals))
    b.BLOCK = 7  # blocks end mid-table and the cache evicts
    for i in rng.permutation(len(vals)):
        # repr: -0.0 prints `-0`, 0.0 `0`
        assert repr(b.get_cell_at(int(i), 0)) == repr(cells.value(int(order[i]))), (i, vals[order[i]])
        assert b.get_cell_at(int(i), 1) == text.value(int(order[i]))
    assert len(b._blocks) <= b.KEEP_BLOCKS


@pytest.mark.parametrize("zebra", [True, False])
def test_plain_rows_paint_exactly_what_the_library_paints(zebra):
    """Whole lines of a table (header, cursor row, stripes, nulls, cut names, scrolled sideways, a
    fill right of the last column) are the same with the fast row and cell paths as with the
    library's own methods on the same widget."""
    import asyncio

    from textual.app import App
    from textual_fastdatatable import DataTable

    from tui.widgets.plain_cells import PlainCellTable

    f = frame()
    backend = FrameBackend([c.label for c in COLS], frame_cells(f, COLS, fit={"name": 12}), np.array([5, 4, 3, 2, 1, 0]), len(f))
    seen = {}

    class T(App):
        def compose(self):
            yield PlainCellTable(backend=backend, cursor_type="row", render_markup=False, null_rep="—",
                                 zebra_stripes=zebra, max_column_content_width=12, id="t")

    async def main():
        app = T()
        async with app.run_test(size=(140, 12)) as pilot:
            table = app.query_one(PlainCellTable)
            table.focus()
            table.move_cursor(row=2)
            await pilot.pause()
            for cls in (PlainCellTable, DataTable):
                table.__class__ = cls
                table._clear_caches()
                seen[cls] = [[(s.text, s.style) for s in table._render_line(y, x1, x1 + 140, table.rich_style)]
                             for x1 in (0, 9) for y in range(9)]
            table.__class__ = PlainCellTable

    asyncio.run(main())
    assert seen[PlainCellTable] == seen[DataTable]
    assert any("—" in text for line in seen[DataTable] for text, _ in line)  # a null is among the lines


@pytest.mark.parametrize("desc", [False, True])
def test_packed_sort_is_the_stable_sort(desc):
    """A million-row key of whole numbers (ties, NaN, negative, huge timestamps) sorts as a stable
    argsort does; a key with fractions, or too wide to pack, takes the stable argsort itself."""
    from tui.widgets import row_order as tbl

    rng = np.random.default_rng(2)
    n = 200_000
    keys = {
        "ties": rng.integers(-50, 50, n).astype(float),
        "timestamps": 1.7e18 + np.cumsum(rng.integers(0, 5_000, n)).astype(float),
        "fractions": rng.random(n),
        "too wide": np.where(rng.random(n) < .5, -1e17, 1e17),
    }
    for name, key in keys.items():
        key[rng.random(n) < 0.05] = np.nan
        expected = np.argsort(-key if desc else key, kind="stable")
        got = tbl.sort_order(pd.Series(key), desc)
        assert np.array_equal(got, expected), name
        packed = tbl._whole_number_order(key, desc)
        assert (packed is None) == (name in ("fractions", "too wide")), name
    # integer columns (nullable steps and layers, int64 timestamps) sort without a float key
    ints = rng.integers(-1000, 1000, n)
    nullable = pd.Series(pd.array(ints, dtype="Int32")).mask(rng.random(n) < 0.05)
    as_float = nullable.astype("float64").to_numpy()
    assert np.array_equal(tbl.sort_order(nullable, desc), np.argsort(-as_float if desc else as_float, kind="stable"))
    stamps = pd.Series(1_700_000_000_000_000_000 + ints * 7, dtype="int64")
    assert np.array_equal(tbl.sort_order(stamps, desc),
                          np.argsort(-stamps.to_numpy() if desc else stamps.to_numpy(), kind="stable"))
    text = pd.Series(pd.Categorical.from_codes(rng.integers(-1, 3, n), ["b", "a", "c"]))
    rank = np.array([1.0, 0.0, 2.0, np.nan])[text.cat.codes.to_numpy()]  # a < b < c, null last
    assert np.array_equal(tbl.sort_order(text, desc, "text"), np.argsort(-rank if desc else rank, kind="stable"))


def test_text_sort_is_code_point_order():
    """Text sorts as Python compares str (by code point), nulls last: accents, case, CJK, emoji."""
    from tui.widgets import row_order as tbl

    names = ["b", "B", "a", "é", "e", "日本", "Z", "z", "😀", "ab", "a b", None, "a"]
    s = pd.Series(pd.Categorical(names))
    got = [names[i] for i in tbl.sort_order(s, False, "text")]
    assert got == sorted(n for n in names if n is not None) + [None]
    got = [names[i] for i in tbl.sort_order(pd.Series(names, dtype=object), True, "text")]
    assert got == sorted((n for n in names if n is not None), reverse=True) + [None]



def test_a_categorical_columns_text_ranks_are_kept_and_agree(monkeypatch):
    """A categorical column's ranks are computed once for its categories (a sort of a filtered
    view or the other way reuses them, and gives what ranking afresh gives); an object column's
    distinct values are ranked every time and never kept; the last few columns only."""
    from tui.widgets import row_order as tbl

    calls = []
    real = tbl.pa.compute.sort_indices
    monkeypatch.setattr(tbl.pa.compute, "sort_indices", lambda a: calls.append(len(a)) or real(a))
    monkeypatch.setattr(tbl, "_RANKS", {})
    rng = np.random.default_rng(4)
    words = [f"w{i:04d}" for i in rng.permutation(500)]
    col = pd.Series(pd.Categorical.from_codes(rng.integers(-1, 500, 5_000), words))
    half = col[::2]  # a filtered view: the same categories object
    place = {w: i for i, w in enumerate(sorted(words))}
    for v in (col, half):
        codes = v.cat.codes.to_numpy()
        r = [place[words[c]] if c >= 0 else 0 for c in codes]
        for desc in (False, True):  # stable, nulls last either way
            want = sorted(range(len(v)), key=lambda i: (codes[i] < 0, -r[i] if desc else r[i]))
            assert tbl.sort_order(v, desc, "text").tolist() == want
    assert calls == [500]  # ranked once, for four sorts over two views
    plain = col.astype(object)
    tbl.sort_order(plain, False, "text")
    tbl.sort_order(plain, True, "text")
    assert len(calls) == 3 and len(tbl._RANKS) == 1
    for i in range(tbl.KEPT_RANKS + 2):  # other columns: the oldest kept ranks go
        tbl.sort_order(pd.Series(pd.Categorical([f"x{i}", "y"])), False, "text")
    assert len(tbl._RANKS) == tbl.KEPT_RANKS and id(col.cat.categories) not in tbl._RANKS

def test_each_cell_keeps_the_columns_digits_unless_it_would_read_zero():
    """One tiny share in a column no longer makes every row print six digits (81.4109): a cell is
    rounded to the column's digits, and only a non-zero one too small for them keeps two
    significant digits of its own."""
    from tui.widgets.frame_backend import round_cells

    got = round_cells(np.array([81.41093, 13.0429, 0.07649, 0.00123, -0.00041, 0.0, np.nan]), 1)
    assert got[:6].tolist() == [81.4, 13.0, 0.1, 0.0012, -0.00041, 0.0] and np.isnan(got[6])
    assert round_cells(np.array([999.999, 0.5]), 2).tolist() == [1000.0, 0.5]
