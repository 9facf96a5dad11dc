"""SVG snapshots at 80x24 and 160x48: kernel detail opened from a decode roofline point (decode-only
numbers), Compare of the fused and materialized llama3-8b samples (the changed attention verdict in
sight at 80x24), and the warnings list.

Update after an intended layout change with `pytest tests/test_tui_snapshots_drill.py --snapshot-update`,
only after looking at the report's left-hand side.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tui.app import RooftopApp

from test_tui_warnings import warned_trace
from tui_helpers import small_trace

SIZES = [(80, 24), (160, 48)]
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


async def _loaded(pilot):
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _paths(screen: str, tmp: Path) -> list[str]:
    if screen == "compare":
        return [str(SAMPLES / f"llama3-8b_h100-sxm_b1_{v}.modeled.parquet") for v in ("fused", "materialized")]
    if screen == "warnings":
        return [str(warned_trace(tmp))]
    return [str(small_trace(tmp, counters=True))]


# Roofline, phase prefill, then decode; Enter on its biggest point (the decode GEMM group).
KEYS = {"detail-decode": ["4", "p", "p", "enter"], "compare": ["6"], "warnings": ["w"]}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(KEYS))
def test_drill_snapshot(snap_compare, tmp_path_factory, screen, size):
    app = RooftopApp(_paths(screen, tmp_path_factory.mktemp("snap")))

    async def settle(pilot):
        await _loaded(pilot)
        for key in KEYS[screen]:
            await pilot.press(key)
            await _loaded(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=settle)
