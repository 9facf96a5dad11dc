"""SVG snapshots of the Roofline and Stalls screens at 80x24 and 160x48, on deterministic traces.

Run this file (`python tests/test_tui_snapshots_charts.py roofline|stalls`) to see the app live.
Update the pins with `pytest tests/test_tui_snapshots_charts.py --snapshot-update` after checking the
report by eye.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from textual.app import App

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import STYLESHEET, small_trace  # noqa: E402

from rooftop.analysis import analyze  # noqa: E402
from rooftop.trace import load_trace, write_trace  # noqa: E402

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132,
          "peaks": {"datasheet": {"flops": 989e12, "bw": 3.35e12}}}
# A prefill GEMM right of the ridge, decode GEMVs and attention left of it, small latency-bound kernels.
KERNELS = [
    ("prefill_gemm", "prefill/step=0/layer=0/mlp", 400_000, 2.4e11, 4e8),
    ("prefill_flash_attn", "prefill/step=0/layer=0/attn", 120_000, 3e10, 3e8),
    ("decode_gemv", "decode/step=0/layer=0/mlp", 900_000, 2.4e9, 2.4e9),
    ("decode_flash_attn", "decode/step=0/layer=0/attn", 200_000, 8e8, 2e8),
    ("rmsnorm", "decode/step=0/layer=0/norm", 60_000, 2e7, 8e7),
    ("silu_mul", "decode/step=0/layer=0/mlp", 40_000, 1e7, 6e7),
    ("rope", "decode/step=0/layer=0/attn", 8_000, 4e6, 2e7),
]


def chart_trace(folder: Path) -> Path:
    rows, t = [], 0
    for i, (name, path, dur, flops, nbytes) in enumerate(KERNELS):
        stalls = {f"stall_{r}": 0.1 for r in ("short_scoreboard", "mio_throttle", "barrier", "not_selected")}
        stalls.update(stall_long_scoreboard=4.0 if "decode" in path else 0.5, stall_selected=1.0,
                      stall_gmma=3.0 if "gemm" in name else 0.2, stall_wait=0.8 if i % 2 else 0.3,
                      stall_math_pipe_throttle=1.2 if "prefill" in path else 0.1)
        rows.append({"kind": "kernel", "name": name, "path": path, "start_ns": t, "dur_ns": dur, "device": 0,
                     "stream": 7, "flops": flops, "dram_read": nbytes * 0.8, "dram_write": nbytes * 0.2,
                     "model_flops": flops, "model_bytes": nbytes, "counters": True, **stalls})
        t += dur + 2_000
    meta = {"device": DEVICE, "model": {"name": "llama-chart"}, "modeled": False,
            "workload": {"batch": 8, "prompt_len": 512, "gen_len": 1, "dtype": "bf16", "attn": "flash"},
            "source": {"tool": "rooftop-test", "version": "0"},
            "steps": [{"phase": "prefill", "index": 0, "batch": 8, "new_tokens": 4096, "context": 512},
                      {"phase": "decode", "index": 0, "batch": 8, "new_tokens": 8, "context": 513}]}
    path = Path(folder) / "chart.parquet"
    write_trace(path, rows, meta)
    return path


class ChartApp(App):


    CSS_PATH = STYLESHEET
    """Mounts one chart screen on the deterministic trace."""

    def __init__(self, which: str, folder: Path | None = None) -> None:
        super().__init__()
        self.which = which
        folder = folder or Path(tempfile.mkdtemp(prefix="rooftop-snap-"))
        self.analysis = analyze(load_trace(chart_trace(folder)))

    def on_mount(self) -> None:
        if self.which == "roofline":
            from tui.screens.roofline import RooflineScreen

            self.push_screen(RooflineScreen(self.analysis))
        else:
            from tui.screens.stalls import StallsScreen

            self.push_screen(StallsScreen(self.analysis))


async def _settle(pilot) -> None:
    for _ in range(2):
        await pilot.app.workers.wait_for_complete()
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("which", ["roofline", "stalls"])
def test_chart_snapshot(snap_compare, tmp_path, which, size):
    assert snap_compare(ChartApp(which, tmp_path), terminal_size=size, run_before=_settle)


def test_small_trace_stalls_renders(tmp_path):
    """The shared helper trace also renders (no snapshot: guards against crashes on its shapes)."""
    import asyncio

    from tui.screens.stalls import StallsScreen

    a = analyze(load_trace(small_trace(tmp_path, counters=True)))

    class One(App):

        CSS_PATH = STYLESHEET
        def on_mount(self):
            self.push_screen(StallsScreen(a))

    async def run():
        app = One()
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(pilot)
            assert app.screen.stalls is not None

    asyncio.run(run())


if __name__ == "__main__":
    ChartApp(sys.argv[1] if len(sys.argv) > 1 else "roofline").run()
