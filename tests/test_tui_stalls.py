"""Stall bars and the Stalls screen, on the shared helper traces (numbers worked out by hand below)."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pandas as pd
from textual.app import App
from textual.widgets import Static

from rooftop.analysis import analyze
from rooftop.trace import load_trace
from tui.screens.stalls import StallsScreen, top_reasons
from tui.widgets.stall_bars import StallBars, bar, stall_lines, top_shares

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import STYLESHEET, small_trace  # noqa: E402

# Helper trace stall columns: 0.1 for 17 reasons, 4.0 for the dominant one, 1.0 for `selected` -> sum 6.7.
# Decode kernels: 428 µs in all, of which silu (dominant `wait`) 16 µs; every other kernel long_scoreboard.
# long_scoreboard share in decode = (412/428)·4/6.7 + (16/428)·0.1/6.7 = 0.5753 -> "57.5%".
# By category, gemm: 4/6.7 = 59.7% long_scoreboard; elementwise (silu): 59.7% wait.


def test_bar_and_lines():
    assert bar(0.5, 10) == "█████"
    assert bar(1 / 16, 10) == "▋"          # 0.625 cells = 5 eighths
    assert bar(0.0, 10) == "" and bar(float("nan"), 10) == ""
    s = pd.Series({"long_scoreboard": 0.6, "wait": 0.3, "selected": 0.1, "gmma": 0.0, "barrier": None})
    assert list(top_shares(s, top=8).index) == ["long_scoreboard", "wait", "selected"]
    lines = stall_lines(s, width=120).plain.split("\n")
    assert len(lines) == 3
    assert lines[0].startswith("long_scoreboard") and "60.0%" in lines[0] and "waiting on L1TEX" in lines[0]
    assert all(len(line) <= 120 for line in lines)
    narrow = stall_lines(s, width=50).plain.split("\n")
    assert all(len(line) <= 50 for line in narrow) and "30.0%" in narrow[1]
    assert top_reasons(pd.DataFrame([s.fillna(0)])) == ["long_scoreboard", "wait"]  # `selected` is not a stall


class One(App):


    CSS_PATH = STYLESHEET
    def __init__(self, analysis):
        super().__init__()
        self.analysis = analysis

    def on_mount(self):
        self.push_screen(StallsScreen(self.analysis))


async def _settle(pilot):
    for _ in range(2):
        await pilot.app.workers.wait_for_complete()
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()


def _groups(screen) -> dict[str, str]:
    """group title -> its bars, as shown."""
    out, title = {}, None
    for w in screen.query("#stalls-body > *"):
        if "stalls-group" in w.classes:
            title = str(w.render())
        elif isinstance(w, StallBars):
            out[title] = str(w.render())
    return out


def test_by_phase_then_category(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))

    async def run():
        app = One(a)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot)
            screen = app.screen
            assert "by phase" in str(screen.query_one("#stalls-title").render())
            groups = _groups(screen)
            assert set(groups) == {"prefill", "decode"}
            first = groups["decode"].split("\n")[0]
            assert first.startswith("long_scoreboard") and "57.5%" in first and "waiting on L1TEX" in first
            kernels = " ".join(str(w.render()) for w in screen.query(".stalls-kernels"))
            assert "long_scoreboard" in kernels and "sm90_xmma_gemm" in kernels
            await pilot.press("c")
            await _settle(pilot)
            assert "by category" in str(screen.query_one("#stalls-title").render())
            groups = _groups(screen)
            assert set(groups) == {"gemm", "attention", "elementwise"}
            assert groups["gemm"].split("\n")[0].startswith("long_scoreboard") and "59.7%" in groups["gemm"]
            top = groups["elementwise"].split("\n")[0]
            assert top.startswith("wait") and "59.7%" in top and "fixed-latency dependency" in top
            await pilot.press("c")
            await _settle(pilot)
            assert set(_groups(screen)) == {"prefill", "decode"}

    asyncio.run(run())


def test_no_counters_says_how_to_collect(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=False)))

    async def run():
        app = One(a)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            msg = str(app.screen.query_one("#stalls-none", Static).render())
            assert "This trace has no hardware counters" in msg and "rooftop collect --counters" in msg
            assert "ncu --section WarpStateStats" in msg
            assert not list(app.screen.query(StallBars))

    asyncio.run(run())


def test_modeled_badge_and_weird_names(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True, modeled=True, weird_names=True)))

    async def run():
        app = One(a)
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(pilot)
            assert "MODELED" in str(app.screen.query_one("#breadcrumb").render())
            shown = " ".join(str(w.render()) for w in app.screen.query(".stalls-kernels"))
            assert "\x1b" not in shown and "\x07" not in shown

    asyncio.run(run())


def test_missing_stalls_say_what_this_kind_of_file_lacks():
    """Each kind of file is told what it lacks: an ncu report with counters but no WarpStateStats
    section is not told it has no counters (issue 40); a Kineto or nsys timeline is told where
    stalls come from; a modeled trace is said to be modeled."""
    import pandas as pd
    from rooftop.analysis.stalls import missing_reason
    with_counters = pd.DataFrame({"counters": [True, None]})
    without = pd.DataFrame({"counters": [False, False]})
    ncu = missing_reason(with_counters, {"tool": "ncu"}, False)
    assert "counters but no WarpStateStats section" in ncu and "--section WarpStateStats" in ncu
    assert "no hardware counters" not in ncu.lower()
    assert "PyTorch profiler (Kineto)" in missing_reason(without, {"tool": "kineto"}, False)
    assert "Nsight Systems" in missing_reason(without, {"tool": "nsys"}, False)
    assert "MODELED" in missing_reason(with_counters, {"tool": "rooftop"}, True)
    # a counters column set by any source means a report of some other section set
    assert "no WarpStateStats" in missing_reason(with_counters, None, False)


def test_ncu_csv_without_warp_state_stats_says_which_section(fixtures_dir):
    """A real ncu CSV that has SpeedOfLight counters and no WarpStateStats."""
    from collectors.open import open_trace
    t = open_trace(fixtures_dir / "ncu" / "AveryClapp__ESMM-Research__metrics.csv", None)
    a = analyze(t)
    assert a.stalls() is None
    assert "--section WarpStateStats" in a.stalls_missing and "has counters" in a.stalls_missing
