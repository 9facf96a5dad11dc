"""What the headless TUI benchmarks share (tui_child.py, timeline_bench.py): memory readings, key
latency, waiting on a state, and the Overview's first number.

"First number" is what a user waits for: the first figure of the phase table painted on the
Overview (not the screen appearing with its identity lines, and not the app going idle, which a
background worker can postpone for seconds). Times are wall clock in this process.
"""
from __future__ import annotations

import os
import re
import resource
import statistics
import time

SIZE = (120, 40)


def rss_mb() -> float:
    """Resident memory now."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    """Peak resident memory of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def key_latency(pilot, key: str, n: int) -> float:
    """Median ms from key press to the repaint after it (`pilot.pause()`: messages processed)."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await pilot.press(key)
        await pilot.pause()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def until(pilot, cond, limit_s: float = 300, what: str = "screen") -> None:
    """Poll `cond` between message rounds; TimeoutError after `limit_s`."""
    t = time.perf_counter()
    while not cond():
        if time.perf_counter() - t > limit_s:
            raise TimeoutError(f"{what} never appeared")
        await pilot.pause(0.005)


_DIGIT = re.compile(r"\d")


def _phase_number_shown(app) -> bool:
    from tui.screens.overview import OverviewScreen

    screen = app.screen
    if not isinstance(screen, OverviewScreen):
        return False
    tables = screen.query("#phases")
    if not tables:
        return False
    # laid out (a region on screen) and its rendered lines hold a digit (a time, a rate)
    table = tables.first()
    if not table.region.area:
        return False
    return any(_DIGIT.search(strip.text) for strip in table.render_lines(table.region.reset_offset))


async def overview_first_number(app, pilot, t0: float) -> dict:
    """Seconds from `t0` to the Overview screen (identity painted) and to its first number (the
    phase table painted with a figure), and RSS then."""
    from tui.screens.overview import OverviewScreen

    out = {}
    await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="Overview")
    await pilot.pause()
    out["overview_screen_s"] = time.perf_counter() - t0
    await until(pilot, lambda: _phase_number_shown(app), what="the phase table's first number")
    out["first_number_s"] = time.perf_counter() - t0
    out["rss_first_number_mb"] = rss_mb()
    return out
