"""The Timeline at 80x24 and 160x48: SVG snapshots of the whole modeled sample, and the same
sizes on a real Kineto step (HolisticTraceAnalysis' nccl_data, ProfilerStep#5) with its largest gap
selected, checked on the rendered screen (skipped when the third-party fixtures are absent). The
real step is not stored as an SVG: nothing derived from a third-party file goes into the repository.

Update after an intended layout change with `pytest tests/test_timeline_snapshots.py --snapshot-update`,
only after looking at the report's left-hand side.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tui.app import RooftopApp

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(80, 24), (160, 48)]
SAMPLE = ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet"
HTA = "traces/facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz"


def _pressing(*keys):
    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline_modeled_sample(snap_compare, size):
    assert snap_compare(RooftopApp([str(SAMPLE)]), terminal_size=size, run_before=_pressing("7"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_timeline_real_step_largest_gap(fixtures_dir, size):
    """What a snapshot would hold, asserted: every lane, the gap marker, the gap, the host's
    activity and the next kernel are on screen, nothing clipped, with colour or without."""
    import asyncio

    from tui.widgets.timeline_canvas import TimelineView

    async def main():
        app = RooftopApp([str(fixtures_dir / HTA)])
        async with app.run_test(size=size) as pilot:
            await _pressing("2", "down", "t", "right_square_bracket")(pilot)
            strips = app.screen._compositor.render_strips()
            lines = ["".join(seg.text for seg in s) for s in strips]
            view = app.screen.query_one(TimelineView)
            return lines, view, app.screen.timeline

    lines, view, t = asyncio.run(main())
    text = "\n".join(lines)
    assert len(lines) == size[1] and all(len(ln) == size[0] for ln in lines)
    for lane in t.lanes:  # streams 7, 40 (nccl) and the launching host thread, all visible
        assert any(ln.startswith(lane.label) for ln in lines), lane.label
    assert sum(ln.count("└") for ln in lines) == 1 and " idle " in text
    flat = " ".join(text.split())
    # the kernel after the gap depends on which launches the step's GPU window holds: it is named,
    # with its launch-to-start time
    assert "Gap 1 of" in flat and "in no CUDA call for" in flat and "Next: " in flat and "launch→start" in flat
    assert "⏎ Detail" in lines[-1]
