"""`rooftop report` on a large trace: wall and peak RSS of the command, and the load / analyse split;
then the stored summary (docs/summary.md): `report` and `report --json` with and without a current
summary in the footer, what storing it adds to writing the trace, and the Overview's first number.

Sizes default to 100k and 1M kernels of the synthetic decode trace (bench/synth_trace.py); the
linear column (µs per kernel) should stay flat.

    python bench/report_bench.py [--sizes 100000,1000000] [--no-summary]
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
from collectors.open import open_trace
from rooftop.analysis import analyze
from rooftop.present.report import report_text
t1 = time.perf_counter(); tr = open_trace(sys.argv[1])
t2 = time.perf_counter(); a = analyze(tr); a.steps; a.phases; a.groups(); a.findings; a.gap; a.rank_steps
t3 = time.perf_counter(); report_text(a)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "analyze": t3 - t2, "render": t4 - t3}))
"""


# Writing the same rows with and without the summary: what the summary adds to an import or a
# collection (the import's own reading of its source is the same either way).
WRITE = """
import json, sys, time
sys.path.insert(0, "bench")
import synth_trace
from rooftop.present.summary import write_summarized
from rooftop.trace import write_trace
steps = max(1, round(int(sys.argv[1]) / (32 * len(synth_trace.KERNELS))))
frame, meta = synth_trace.decode_frame(steps), synth_trace.meta(steps)
t0 = time.perf_counter(); write_trace(sys.argv[2], frame, meta)
t1 = time.perf_counter(); write_summarized(sys.argv[3], frame, meta)
t2 = time.perf_counter()
print(json.dumps({"write": t1 - t0, "write_summary": t2 - t1}))
"""


def summary_section(sizes: list[int]) -> None:
    """`report` with and without a stored summary, the cost of storing it, the Overview's first number."""
    rows = []
    for s in sizes:
        plain, stored = OUT / f"synth_{s}.nosummary.parquet", OUT / f"synth_{s}.summary.parquet"
        w = run([sys.executable, "-c", WRITE, str(s), str(plain), str(stored)], timeout_s=900)
        writes = json.loads(w.stdout.strip().splitlines()[-1]) if w.ok else {}
        cmds = {}
        for name, path in (("plain", plain), ("stored", stored)):
            for fmt in ((), ("--json",)):
                r = run([sys.executable, "-m", "rooftop", "report", *fmt, str(path)], timeout_s=600)
                cmds[(name, bool(fmt))] = r
            t = run([sys.executable, str(ROOT / "bench" / "tui_child.py"), "first", str(path)], timeout_s=600)
            cmds[(name, "tui")] = json.loads(t.stdout.strip().splitlines()[-1]) if t.ok else {}
        rows.append((s, writes, cmds, stored.stat().st_size / 1e6, plain.stat().st_size / 1e6))
        print(f"{s}: {writes} " + " ".join(f"{k}={v.wall_s if hasattr(v, 'wall_s') else v}" for k, v in cmds.items()),
              file=sys.stderr)
    print("\n### stored summary\n")
    print("| kernels | write s | write + summary s | Parquet MB (with) | `report` s (none / stored) "
          "| `report --json` s (none / stored) | Overview first number s (none / stored) | all loaded s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s, writes, cmds, mb_stored, mb_plain in rows:
        def f(v):
            return f"{v:.2f}" if isinstance(v, (int, float)) else "—"
        tui_plain, tui_stored = cmds[("plain", "tui")], cmds[("stored", "tui")]
        print(f"| {s:,} | {f(writes.get('write'))} | {f(writes.get('write_summary'))} | {mb_plain:.1f} ({mb_stored:.1f}) "
              f"| {cmds[('plain', False)].cell(600)} / {cmds[('stored', False)].cell(600)} "
              f"| {cmds[('plain', True)].cell(600)} / {cmds[('stored', True)].cell(600)} "
              f"| {f(tui_plain.get('first_number_s'))} / {f(tui_stored.get('first_number_s'))}"
              f"{'' if tui_stored.get('from_summary') else ' (computed: no footer preview below 50k rows)'} "
              f"| {f(tui_plain.get('loaded_s'))} / {f(tui_stored.get('loaded_s'))} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--no-summary", action="store_true", help="skip the stored-summary measurements")
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
    if not args.no_summary:
        summary_section([int(x) for x in args.sizes.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
