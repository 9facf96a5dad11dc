"""Timeline at scale: open and pan on a 20,000-kernel step and on a 1M-kernel trace, ms per key,
against the Kernels table's key latency in the same process; RSS.

Traces (synthetic decode loops from bench/synth_trace.py, written to bench/out/ once):
- `timeline_step20k`: 3 decode steps of 20,007 kernels (2,223 layers x 9), each kernel with its
  cudaLaunchKernel runtime row 5 µs before it on host thread 1 (so the host lane is drawn too);
- `synth_1000000`: 999,936 kernels, no runtime rows (the file tui_bench.py uses);
- `timeline_1m_host`: the same 999,936 kernels plus one runtime row each (2M rows).

Each measurement runs headless (`run_test(size=(120, 40))`) in its own process, for its own RSS:
the Overview, then the timeline (`7` for the whole trace, or `t` on step 1's row of Steps), the
median of N presses of each timeline key from press to repaint (`pilot.pause()`), then the Kernels
screen (`3`) and its `down` latency.

    python bench/timeline_bench.py [--presses 15] [--skip-1m]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import ROOT, machine, run
from tui_pilot import SIZE, key_latencies, overview_first_number, peak_mb, rss_mb, until

OUT = ROOT / "bench" / "out"
KEYS = ["l", "h", "plus", "minus", "right_square_bracket", "full_stop", "0"]
LAUNCH_LEAD_NS = 5_000


def with_launches(frame):
    """The kernel rows plus a cudaLaunchKernel per kernel, 5 µs before it, on host thread 1."""
    import numpy as np
    import pandas as pd

    n = len(frame)
    rt = pd.DataFrame({
        "id": frame["id"].to_numpy() + n, "kind": "runtime", "name": "cudaLaunchKernel",
        "start_ns": frame["start_ns"].to_numpy() - LAUNCH_LEAD_NS, "dur_ns": np.full(n, 3_000, dtype=np.int64),
        "correlation": frame["correlation"].to_numpy(), "thread": np.ones(n, dtype=np.int64), "op": "aten::mm",
    })
    return pd.concat([frame, rt], ignore_index=True)


def build(name: str) -> Path:
    sys.path.insert(0, str(ROOT))
    import synth_trace
    from rooftop.trace import write_trace

    path = OUT / f"{name}.parquet"
    if path.exists():
        return path
    t = time.perf_counter()
    if name == "timeline_step20k":
        write_trace(path, with_launches(synth_trace.decode_frame(3, layers=2223)), synth_trace.meta(3))
    elif name == "synth_1000000":
        synth_trace.write(path, 1_000_000)
    elif name == "timeline_1m_host":
        steps = round(1_000_000 / (32 * len(synth_trace.KERNELS)))
        write_trace(path, with_launches(synth_trace.decode_frame(steps)), synth_trace.meta(steps))
    print(f"built {path.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


# --- the child: one app, one trace -----------------------------------------------------------------

async def child(path: str, mode: str, presses: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from tui.app import RooftopApp
    from tui.screens.kernels import KernelsScreen
    from tui.screens.timeline import TimelineScreen
    from tui.widgets.timeline_canvas import TimelineView

    out: dict = {}
    t0 = time.perf_counter()
    app = RooftopApp([path])
    async with app.run_test(size=SIZE) as pilot:
        out.update(await overview_first_number(app, pilot, t0))
        await app.workers.wait_for_complete()
        await pilot.pause()
        out["rss_overview_mb"] = rss_mb()
        out["peak_before_timeline_mb"] = peak_mb()
        if mode == "step":  # to step 1's row in Steps first: only the timeline key is timed
            for k in ("2", "down"):
                await pilot.press(k)
                await app.workers.wait_for_complete()
                await pilot.pause()
        t = time.perf_counter()
        await pilot.press("t" if mode == "step" else "7")
        await pilot.pause()
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.query(TimelineView))
        await pilot.pause()
        out["open_ms"] = (time.perf_counter() - t) * 1000
        s = app.screen
        out["gpu_rows"] = len(s.timeline.gpu)
        out["lanes"] = [ln.label for ln in s.timeline.lanes]
        out["gaps"] = len(s.timeline.gaps)
        out["rss_timeline_mb"] = rss_mb()
        for key in KEYS:
            out[f"{key}_ms"], out[f"{key}_frame_ms"] = await key_latencies(pilot, key, presses)
        out["rss_after_keys_mb"] = rss_mb()
        t = time.perf_counter()
        await pilot.press("3")
        await until(pilot, lambda: isinstance(app.screen, KernelsScreen))
        await pilot.pause()
        out["kernels_open_ms"] = (time.perf_counter() - t) * 1000
        out["kernels_down_ms"], out["kernels_down_frame_ms"] = await key_latencies(pilot, "down", presses)
    out["peak_rss_mb"] = peak_mb()
    return out


# --- the driver ---------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presses", type=int, default=15)
    p.add_argument("--skip-1m", action="store_true")
    p.add_argument("--child", nargs=3, metavar=("TRACE", "MODE", "PRESSES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        trace, mode, presses = args.child
        print(json.dumps(asyncio.run(child(trace, mode, int(presses)))))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    cases = [("20,007-kernel step (step 1 of 3, host lane)", "timeline_step20k", "step"),
             ("20,007-kernel step, whole trace (60k kernels)", "timeline_step20k", "whole")]
    if not args.skip_1m:
        cases += [("1M kernels, whole trace", "synth_1000000", "whole"),
                  ("1M kernels + 1M runtime rows, whole trace", "timeline_1m_host", "whole")]
    results = []
    for label, name, mode in cases:
        path = build(name)
        res = run([sys.executable, __file__, "--child", str(path), mode, str(args.presses)], timeout_s=900)
        r = json.loads(res.stdout.strip().splitlines()[-1]) if res.ok else None
        results.append((label, r, res.rss_mb, res.status + ": " + res.stderr.strip()[-300:]))
    print(f"## Timeline ({SIZE[0]}x{SIZE[1]}, median of {args.presses} presses, press to repaint) — "
          f"{time.strftime('%Y-%m-%d')}, {machine()}\n")
    print("Overview: first number = the phase table painted with a figure (bench/tui_pilot.py), from launch.")
    print("Keys: press to idle as Textual's pilot sees it (~60-85 ms for a key that does nothing), and in "
          "brackets press to the last frame composed (bench/tui_pilot.py).\n")
    print("| trace | GPU rows drawn | lanes | Overview first number s | open ms | l | h | + | - | ] | . | 0 | Kernels `down` ms "
          "| RSS Overview MB | RSS timeline MB | peak before timeline MB | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, r, peak, err in results:
        if r is None:
            print(f"| {label} | {err} | | | | | | | | | | | | | | | {peak:.0f} |")
            continue
        keys = " | ".join(f"{r[f'{k}_ms']:.0f} ({r[f'{k}_frame_ms']:.0f})" for k in KEYS)
        print(f"| {label} | {r['gpu_rows']:,} | {len(r['lanes'])} | {r['first_number_s']:.2f} | {r['open_ms']:.0f} | {keys} | "
              f"{r['kernels_down_ms']:.0f} ({r['kernels_down_frame_ms']:.0f}) | {r['rss_overview_mb']:.0f} | {r['rss_timeline_mb']:.0f} | "
              f"{r['peak_before_timeline_mb']:.0f} | {peak:.0f} |")
    (OUT / "timeline_bench.json").write_text(json.dumps([{"case": c, "result": r, "peak_mb": pk}
                                                         for c, r, pk, _ in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
