"""The Compare screen on the helper traces: A = small_trace, B = second_trace (decode GEMMs slower).

By hand: decode step i has 2 layers x 5 kernels (52 µs + the step's extra GEMM time) and 9 gaps of 1 µs,
so its span is 113 µs + 2·extra. A's extra is i µs, B's 3·i µs: decode time A = 4·113 + 2·(0+1+2+3) =
464 µs, B = 452 + 2·(0+3+6+9) = 488 µs, Δ = +24 µs (+5.2%, worse). Tokens/s: 4 tokens / 464 µs =
8.62 k, / 488 µs = 8.20 k (−4.9%). Prefill is identical. The GEMM group gains the same 24 µs.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from textual.app import App
from textual.widgets import DataTable

from rooftop.analysis import analyze
from rooftop.trace import load_trace
from tui.screens.compare import CompareScreen, rel_change, verdict

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import second_trace, small_trace  # noqa: E402


def test_verdicts():
    assert verdict(100, 120, higher_is_better=False) == "worse"
    assert verdict(100, 120, higher_is_better=True) == "better"
    assert verdict(100, 100.5, higher_is_better=True) is None   # within 1%
    assert verdict(None, 1, True) is None and rel_change(0, 5) is None
    assert rel_change(464, 488) == 24 / 464


class Two(App):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def on_mount(self):
        self.push_screen(CompareScreen(self.a, self.b))


async def _settle(pilot):
    for _ in range(2):
        await pilot.app.workers.wait_for_complete()
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()


def _rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_compare_deltas(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))
    b = analyze(load_trace(second_trace(tmp_path, counters=True, modeled=True)))

    async def run():
        app = Two(a, b)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot)
            screen = app.screen
            head = str(screen.query_one("#compare-head").render())
            assert "A: small.parquet" in head and "B: second.parquet" in head
            assert head.split("\n")[1].count("MODELED") == 1 and "MODELED" not in head.split("\n")[0]
            rows = {(r[0], r[1]): r[2:] for r in _rows(screen.query_one("#compare-phases", DataTable))}
            assert rows[("decode", "time")] == ["464 µs", "488 µs", "+24 µs", "+5.2%"]
            assert rows[("decode", "tokens/s")] == ["8.62 ktok/s", "8.2 ktok/s", "−424 tok/s", "-4.9%"]
            assert rows[("prefill", "time")][2:] == ["±0 ns", "+0.0%"]
            # Colour classes: slower time is worse, fewer tokens/s is worse, unchanged is plain.
            table = screen.query_one("#compare-phases", DataTable)
            worse = screen.get_component_rich_style("compare--worse", partial=True)
            cells = {(str(r[0]), str(r[1])): r for r in (table.get_row_at(i) for i in range(table.row_count))}
            assert cells[("decode", "time")][4].style == worse
            assert cells[("decode", "tokens/s")][5].style == worse
            assert cells[("prefill", "time")][4].style == ""
            groups = _rows(screen.query_one("#compare-groups", DataTable))
            assert groups[0][0].startswith("sm90_xmma_gemm") and groups[0][3] == "+24 µs"
            assert [g[3] for g in groups[1:]] == ["±0 ns", "±0 ns"]
            assert "Findings:" in str(screen.query_one("#compare-findings").render())
            await pilot.press("s")
            await pilot.pause()
            assert "by |Δ bytes|" in str(screen.query_one("#compare-groups-title").render())

    asyncio.run(run())


def test_findings_added_and_removed(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))
    b = analyze(load_trace(small_trace(tmp_path, counters=False, name="nocounters.parquet")))

    async def run():
        app = Two(a, b)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot)
            d = app.screen.diff
            text = str(app.screen.query_one("#compare-findings").render())
            for f in d.findings_added:
                assert f"+ new in B: [{f.severity}] {f.title}" in text
            for f in d.findings_removed:
                assert f"− gone from A: [{f.severity}] {f.title}" in text
            if not d.findings_added and not d.findings_removed:
                assert "no change" in text

    asyncio.run(run())
