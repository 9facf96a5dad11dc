"""The Nsight Systems path at scale, against nsys-ai and against a read-into-Arrow floor, in one run.

    python bench/nsys_bench.py --src REAL_EXPORT.sqlite [--kernels 1000000] [--rounds 3]
        [--nsys-ai /path/to/venv/bin/nsys-ai] [--pythonpath DIR]

Builds (once) a large export from a real one with `make_nsys.py` (time-shifted copies, correlation
ids offset) under bench/out/, then runs, each in a fresh process, in a rotating order every round:
- `rooftop report FILE.sqlite`: the first look at an export (read, conform, analyse, print);
- `rooftop import FILE.sqlite -o OUT.parquet`: the import alone, written;
- `nsys-ai summary FILE.sqlite`: the peer's first summary, its `<file>.nsys-cache*` removed first
  (it reads the SQLite through DuckDB's sqlite extension and caches Parquet beside the input). Its
  mode is read from its stderr, not assumed: where DuckDB cannot load the extension (offline, the
  extension not where DuckDB looks: bench/README.md), nsys-ai falls back to Python's sqlite3, a
  different tool in speed and memory, and the row is named for it. `--peer-modes` adds its other
  modes: `direct` (`NSYS_AI_CACHE_MODE=direct`: DuckDB reading the SQLite in place, no cache) and
  `fallback` (HOME an empty directory, so DuckDB finds no extension: its sqlite3 path, offline);
- the floor: the kernel, memcpy, memset, runtime and NVTX columns rooftop reads, read into Arrow
  through the same reader (ADBC SQLite) and nothing else.
Prints a markdown table (median wall, CPU seconds and peak RSS per tool) and each round's ratios
(rooftop report against the peer and against the floor: min / median / max over the rounds).
`--pythonpath` is prepended to PYTHONPATH for rooftop and the floor (where the ADBC driver was
installed with `pip install --target`).
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_nsys import build  # noqa: E402
from measure import ROOT, machine, run  # noqa: E402

OUT = ROOT / "bench" / "out"

# The same queries rooftop's reader runs (collectors/readers/nsys.py), through the same driver.
FLOOR = """
import sys
import adbc_driver_sqlite.dbapi as adbc
from pathlib import Path
con = adbc.connect(Path(sys.argv[1]).resolve().as_uri() + "?mode=ro&immutable=1")
queries = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "start, [end], deviceId, streamId, correlationId, demangledName, shortName, "
        "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
        "dynamicSharedMemory, graphNodeId, graphId",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start, [end], deviceId, streamId, correlationId, bytes, copyKind",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start, [end], deviceId, streamId, correlationId, bytes, memKind",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "correlationId, globalTid, start, [end], nameId",
    "NVTX_EVENTS": "start, [end], eventType, CAST(text AS BLOB), textId, globalTid",
}
rows = 0
for table, cols in queries.items():
    cur = con.cursor()
    where = " WHERE eventType IN (59, 60)" if table == "NVTX_EVENTS" else ""
    cur.execute(f"SELECT {cols} FROM [{table}]{where}")
    rows += cur.fetch_arrow_table().num_rows
    cur.close()
strings = con.cursor(); strings.execute("SELECT id, value FROM StringIds"); strings.fetch_arrow_table()
print(rows)
"""


# The same columns through Python's sqlite3 (row tuples, then Arrow column by column): what the
# reader does without the ADBC driver, the figure that justifies the dependency.
FLOOR_SQLITE3 = FLOOR.replace("import adbc_driver_sqlite.dbapi as adbc", "import sqlite3\nimport pyarrow as pa").replace(
    'con = adbc.connect(Path(sys.argv[1]).resolve().as_uri() + "?mode=ro&immutable=1")',
    'con = sqlite3.connect(Path(sys.argv[1]).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)\n'
    'con.text_factory = bytes').replace(
    "rows += cur.fetch_arrow_table().num_rows\n    cur.close()",
    "got = cur.fetchall()\n    rows += pa.table({str(i): pa.array(c) for i, c in enumerate(zip(*got))}).num_rows if got else 0").replace(
    "strings = con.cursor(); strings.execute(\"SELECT id, value FROM StringIds\"); strings.fetch_arrow_table()",
    "con.execute(\"SELECT id, value FROM StringIds\").fetchall()")


def _median(xs):
    return statistics.median(xs) if xs else None


def peer_mode(stderr: str) -> str:
    """How nsys-ai read the export, from what it printed: its sqlite3 fallback says so."""
    return "sqlite3 fallback" if "falling back to sqlite" in stderr.lower() else "DuckDB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", type=Path, required=True, help="a real nsys SQLite export to scale up")
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--step-ranges", type=int, default=0,
                   help="the source's NVTX ranges replaced by N step ranges first (make_nsys.py)")
    p.add_argument("--nsys-ai", default=shutil.which("nsys-ai"), help="the peer's command (nsys-ai 0.3)")
    p.add_argument("--pythonpath", default="", help="prepended to PYTHONPATH for rooftop and the floor")
    p.add_argument("--peer-modes", default="", help="the peer's other modes too, comma-separated: direct, fallback")
    p.add_argument("--no-sqlite3-floor", dest="sqlite3_floor", action="store_false",
                   help="skip the same read through Python's sqlite3 (the reader without ADBC)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--mem-gb", type=float, default=16)
    a = p.parse_args(argv)
    big = OUT / f"nsys_{a.src.stem[-40:]}_{a.kernels}{f'_steps{a.step_ranges}' if a.step_ranges else ''}.sqlite"
    if not big.exists():
        info = build(a.src, big, a.kernels, a.step_ranges)
        print(f"built {big.name}: {info['kernels']:,} kernels ({info['copies']} copies) in {info['seconds']} s",
              file=sys.stderr)
    import sqlite3
    with sqlite3.connect(f"{big.resolve().as_uri()}?mode=ro", uri=True) as con:
        kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    env = {"PYTHONPATH": os.pathsep.join(x for x in (a.pythonpath, str(ROOT), os.environ.get("PYTHONPATH", "")) if x)}
    parquet = OUT / f"{big.stem}.rooftop.parquet"
    tools = {
        "rooftop report": ([sys.executable, "-m", "rooftop", "report", str(big)], None),
        "rooftop import": ([sys.executable, "-m", "rooftop", "import", str(big), "-o", str(parquet)], None),
        "floor (ADBC into Arrow)": ([sys.executable, "-c", FLOOR, str(big)], None),
    }
    if a.sqlite3_floor:
        tools["sqlite3 into Arrow"] = ([sys.executable, "-c", FLOOR_SQLITE3, str(big)], None)
    if a.nsys_ai:
        tools["nsys-ai summary"] = ([a.nsys_ai, "summary", str(big)], "peer")
        modes = {m.strip() for m in a.peer_modes.split(",") if m.strip()}
        if "direct" in modes:
            tools["nsys-ai summary, direct"] = ([a.nsys_ai, "summary", str(big)], {"NSYS_AI_CACHE_MODE": "direct"})
        if "fallback" in modes:
            home = OUT / "empty-home"
            home.mkdir(parents=True, exist_ok=True)
            tools["nsys-ai summary, no extension"] = ([a.nsys_ai, "summary", str(big)], {"HOME": str(home)})
    else:
        print("nsys-ai not found (--nsys-ai): the peer is not run", file=sys.stderr)
    names = list(tools)
    results: dict[str, list] = {n: [] for n in names}
    peer_modes: dict[str, set] = {n: set() for n in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            cmd, kind = tools[n]
            if kind is not None:  # the peer: a first run
                for c in glob.glob(f"{big}*.nsys-cache*") + glob.glob(str(big.with_suffix("")) + "*.nsys-cache*"):
                    shutil.rmtree(c, ignore_errors=True) if os.path.isdir(c) else os.remove(c)
            if parquet.exists() and n == "rooftop import":
                parquet.unlink()
            res = run(cmd, timeout_s=a.timeout, mem_gb=a.mem_gb,
                      env=env if kind is None else (kind if isinstance(kind, dict) else None))
            results[n].append(res)
            if kind is not None:
                peer_modes[n].add(peer_mode(res.stderr))
            print(f"round {r + 1} {n}: {res.status} {res.wall_s:.1f} s {res.tree_mb:.0f} MB"
                  f"{f' ({peer_mode(res.stderr)})' if kind is not None else ''}", file=sys.stderr)
            if res.status != "ok":
                print(res.stderr[-600:], file=sys.stderr)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"\n{big.name}: {kernels:,} kernels from {a.src.name}; {a.rounds} rounds; {machine()}; {load}\n")
    print("| tool | median wall s | median CPU s | median peak RSS MB | runs ok |")
    print("|---|---|---|---|---|")
    for n in names:
        ok = [x for x in results[n] if x.status == "ok"]
        label = f"{n} [{' / '.join(sorted(peer_modes[n]))}]" if peer_modes[n] else n
        print(f"| {label} | {_median([x.wall_s for x in ok]) or float('nan'):.1f} | "
              f"{_median([x.cpu_s for x in ok]) or float('nan'):.1f} | "
              f"{_median([x.tree_mb for x in ok]) or float('nan'):.0f} | {len(ok)}/{len(results[n])} |")
    print("\nratios per round (rooftop report / other; below 1: rooftop faster or smaller): min / median / max")
    base = results["rooftop report"]
    for other in [n for n in names if n != "rooftop report"]:
        w = [b.wall_s / o.wall_s for b, o in zip(base, results[other]) if b.status == o.status == "ok"]
        m = [b.tree_mb / o.tree_mb for b, o in zip(base, results[other]) if b.status == o.status == "ok"]
        if w:
            print(f"- vs {other}: wall {min(w):.2f} / {statistics.median(w):.2f} / {max(w):.2f}; "
                  f"peak RSS {min(m):.2f} / {statistics.median(m):.2f} / {max(m):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
