"""What the GPU waited for, at scale: idle by cause, exposed communication, host copies and
CUDA-graph layers on a synthetic decode loop (bench/synth_trace.py, ~1M kernels, one
cudaLaunchKernel per kernel 5 µs before it), as ratios to the phase and step tables of the same
rows in the same process (the tables every report computes anyway).

    python bench/idle_bench.py [--steps 3472]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from synth_trace import decode_frame  # noqa: E402

from rooftop.analysis import comm, copies, graphs, idle, metrics, work  # noqa: E402


def timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3472)  # 3472 steps x 32 layers x 9 kernels ~ 1M
    args = ap.parse_args(argv)
    rows = decode_frame(args.steps)
    n = len(rows)
    for col in ("dram_read", "dram_write", "flops"):
        rows[col] = np.nan
    rows["counters"] = False
    rows["category"] = np.where(np.arange(n) % 97 == 0, "comm", "gemm")  # a collective now and then
    rows["op"] = None
    for col in ("kind", "phase", "category", "name"):  # as a loaded trace holds them (dictionary columns)
        rows[col] = rows[col].astype("category")
    rows = work.prepare(rows)
    host = pd.DataFrame({"start_ns": rows["start_ns"] - 5_000, "dur_ns": 2_000, "name": "cudaLaunchKernel",
                         "correlation": rows["correlation"], "thread": 1, "op": None})
    base = timed(lambda: metrics.phase_table(rows, metrics.step_table(rows, {}, None, None, None), {}, None, None, None))
    print(f"{n:,} kernels; phase + step tables {base:.2f} s (the baseline)")
    for name, f in (("idle by cause", lambda: idle.Causes(rows, host).table()),
                    ("exposed communication", lambda: comm.Overlap(rows).table()),
                    ("host copies", lambda: copies.copy_table(rows, "h100-sxm")),
                    ("graph layers", lambda: graphs.with_layers(rows))):
        t = timed(f)
        print(f"{name:24s} {t:6.2f} s  {t / base:5.2f}x the baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
