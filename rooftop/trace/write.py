"""Writing a trace atomically (temporary file in the same directory, then rename)."""
from __future__ import annotations

import json
import math
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rooftop.trace.atomic import replace_atomically
from rooftop.trace.build import to_table
from rooftop.trace.schema import FORMAT_VERSION, META_KEY, SCHEMA, TraceError


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        v = float(obj)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _clean_json(obj: Any) -> Any:
    """NaN/inf are not JSON: unknown is null."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_json(v) for v in obj]
    return obj


def encode_meta(meta: Mapping[str, Any]) -> bytes:
    doc = dict(meta)
    doc["format"] = FORMAT_VERSION
    return json.dumps(_clean_json(doc), default=_json_default, ensure_ascii=False).encode("utf-8")


def write_trace(path: str | os.PathLike, events: pd.DataFrame | pa.Table | Iterable[Mapping[str, Any]],
                meta: Mapping[str, Any], *, conform: bool = True, extra: Mapping[bytes, bytes] | None = None) -> Path:
    """Write a trace atomically (temporary file in the same directory, then rename). `extra`: more
    footer entries beside the metadata (the stored summary, rooftop/present/summary.py)."""
    path = Path(path)
    table = _as_stored(to_table(events) if conform or not isinstance(events, pa.Table) else events, meta, path)
    return replace_atomically(path, lambda tmp: write_parquet(table, tmp, extra))


def _as_stored(table: pa.Table, meta: Mapping[str, Any], path: Path) -> pa.Table:
    """The table as a file stores it: no `rank` column (a file is one rank; the directory says
    which), the metadata in the schema; and the file's directory made."""
    if "rank" in table.column_names:
        table = table.drop(["rank"])
    table = table.replace_schema_metadata({META_KEY: encode_meta(meta)})  # (raises before any mkdir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return table


def write_parquet(table: pa.Table, where: str | os.PathLike, extra: Mapping[bytes, bytes] | None = None) -> None:
    """`table` as Parquet (zstd; dictionary pages, deltas for `DELTA_COLUMNS`), with `extra` entries
    in the footer's key-value metadata only: put in the schema's metadata they would be stored
    twice, once more base64-coded inside the serialised Arrow schema (a summary would then
    weigh more than the rows)."""
    with _writer(where, table.schema) as writer:
        writer.write_table(_plain_text(table))
        _add_footer(writer, extra)


_PLAIN_TEXT = frozenset(f.name for f in SCHEMA if pa.types.is_string(f.type))


def _stored_schema(schema: pa.Schema) -> pa.Schema:
    """The file's schema of a table: the schema's plain-text columns that the table holds as
    dictionaries (an import's names and paths, `to_table(text_dictionaries=True)`) are stored as
    plain text, so the file is the one the plain table makes (Parquet encodes them as dictionary
    pages either way)."""
    for i, f in enumerate(schema):
        if f.name in _PLAIN_TEXT and pa.types.is_dictionary(f.type):
            schema = schema.set(i, f.with_type(pa.string()))
    return schema


def _plain_text(table: pa.Table) -> pa.Table:
    """`table` in its `_stored_schema` (the dictionaries spelled out: a cast, which Arrow does
    without the GIL, on the writer's thread when the rows are written beside the summary)."""
    stored = _stored_schema(table.schema)
    return table if stored.equals(table.schema) else table.cast(stored)


# Row ids, start times and correlation ids mostly climb: stored as deltas, not as dictionaries of
# a million distinct values (which Parquet builds, outgrows and abandons): a smaller file and a
# cheaper write; they read back the same.
DELTA_COLUMNS = ("id", "start_ns", "correlation")


def _writer(where: str | os.PathLike, schema: pa.Schema) -> pq.ParquetWriter:
    stored = _stored_schema(schema)
    delta = [n for n in DELTA_COLUMNS if n in stored.names and pa.types.is_integer(stored.field(n).type)]
    if not delta:
        return pq.ParquetWriter(where, stored, compression="zstd", use_dictionary=True)
    return pq.ParquetWriter(where, stored, compression="zstd", use_dictionary=_leaf_paths(stored, delta),
                            column_encoding=dict.fromkeys(delta, "DELTA_BINARY_PACKED"))


def _leaf_paths(schema: pa.Schema, but: list[str]) -> list[str]:
    """The Parquet column paths of `schema` ("grid.list.element" for a list column: what
    `use_dictionary` takes), but those of the top-level columns `but`."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    paths = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    return [p for p in (paths.column(i).path for i in range(len(paths))) if p.split(".")[0] not in but]


def _add_footer(writer: pq.ParquetWriter, extra: Mapping[bytes, bytes] | None) -> None:
    # (pyarrow < 16 cannot write footer-only entries: the trace is then written without them)
    if extra and hasattr(writer, "add_key_value_metadata"):
        writer.add_key_value_metadata(dict(extra))


def write_handed_over(path: str | os.PathLike, held: list, meta: Mapping[str, Any],
                      footer: Callable[[list], Mapping[bytes, bytes] | None]) -> Path:
    """`write_trace` of the conformed table in `held` (`[table]`, which it empties: the caller
    keeps no other reference), with the footer entries that `footer` computes (the summary: an
    analysis of the rows) from a `[table]` of its own, which it empties in turn.

    `footer` runs while another thread encodes and compresses the rows, which Arrow does without
    the GIL: the two overlap on a second core. The table is freed as soon as the write and
    `footer` are both done with it. Above `OVERLAP_MAX_BYTES` the rows are written first and
    `footer` runs after: while the writer holds the table, the summary's conversion cannot free it
    as it goes (there the overlap peaks higher than one after the other; below the import's own
    peak it saves time). The file is the one
    `write_trace(path, table, meta, extra=footer entries)` writes."""
    path = Path(path)
    box = [_as_stored(held.pop(), meta, path)]
    overlap = box[0].get_total_buffer_size() <= OVERLAP_MAX_BYTES

    def write(tmp: str) -> None:
        with _writer(tmp, box[0].schema) as writer:
            mine = [box[0]]
            with ThreadPoolExecutor(1, thread_name_prefix="rooftop-write") as pool:
                rows = pool.submit(_write_rows, writer, box)
                try:
                    if not overlap:
                        rows.result()
                    extra = footer(mine)
                finally:
                    mine.clear()
                    rows.result()  # the rows' error first: the footer of a failed write is moot
            _add_footer(writer, extra)

    try:
        return replace_atomically(path, write)
    finally:
        box.clear()


# Tables above this write their rows before the summary is computed, not beside it (see
# `write_handed_over`): ~2M kernels of a Kineto import, whose summary would otherwise hold a
# second gigabyte while the writer holds the first.
OVERLAP_MAX_BYTES = 1 << 30


def _write_rows(writer: pq.ParquetWriter, box: list) -> None:
    writer.write_table(_plain_text(box.pop()))  # the table's last reference, if the footer is done with it
    pa.default_memory_pool().release_unused()


def check_writable(path: str | os.PathLike) -> None:
    """Raise TraceError before a long run if `path` cannot be written (missing dir, read-only, full)."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as exc:
        raise TraceError(path, f"cannot write here: {exc.strerror or exc}",
                         "choose another -o path") from None
    if path.is_dir():
        raise TraceError(path, "is a directory", "give a file name ending in .parquet")
