"""SVG snapshots of Overview, Kernels and kernel detail at 80x24 and 160x48, on deterministic data.

Update after an intended layout change with `pytest tests/test_tui_snapshots.py --snapshot-update`,
only after looking at the report's left-hand side.
"""
from __future__ import annotations

import pytest

from tui.app import RooftopApp

from tui_helpers import small_trace

SIZES = [(80, 24), (160, 48)]
SCREENS = {"overview": [], "kernels": ["3"], "detail": ["3", "enter"]}


async def _loaded(pilot):
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_snapshot(snap_compare, tmp_path_factory, screen, size):
    # A fixed directory name: the path never shows on these screens, but keep runs identical anyway.
    path = small_trace(tmp_path_factory.mktemp("snap"), counters=True)
    assert snap_compare(RooftopApp([str(path)]), press=SCREENS[screen], terminal_size=size, run_before=_loaded)
