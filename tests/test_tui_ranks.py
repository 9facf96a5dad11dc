"""Multi-rank runs, both ceilings and the gap to ideal on the Overview and Steps screens.

Traces from `tui_helpers`: `multi_rank_run` (rank 1's decode GEMMs grow 3 µs per step, rank 0's 1 µs)
and `calibrated_trace` (measured peaks 2.68 TB/s, 800 TFLOP/s). Expected numbers by hand:

- decode step s spans 113 + 2·s·k µs on a rank with factor k (two layers of 52 µs of kernels, nine
  1 µs gaps): rank 0 = 113, 115, 117, 119; rank 1 = 113, 119, 125, 131. Step 3: min 119, median 125,
  max 131, spread (131 - 119) / 125 = 9.6%, straggler rank 1. Decode time rank 0 = 464 µs, rank 1 = 488.
- calibrated decode: measured bytes 1.1 × (30+2+60+4+45) MB per layer × 2 layers × 4 steps = 1.2408 GB
  over 464 µs = 2.674 TB/s: MBU 79.8% of 3.35 TB/s (datasheet), 99.8% of 2.68 (measured); FLOPs
  1.001 GFLOP × 8 = 8.008 GFLOP / 464 µs = 17.26 TFLOP/s: MFU 1.7% of 989.4, 2.2% of 800.
"""
from __future__ import annotations

import io

import pandas as pd
from rich.console import Console
from test_tui_app import drive
from tui_helpers import calibrated_trace, multi_rank_run, small_trace

from tui.screens.overview import OverviewScreen
from tui.screens.steps import StepScreen, StepsScreen
from tui.widgets.breadcrumb import Breadcrumb
from tui.widgets.steps_plot import curves


def lines(widget) -> list[str]:
    """A Static's content as the words on screen, one list item per line, runs of spaces collapsed."""
    console = Console(width=200, record=True, no_color=True, file=io.StringIO())
    console.print(widget.content)
    return [" ".join(line.split()) for line in console.export_text().splitlines() if line.strip()]


def keybar(app) -> str:
    return app.screen.query_one("#keybar").render().plain


def test_multi_rank_run_shows_ranks_straggler_and_spread(tmp_path):
    run = multi_rank_run(tmp_path)

    def overview(app):
        s = app.screen
        assert isinstance(s, OverviewScreen) and app.analyses[0].trace.ranks == [0, 1]
        spread = lines(s.query_one("#rank-spread"))
        assert spread[0] == "phase step min median max spread straggler"
        assert spread[1] == "decode 3 119 µs 125 µs 131 µs 9.6% rank 1"  # the worst step first
        assert spread[2] == "decode 2 117 µs 121 µs 125 µs 6.6% rank 1"
        ranks = lines(s.query_one("#rank-phases"))
        assert ranks[0] == "rank phase time MBU MFU TB/s"
        assert any(r.startswith("0 decode 464 µs") for r in ranks)
        assert any(r.startswith("1 decode 488 µs") for r in ranks)
        # The gap is rank 0's, as the phase table is: its parts add up to rank 0's 464 µs.
        measured = next(r for r in lines(s.query_one("#gap")) if r.startswith("measured"))
        assert measured == "measured 841 µs 464 µs"
        launch = next(r for r in lines(s.query_one("#gap")) if r.startswith("+ launch gaps"))
        assert launch == "+ launch gaps 9 µs 1% 36 µs 8%"  # 9 gaps per step × 4 decode steps
        assert [str(v) for v in s.query_one("#step-curve").series["rank"].unique()] == ["0", "1"]

    def steps(app):
        s = app.screen
        assert isinstance(s, StepsScreen)
        table = s.query_one("#steps-table")
        assert table.cols[0].key == "rank" and len(table.view) == 10
        assert "r Rank spread" in keybar(app)

    def spread(app):
        view = app.screen.query_one("#steps-table").view
        assert list(view.columns[:2]) == ["phase", "step"] and len(view) == 5
        row = view[(view["phase"] == "decode") & (view["step"] == 3)].iloc[0]
        assert row["straggler"] == 1 and row["min_ns"] == 119_000 and row["max_ns"] == 131_000
        assert abs(row["spread"] - 0.096) < 1e-9
        assert "·" in app.screen.query_one("#steps-hint").render().plain

    def straggler_step(app):
        s = app.screen
        assert isinstance(s, StepScreen) and s.rank == 1
        assert s.query_one(Breadcrumb).plain == "tiny ▸ Steps ▸ decode step 3 · rank 1"
        kernels = s.query_one("#step-kernels").source
        assert len(kernels) == 10 and set(kernels["rank"]) == {1}
        assert kernels["dur_ns"].sum() == 122_000  # rank 1's step 3: 131 µs span less 9 µs of gaps

    drive([run], size=(100, 40), steps=[([], overview), (["2"], steps), (["r"], spread),
                                        (["down"] * 4 + ["enter"], straggler_step)])


def test_calibrated_trace_shows_both_ceilings_gap_and_compare_key(tmp_path):
    def overview(app):
        s = app.screen
        ceilings = lines(s.query_one("#ceilings"))
        assert ceilings[0] == "phase MBU of datasheet of measured MFU of datasheet of measured"
        assert "decode 79.8% 99.8% 1.7% 2.2%" in ceilings
        src = " ".join(lines(s.query_one("#sources")))
        assert src.startswith("bytes: measured · peaks: measured") and "MBU/MFU columns use the measured peaks" in src
        gap = lines(s.query_one("#gap"))
        assert gap[0] == "prefill decode" and gap[1] == "measured 841 µs 464 µs"
        assert [r.split()[1] if r[0] in "=+" else None for r in gap[2:]] == [
            "ideal", "slow", "extra", "launch", "edge", "host", "unmodeled"]
        a = app.analyses[0].gap.set_index("phase").loc["decode"]
        parts = a[["ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns", "edge_idle_ns", "copies_ns",
                   "unmodeled_ns"]].sum()
        assert abs(parts - 464_000) < 1 and a["launch_gaps_ns"] == 36_000 and a["extra_bytes_ns"] > 0
        assert not s.query("#rank-phases")  # one rank: no ranks section
        assert "1-7 screens" in keybar(app)  # two traces: Compare is a screen too

    def steps(app):
        assert "Rank spread" not in keybar(app)  # one rank has no spread to show
        assert app.screen.query_one("#steps-table").cols[0].key == "phase"

    drive([calibrated_trace(tmp_path), small_trace(tmp_path)], size=(80, 24),
          steps=[([], overview), (["2"], steps)])


def test_step_curve_has_a_line_per_rank_or_median_and_slowest():
    two = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [0, 1, 0, 1], "span_ns": [10, 20, 30, 40]})
    assert [label for label, _ in curves(two)] == ["rank 0", "rank 1"]
    many = pd.DataFrame({"rank": [0, 1, 2, 3, 4], "step": [0] * 5, "span_ns": [10, 20, 30, 40, 100]})
    (m, med), (s, slow) = curves(many)
    assert (m, s) == ("median", "slowest rank") and med["span_ns"].tolist() == [30] and slow["span_ns"].tolist() == [100]
    one = two[two["rank"] == 0]
    assert curves(one)[0][0] is None
