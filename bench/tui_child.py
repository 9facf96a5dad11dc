"""One headless TUI measurement, run in its own process by tui_bench.py; prints one JSON object.

    tui_child.py rooftop TRACE [PRESSES]   the rooftop app: Overview, Kernels (grouped), raw launches
    tui_child.py stock ROWS [PRESSES]      textual.widgets.DataTable with ROWS rows (add_rows)
    tui_child.py fast ROWS [PRESSES]       textual_fastdatatable on an Arrow backend, for reference
    tui_child.py first TRACE               the rooftop app: launch to the Overview's first number (its
                                           phase table) on screen, and to the rows loaded; also from
                                           the process's start (`from_process_start_s`)

Times are from the start of the measurement (after imports). The Overview is timed to its first
number on screen (the phase table painted with a figure; see tui_pilot.py), not to the app going
idle; other screens to the screen having processed its messages and refreshed (`pilot.pause()`).
Keys: press to idle as the pilot sees it (`*_ms`) and press to the last frame (`*_frame_ms`).
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_pilot import (SIZE, FirstNumberClock, frame_clock, key_latencies, overview_first_number, peak_mb,  # noqa: E402
                       rss_mb, until)


async def rooftop(path: str, presses: int) -> dict:
    from tui.app import RooftopApp
    from tui.screens.kernels import KernelsScreen

    out: dict = {}
    t0 = time.perf_counter()
    app = RooftopApp([path])
    clock = FirstNumberClock(app)
    async with app.run_test(size=SIZE) as pilot:
        out.update(await overview_first_number(app, pilot, t0, clock))
        await app.workers.wait_for_complete()  # the Overview's worker finishes (findings, groups)
        await pilot.pause()
        out["overview_complete_s"] = time.perf_counter() - t0
        out["rss_overview_mb"] = rss_mb()
        out["peak_before_kernels_mb"] = peak_mb()  # the load and the Overview's analysis
        t = time.perf_counter()
        await pilot.press("3")
        await until(pilot, lambda: isinstance(app.screen, KernelsScreen))
        await pilot.pause()
        out["kernels_grouped_s"] = time.perf_counter() - t
        t = time.perf_counter()
        await pilot.press("g")  # raw launches: every kernel row
        await until(pilot, lambda: app.screen.mode == "raw")
        await pilot.pause()
        out["kernels_raw_s"] = time.perf_counter() - t
        out["raw_rows"] = len(app.screen.analysis.kernels())
        out["rss_kernels_mb"] = rss_mb()
        out["peak_before_sorts_mb"] = peak_mb()
        out["down_ms"], out["down_frame_ms"] = await key_latencies(pilot, "down", presses)
        out["pagedown_ms"], out["pagedown_frame_ms"] = await key_latencies(pilot, "pagedown", presses)
        table = app.screen.table
        # Sorts: `s` through every raw column (the order computed ahead, once the previous sort was
        # painted, as for a user pressing keys a few hundred ms apart: the pilot's pause waits for
        # the process to go idle), `S` three times, then `s` again through every column with the
        # orders computed on the key press (`FrameTable.PREFETCH_ORDERS` off, the kept ones
        # dropped: a burst of keys, a first sort): what main did for every sort.
        out["sorts_ms"], out["sorts_frame_ms"] = await sort_presses(pilot, table, "s", len(table.cols))
        out["reverse_ms"], out["reverse_frame_ms"] = await sort_presses(pilot, table, "S", 3)
        if hasattr(type(table), "PREFETCH_ORDERS"):
            type(table).PREFETCH_ORDERS = False
            table._orders.clear()
        out["cold_sorts_ms"], out["cold_sorts_frame_ms"] = await sort_presses(pilot, table, "s", len(table.cols))
        out["sort_ms"], out["sort_frame_ms"] = out["sorts_ms"][0], out["sorts_frame_ms"][0]
        for k in ("sorts", "reverse", "cold_sorts"):
            out[k + "_median_ms"] = statistics.median(out[k + "_ms"])
            out[k + "_median_frame_ms"] = statistics.median(out[k + "_frame_ms"])
        out["sort_columns"] = table.sort_key
        out["down_after_sorts_ms"], out["down_after_sorts_frame_ms"] = await key_latencies(pilot, "down", presses)
    out["peak_rss_mb"] = peak_mb()
    return out


async def sort_presses(pilot, table, key: str, n: int) -> tuple[list[float], list[float]]:
    """Press `key` n times on a FrameTable: ms from each press to idle as the pilot sees it, and
    to the last frame composed (the sorted rows and the status line on screen)."""
    clock = frame_clock(pilot.app)
    idle, frames = [], []
    for _ in range(n):
        built = table._serial
        clock.last = None
        t = time.perf_counter()
        await pilot.press(key)
        await until(pilot, lambda: table._serial > built, what="the sorted table")
        await pilot.pause()
        idle.append((time.perf_counter() - t) * 1000)
        frames.append(((clock.last or t) - t) * 1000)
    return idle, frames


async def first_number(path: str) -> dict:
    """Seconds from the app's start (after its module imports, `imports_s`) to the phase table on
    the Overview (from a stored summary, or computed), and to the whole trace loaded (every screen
    available)."""
    from tui.app import RooftopApp  # (imported in main, timed there)

    out: dict = {"imports_s": IMPORTS_S}
    t0, cpu0 = time.perf_counter(), time.process_time()
    app = RooftopApp([path])
    clock = FirstNumberClock(app)
    async with app.run_test(size=SIZE) as pilot:
        # on screen: the first frame composed with the phase table showing a figure (not the first
        # idle, which the rows loading behind it in a thread can hold back by a second)
        await until(pilot, lambda: clock.at is not None, what="the phase table's first number")
        out["first_number_s"] = clock.at - t0
        out["from_process_start_s"] = clock.at - PROCESS_START  # Python's own start-up and every import too
        # CPU seconds the process spent meanwhile (all threads): on a shared machine, steadier than wall
        out["first_number_cpu_s"] = clock.cpu_at - cpu0
        out["from_process_start_cpu_s"] = clock.cpu_at
        out["from_summary"] = app.screen.stored is not None
        await pilot.pause()
        out["first_idle_s"] = time.perf_counter() - t0
        await until(pilot, lambda: bool(app.analyses))
        out["loaded_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = peak_mb()
    return out


def frame(rows: int):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    names = np.array([f"kernel_{i}<float, {i % 7}>" for i in range(200)], dtype=object)
    return pd.DataFrame({
        "kernel": names[rng.integers(0, 200, rows)], "phase": np.where(rng.random(rows) < .1, "prefill", "decode"),
        "step": rng.integers(0, 4000, rows), "layer": rng.integers(0, 32, rows),
        "time_us": rng.random(rows) * 100, "start_us": np.cumsum(rng.random(rows) * 10),
        "category": np.array(["gemm", "attention", "norm", "elementwise"], dtype=object)[rng.integers(0, 4, rows)],
        "stream": 7,
    })


async def table(kind: str, rows: int, presses: int) -> dict:
    from textual.app import App

    df = frame(rows)
    out: dict = {}
    t0 = time.perf_counter()
    if kind == "stock":
        from textual.widgets import DataTable

        class T(App):
            def compose(self):
                yield DataTable(id="t")

            def on_mount(self):
                t = self.query_one(DataTable)
                for c in df.columns:
                    t.add_column(c, key=c)
                t.add_rows(df.itertuples(index=False))
                t.focus()
    else:
        from textual_fastdatatable import ArrowBackend, DataTable

        class T(App):
            def compose(self):
                yield DataTable(id="t", backend=ArrowBackend.from_pandas(df))

            def on_mount(self):
                self.query_one(DataTable).focus()
    app = T()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        out["first_paint_s"] = time.perf_counter() - t0
        out["rss_mounted_mb"] = rss_mb()
        out["down_ms"], out["down_frame_ms"] = await key_latencies(pilot, "down", presses)
        out["pagedown_ms"], out["pagedown_frame_ms"] = await key_latencies(pilot, "pagedown", presses)
    out["peak_rss_mb"] = peak_mb()
    return out


IMPORTS_S: float | None = None


def since_process_start() -> float:
    """Seconds since this process started (Linux: /proc/self/stat's start time, in clock ticks
    since boot, against /proc/uptime; 10 ms resolution)."""
    with open("/proc/self/stat") as fh:
        start = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22; fields after the name start at 3
    with open("/proc/uptime") as fh:
        up = float(fh.read().split()[0])
    return up - start / os.sysconf("SC_CLK_TCK")


PROCESS_START = time.perf_counter() - since_process_start()  # on the perf_counter clock


def main() -> int:
    global IMPORTS_S
    kind, arg = sys.argv[1], sys.argv[2]
    base = {"rss_start_mb": rss_mb()}
    if kind == "first":  # the app's own modules, timed apart from the run (Python's start excluded)
        t = time.perf_counter()
        import tui.app  # noqa: F401

        IMPORTS_S = time.perf_counter() - t
    presses = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    if kind == "rooftop":
        res = asyncio.run(rooftop(arg, presses))
    elif kind == "first":
        res = asyncio.run(first_number(arg))
    else:
        res = asyncio.run(table(kind, int(arg), presses))
    print(json.dumps({**base, **res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
