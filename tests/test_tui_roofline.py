"""Roofline widget maths and the Roofline screen, driven with Pilot on a hand-built trace."""
from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
from textual.app import App

from rooftop.analysis import analyze
from rooftop.trace import load_trace, write_trace
from tui.screens.roofline import RooflineScreen
from tui.widgets.roofline_plot import (BIG, GLYPHS, MID, SMALL, RooflinePlot, decade_label, decade_ticks, frame_for,
                                       marker_for, plottable, printable, ridge)

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import STYLESHEET, small_trace  # noqa: E402

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132,
          "peaks": {"datasheet": {"flops": 989e12, "bw": 3.35e12}}}
BW, PEAK = 3.35e12, 989.4e12  # H100 SXM datasheet, as the spec table gives them

# name, path, dur_ns, flops, bytes: AI and FLOP/s are chosen to be easy to check by hand.
KERNELS = [
    ("prefill_gemm", "prefill/step=0/layer=0/mlp", 100_000, 5e10, 1e8),   # AI 500, 500 TFLOP/s
    ("decode_gemv", "decode/step=0/layer=0/mlp", 200_000, 4e8, 4e8),      # AI 1, 2 TFLOP/s, 2 TB/s
    ("flash_attn", "decode/step=0/layer=0/attn", 50_000, 1e8, 2e7),       # AI 5, 2 TFLOP/s
    ("rmsnorm", "decode/step=0/layer=0/norm", 10_000, 1e6, 4e6),          # AI 0.25, 0.1 TFLOP/s
]


def roof_trace(tmp_path: Path, measured: bool = False, modeled: bool = False) -> Path:
    rows, t = [], 0
    for name, path, dur, flops, nbytes in KERNELS:
        rows.append({"kind": "kernel", "name": name, "path": path, "start_ns": t, "dur_ns": dur, "device": 0,
                     "stream": 7, "flops": flops, "dram_read": nbytes * 0.75, "dram_write": nbytes * 0.25,
                     "model_flops": flops, "model_bytes": nbytes, "counters": True})
        t += dur + 1_000
    device = dict(DEVICE)
    if measured:
        device = {**DEVICE, "peaks": {**DEVICE["peaks"], "measured": {"flops": 700e12, "bw": 2.8e12}}}
    meta = {"device": device, "modeled": modeled, "model": {"name": "hand"},
            "workload": {"batch": 1, "dtype": "bf16"},
            "steps": [{"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 8, "context": 8},
                      {"phase": "decode", "index": 0, "batch": 1, "new_tokens": 1, "context": 9}]}
    path = tmp_path / "roof.parquet"
    write_trace(path, rows, meta)
    return path


# --- pure maths ------------------------------------------------------------------------------

def test_decade_labels():
    assert [decade_label(e) for e in (-1, 0, 1, 2, 3, 4)] == ["0.1", "1", "10", "100", "1k", "10k"]
    assert [decade_label(e) for e in (9, 10, 11, 12, 13, 14, 15)] == ["1G", "10G", "100G", "1T", "10T", "100T", "1P"]
    assert decade_ticks(-1.0, 3.0) == ([-1, 0, 1, 2, 3], ["0.1", "1", "10", "100", "1k"])
    assert decade_ticks(10.6, 15.2)[1] == ["100G", "1T", "10T", "100T", "1P"]


def test_ridge_and_frame():
    c = {"bw": BW, "flops": PEAK, "fp32": 67e12}
    assert ridge(c) == pytest.approx(295.3, abs=0.1)
    assert ridge({"bw": None, "flops": PEAK}) is None
    pts = plottable(pd.DataFrame({"key": ["a"], "phase": ["decode"], "ai": [1.0], "achieved_flops": [2e12],
                                  "time_ns": [1.0]}))
    fr = frame_for(pts, c)
    assert fr.x[0] <= 0 and fr.x[1] >= math.log10(295.3)
    # The roof is the min of the two ceilings, in log10: bw·x left of the ridge, the peak right of it.
    i = int(abs(fr.roof_x - 0).argmin())
    assert fr.roof[i] == pytest.approx(math.log10(BW) + fr.roof_x[i], abs=1e-9)
    assert fr.roof[-1] == pytest.approx(math.log10(PEAK))
    assert fr.fp32[-1] == pytest.approx(math.log10(67e12))
    assert fr.y[0] < math.log10(2e12) < math.log10(PEAK) < fr.y[1]


def test_plottable_drops_what_a_log_axis_cannot_hold_and_sorts_by_time():
    df = pd.DataFrame({"key": list("abcd"), "phase": ["decode"] * 4, "ai": [1.0, 0.0, float("nan"), 2.0],
                       "achieved_flops": [1e12, 1e12, 1e12, 3e12], "time_ns": [5, 9, 9, 7]})
    assert list(plottable(df)["key"]) == ["d", "a"]
    assert marker_for(100, 100) == BIG and marker_for(10, 100) == MID and marker_for(1, 100) == SMALL
    assert printable("esc\x1b[31mred\x07") == "esc\\x1b[31mred\\x07"  # escaped, as everywhere (rooftop.present.text)


# --- the screen ------------------------------------------------------------------------------

class ScreenApp(App):

    CSS_PATH = STYLESHEET
    def __init__(self, analysis, **kw):
        super().__init__(**kw)
        self.analysis = analysis

    def on_mount(self) -> None:
        self.push_screen(RooflineScreen(self.analysis))


def _text(screen, selector: str) -> str:
    return str(screen.query_one(selector).render())


async def _settle(pilot):
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.screen.workers.wait_for_complete()
    await pilot.pause()


def test_selection_moves_through_points_by_time(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(120, 36)) as pilot:
            await _settle(pilot)
            screen = app.screen
            assert list(screen.plot.points["key"]) == ["decode_gemv", "prefill_gemm", "flash_attn", "rmsnorm"]
            info = _text(screen, "#roofline-info")
            # decode_gemv: AI 4e8/4e8 = 1; 4e8 FLOP / 200 µs = 2 TFLOP/s; roof at AI 1 = 3.35 TFLOP/s -> 59.7%.
            # Numbers on the first line (never cut at 80 columns), the name on the second.
            assert info.startswith("[1/4] decode · AI 1 FLOP/B · 2 TFLOP/s · 2 TB/s · 59.7% of roof")
            assert "memory-bound" in info and info.splitlines()[1] == "decode_gemv"
            await pilot.press("j")
            info = _text(screen, "#roofline-info")
            # prefill_gemm: AI 500, 5e10 / 100 µs = 500 TFLOP/s, roof = 989.4 T -> 50.5%, right of the ridge.
            assert info.startswith("[2/4] prefill · AI 500 FLOP/B · 500 TFLOP/s") and info.endswith("\nprefill_gemm")
            assert "50.5% of roof" in info and "compute-bound" in info
            await pilot.press("down")
            assert _text(screen, "#roofline-info").endswith("\nflash_attn")
            await pilot.press("k", "k")
            assert _text(screen, "#roofline-info").startswith("[1/4] decode ·")
            await pilot.press("up")  # wraps to the smallest
            assert _text(screen, "#roofline-info").startswith("[4/4]")
            assert _text(screen, "#roofline-info").endswith("\nrmsnorm")
            assert screen.selected_key() == "rmsnorm"

    asyncio.run(run())


def test_phase_filter_and_legend(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(120, 36)) as pilot:
            await _settle(pilot)
            screen = app.screen
            legend = _text(screen, "#roofline-legend")
            assert "Roofs: datasheet" in legend and "HBM 3.35 TB/s" in legend and "ridge 295 FLOP/B" in legend
            assert "phase: all" in _text(screen, "#roofline-title")
            await pilot.press("p")
            await _settle(pilot)
            assert "phase: prefill" in _text(screen, "#roofline-title")
            assert list(screen.plot.points["key"]) == ["prefill_gemm"]
            await pilot.press("p")
            await _settle(pilot)
            assert list(screen.plot.points["key"]) == ["decode_gemv", "flash_attn", "rmsnorm"]
            await pilot.press("p")
            await _settle(pilot)
            assert len(screen.plot.points) == 4
            # No calibration in this trace: `m` says so instead of changing the roofs.
            await pilot.press("m")
            await _settle(pilot)
            assert "Roofs: datasheet" in _text(screen, "#roofline-legend")
            assert any("measured" in str(n.message) for n in app._notifications)

    asyncio.run(run())


def test_toggle_measured_ceilings(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path, measured=True)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(120, 36)) as pilot:
            await _settle(pilot)
            screen = app.screen
            first = _text(screen, "#roofline-legend")
            await pilot.press("m")
            await _settle(pilot)
            second = _text(screen, "#roofline-legend")
            assert first != second
            both = {first.split(" — ")[0], second.split(" — ")[0]}
            assert any("measured calibration" in s for s in both) and any("datasheet" in s for s in both)
            assert "HBM 2.8 TB/s" in first + second and "HBM 3.35 TB/s" in first + second
            await pilot.press("m")
            await _settle(pilot)
            assert _text(screen, "#roofline-legend") == first

    asyncio.run(run())


def test_modeled_badge_and_enter(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path, modeled=True)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(pilot)
            assert "MODELED" in app.screen.query_one("#breadcrumb").plain + str(app.screen.query_one("#breadcrumb").render())
            await pilot.press("j", "enter")
            await pilot.pause()
            from tui.screens.detail import KernelDetailScreen

            assert isinstance(app.screen, KernelDetailScreen)
            assert app.screen.key == "prefill_gemm"
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, RooflineScreen)

    asyncio.run(run())


def test_no_badge_when_measured(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(pilot)
            assert "MODELED" not in str(app.screen.query_one("#breadcrumb").render())
            assert "Roofline" in app.screen.query_one("#breadcrumb").plain

    asyncio.run(run())


def test_resize_survives_and_keeps_drawing(tmp_path):
    """plotext 5 log axes crash on the second build; ours are linear over log10 data."""
    a = analyze(load_trace(roof_trace(tmp_path)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            for size in [(200, 60), (80, 24), (120, 40), (60, 20), (160, 48), (80, 24)]:
                await pilot.resize_terminal(*size)
                await pilot.pause()
                plot = app.screen.plot
                rendered = str(plot.render())
                assert "1T" in rendered and "100T" in rendered  # our decade labels, not plotext's
                assert any(g[0] in rendered for g in GLYPHS.values())  # the biggest group's marker is on the canvas
            app.save_screenshot(str(tmp_path / "after.svg"))

    asyncio.run(run())


def test_weird_names_are_literal(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True, weird_names=True)))

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(120, 36)) as pilot:
            await _settle(pilot)
            screen = app.screen
            keys = list(screen.plot.points["key"])
            for _ in range(len(keys)):
                info = _text(screen, "#roofline-info")
                assert "\x1b" not in info and "\x07" not in info
                await pilot.press("j")
            assert "\x1b" not in str(screen.plot.render())

    asyncio.run(run())


def test_for_kernel_mini_plot(tmp_path):
    a = analyze(load_trace(roof_trace(tmp_path)))
    plot = RooflinePlot.for_kernel(a, "flash_attn", by="short_name", id="mini")
    assert plot.compact and plot.selected == 0 and list(plot.points["key"]) == ["flash_attn"]
    assert plot.points["ai"].iloc[0] == pytest.approx(5.0)


def test_compact_plot_one_point():
    pts = pd.DataFrame({"key": ["k"], "phase": ["decode"], "ai": [2.0], "achieved_flops": [4e12], "time_ns": [10]})

    class Mini(App):

        CSS_PATH = STYLESHEET
        def compose(self):
            yield RooflinePlot(pts, {"bw": BW, "flops": PEAK, "fp32": None}, selected=0, compact=True)

    async def run():
        app = Mini()
        async with app.run_test(size=(40, 12)) as pilot:
            await pilot.pause()
            plot = app.query_one(RooflinePlot)
            assert plot.selected == 0
            await pilot.resize_terminal(30, 10)
            await pilot.pause()
            assert "◉" in str(plot.render())

    asyncio.run(run())


def test_one_phase_trace_offers_no_phase_filter_and_each_series_has_its_glyph(tmp_path):
    """Issue 40: a trace whose only phase is `run` is not offered `(p: prefill)`; the legend lists the
    series present, each with its own glyph (apart under NO_COLOR)."""
    rows = [{"kind": "kernel", "name": name, "path": f"run/step={i}", "start_ns": i * 300_000, "dur_ns": dur,
             "device": 0, "stream": 7, "flops": flops, "dram_read": nbytes, "dram_write": 0.0,
             "counters": True} for i, (name, _, dur, flops, nbytes) in enumerate(KERNELS)]
    steps = [{"phase": "run", "index": i} for i in range(len(KERNELS))]
    a = analyze(load_trace(write_trace(tmp_path / "run.parquet", rows, {"device": DEVICE, "steps": steps})))
    assert set(a.steps["phase"]) == {"run"}

    async def run():
        app = ScreenApp(a)
        async with app.run_test(size=(100, 30)) as pilot:
            await _settle(pilot)
            screen = app.screen
            title = _text(screen, "#roofline-title")
            assert "phase: all" in title and "(p:" not in title and "prefill" not in title
            legend = _text(screen, "#roofline-legend")
            assert f"{GLYPHS['other'][0]} other" in legend and "prefill" not in legend and "decode" not in legend
            await pilot.press("p")
            await _settle(pilot)
            assert len(screen.plot.points) == 4 and any("one phase" in str(n.message) for n in app._notifications)

    asyncio.run(run())


def test_phase_series_have_distinct_glyphs():
    firsts = [g[0] for g in GLYPHS.values()]
    assert len(set(firsts)) == len(firsts) == 3
    assert len({c for g in GLYPHS.values() for c in g}) == 9
