"""`rooftop report` on a large trace: wall and peak RSS of the command, and the load / analyse split.

Sizes default to 100k and 1M kernels of the synthetic decode trace (bench/synth_trace.py); the
linear column (µs per kernel) should stay flat.

    python bench/report_bench.py [--sizes 100000,1000000]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import ROOT, machine, run

OUT = ROOT / "bench" / "out"
SPLIT = """
import json, sys, time
t0 = time.perf_counter()
from collectors.readers.importers import load_any
from rooftop.analysis import analyze
from rooftop.report import report_text
t1 = time.perf_counter(); tr = load_any(sys.argv[1])
t2 = time.perf_counter(); a = analyze(tr); a.steps; a.phases; a.groups(); a.findings; a.gap; a.rank_steps
t3 = time.perf_counter(); report_text(a)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "analyze": t3 - t2, "render": t4 - t3}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    import synth_trace

    rows = []
    for s in map(int, args.sizes.split(",")):
        trace = OUT / f"synth_{s}.parquet"
        if not trace.exists():
            synth_trace.write(trace, s)
        cmd = run([sys.executable, "-m", "rooftop", "report", str(trace)], timeout_s=600)
        split = run([sys.executable, "-c", SPLIT, str(trace)], timeout_s=600)
        parts = json.loads(split.stdout.strip().splitlines()[-1]) if split.ok else {}
        rows.append((s, trace.stat().st_size / 1e6, cmd, parts))
        print(f"{s}: {cmd.status} {cmd.wall_s:.2f} s {cmd.rss_mb:.0f} MB {parts}", file=sys.stderr)
    print(f"## rooftop report — {time.strftime('%Y-%m-%d')}, {machine()}\n")
    print("| kernels | Parquet MB | `rooftop report` wall s | peak RSS MB | µs/kernel | imports s | load s | analyse s | render s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s, mb, cmd, parts in rows:
        def f(k, parts=parts):
            return f"{parts[k]:.2f}" if k in parts else "—"
        print(f"| {s:,} | {mb:.1f} | {cmd.cell(600)} | {cmd.rss_mb:.0f} | {cmd.wall_s / s * 1e6:.1f} | "
              f"{f('import')} | {f('load')} | {f('analyze')} | {f('render')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
