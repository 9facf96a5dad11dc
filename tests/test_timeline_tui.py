"""The Timeline screen, driven with Pilot: keys 7 and t, zoom/pan/fit, gaps by size, the host's
activity in a gap, the gap list, Enter to kernel detail; and the largest gap of a real step."""
from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooftop.trace import write_trace
from rooftop.trace.schema import HOST_COLUMNS
from tui.app import RooftopApp
from tui.screens.detail import KernelDetailScreen
from tui.screens.timeline import GapListScreen, TimelineScreen
from tui.widgets.timeline_canvas import GAP_IDLE, GLYPHS, IDLE, PARTIAL, TimelineView, glyph_row

from tui_helpers import small_trace

HTA = "traces/facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
NORM = "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)"


def host_trace(tmp_path: Path) -> Path:
    """decode step 0 on stream 7: norm [0,10µs) gemm [12,42µs) norm [242,252µs) gemm [255,285µs).
    Gaps: 2 µs, 200 µs (the largest: the host sat in cudaStreamSynchronize [40,230µs) under
    aten::item, then launched the norm at 236 µs, 6 µs before it started), 3 µs.
    Host thread 4242 launches each kernel (correlation 1..4)."""
    us = 1_000
    kernels = [(NORM, 0, 10), (GEMM, 12, 30), (NORM, 242, 10), (GEMM, 255, 30)]
    rows = [{"kind": "kernel", "name": n, "start_ns": s * us, "dur_ns": d * us, "device": 0, "stream": 7,
             "correlation": i + 1, "path": "decode/step=0/layer=0"} for i, (n, s, d) in enumerate(kernels)]
    rows.append({"kind": "range", "name": "step=0", "path": "decode/step=0", "start_ns": -5 * us, "dur_ns": 295 * us})
    calls = [("cudaLaunchKernel", -4, 2, 1, "aten::rms_norm"), ("cudaLaunchKernel", 5, 2, 2, "aten::mm"),
             ("cudaStreamSynchronize", 40, 190, 10, "aten::item"), ("cudaLaunchKernel", 236, 2, 3, "aten::rms_norm"),
             ("cudaLaunchKernel", 240, 2, 4, "aten::mm")]
    rows += [{"kind": "runtime", "name": n, "start_ns": s * us, "dur_ns": d * us, "correlation": c, "op": op,
              "thread": 4242} for n, s, d, c, op in calls]
    meta = {"source": {"tool": "test"}, "device": {"name": "NVIDIA H100 80GB HBM3"},
            "steps": [{"phase": "decode", "index": 0}], "modeled": False}
    path = tmp_path / "host.parquet"
    write_trace(path, rows, meta)
    return path


def screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in s) for s in strips)


def drive(path, steps, size=(100, 40)):
    """Open the app, then for each (keys, check): press the keys, wait for workers, run check(app)."""
    async def main():
        app = RooftopApp([str(path)])
        out = []
        async with app.run_test(size=size) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for keys, check in steps:
                for k in keys:
                    await pilot.press(k)
                    await app.workers.wait_for_complete()
                    await pilot.pause()
                out.append(check(app))
        return out
    return asyncio.run(main())


def view(app) -> TimelineView:
    return app.screen.query_one(TimelineView)


def test_glyphs_tell_categories_apart_without_colour():
    glyphs = list(GLYPHS.values())
    assert len(set(glyphs)) == len(glyphs)
    assert not {IDLE, PARTIAL, GAP_IDLE} & set(glyphs)
    frac = np.array([1.0, 0.3, 0.0, 0.9])
    code = np.array([0, 1, -1, 1], dtype=np.int8)  # gemm, attention (partly busy), idle, attention
    assert glyph_row(frac, code) == [GLYPHS["gemm"], PARTIAL, IDLE, GLYPHS["attention"]]


def test_key_7_draws_streams_and_the_host_thread_and_finds_the_largest_gap(tmp_path):
    path = host_trace(tmp_path)

    def opened(app):
        assert isinstance(app.screen, TimelineScreen)
        text = screen_text(app)
        assert "stream 7" in text and "host 4242" in text
        assert "4 rows in 289 µs · 3 gaps (max 200 µs)" in text
        return True

    def largest(app):
        text = " ".join(screen_text(app).split())
        assert "Gap 1 of 3 (by size): 200 µs idle" in text
        # the sync covers [42, 230) of the gap [42, 242): 188 µs
        assert "cudaStreamSynchronize (sync) for 188 µs of it in aten::item" in text
        assert "launch→start 6 µs, launched after the GPU went idle" in text
        assert view(app).gap == (42_000, 242_000)
        return True

    def second(app):
        assert "Gap 2 of 3 (by size): 3 µs idle" in " ".join(screen_text(app).split())
        return True

    def back(app):
        assert app.screen.gap_rank == 0
        return True

    assert all(drive(path, [(["7"], opened), (["right_square_bracket"], largest), (["right_square_bracket"], second),
                            (["left_square_bracket"], back)]))


def test_zoom_pan_fit_move_the_view(tmp_path):
    path = host_trace(tmp_path)
    seen = {}

    def fit(app):
        v = view(app)
        seen["fit"] = (v.t0, v.t1)
        return True

    def zoomed(app):
        v = view(app)
        a, b = seen["fit"]
        assert v.t1 - v.t0 == pytest.approx((b - a) / 2)
        seen["zoom"] = (v.t0, v.t1)
        return True

    def panned(app):
        v = view(app)
        a, b = seen["zoom"]
        assert v.t0 == pytest.approx(a + (b - a) * 0.25) and v.t1 - v.t0 == pytest.approx(b - a)
        return True

    def refit(app):
        assert (view(app).t0, view(app).t1) == pytest.approx(seen["fit"])
        return True

    assert all(drive(path, [(["7"], fit), (["plus"], zoomed), (["l"], panned), (["0"], refit)]))


def test_enter_opens_the_kernel_after_the_gap_and_the_gap_list_jumps(tmp_path):
    path = host_trace(tmp_path)

    def detail(app):
        assert isinstance(app.screen, KernelDetailScreen)
        assert "rms_norm_kernel" in str(app.screen.key)
        return True

    def listed(app):
        assert isinstance(app.screen, GapListScreen)
        assert app.screen.frame["dur_ns"].tolist() == [200_000, 3_000, 2_000]
        return True

    def jumped(app):
        assert isinstance(app.screen, TimelineScreen) and app.screen.gap_rank == 2
        assert view(app).gap == (10_000, 12_000)
        return True

    assert all(drive(path, [(["7", "right_square_bracket", "enter"], detail), (["escape", "g"], listed),
                            (["down", "down", "enter"], jumped)]))


def test_t_on_a_step_opens_that_steps_timeline(tmp_path):
    path = small_trace(tmp_path)

    def opened(app):
        s = app.screen
        assert isinstance(s, TimelineScreen) and (s.phase, s.step) == ("decode", 0)
        # decode step 0 of the small trace: 2 layers x 5 kernels, 1 µs apart
        assert len(s.timeline.gpu) == 10 and s.timeline.gaps.frame()["dur_ns"].tolist() == [1_000] * 9
        assert "decode step 0" in " ".join(s.crumbs)
        assert "Host: unknown" not in screen_text(app)  # no gap selected yet
        return True

    def no_host(app):
        assert "Host: unknown (no CUDA runtime calls" in " ".join(screen_text(app).split())
        return True

    def from_step_view(app):
        s = app.screen
        assert isinstance(s, TimelineScreen) and (s.phase, s.step) == ("prefill", 0)
        assert len(s.timeline.gpu) == 10 and s.crumbs[-2] == "prefill step 0"
        return True

    # Steps: row 0 is prefill 0, row 1 decode 0
    assert all(drive(path, [(["2", "down", "t"], opened), (["right_square_bracket"], no_host),
                            (["escape", "up", "enter", "t"], from_step_view)]))


def test_runtime_rows_do_not_change_kernel_counts(fixtures_dir):
    from tui.loader import open_analysis

    a = open_analysis(str(fixtures_dir / HTA))
    # SOURCES.md: 2,700 kernels, 960 memcpy, 114 memset, 8,740 cuda_runtime calls; the calls are kept
    # apart from the events, in a few columns
    assert "runtime" not in set(a.trace.events["kind"].astype(object))
    assert len(a.trace.host) == 8740 and list(a.trace.host.columns) == list(HOST_COLUMNS)
    assert len(a.timed) == 2700 + 960 + 114
    assert int(a.steps["kernels"].sum()) <= len(a.timed)


def _largest_gap_by_sweep(rows: pd.DataFrame) -> int:
    """The longest stretch with no GPU row running, by walking the rows in start order."""
    best, reach = 0, None
    for s, d in sorted(zip(rows["start_ns"].tolist(), rows["dur_ns"].tolist())):
        if reach is not None and s > reach:
            best = max(best, s - reach)
        reach = s + d if reach is None else max(reach, s + d)
    return best


def test_largest_gap_of_a_real_step_found_with_the_gap_keys(fixtures_dir):
    path = fixtures_dir / HTA

    def check(app):
        s = app.screen
        assert isinstance(s, TimelineScreen) and s.step == 5
        expected = _largest_gap_by_sweep(app.analyses[0].kernels(phase=s.phase, step=5))
        g = view(app).gap
        assert expected > 0 and g[1] - g[0] == expected
        assert s.gap_rank == 0 and "Gap 1 of" in screen_text(app)
        assert any(ln.host for ln in s.timeline.lanes)  # the launching thread has its lane
        return True

    # Steps rows: ProfilerStep#4, #5, #6
    assert all(drive(path, [(["2", "down", "t", "right_square_bracket"], check)], size=(80, 24)))


def test_trace_text_on_the_timeline_is_shown_literally(tmp_path):
    """A kernel name with a terminal escape and a runtime call named like Rich markup: escaped and
    literal in the gap description, never interpreted."""
    us = 1_000
    rows = [{"kind": "kernel", "name": n, "start_ns": s * us, "dur_ns": 10 * us, "device": 0, "stream": 7,
             "correlation": c} for n, s, c in (("plain", 0, 1), ("esck\x1b[31mred", 100, 2))]
    rows += [{"kind": "runtime", "name": "[bold]cudaStreamSynchronize[/]", "start_ns": 12 * us, "dur_ns": 80 * us,
              "correlation": 9, "op": "op\x07bell", "thread": 7},
             {"kind": "runtime", "name": "cudaLaunchKernel", "start_ns": 95 * us, "dur_ns": 1 * us,
              "correlation": 2, "thread": 7}]
    path = tmp_path / "weird.parquet"
    write_trace(path, rows, {"source": {"tool": "test"}, "modeled": False})

    def check(app):
        text = " ".join(screen_text(app).split())
        assert "\x1b" not in text and "\x07" not in text
        assert "[bold]cudaStreamSynchronize[/] (sync) for 80 µs of it in op\\x07bell" in text
        assert "Next: esck\\x1b[31mred" in text
        return True

    assert all(drive(path, [(["7", "right_square_bracket"], check)], size=(120, 30)))


def test_multi_rank_run_draws_one_ranks_streams(tmp_path):
    from tui_helpers import multi_rank_run

    def check(app):
        s = app.screen
        assert isinstance(s, TimelineScreen) and s.rank == 0 and s.crumbs[-1] == "rank 0"
        rows = app.analyses[0].kernels(rank=0)
        assert len(s.timeline.gpu) == len(rows) and len(s.timeline.gpu) < len(app.analyses[0].timed)
        assert "Gap 1 of" in screen_text(app)
        return True

    assert all(drive(multi_rank_run(tmp_path), [(["7", "right_square_bracket"], check)]))
