"""Build a large Nsight Systems SQLite export from a real one: time-shifted copies.

    python bench/make_nsys.py SRC.sqlite OUT.sqlite --kernels 1000000

The source is copied whole (the SQLite backup API: every table, string and metadata row), then the
event tables are appended to themselves `copies - 1` times inside SQLite: copy i has every `start`
/ `end` moved by i times the capture's span (plus a 1 us gap) and every correlation id moved by i
times the id span, so runtime calls still meet their own kernels and NVTX ranges still hold their
own launches. StringIds is shared (the same names, as in a longer capture of the same program).
The output goes under bench/out/ (git-ignored): it is derived from a fixture and never committed.

`--step-ranges N` first replaces the source's NVTX ranges by a serving-like annotation: N
`decode_step_K` push/pop ranges over the busiest launching thread's span, each split in four
`layer_J` ranges (a few distinct texts, ~1 range per 14 kernels at N=50: the shape of a decode loop
annotated per step and layer, unlike PyTorch's `emit_nvtx`, which gives several ranges per kernel).
"""
from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import time
from pathlib import Path

# Tables with per-event timestamps; the ones with a correlation id get it shifted too.
EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info([{table}])")]


def step_ranges(con: sqlite3.Connection, n: int) -> None:
    """The NVTX table replaced by `n` step ranges, each holding four layer ranges (module docstring)."""
    con.execute("DELETE FROM NVTX_EVENTS")
    tid = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY globalTid "
                      "ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    lo, hi = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ?",
                         (tid,)).fetchone()
    width = (hi - lo) / n
    rows = []
    for i in range(n):
        s, e = int(lo + i * width), int(lo + (i + 1) * width) - 1
        rows.append((s, e, f"decode_step_{i}"))
        quarter = (e - s) / 4
        rows += [(int(s + j * quarter), int(s + (j + 1) * quarter) - 1, f"layer_{j}") for j in range(4)]
    con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                    [(s, e, text, tid) for s, e, text in rows])
    con.commit()


def build(src: Path, out: Path, kernels: int, steps: int = 0) -> dict:
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    with sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True) as s, sqlite3.connect(out) as d:
        s.backup(d)
    con = sqlite3.connect(out)
    if steps:
        step_ranges(con, steps)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    tables = [t for t in EVENT_TABLES
              if con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (t,)).fetchone()]
    have = {t: _columns(con, t) for t in tables}
    base = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if not base:
        raise SystemExit(f"{src}: no kernels to copy")
    lo = hi = None
    cmin = cmax = None
    for t in tables:
        a, b = con.execute(f"SELECT min(start), max(coalesce(end, start)) FROM [{t}]").fetchone()
        if a is not None:
            lo, hi = (a if lo is None else min(lo, a)), (b if hi is None else max(hi, b))
        if "correlationId" in have[t]:
            a, b = con.execute(f"SELECT min(correlationId), max(correlationId) FROM [{t}]").fetchone()
            if a is not None:
                cmin, cmax = (a if cmin is None else min(cmin, a)), (b if cmax is None else max(cmax, b))
    span = hi - lo + 1000
    cspan = (cmax - cmin + 1) if cmin is not None else 0
    copies = max(1, math.ceil(kernels / base))
    # the originals only: each copy is made from them, never from an earlier copy
    counts = {t: con.execute(f"SELECT max(rowid) FROM [{t}]").fetchone()[0] or 0 for t in tables}
    for t in tables:
        cols = have[t]
        for i in range(1, copies):
            exprs = []
            for c in cols:
                if c in ("start", "end"):
                    exprs.append(f"[{c}] + {i * span}")
                elif c == "correlationId":
                    exprs.append(f"[{c}] + {i * cspan}")
                else:
                    exprs.append(f"[{c}]")
            con.execute(f"INSERT INTO [{t}] ({', '.join(f'[{c}]' for c in cols)}) "
                        f"SELECT {', '.join(exprs)} FROM [{t}] WHERE rowid <= {counts[t]}")
    con.commit()
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    return {"copies": copies, "kernels": n, "seconds": round(time.perf_counter() - t0, 1),
            "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--step-ranges", type=int, default=0, help="replace the NVTX ranges by N step ranges (docstring)")
    a = p.parse_args(argv)
    info = build(a.src, a.out, a.kernels, a.step_ranges)
    print(f"{a.out}: {info['kernels']:,} kernels ({info['copies']} copies), "
          f"{info['bytes'] / 2**20:.0f} MiB in {info['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
