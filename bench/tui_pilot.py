"""What the headless TUI benchmarks share (tui_child.py, timeline_bench.py): memory readings, key
latency, waiting on a state, and the Overview's first number.

"First number" is what a user waits for: the first figure of the phase table painted on the
Overview (not the screen appearing with its identity lines, and not the app going idle, which a
background worker can postpone for seconds). Times are wall clock in this process.

Key latency is given two ways. "Pilot" is press to idle as Textual's test pilot sees it
(`pilot.press` + `pilot.pause()`): the pilot polls for idleness in 20 ms sleeps, three times per key,
so even a key that does nothing reads ~60-85 ms on this machine. "Frame" is press to the last frame
the app composed for that key (`App._display`, called with each screen update, headless included):
what a user waits for, without the pilot's polling.
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


class FrameClock:
    """When the app last composed a screen update (`App._display` with something to show)."""

    def __init__(self, app) -> None:
        self.last: float | None = None
        display = app._display

        def timed(screen, renderable):
            if renderable is not None:
                self.last = time.perf_counter()
            return display(screen, renderable)

        app._display = timed


def frame_clock(app) -> FrameClock:
    """The app's FrameClock, installed on first use."""
    clock = getattr(app, "_bench_frame_clock", None)
    if clock is None:
        clock = app._bench_frame_clock = FrameClock(app)
    return clock


async def key_latencies(pilot, key: str, n: int) -> tuple[float, float]:
    """(median ms from key press to idle as the pilot sees it, median ms from key press to the last
    frame composed before that idle); see the module docstring."""
    clock = frame_clock(pilot.app)
    idle, frame = [], []
    for _ in range(n):
        clock.last = None
        t = time.perf_counter()
        await pilot.press(key)
        await pilot.pause()
        idle.append((time.perf_counter() - t) * 1000)
        frame.append(((clock.last or t) - t) * 1000)
    return statistics.median(idle), statistics.median(frame)


async def key_latency(pilot, key: str, n: int) -> float:
    """Median ms from key press to the repaint after it (`pilot.pause()`: messages processed)."""
    return (await key_latencies(pilot, key, n))[0]


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


class FirstNumberClock:
    """When the first frame holding the phase table's first number was composed: checked after
    each frame (`App._display`) until seen, so a busy event loop right after that frame (the step
    curve's import, the rows loading) cannot postpone the reading, as polling from the pilot can."""

    def __init__(self, app) -> None:
        self.at: float | None = None
        self.cpu_at: float | None = None  # the process's CPU seconds then (every thread; `time.process_time`)
        display = app._display

        def timed(screen, renderable):
            out = display(screen, renderable)
            if self.at is None and renderable is not None and _phase_number_shown(app):
                self.at, self.cpu_at = time.perf_counter(), time.process_time()
            return out

        app._display = timed


async def overview_first_number(app, pilot, t0: float, clock: FirstNumberClock | None = None) -> dict:
    """Seconds from `t0` to the Overview screen (identity painted) and to its first number (the
    frame composed with the phase table painted with a figure), and RSS then. `clock`: installed
    when the app was made (else now: it may then miss a frame already composed)."""
    from tui.screens.overview import OverviewScreen

    clock = clock or FirstNumberClock(app)
    out = {}
    await until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="Overview")
    await pilot.pause()
    out["overview_screen_s"] = time.perf_counter() - t0
    await until(pilot, lambda: clock.at is not None or _phase_number_shown(app), what="the phase table's first number")
    out["first_number_s"] = (clock.at or time.perf_counter()) - t0
    out["rss_first_number_mb"] = rss_mb()
    return out
