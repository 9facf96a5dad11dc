"""Kineto import: rooftop vs plain `json.load` vs Holistic Trace Analysis, on the same files.

For each size, one generated trace (bench/make_kineto.py) is read by each tool in a fresh process
(wall time and peak RSS from wait4), under the same time limit and address-space cap. Prints one
table with ratios against rooftop, the Parquet size against the JSON, and rooftop's cost per
kernel at each size (flat = linear growth).

    python bench/import_bench.py --sizes 1000,100000,1000000 [--synthetic] [--hta-python PY]

HTA lives in its own venv (it pins other pandas/numpy): `python3 -m venv /tmp/hta-venv &&
/tmp/hta-venv/bin/pip install traceinsight 'pandas<3'` (traceinsight 0.6.1 breaks on pandas 3:
an int16 `index_correlation` upcast raises).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_kineto
from measure import ROOT, machine, run

OUT = ROOT / "bench" / "out"
# The floor: msgspec decoding the same file into typed events (the fields rooftop reads), one core.
MSGSPEC_FLOOR = ("import gzip, sys; sys.path.insert(0, '.'); import msgspec; "
                 "from collectors.readers._kineto_events import Event; p = sys.argv[1]; "
                 "data = (gzip.open(p) if p.endswith('.gz') else open(p, 'rb')).read(); "
                 "Doc = msgspec.defstruct('Doc', [('traceEvents', list[Event])]); "
                 "print(len(msgspec.json.decode(data, type=Doc).traceEvents))")
JSON_LOAD = ("import gzip, json, sys; p = sys.argv[1]; "
             "f = gzip.open(p, 'rt') if p.endswith('.gz') else open(p); d = json.load(f); "
             "print(len(d['traceEvents']))")


def trace_for(kernels: int, synthetic: bool, gz: bool) -> tuple[Path, int, int]:
    """(path, kernels, events) of the generated input, reused when already built."""
    tag = "syn" if synthetic else "seed"
    path = OUT / f"{tag}_{kernels}.json{'.gz' if gz else ''}"
    info = path.with_name(path.name + ".info")
    if path.exists() and info.exists():
        k, e = json.loads(info.read_text())
        return path, k, e
    t0 = time.perf_counter()
    _, block, copies = make_kineto.make(path, kernels, synthetic, gz)
    info.write_text(json.dumps([copies * block.kernels, copies * block.events]))
    print(f"  built {path.name}: {copies * block.kernels} kernels in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return path, copies * block.kernels, copies * block.events


def bench_size(kernels: int, args) -> dict:
    path, k, events = trace_for(kernels, args.synthetic, args.gzip)
    pq = OUT / (path.name.split(".json")[0] + ".rooftop.parquet")
    lim = dict(timeout_s=args.timeout, mem_gb=args.mem_gb)
    row = {"kernels": k, "events": events, "json_mb": path.stat().st_size / 1e6, "tools": {}}
    print(f"{k} kernels ({events} events, {row['json_mb']:.0f} MB)", file=sys.stderr)
    res = run([sys.executable, "-m", "rooftop", "import", str(path), "-o", str(pq)], **lim)
    row["tools"]["rooftop import"] = res
    row["parquet_mb"] = pq.stat().st_size / 1e6 if res.ok else None
    print(f"  rooftop   {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, {res.tree_mb:.0f} MB", file=sys.stderr)
    res = run([sys.executable, "-m", "rooftop", "import", str(path), "-o", str(pq)], env={"ROOFTOP_WORKERS": "1"}, **lim)
    row["tools"]["rooftop import, 1 process"] = res
    res = run([sys.executable, "-c", MSGSPEC_FLOOR, str(path)], **lim)
    row["tools"]["msgspec typed decode (floor, 1 core)"] = res
    print(f"  floor     {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, {res.tree_mb:.0f} MB", file=sys.stderr)
    if not args.no_json:
        res = run([sys.executable, "-c", JSON_LOAD, str(path)], **lim)
        row["tools"]["json.load"] = res
        print(f"  json.load {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, {res.rss_mb:.0f} MB", file=sys.stderr)
    if args.hta_python and Path(args.hta_python).exists() and (not args.hta_max or k <= args.hta_max):
        res = run([args.hta_python, str(ROOT / "bench" / "hta_load.py"), str(path)], **lim)
        row["tools"]["HTA"] = res
        print(f"  HTA       {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, {res.rss_mb:.0f} MB", file=sys.stderr)
    return row


def table(rows: list[dict], args) -> str:
    lines = ["| kernels | events | JSON MB | tool | wall s | CPU s | peak RSS MB (all processes) | time vs rooftop | RSS vs rooftop |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        base = r["tools"]["rooftop import"]
        for name, res in r["tools"].items():
            tr = f"{res.wall_s / base.wall_s:.1f}x" if res.ok and base.ok and name != "rooftop import" else ""
            if not res.ok and base.ok:
                tr = f"> {res.wall_s / base.wall_s:.0f}x"
            mr = f"{res.tree_mb / base.tree_mb:.1f}x" if base.ok and name != "rooftop import" else ""
            if not res.ok and mr:
                mr = "> " + mr
            lines.append(f"| {r['kernels']:,} | {r['events']:,} | {r['json_mb']:.0f} | {name} | "
                         f"{res.cell(args.timeout, args.mem_gb)} | {res.cpu_s:.1f} | {res.tree_mb:.0f} | {tr} | {mr} |")
    lines += ["", "| kernels | rooftop µs/kernel | rooftop MB RSS | Parquet MB | JSON MB | Parquet / JSON |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r["tools"]["rooftop import"]
        per = f"{b.wall_s / r['kernels'] * 1e6:.1f}" if b.ok else "—"
        pq = r.get("parquet_mb")
        lines.append(f"| {r['kernels']:,} | {per} | {b.tree_mb:.0f} | {pq:.1f} | {r['json_mb']:.0f} | "
                     f"{pq / r['json_mb']:.3f} |" if pq else f"| {r['kernels']:,} | {per} | {b.tree_mb:.0f} | — | "
                     f"{r['json_mb']:.0f} | — |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,100000,1000000", help="kernel counts, comma-separated")
    p.add_argument("--synthetic", action="store_true", help="decode-loop trace instead of the replicated seed")
    p.add_argument("--gzip", action="store_true", help="gzipped inputs (.json.gz)")
    p.add_argument("--hta-python", default="/tmp/hta-venv/bin/python", help="python of a venv with traceinsight")
    p.add_argument("--hta-max", type=int, default=0, help="skip HTA above this many kernels (0: never skip)")
    p.add_argument("--no-json", action="store_true", help="skip the plain json.load baseline")
    p.add_argument("--timeout", type=float, default=600, help="seconds per tool and size")
    p.add_argument("--mem-gb", type=float, default=20, help="address-space cap per tool")
    p.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = [bench_size(int(s), args) for s in args.sizes.split(",")]
    src = "synthetic decode loop" if args.synthetic else "replicated HTA nccl_data trace"
    print(f"## Kineto import ({src}{', gzipped' if args.gzip else ''}) — {time.strftime('%Y-%m-%d')}, {machine()}")
    print(f"limits per run: {args.timeout:.0f} s, {args.mem_gb:.0f} GB address space\n")
    print(table(rows, args))
    if args.json_out:
        doc = [{**r, "tools": {n: vars(t) | {"stdout": "", "stderr": t.stderr[-300:]} for n, t in r["tools"].items()}}
               for r in rows]
        args.json_out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
