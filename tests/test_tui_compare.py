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

from rooftop.analysis import analyze
from rooftop.trace import load_trace
from tui.screens.compare import (CompareDetailScreen, CompareScreen, change_text, changed_title, rel_change,
                                 verdict)

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import STYLESHEET, second_trace, small_trace  # noqa: E402


def test_verdicts():
    assert verdict(100, 120, higher_is_better=False) == "worse"
    assert verdict(100, 120, higher_is_better=True) == "better"
    assert verdict(100, 100.5, higher_is_better=True) is None   # within 1%
    assert verdict(None, 1, True) is None and rel_change(0, 5) is None
    assert rel_change(464, 488) == 24 / 464


class Two(App):


    CSS_PATH = STYLESHEET
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
            # The phase table shows the phase the lower table is about (decode first), `p` the next.
            rows = {}
            for _ in range(2):
                phases = screen.query_one("#compare-phases").view
                assert set(phases["phase"]) == {screen.phase}
                rows.update({(r["phase"], r["metric"]): [r["a"], r["b"], r["delta"], r["change"]]
                             for r in phases.to_dict("records")})
                await pilot.press("p")
                await _settle(pilot)
            assert screen.phase == "decode"
            assert rows[("decode", "time")] == ["464 µs", "488 µs", "+24 µs", "+5.2% worse"]
            assert rows[("decode", "tokens/s")] == ["8.62 k", "8.2 k", "−424", "-4.9% worse"]
            assert rows[("prefill", "time")][2:] == ["±0 ns", "+0.0%"]
            # MBU is a fraction: its change is in points, not relative.
            mbu = rows[("decode", "MBU")]
            assert mbu[3].endswith(("pts worse", "pts better", "pts")) and "%" not in mbu[3]
            # The lower table starts on decode: its causes per step. The GEMM family gains 24 µs over
            # 4 steps, 6 µs per step; the other families and idle do not change.
            groups = screen.query_one("#compare-groups").view
            assert "decode" in str(screen.query_one("#compare-groups-title").render())
            assert groups["key"].iloc[0].startswith("sm90_xmma_gemm") and groups["delta_ns"].iloc[0] == 6_000
            assert list(groups["delta_ns"].iloc[1:]) == [0, 0, 0]
            assert "Findings:" in str(screen.query_one("#compare-findings").render())
            # The verdict, in `rooftop diff`'s words: 464 -> 488 µs over 4 steps, 116 -> 122 µs a step.
            verdict_text = str(screen.query_one("#compare-verdict").render())
            assert "decode: B 5.2% slower per step" in verdict_text
            assert "prefill: no change per step" in verdict_text

    asyncio.run(run())


def test_groups_only_one_run_has_rank_by_their_own_size():
    import pandas as pd
    from rooftop.analysis.diff import group_diff

    def g(rows):
        return pd.DataFrame([{"key": k, "category": "x", "count": 1, "time_ns": t, "bytes": b} for k, t, b in rows])

    # A: gemm 100 µs / 10 MB, old 50 µs / 80 MB. B: gemm 110 µs / 11 MB, new 30 µs / 60 MB.
    d = group_diff(g([("gemm", 100e3, 10e6), ("old", 50e3, 80e6)]), g([("gemm", 110e3, 11e6), ("new", 30e3, 60e6)]))
    assert d["key"].tolist() == ["old", "new", "gemm"]            # |−50|, |+30|, |+10| µs
    assert d.set_index("key")["bytes_change"].to_dict() == {"gemm": 1e6, "old": -80e6, "new": 60e6}


def test_changed_finding_reads_like_diff():
    assert (changed_title("prefill attention is fused (FlashAttention-like)",
                          "prefill attention is materialized: the S x S scores go through HBM")
            == "prefill attention is fused (FlashAttention-like) → materialized: the S x S scores go through HBM")
    assert change_text(0.878, 0.574, fraction=True) == "-30.4 pts"
    assert change_text(464, 488, fraction=False) == "+5.2%"


def test_enter_on_a_group_opens_a_beside_b(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))
    b = analyze(load_trace(second_trace(tmp_path, counters=True)))

    async def run():
        app = Two(a, b)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            await pilot.press("enter")
            await _settle(pilot)
            screen = app.screen
            assert isinstance(screen, CompareDetailScreen) and screen.key.startswith("sm90_xmma_gemm")
            rows = screen.rows.set_index("metric")
            # Whole-run GEMM time: A 1.09 ms (see test_tui_drilldown); B adds 24 µs.
            assert rows.loc["total time"].tolist() == ["1.09 ms", "1.12 ms"]
            assert rows.loc["launches"].tolist() == ["30", "30"]
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, CompareScreen)

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


def _panel(screen, wid: str):
    return screen.query_one(wid)


def test_every_phase_and_step_reachable_by_keys_at_80x24(tmp_path):
    """`p` cycles the phases, `t` flips between a phase's kernel families and its steps; both keys
    are in the key bar; at 80x24 the verdict, the phase table and the lower table all have rows.
    By hand (tui_helpers): decode step i spans 113 + 2i µs in A, 113 + 6i µs in B."""
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))
    b = analyze(load_trace(second_trace(tmp_path, counters=True)))

    async def run():
        app = Two(a, b)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            screen = app.screen
            bar = screen.query_one("#keybar").render().plain
            assert "p Phase" in bar and "t Steps/Kernels" in bar
            for wid in ("#compare-verdict-box", "#compare-phases", "#compare-groups"):
                r = _panel(screen, wid).region
                assert r.height >= 3 and r.y + r.height <= 23, (wid, r)
            assert screen.phase == "decode"
            await pilot.press("t")
            await _settle(pilot)
            steps = screen.query_one("#compare-steps")
            assert steps.display and not screen.query_one("#compare-groups").display
            rows = steps.view.set_index("step")
            assert rows.loc["3"].tolist() == ["119 µs", "131 µs", "+12 µs", "+10.1% worse"]
            assert rows.loc["0", "change"] == "+0.0%"
            seen = set()
            for _ in range(len(screen.phase_names)):
                seen.add((screen.phase, tuple(screen.query_one("#compare-steps").view["step"])))
                await pilot.press("p")
                await _settle(pilot)
            assert seen == {("decode", ("0", "1", "2", "3")), ("prefill", ("0",))}
            await pilot.press("t")
            await _settle(pilot)
            assert screen.query_one("#compare-groups").display

    asyncio.run(run())


HTA = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-{}.json.gz"


def _sign_ok(view) -> int:
    """Every step row: slower is 'worse', faster is 'better'; returns how many rows changed."""
    changed = 0
    for r in view.to_dict("records"):
        if r["delta"].startswith("+"):
            assert "better" not in r["change"], r
            changed += "worse" in r["change"]
        elif r["delta"].startswith("−"):
            assert "worse" not in r["change"], r
            changed += "better" in r["change"]
    return changed


def test_slower_is_never_better_on_a_real_pair_in_both_orders(fixtures_dir):
    from collectors.open import open_analysis
    from rooftop.analysis.verdict import verdicts
    from rooftop.present.diff_report import verdict_line

    r0, r1 = (open_analysis(str(fixtures_dir / "traces" / HTA.format(i))) for i in (0, 1))

    async def run(a, b):
        app = Two(a, b)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            screen = app.screen
            # The same verdict line as `rooftop diff`.
            line = verdict_line(verdicts(a, b)["phases"][0])
            assert line in str(screen.query_one("#compare-verdict").render()).replace("\n", "")
            await pilot.press("t")
            await _settle(pilot)
            view = screen.query_one("#compare-steps").view
            assert list(view["step"]) == ["551", "552"]
            return _sign_ok(view), view

    n_ab, ab = asyncio.run(run(r0, r1))
    n_ba, ba = asyncio.run(run(r1, r0))
    assert n_ab >= 1 and n_ba >= 1
    # The other order swaps A and B, so each step's word flips.
    for x, y in zip(ab["change"], ba["change"]):
        assert ("worse" in x) == ("better" in y)


def test_different_gpus_said_on_top_and_gemms_matched_by_op(tmp_path):
    """A V100 and an A100 Kineto run of the same `aten::mm` (test_diff_verdict._kineto): the screen's
    first line under the runs says the hardware differs; the causes pair `volta_sgemm_*` with
    `cutlass_80_*` as `rooftop diff` does, and Enter opens each side's own kernel."""
    from collectors.open import open_analysis
    from test_diff_verdict import _kineto

    v100 = _kineto(tmp_path / "v100.json", "Tesla V100-SXM2-16GB", (7, 0), 80, "volta_sgemm_128x64_nn", 40.0)
    a100 = _kineto(tmp_path / "a100.json", "NVIDIA A100-SXM4-40GB", (8, 0), 108,
                   "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", 20.0)
    a, b = open_analysis(str(v100)), open_analysis(str(a100))

    async def run():
        app = Two(a, b)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            screen = app.screen
            hw = screen.query_one("#compare-hw")
            assert hw.display and hw.region.y == 3  # right under the two runs' names
            assert str(hw.render()).startswith("Different hardware: device A Tesla V100")
            assert "run: B 35.1% faster per step" in str(screen.query_one("#compare-verdict").render())
            causes = screen.query_one("#compare-groups").view
            top = causes.iloc[0]
            assert top["key"].startswith("op aten::mm [gemm]") and "volta_sgemm" in top["what"]
            assert "cutlass_80" in top["what"] and top["delta_ns"] == -20_000
            await pilot.press("enter")
            await _settle(pilot)
            detail = app.screen
            assert isinstance(detail, CompareDetailScreen)
            assert detail.name_a.startswith("volta_sgemm") and detail.name_b.startswith("cutlass_80")
            rows = detail.rows.set_index("metric")
            assert "not in" not in " ".join(rows.loc["launches"].tolist())

    asyncio.run(run())


def test_time_rows_are_worse_when_slower_whatever_the_values():
    """Lower is better for every time: a B that takes longer is 'worse' (the 59%-slower step once
    read 'better'), shorter is 'better', within 1% says nothing; and swapping A and B swaps the word."""
    for a, b in ((100, 159), (1e6, 1.02e6), (3.3e9, 3.1e9), (7, 6), (100, 100.5)):
        word, back = verdict(a, b, higher_is_better=False), verdict(b, a, higher_is_better=False)
        if abs(b - a) / a <= 0.01:
            assert word is None and back is None
        else:
            assert word == ("worse" if b > a else "better") and back == ("better" if b > a else "worse")
