"""Kineto import, in one run: rooftop (1 and 2 processes, and 2 without its compiled decoder) vs the
decoder's floor, `json.load`, HTA.

For each size, one generated trace (bench/make_kineto.py) is read by each tool in a fresh process
(wall time, CPU time, peak RSS summed over the process and its workers), under the same time limit
and address-space cap. The floor is msgspec decoding the same file into typed events (the fields
rooftop reads) on one core: no importer can be faster on one core. Prints every run, then the
ratios of each rooftop import against the floor, `json.load` and HTA, then the Parquet size
against the JSON and rooftop's cost per kernel at each size (flat = linear growth).

    python bench/import_bench.py --sizes 100000,1000000 --synthetic --hta-max 100000

HTA lives in its own venv (it pins other pandas/numpy): `python3 -m venv /tmp/hta-venv &&
/tmp/hta-venv/bin/pip install traceinsight 'pandas<3'` (traceinsight 0.6.1 breaks on pandas 3:
an int16 `index_correlation` upcast raises).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_kineto
from measure import ROOT, machine, run

OUT = ROOT / "bench" / "out"
# The floor: msgspec decoding the same file into typed events, the fields rooftop's importer reads
# (a copy of collectors/readers/_kineto_events.Event, so that the floor imports msgspec alone and
# not rooftop's pandas/pyarrow), on one core, the whole file at once, with the cyclic garbage
# collector off as in rooftop's readers: left on, it rescans every launch's grid and block lists
# again and again, which doubled this floor at 1M kernels. Events are tagged by phase,
# the other phases decoded without their fields, as the importer decodes them.
MSGSPEC_FLOOR = """
import gc, gzip, sys
gc.disable()
from typing import Any, Union
import msgspec
from msgspec import Raw, Struct, field
IntLike = int | str | None
class Args(Struct, gc=False):
    ext: IntLike = field(name="External id", default=None)
    corr: IntLike = field(name="correlation", default=None)
    device: IntLike = None
    stream: IntLike = None
    grid: Any = None
    block: Any = None
    regs: IntLike = field(name="registers per thread", default=None)
    smem: IntLike = field(name="shared memory", default=None)
    nbytes: IntLike = field(name="bytes", default=None)
    dims: Raw = field(name="Input Dims", default=Raw(b""))
    types: Raw = field(name="Input type", default=Raw(b""))
    concrete: Raw = field(name="Concrete Inputs", default=Raw(b""))
class Event(Struct, gc=False, tag_field="ph", tag="X"):
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = 0.0
    args: Args | None = None
OTHER = tuple(msgspec.defstruct(f"Phase{i}", [], tag_field="ph", tag=p, gc=False)
              for i, p in enumerate(("B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M",
                                     "V", "v", "R", "c", "(", ")")))
class Doc(Struct):
    traceEvents: list[Union[(Event, *OTHER)]]
p = sys.argv[1]
data = (gzip.open(p) if p.endswith('.gz') else open(p, 'rb')).read()
print(len(msgspec.json.decode(data, type=Doc).traceEvents))
"""
JSON_LOAD = ("import gzip, json, sys; p = sys.argv[1]; "
             "f = gzip.open(p, 'rt') if p.endswith('.gz') else open(p); d = json.load(f); "
             "print(len(d['traceEvents']))")


def load() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: say how busy it was)."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


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


ROOFTOP_1 = "rooftop import, 1 process"
ROOFTOP_2 = "rooftop import, 2 processes"
ROOFTOP_PY = "rooftop import, 2 processes, no compiled decoder"  # ROOFTOP_COMPILED=0: msgspec's typed path
FLOOR = "msgspec typed decode (floor, 1 core)"
JSON = "json.load"
HTA = "HTA"


def bench_size(kernels: int, args) -> dict:
    """Every tool on one generated trace, each in a fresh process under the same limits."""
    path, k, events = trace_for(kernels, args.synthetic, args.gzip)
    pq = OUT / (path.name.split(".json")[0] + ".rooftop.parquet")
    lim = dict(timeout_s=args.timeout, mem_gb=args.mem_gb)
    row = {"kernels": k, "events": events, "json_mb": path.stat().st_size / 1e6, "tools": {},
           "parquet": str(pq.relative_to(ROOT))}
    print(f"{k} kernels ({events} events, {row['json_mb']:.0f} MB)", file=sys.stderr)

    def note(name: str, res) -> None:
        row["tools"][name] = res
        print(f"  {name:40s} {res.cell(args.timeout, args.mem_gb)}{' s' if res.ok else ''}, "
              f"{res.tree_mb:.0f} MB", file=sys.stderr)

    def rooftop(workers: str, compiled: bool = True):
        # `ROOFTOP_WORKERS` pins the process count (by default 1 below 48 MB of JSON, every core above)
        env = {"ROOFTOP_WORKERS": workers, **({} if compiled else {"ROOFTOP_COMPILED": "0"})}
        return run([sys.executable, "-m", "rooftop", "import", str(path), "-o", str(pq)], env=env, **lim)

    def floor():
        return run([sys.executable, "-c", MSGSPEC_FLOOR, str(path)], **lim)

    for name, workers in ((ROOFTOP_1, "1"), (ROOFTOP_2, "2")):
        note(name, rooftop(workers))
    if not args.no_python_decoder:  # what the compiled decoder is worth, in the same run
        note(ROOFTOP_PY, rooftop("2", compiled=False))
    row["parquet_mb"] = pq.stat().st_size / 1e6 if pq.exists() else None
    note(FLOOR, floor())
    if not args.no_json and (not args.json_max or k <= args.json_max):
        note(JSON, run([sys.executable, "-c", JSON_LOAD, str(path)], **lim))
    if args.hta_python and Path(args.hta_python).exists() and (not args.hta_max or k <= args.hta_max):
        note(HTA, run([args.hta_python, str(ROOT / "bench" / "hta_load.py"), str(path)], **lim))
    # more rounds of the one comparison that decides the floor target: rooftop on 2 processes and the
    # floor back to back, the order swapped each round (the machine drifts by up to 2x in minutes:
    # only a pair run seconds apart compares, and the spread of the pairs says how far to trust it)
    pairs = [(row["tools"][ROOFTOP_2], row["tools"][FLOOR])]
    for i in range(1, args.rounds):
        if i % 2:
            f = floor()
            m = rooftop("2")
        else:
            m = rooftop("2")
            f = floor()
        pairs.append((m, f))
        print(f"  round {i + 1}: rooftop (2 processes) {m.cell(args.timeout, args.mem_gb)}, floor "
              f"{f.cell(args.timeout, args.mem_gb)}", file=sys.stderr)
    row["rounds"] = [{"rooftop_2_s": m.wall_s if m.ok else None, "floor_s": f.wall_s if f.ok else None,
                      "rooftop_2_mb": m.tree_mb, "floor_mb": f.tree_mb} for m, f in pairs]
    return row


def rounds_table(rows: list[dict]) -> str:
    """The pairs of every round: rooftop on 2 processes against the floor, run back to back."""
    lines = ["| kernels | rounds | rooftop 2 processes, s (median; range) | floor, s (median; range) | "
             "rooftop / floor per pair (min / median / max) |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        pairs = [p for p in r.get("rounds", []) if p["rooftop_2_s"] and p["floor_s"]]
        if not pairs:
            continue
        mine, floor = [p["rooftop_2_s"] for p in pairs], [p["floor_s"] for p in pairs]
        ratio = sorted(m / f for m, f in zip(mine, floor))
        spread = [f"{statistics.median(v):.2f}; {min(v):.2f}-{max(v):.2f}" for v in (mine, floor)]
        lines.append(f"| {r['kernels']:,} | {len(pairs)} | {spread[0]} | {spread[1]} | "
                     f"{ratio[0]:.2f}x / {statistics.median(ratio):.2f}x / {ratio[-1]:.2f}x |")
    return "\n".join(lines)


def _ratio(num, den, fmt="{:.2f}x") -> str:
    """num / den as a table cell: '>' when num did not finish (its time is a lower bound)."""
    if num is None or den is None or not den.ok:
        return "—"
    r = fmt.format(num.wall_s / den.wall_s)
    return r if num.ok else "> " + r


def _mem_ratio(num, den) -> str:
    if num is None or den is None or not den.ok or not den.tree_mb:
        return "—"
    r = f"{num.tree_mb / den.tree_mb:.1f}x"
    return r if num.ok else "> " + r


def table(rows: list[dict], args) -> str:
    """Every run, then the ratios of each rooftop import against the floor and the peers."""
    lines = ["| kernels | events | JSON MB | tool | wall s | CPU s | peak RSS MB (all processes) |",
             "|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        for name, res in r["tools"].items():
            lines.append(f"| {r['kernels']:,} | {r['events']:,} | {r['json_mb']:.0f} | {name} | "
                         f"{res.cell(args.timeout, args.mem_gb)} | {res.cpu_s:.1f} | {res.tree_mb:.0f} |")
    lines += ["", "Ratios, same run (time: rooftop / floor, and each peer / rooftop; memory: peak RSS, "
              "each peer / rooftop):", "",
              "| kernels | rooftop | wall s | rooftop / floor (time) | floor / rooftop (memory) | json.load / rooftop (time) | "
              "json.load / rooftop (memory) | HTA / rooftop (time) | HTA / rooftop (memory) |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["tools"]
        floor, js, hta = t.get(FLOOR), t.get(JSON), t.get(HTA)
        for name in (ROOFTOP_1, ROOFTOP_2, ROOFTOP_PY):
            me = t.get(name)
            if me is None:
                continue
            lines.append(f"| {r['kernels']:,} | {name.removeprefix('rooftop import, ')} | {me.cell(args.timeout, args.mem_gb)} | "
                         f"{_ratio(me, floor)} | {_mem_ratio(floor, me)} | {_ratio(js, me, '{:.1f}x')} | "
                         f"{_mem_ratio(js, me)} | "
                         f"{_ratio(hta, me, '{:.1f}x') if hta else 'not run' + (f' (> {args.hta_max:,} kernels)' if args.hta_max else '')} | "
                         f"{_mem_ratio(hta, me) if hta else '—'} |")
    lines += ["", "| kernels | rooftop µs/kernel (1 process) | Parquet MB | JSON MB | Parquet / JSON |",
              "|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r["tools"][ROOFTOP_1]
        per = f"{b.wall_s / r['kernels'] * 1e6:.1f}" if b.ok else "—"
        pq = r.get("parquet_mb")
        lines.append(f"| {r['kernels']:,} | {per} | {pq:.1f} | {r['json_mb']:.0f} | {pq / r['json_mb']:.3f} |"
                     if pq else f"| {r['kernels']:,} | {per} | — | {r['json_mb']:.0f} | — |")
    return "\n".join(lines)


def to_json(rows: list[dict]) -> list[dict]:
    return [{**r, "tools": {n: vars(t) | {"stdout": "", "stderr": t.stderr[-300:]} for n, t in r["tools"].items()}}
            for r in rows]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--synthetic", action="store_true", help="decode-loop trace instead of the replicated seed")
    p.add_argument("--gzip", action="store_true", help="gzipped inputs (.json.gz)")
    p.add_argument("--hta-python", default="/tmp/hta-venv/bin/python", help="python of a venv with traceinsight")
    p.add_argument("--hta-max", type=int, default=0, help="skip HTA above this many kernels (0: never skip)")
    p.add_argument("--no-json", action="store_true", help="skip the plain json.load baseline")
    p.add_argument("--no-python-decoder", action="store_true",
                   help="skip rooftop on 2 processes without its compiled decoder (ROOFTOP_COMPILED=0)")
    p.add_argument("--json-max", type=int, default=0, help="skip json.load above this many kernels (0: never skip)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per tool and size")
    p.add_argument("--mem-gb", type=float, default=16, help="address-space cap per tool (keep it under the RAM)")
    p.add_argument("--rounds", type=int, default=1, help="pairs of rooftop (2 processes) and the floor per size, "
                                                         "back to back, the order swapped each round")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="kernel counts, comma-separated")
    add_arguments(p)
    p.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = [bench_size(int(s), args) for s in args.sizes.split(",")]
    src = "synthetic decode loop" if args.synthetic else "replicated HTA nccl_data trace"
    print(f"## Kineto import ({src}{', gzipped' if args.gzip else ''}) — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{machine()}, load average {load()}")
    print(f"limits per run: {args.timeout:.0f} s, {args.mem_gb:.0f} GB address space\n")
    print(table(rows, args))
    if args.rounds > 1:
        print("\nRounds (rooftop on 2 processes and the floor back to back, the floor first in every "
              "second round):\n")
        print(rounds_table(rows))
    if args.json_out:
        args.json_out.write_text(json.dumps(to_json(rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
