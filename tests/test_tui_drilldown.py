"""Drill-down keeps its context: kernel detail of a phase (roofline point, (name, phase) row) or a step.

By hand, on `small_trace` (counters on): the GEMM group runs 3 launches per layer, 2 layers per step.
Decode steps 0..3 take 10 + s, 20 and 15 µs per layer: 2 · (4 · 45 + 0+1+2+3) = 372 µs over 24
launches. Prefill (8x longer) adds 2 · 360 = 720 µs over 6 launches, so the whole trace is 1.09 ms
over 30. Decode step 1 alone: 2 · (11 + 20 + 15) = 92 µs over 6 launches. Each launch follows the
previous kernel after a 1 µs gap (the first kernel of the trace has none: unknown).
"""
from __future__ import annotations

from tui.screens.detail import KernelDetailScreen
from tui.screens.kernels import KernelsScreen

from test_tui_app import crumbs, drive, text_of
from tui_helpers import small_trace


def metrics(app) -> dict[str, str]:
    screen = app.screen
    assert isinstance(screen, KernelDetailScreen) and screen.data is not None
    return {label: value for label, value, _ in screen.data.metrics}


def test_detail_from_a_decode_roofline_point_shows_decode_only(tmp_path):
    def check(app):
        m = metrics(app)
        assert app.screen.key.startswith("sm90_xmma_gemm") and app.screen.phase == "decode"
        assert m["launches"] == "24" and m["total time"] == "372 µs" and m["phase"] == "decode"
        assert "share of decode kernel time" in m
        assert "Roofline ▸ decode ▸ sm90_xmma_gemm" in crumbs(app)
        assert "scope: decode only" in text_of(app.screen.query_one("#detail-scope"))
        launches = app.screen.query_one("#detail-launches").view
        assert len(launches) == 24 and set(launches["phase"]) == {"decode"}
        assert set(launches["gap_before_ns"]) == {1000.0}  # 1 µs after the kernel before, every time
        assert set(launches["grid_dims"]) == {"132x1x1"} and set(launches["block_dims"]) == {"128x1x1"}
        return m

    # 4: roofline; p twice: phase prefill, then decode; the biggest decode point is the GEMM group.
    drive([small_trace(tmp_path, counters=True)], ["4", "p", "p", "enter"], check=check)


def test_detail_from_an_unfiltered_roofline_point_keeps_the_points_phase(tmp_path):
    def check(app):
        m = metrics(app)  # the biggest point of all is the prefill GEMM: prefill's numbers only
        assert app.screen.phase == "prefill" and m["launches"] == "6" and m["total time"] == "720 µs"

    drive([small_trace(tmp_path, counters=True)], ["4", "enter"], check=check)


def test_whole_trace_detail_and_name_phase_rows(tmp_path):
    def whole(app):
        m = metrics(app)
        assert m["launches"] == "30" and m["total time"] == "1.09 ms" and "share of all kernel time" in m
        assert crumbs(app).endswith("Kernels ▸ " + app.screen.key)
        launches = app.screen.query_one("#detail-launches").view
        assert launches["gap_before_ns"].isna().sum() == 1  # the trace's first kernel: nothing before it

    def by_phase(app):
        t = app.screen.query_one("#kernels-table")
        assert isinstance(app.screen, KernelsScreen) and app.screen.focused is t.table
        assert len(t.view) == 6  # 3 names x 2 phases
        gemm = t.view[t.view["key"].str.startswith("sm90")].set_index("phase")["time_ns"]
        assert gemm.to_dict() == {"prefill": 720_000, "decode": 372_000}

    def decode_row(app):
        m = metrics(app)
        assert m["launches"] == "24" and m["total time"] == "372 µs"

    drive([small_trace(tmp_path, counters=True)], steps=[
        (["3", "enter"], whole), (["escape", "p"], by_phase), (["down", "enter"], decode_row)])


def test_detail_from_a_step_shows_that_step(tmp_path):
    def check(app):
        m = metrics(app)
        assert app.screen.step == 1 and app.screen.phase == "decode"
        assert m["launches"] == "6" and m["total time"] == "92 µs"
        assert "decode step 1" in crumbs(app) and crumbs(app).count("decode step 1") == 1
        assert "scope: decode step 1 only" in text_of(app.screen.query_one("#detail-scope"))

    # 2: steps; down to decode step 1 (rows: prefill 0, decode 0, decode 1); Enter; tab to the kernels.
    drive([small_trace(tmp_path, counters=True)], ["2", "down", "down", "enter", "tab", "enter"], check=check)
