"""Do two versions of the importer write the same table? For checking an importer change.

    python bench/import_same.py REF FILE... [--workers 1,2]

For each Kineto file, converts it (`importers.convert`: the table and metadata `rooftop import`
writes, before the summary derived from them) with the code of git revision REF (exported to a
temporary directory) and with the working tree's, each in a fresh process, and compares the two
tables column by column after sorting the rows by (start_ns, dur_ns, id), and the metadata. Prints
one line per file and process count; exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONVERT = """
import os, sys, json
sys.path.insert(0, sys.argv[1])
import pyarrow as pa
from collectors.readers.importers import convert
table, meta = convert(sys.argv[2])
with pa.OSFile(sys.argv[3], "wb") as f, pa.ipc.new_file(f, table.schema) as w:
    w.write_table(table)
open(sys.argv[3] + ".meta", "w").write(json.dumps(meta, sort_keys=True, default=str))
"""


def convert_with(code: Path, src: Path, out: Path, workers: int) -> None:
    env = {**__import__("os").environ, "ROOFTOP_WORKERS": str(workers), "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, "-c", CONVERT, str(code), str(src), str(out)], check=True, env=env, cwd=code)


def read(path: Path):
    import pyarrow as pa

    with pa.memory_map(str(path)) as f:
        table = pa.ipc.open_file(f).read_all()
    # names and paths an import holds as dictionaries are stored as plain text: compared as stored
    from rooftop.trace.schema import TEXT_COLUMNS

    for i, field in enumerate(table.schema):
        if field.name in TEXT_COLUMNS and pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.with_type(pa.string()), table.column(i).cast(pa.string()))
    return table, Path(str(path) + ".meta").read_text()


def differences(a, b) -> list[str]:
    """Column names (and the first differing row) where the sorted tables differ."""
    if a.schema != b.schema:
        return [f"schema: {a.schema} != {b.schema}"]
    if a.num_rows != b.num_rows:
        return [f"rows: {a.num_rows} != {b.num_rows}"]
    keys = [("start_ns", "ascending"), ("dur_ns", "ascending"), ("id", "ascending")]
    a, b = a.sort_by(keys), b.sort_by(keys)
    out = []
    for name in a.column_names:
        x, y = a.column(name).combine_chunks(), b.column(name).combine_chunks()
        if hasattr(x, "dictionary_decode"):
            x, y = x.dictionary_decode(), y.dictionary_decode()
        if not x.equals(y):
            bad = next(i for i in range(len(x)) if x[i] != y[i] and not (x[i].as_py() is None and y[i].as_py() is None)
                       or (x[i].is_valid != y[i].is_valid))
            out.append(f"{name} (row {bad}: {x[bad]} != {y[bad]})")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref")
    p.add_argument("files", nargs="+", type=lambda s: Path(s).resolve())  # the converters run elsewhere
    p.add_argument("--workers", default="1,2")
    args = p.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = tmp / "ref"
        base.mkdir()
        subprocess.run(f"git archive {args.ref} | tar -x -C {base}", shell=True, check=True, cwd=ROOT)
        for src in args.files:
            convert_with(base, src, tmp / "ref.arrow", 1)
            ref, ref_meta = read(tmp / "ref.arrow")
            for w in (int(x) for x in args.workers.split(",")):
                convert_with(ROOT, src, tmp / "new.arrow", w)
                new, new_meta = read(tmp / "new.arrow")
                diff = differences(ref, new) + (["metadata"] if new_meta != ref_meta else [])
                failed |= bool(diff)
                print(f"{src.name} ({ref.num_rows:,} rows, {w} process{'es' if w > 1 else ''}): "
                      f"{'same' if not diff else 'DIFFERENT: ' + '; '.join(diff)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
