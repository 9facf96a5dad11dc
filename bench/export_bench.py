"""Perfetto export against the import of the same trace, in one run.

For each size, one synthetic decode-loop Kineto trace (bench/make_kineto.py) is imported
(`rooftop import SRC -o T.parquet`) and exported (`rooftop export SRC --perfetto OUT.json`, which
converts in memory, analyses and writes), and the imported Parquet exported too (`rooftop export
T.parquet --perfetto`: load, analyse, write), each in a fresh process (wall, CPU, peak RSS). The
ratios say whether an export fits in the import's time budget; the JSON's size and events are
printed beside them. The written JSON is read back once with `json` (its events counted) so a
broken file cannot pass for a fast one.

    python bench/export_bench.py --sizes 100000,1000000
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import OUT, load, trace_for
from measure import machine, run


def bench_size(kernels: int, args) -> dict:
    src, k, events = trace_for(kernels, True, False)
    pq = OUT / f"export_{kernels}.rooftop.parquet"
    out = OUT / f"export_{kernels}.json"
    lim = dict(timeout_s=args.timeout, mem_gb=args.mem_gb)
    rooftop = [sys.executable, "-m", "rooftop"]
    row = {"kernels": k, "events": events, "tools": {}}
    print(f"{k} kernels ({events} events)", file=sys.stderr)
    for name, cmd in (("import (Kineto -> Parquet)", [*rooftop, "import", str(src), "-o", str(pq)]),
                      ("export (Kineto -> Perfetto JSON)", [*rooftop, "export", str(src), "--perfetto", str(out)]),
                      ("export (Parquet -> Perfetto JSON)", [*rooftop, "export", str(pq), "--perfetto", str(out)])):
        res = run(cmd, **lim)
        row["tools"][name] = res
        print(f"  {name:36s} {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, "
              f"{res.cpu_s:.1f} CPU s, {res.tree_mb:.0f} MB", file=sys.stderr)
        if not res.ok:
            print(res.stderr[-2000:], file=sys.stderr)
    if out.exists():
        doc = json.loads(out.read_bytes())
        row["json_mb"] = out.stat().st_size / 1e6
        row["json_events"] = len(doc["traceEvents"])
        row["json_kernels"] = sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel")
    return row


def table(rows: list[dict]) -> str:
    """Wall and CPU seconds of each export, and their ratios to the import's (CPU is steadier on a
    shared machine: wall time there drifts by up to 2x between runs)."""
    lines = ["| kernels | import s (CPU s) | export from Kineto s (CPU s): x import | export from Parquet s (CPU s): "
             "x import | JSON MB | JSON events | peak MB import / export |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        imp, kin, par = r["tools"].values()

        def cell(res):
            if not res.ok:
                return res.status
            if not imp.ok:
                return f"{res.wall_s:.1f} ({res.cpu_s:.1f})"
            return (f"{res.wall_s:.1f} ({res.cpu_s:.1f}): {res.wall_s / imp.wall_s:.2f}x wall, "
                    f"{res.cpu_s / imp.cpu_s:.2f}x CPU")
        lines.append(f"| {r['kernels']:,} | {imp.wall_s:.1f} ({imp.cpu_s:.1f}) | {cell(kin)} | {cell(par)} | "
                     f"{r.get('json_mb', 0):.0f} | {r.get('json_events', 0):,} | "
                     f"{imp.tree_mb:.0f} / {kin.tree_mb:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="kernel counts, comma-separated")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--mem-gb", type=float, default=16)
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = [bench_size(int(s), args) for s in args.sizes.split(",")]
    print(f"\n{machine()}, load {load()}\n")
    print(table(rows))
    for r in rows:
        assert r.get("json_kernels") == r["kernels"], "the export lost kernels"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
