"""The shared table's lazy backend (FrameBackend): the same cells and column widths as the Arrow
backend built from every display value, for any order; and a million-row view that builds no
per-row display values."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from textual_fastdatatable import ArrowBackend

from textual_fastdatatable.format import measure_width

from tui.widgets.frame_backend import FrameBackend
from tui.widgets.table import Col, display_table, frame_cells

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


@pytest.mark.parametrize("order", [None, [3, 1, 5, 0], [2], []])
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


def test_each_cell_keeps_the_columns_digits_unless_it_would_read_zero():
    """One tiny share in a column no longer makes every row print six digits (81.4109): a cell is
    rounded to the column's digits, and only a non-zero one too small for them keeps two
    significant digits of its own."""
    from tui.widgets.frame_backend import round_cells

    got = round_cells(np.array([81.41093, 13.0429, 0.07649, 0.00123, -0.00041, 0.0, np.nan]), 1)
    assert got[:6].tolist() == [81.4, 13.0, 0.1, 0.0012, -0.00041, 0.0] and np.isnan(got[6])
    assert round_cells(np.array([999.999, 0.5]), 2).tolist() == [1000.0, 0.5]
