"""Kernels screen (group/raw/category, sort, filter, search), kernel detail, and literal names."""
from __future__ import annotations

import pandas as pd

from tui.screens.detail import KernelDetailScreen
from tui.widgets.breadcrumb import Breadcrumb
from tui.widgets.table import matches
from tui.widgets.table_values import Col, display_table
from tui.widgets.text import safe_text, sanitize, sanitize_series

from test_tui_app import drive, text_of
from tui_helpers import STYLESHEET, WEIRD_NAMES, small_trace


def table(app):
    return app.screen.query_one("#kernels-table")


def status(app):
    return text_of(app.screen.query_one("#kernels-status"))


def test_group_raw_category_and_sort_keys(tmp_path):
    def grouped(app):
        t = table(app)
        g = app.analyses[0].groups()
        assert len(t.view) == len(g) == 3
        assert t.view["key"].iloc[0] == g.sort_values("time_ns", ascending=False)["key"].iloc[0]
        assert status(app).startswith("grouped by name · 3 rows · sort: time µs ▼")
        return list(t.view["time_ns"])

    def raw(app):
        assert len(table(app).view) == 50  # 5 steps × 2 layers × 5 kernels
        assert "raw launches" in status(app)
        assert list(table(app).view["dur_ns"]) == sorted(table(app).view["dur_ns"], reverse=True)

    def category(app):
        assert sorted(table(app).view["key"]) == ["attention", "elementwise", "gemm"]
        assert "grouped by category" in status(app)

    def sorted_by_category(app):  # s from "time" moves to the next column; text sorts ascending
        t = table(app)
        assert t.sort_key == "time_share" and t.sort_desc
        return list(t.view["time_share"])

    def reversed_(app):
        return list(table(app).view["time_share"])

    got = drive([small_trace(tmp_path)], steps=[
        (["3"], grouped), (["g"], raw), (["g", "c"], category), (["c", "s"], sorted_by_category), (["S"], reversed_)])
    assert got[0] == sorted(got[0], reverse=True)
    assert got[3] == sorted(got[3], reverse=True) and got[4] == sorted(got[4])


def test_filter_regex_bad_regex_and_next_match(tmp_path):
    def flt(app):
        assert sorted(table(app).view["key"]) == ["flash_fwd_kernel<>", "vectorized_elementwise_kernel<>"]
        assert "2 of 8 rows" in status(app) and "filter: /flash|elementwise/" in status(app)

    def bad(app):  # "[bold" is not a regex: taken literally
        assert list(table(app).view["key"]) == ["[bold]boldk[/]"]

    def cleared(app):
        assert len(table(app).view) == 8 and "filter" not in status(app)
        return table(app).table.cursor_row

    def jumped(app):
        t = table(app)
        return t.view["key"].iloc[t.table.cursor_row]

    got = drive([small_trace(tmp_path, weird_names=True)], steps=[
        (["3", "slash", *"flash|elementwise", "enter"], flt),
        (["slash", "ctrl+a", "ctrl+k", *"[bold", "enter"], bad),
        (["slash", "escape"], cleared),
        (["n"], jumped), (["n"], jumped), (["N"], jumped)])
    assert got[2] == 0
    # The last pattern was "[bold": one match, so n and N both land on it.
    assert got[3:] == ["[bold]boldk[/]"] * 3


def test_kernel_detail_with_counters_shows_stalls_and_meanings(tmp_path):
    def check(app):
        s = app.screen
        assert isinstance(s, KernelDetailScreen)
        key = s.key
        rows = [r[0] for r in app.analyses[0].kernel_detail(key)]
        assert "launches" in rows and "total time" in rows
        bars = text_of(s.query_one("#detail-stalls"))
        assert bars.splitlines()[0].startswith("long_scoreboard") and "█" in bars
        assert "long_scoreboard: waiting on" in text_of(s.query_one("#detail-stall-meanings"))
        assert "Roofline" in [text_of(w) for w in s.query(".section-title")]
        assert "AI" in text_of(s.query_one("#detail-roofline")) or s.query_one("#detail-roofline")
        assert app.screen.query_one(Breadcrumb).plain == f"tiny ▸ Kernels ▸ {key}"
    drive([small_trace(tmp_path, counters=True)], ["3", "enter"], check=check)


def test_kernel_detail_without_counters_says_how_to_collect(tmp_path):
    def check(app):
        said = text_of(app.screen.query_one("#detail-stalls"))
        assert said == app.analyses[0].stalls_missing
        assert "rooftop collect --counters" in said and "WarpStateStats" in said
    drive([small_trace(tmp_path)], ["3", "enter"], check=check)


def test_weird_names_are_shown_literally(tmp_path):
    def check(app):
        t = table(app).table
        shown = {t.get_row_at(i)[0] for i in range(t.row_count)}
        for name in WEIRD_NAMES:
            assert sanitize(name) in shown
        assert "esck\\x1b[31mred" in shown and "bellk\\x07ding" in shown
        assert not any("\x1b" in s or "\x07" in s for s in shown)
        svg = app.export_screenshot()
        assert "\x1b" not in svg and "boldk[/]" in svg.replace("&#160;", " ")

    def detail(app):
        crumb = app.screen.query_one(Breadcrumb).render().plain
        assert crumb.endswith("▸ [bold]boldk[/]")
    drive([small_trace(tmp_path, weird_names=True)], size=(140, 40), steps=[
        (["3"], check), (["slash", *"boldk", "enter", "enter"], detail)])


def test_safe_text_and_sanitize():
    assert sanitize("a\x1b[31mb\x07\x9b") == "a\\x1b[31mb\\x07\\x9b"
    assert safe_text("[bold]x[/]").plain == "[bold]x[/]" and not safe_text("[bold]x[/]").spans
    assert sanitize(None) == "—"
    out = sanitize_series(pd.Series(["a\n", None, "a\n", "b"]))
    assert out.tolist() == ["a\\x0a", None, "a\\x0a", "b"]


def test_display_table_units_and_matches():
    frame = pd.DataFrame({"n": ["x", "y"], "t": [1500, None], "f": [0.25, 0.5]})
    tbl = display_table(frame, [Col("n", "name", "text"), Col("t", "time µs", "ns"), Col("f", "share %", "pct")])
    assert tbl.column_names == ["name", "time µs", "share %"]
    assert tbl.column("time µs").to_pylist() == [1.5, None]  # unknown stays null, never 0
    assert tbl.column("share %").to_pylist() == [25.0, 50.0]
    assert matches(pd.Series(["ab(", "cd", None]), "b(").tolist() == [True, False, False]


def test_a_million_raw_launches_mount(tmp_path):
    import asyncio
    import time

    from textual.app import App

    from tui.widgets.table import FrameTable

    n = 1_000_000
    frame = pd.DataFrame({"short_name": pd.Categorical.from_codes(pd.Series(range(n)) % 7, [f"k{i}" for i in range(7)]),
                          "dur_ns": pd.Series(range(n), dtype="int64")})
    cols = [Col("short_name", "kernel", "text"), Col("dur_ns", "time µs", "ns")]

    class One(App):

        CSS_PATH = STYLESHEET
        def compose(self):
            yield FrameTable(cols, frame, sort=("dur_ns", True), id="big")

    async def main():
        app = One()
        async with app.run_test(size=(80, 24)) as pilot:
            t0 = time.perf_counter()
            await pilot.pause()
            big = app.query_one("#big")
            # 1 ns steps: the column's 1 decimal for the longest (999.999 µs reads 1000), the ns
            # (0.001 µs) for the shortest launches, never rounded to 0.0.
            assert big.table.row_count == n and big.table.get_row_at(0)[1] == 1000.0
            assert big.table.get_row_at(n - 2)[1] == 0.001 and big.table.get_row_at(n - 1)[1] == 0.0
            await pilot.press("end")
            return time.perf_counter() - t0
    assert asyncio.run(main()) < 10


def _burst(app, keys) -> None:
    """Send key events back to back, with no idle in between (tmux send-keys, a paste)."""
    from textual import events

    chars = {"slash": "/", "enter": "\r"}
    for key in keys:
        event = events.Key(key, chars.get(key, key if len(key) == 1 else None))
        event.set_sender(app)
        app._driver.send_message(event)


def test_keys_typed_right_after_slash_reach_the_filter(tmp_path):
    """`/bold` + Enter in one burst filters (it used to go to the table and open the first kernel)."""
    async def main():
        from tui.app import RooftopApp
        app = RooftopApp([str(small_trace(tmp_path, weird_names=True))])
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.press("3")
            await pilot.pause()
            _burst(app, ["slash", *"boldk", "enter"])
            await pilot.pause()
            await pilot.pause()
            screen = app.screen
            assert type(screen).__name__ == "KernelsScreen"  # Enter did not open a kernel
            assert list(screen.query_one("#kernels-table").view["key"]) == ["[bold]boldk[/]"]
            assert "filter: /boldk/" in text_of(screen.query_one("#kernels-status"))
            # Focus is back on the table at once: the next burst's Enter opens the one match.
            _burst(app, ["enter"])
            await pilot.pause()
            await pilot.pause()
            assert isinstance(app.screen, KernelDetailScreen) and app.screen.key == "[bold]boldk[/]"
    import asyncio
    asyncio.run(main())


def test_sort_order_is_stable_nulls_last_and_lexical_for_text():
    import numpy as np

    from tui.widgets.row_order import sort_order

    nums = pd.Series([3.0, None, 1.0, 3.0, 2.0])
    assert sort_order(nums, descending=True).tolist() == [0, 3, 4, 2, 1]  # ties keep their order
    assert sort_order(nums, descending=False).tolist() == [2, 4, 0, 3, 1]
    # Categories in file order (b before a), as a Parquet dictionary gives them: sorted by text.
    cat = pd.Series(pd.Categorical(["b", "a", None, "b", "c"], categories=["b", "a", "c"]))
    assert sort_order(cat, descending=False, kind="text").tolist() == [1, 0, 3, 4, 2]
    assert sort_order(cat, descending=True, kind="text").tolist() == [4, 0, 3, 1, 2]
    frame = pd.DataFrame({"k": cat, "v": [1, 2, 3, 4, 5]})
    want = frame.sort_values("k", key=lambda s: s.astype(object), ascending=False, kind="stable", na_position="last")
    assert sort_order(frame["k"], True, "text").tolist() == list(want.index)
    assert np.array_equal(sort_order(pd.Series([], dtype="float64"), True), [])


def test_display_table_cleans_each_category_once_and_takes_rows():
    cat = pd.Series(pd.Categorical(["ok", "esc\x1b[31m", None, "ok"]))
    frame = pd.DataFrame({"name": cat, "dur_ns": [4000, 3000, 2000, 1000]})
    cols = [Col("name", "kernel", "text"), Col("dur_ns", "time µs", "ns")]
    tbl = display_table(frame, cols, order=[3, 1, 2])
    assert tbl.column("kernel").to_pylist() == ["ok", "esc\\x1b[31m", None]
    assert tbl.column("time µs").to_pylist() == [1.0, 3.0, 2.0]
    assert matches(frame["name"], "ESC").tolist() == [False, True, False, False]


def test_kernel_detail_shows_a_long_name_in_three_lines_at_most(tmp_path):
    """Issue 40: a templated name wrapped over screens before the first metric; now three lines at
    most, cut in the middle (its head and tail kept), and `i` shows it whole."""
    from rooftop.trace import write_trace
    long = "void cutlass::Kernel2<" + ",".join(f"cutlass::gemm::Arg{i}<{i}>" for i in range(40)) + ">(Params)"
    rows = [dict(kind="kernel", name=long, start_ns=i * 100, dur_ns=50, device=0, stream=7) for i in range(3)]
    path = write_trace(tmp_path / "long.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})

    def check(app):
        from rich.console import Console
        console = Console(width=76, record=True, file=open("/dev/null", "w"))
        console.print(app.screen._metrics(app.screen.data.metrics))
        lines = console.export_text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("name "))
        after = next(i for i, line in enumerate(lines) if i > start and not line.startswith(" "))
        assert after - start <= 3  # the name takes three lines at most before the next metric
        shown = " ".join(lines[start:after])
        assert "…" in shown and "void" in shown and "(i: whole name)" in shown and "(Params)" in shown
    drive([path], ["3", "enter"], size=(80, 24), check=check)
