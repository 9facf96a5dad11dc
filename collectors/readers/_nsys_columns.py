"""Column-wise reading of an Nsight Systems SQLite export, and text as codes into distinct strings.

The event tables of a 1M-kernel export hold millions of rows but a few dozen distinct names: every
name-shaped value is kept as a code into a table of distinct texts (`Text`), and everything done to
text (decoding, the text budget, redaction, path building) is done once per distinct string.

Tables are read into Arrow by the ADBC SQLite driver (`adbc-driver-sqlite`: SQLite's own C library
filling Arrow arrays, no Python object per value) where it is installed; else, or where it refuses
a table (a damaged export whose column mixes types), through Python's `sqlite3`, row tuples turned
into the same typed columns. Both give the same values: an integer column is Int64 (null where a
damaged row holds no integer), a text column is a `Text`.
"""
from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rooftop import limits, speedups
from rooftop.errors import TraceError


class NsysError(TraceError):
    """An Nsight Systems export could not be read."""


@dataclass
class Text:
    """Text per row as codes into distinct values: `codes[i]` indexes `values` (-1: null)."""
    codes: np.ndarray
    values: list

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def nulls(cls, n: int) -> "Text":
        return cls(np.full(n, -1, dtype=np.int64), [])

    @classmethod
    def constant(cls, value: str, n: int) -> "Text":
        return cls(np.zeros(n, dtype=np.int64), [value])

    def unique(self) -> "Text":
        """The same text with `values` distinct (two ids may decode or be cut to one text)."""
        if not self.values:
            return self
        remap, uniq = pd.factorize(pd.Index(self.values, dtype=object), use_na_sentinel=True)
        remap = np.append(np.asarray(remap, dtype=np.int64), -1)  # code -1 stays -1
        return Text(remap[self.codes], list(uniq))

    def map(self, fn) -> "Text":
        """`fn` applied to each distinct value (None stays None), not to each row."""
        vals = [None if v is None else fn(v) for v in self.values]
        none = [i for i, v in enumerate(vals) if v is None]
        codes = self.codes
        if none:
            fix = np.arange(len(vals) + 1, dtype=np.int64)
            fix[none] = -1
            fix[-1] = -1
            codes = fix[codes]
        return Text(codes, vals).unique()

    def take(self, idx: np.ndarray) -> "Text":
        return Text(self.codes[idx], self.values)

    def objects(self) -> np.ndarray:
        """Each row's text as an object array (one shared string object per distinct value)."""
        return np.array(self.values + [None], dtype=object)[self.codes]

    def categorical(self) -> pd.Categorical:
        t = self.unique()
        return pd.Categorical.from_codes(t.codes, categories=pd.Index(t.values, dtype=object))


def redacted(text: Text) -> Text:
    """`rooftop.trace.redact.redact_text` on each distinct value that can hold a secret: Arrow's RE2 runs
    the redaction's gate over the dictionary at C speed (as the scrub does), Python's patterns
    only over the values it lets through."""
    from rooftop.trace.redact import GATE, redact_text

    if not text.values:
        return text
    vals = pa.array(text.values, type=pa.string())
    hits = pc.indices_nonzero(pc.fill_null(pc.match_substring_regex(vals, GATE.removeprefix("(?i)"), ignore_case=True),
                                           False)).to_pylist()
    if not hits:
        return text
    out = list(text.values)
    for j in hits:
        out[j] = redact_text(out[j])
    return Text(text.codes, out).unique()


def concat_text(parts: list[Text]) -> Text:
    codes, values = [], []
    for p in parts:
        codes.append(np.where(p.codes >= 0, p.codes + len(values), -1))
        values += p.values
    return Text(np.concatenate(codes) if codes else np.zeros(0, np.int64), values).unique()


def from_objects(values, clean) -> Text:
    """Text from an object array or Arrow (binary or string) array: `clean` run per distinct value."""
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(
        np.asarray(values, dtype=object), from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], type=arr.type)
    if pa.types.is_null(arr.type):
        return Text.nulls(len(arr))
    enc = arr.dictionary_encode()
    codes = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return Text(codes, [clean(v) for v in enc.dictionary.to_pylist()]).unique()


def ints(col) -> pd.arrays.IntegerArray:
    """Int64 with nulls from an Arrow integer column or an object column of database values: text
    holding an integer ("12", "12.0") counts, anything else (a fraction, words, beyond int64) is null."""
    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks else pa.array([], type=pa.int64())
        if pa.types.is_null(col.type):
            n = len(col)
            return pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, dtype=bool))
        col = col.cast(pa.int64())
        if not col.null_count:  # most columns: the values as they are, no fill and no mask to build
            return pd.arrays.IntegerArray(np.asarray(col.to_numpy(), dtype=np.int64), np.zeros(len(col), dtype=bool))
        mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        return pd.arrays.IntegerArray(np.asarray(col.fill_null(0).to_numpy(), dtype=np.int64), mask)
    vals = np.asarray(col, dtype=object)
    if pd.api.types.infer_dtype(vals, skipna=True) in ("integer", "empty"):
        # Python ints and NULLs (every undamaged column): converted in C, exactly (a float64 on the
        # way would round ids above 2**53, as `globalTid` is)
        mask = np.asarray(pd.isna(vals), dtype=bool)
        out = np.zeros(len(vals), dtype=np.int64)
        try:
            out[~mask] = vals[~mask].astype(np.int64)
            return pd.arrays.IntegerArray(out, mask)
        except OverflowError:
            pass  # beyond int64: the general path below makes it null
    s = pd.Series(vals, dtype=object)
    if len(s):
        s = s.map(lambda v: v.decode("ascii", "replace") if isinstance(v, (bytes, bytearray)) else v)
        s = s.map(lambda v: None if isinstance(v, bool) else v)
    num = pd.to_numeric(s, errors="coerce")
    if pd.api.types.is_float_dtype(num):
        num = num.where(num.abs().lt(2.0 ** 62) & (num % 1 == 0))
    return pd.array(num, dtype="Int64")


def open_fast(path: Path):
    """An ADBC SQLite connection to the export (read-only, immutable: no lock, no -wal/-shm files),
    or None where the driver is not installed or cannot open it, or is turned off (`ROOFTOP_ADBC=0`)."""
    if not speedups.on("ADBC"):
        return None
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    try:
        return adbc.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1")
    except Exception:  # noqa: BLE001  (any driver failure: the sqlite3 path reads it instead)
        return None


class Ahead:
    """Tables fetched ahead, through ADBC on a second connection and thread, while the reader works
    on the ones it fetched first: the driver steps SQLite without the GIL, so on two cores the
    runtime and NVTX tables (the largest of a serving capture) cost little beyond the kernels'
    own fetch. The row budget bounds the fetch as it does `fetch`'s (`_fetch_adbc`), and is
    judged when the table is taken; a refused or failed fetch is read again by `fetch` on the
    caller's connection. Off (nothing fetched ahead) without ADBC or with `ROOFTOP_THREADS=0`."""

    def __init__(self, path: Path):
        self.con = open_fast(path) if speedups.on("THREADS") else None
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="rooftop-nsys") if self.con is not None else None
        self.jobs: dict = {}

    def start(self, db, table: str, cols: list[str], text: tuple[str, ...] = (), where: str = "") -> None:
        if self.pool is None or table not in db.tables:
            return
        present = [c for c in cols if c in db.columns(table)]
        if present:
            self.jobs[(table, where)] = self.pool.submit(_fetch_adbc, self.con, table, present, text, where)

    def take(self, table: str, where: str) -> dict | None:
        """The table's columns once fetched; None where it was not asked ahead or its fetch had not
        begun (taken back: the caller reads it now, rather than wait behind the fetches before it)."""
        job = self.jobs.pop((table, where), None)
        if job is None or job.cancel():
            return None
        return job.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.con.close()


def rowid_halves(db, table: str, where: str = "") -> tuple[str, str] | None:
    """Filters that split a table into two halves by rowid, lower then upper (together every row
    once, each half in rowid order, as a whole-table scan gives them), each within `where` (a
    "WHERE ..." filter or ""); None where the table has no rowid to split on (WITHOUT ROWID, a
    column of its own named rowid) or fewer than two rows."""
    if table not in db.tables or "rowid" in {c.lower() for c in db.columns(table)}:
        return None
    try:
        lo, hi = db.con.execute(f"SELECT min(rowid), max(rowid) FROM [{table}]").fetchone()
    except sqlite3.Error:  # (WITHOUT ROWID)
        return None
    if not isinstance(lo, int) or not isinstance(hi, int) or hi <= lo:
        return None
    mid = lo + (hi - lo) // 2
    within = f"({where.strip()[len('WHERE'):].strip()}) AND " if where.strip() else ""
    return f"WHERE {within}rowid <= {mid}", f"WHERE {within}rowid > {mid}"


def fetch(db, fast, table: str, cols: list[str], text: tuple[str, ...] = (), where: str = "",
          ahead: Ahead | None = None) -> dict:
    """The named columns of a table as {column: Int64 array or, for `text`, raw values (Arrow binary
    or object)}, all null for the columns this schema version lacks; no rows for a missing table.
    `db` is the sqlite3 reader (`nsys._Db`). The row budget (`ROOFTOP_MAX_ROWS`) holds before
    anything beyond it is fetched: ADBC reads at most one row past it (and so judges the rows the
    filter keeps), sqlite3 counts the table's rows first. A table `ahead` started is taken from it."""
    if table not in db.tables:
        return {c: (pa.nulls(0, pa.binary()) if c in text else ints(pa.nulls(0))) for c in cols}
    have = db.columns(table)
    present = [c for c in cols if c in have]
    got = ahead.take(table, where) if ahead is not None else None
    if got is None and fast is not None and present:
        got = _fetch_adbc(fast, table, present, text, where)
    if got is not None:  # (judged on the read: past the budget, the same one line as a count first)
        db.check_rows(table, counted=len(next(iter(got.values()))))
    if got is None:
        db.check_rows(table)
        raw = _fetch_sqlite3(db, table, present, where) if present else None
        got = {c: (v if c in text else ints(v)) for c, v in (raw or {}).items()}
        n = len(next(iter(raw.values()))) if raw else \
            db.con.execute(f"SELECT count(*) FROM [{table}] {where}").fetchone()[0]
    else:
        n = len(next(iter(got.values())))
    return {c: got[c] if c in got else (pa.nulls(n, pa.binary()) if c in text else ints(pa.nulls(n))) for c in cols}


def _fetch_sqlite3(db, table: str, cols: list[str], where: str) -> dict:
    """One query through Python's sqlite3: each column as an object array of the values as stored
    (no type guessed on the way: a pandas frame would turn integers with NULLs into floats)."""
    try:
        rows = db.con.execute(f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM [{table}] {where}").fetchall()
    except sqlite3.Error as exc:
        if "too big" in str(exc):
            raise
        raise NsysError(db.path, f"cannot read table {table}: {exc}") from None
    out = {}
    for c, values in zip(cols, zip(*rows) if rows else [()] * len(cols)):
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        out[c] = arr
    return out


def _fetch_adbc(fast, table: str, cols: list[str], text: tuple[str, ...], where: str) -> dict | None:
    """One query through ADBC; None where the driver refuses it or a column is not what the schema
    says (the caller then reads the table through sqlite3, which takes any value)."""
    # text as BLOB: bytes as stored, decoded later per distinct value with replacement (the driver
    # would hand over invalid UTF-8 as a string)
    sel = ", ".join(f"CAST([{c}] AS BLOB) AS [{c}]" if c in text else f"[{c}]" for c in cols)
    try:
        cur = fast.cursor()
        try:  # (one row past the budget at most: `fetch` refuses the table then)
            cur.execute(f"SELECT {sel} FROM [{table}] {where} LIMIT {limits.max_rows() + 1}")
            tab = cur.fetch_arrow_table()
        finally:
            cur.close()
    except Exception:  # noqa: BLE001  (a type the driver cannot carry on with: the sqlite3 path)
        return None
    out = {}
    for c in cols:
        col = tab.column(c)
        if c in text:
            if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type) or pa.types.is_null(col.type)):
                return None
            if len(col) and not pa.types.is_null(col.type):
                # the SQL value budget the sqlite3 connection enforces (SQLITE_LIMIT_LENGTH)
                longest = pc.max(pc.binary_length(col)).as_py()
                if longest is not None and longest > limits.max_sql_value():
                    raise sqlite3.DataError("string or blob too big")
            out[c] = col
        else:
            if not (pa.types.is_integer(col.type) or pa.types.is_null(col.type)):
                return None  # a damaged row's text or fraction in an integer column
            out[c] = ints(col)
    return out


def nest_ranges(thr: np.ndarray, start: np.ndarray, end: np.ndarray, label: Text, qthr: np.ndarray,
                qt: np.ndarray, stats: dict) -> tuple[np.ndarray, Text]:
    """`nest_intervals` (the Kineto path's interval code) with the paths built once per distinct
    path: (innermost range of each query or -1, each range's path as `Text`).

    A path is the labels of the enclosing ranges, outermost first, joined by "/". Ranges are
    numbered a nesting level at a time by (their parent's path, their own label), so a level
    of a million ranges costs one `np.unique` over integer pairs, and only the distinct pairs
    (a few hundred in a decode loop) are spelled out. Where a label is missing or a path would be
    cut (deeper than MAX_PATH_DEPTH, longer than MAX_PATH_CHARS), `nest_intervals` builds the
    paths itself, with its cut rules."""
    from collectors.readers.nesting import MAX_PATH_CHARS, MAX_PATH_DEPTH, nest_intervals

    n = len(start)
    if n and (label.codes < 0).any():
        return _nest_with_labels(thr, start, end, label, qthr, qt, stats)
    got: list = []
    inner, _, _ = nest_intervals(thr, start, end, None, qthr, qt, stats, query_paths=False, parents=got)
    if not n:
        return inner, Text.nulls(0)
    parent = got[0]
    nl = len(label.values)
    lens = np.fromiter(map(len, label.values), dtype=np.int64, count=nl)
    values = list(label.values)  # paths at level 0: the labels themselves
    plen = lens.copy()
    code = label.codes.copy()
    level = np.where(parent < 0, 0, -1)
    todo = np.flatnonzero(level < 0)
    if n and int(lens[label.codes].max()) > MAX_PATH_CHARS:
        return _nest_with_labels(thr, start, end, label, qthr, qt, stats, inner)
    for depth in range(1, MAX_PATH_DEPTH):  # (a path of MAX_PATH_DEPTH levels would be cut)
        if not len(todo):
            break
        up = parent[todo]
        ready = level[up] >= 0
        ks, ups = todo[ready], up[ready]
        level[ks] = depth
        pairs, at = np.unique(code[ups] * nl + label.codes[ks], return_inverse=True)
        pp, pl = pairs // nl, pairs % nl
        new_len = plen[pp] + 1 + lens[pl]
        if len(new_len) and int(new_len.max()) > MAX_PATH_CHARS:
            return _nest_with_labels(thr, start, end, label, qthr, qt, stats, inner)
        code[ks] = len(values) + at.reshape(-1)
        values += [f"{values[a]}/{label.values[b]}" for a, b in zip(pp.tolist(), pl.tolist())]
        plen = np.concatenate([plen, new_len])
        todo = todo[~ready]
    if len(todo):
        return _nest_with_labels(thr, start, end, label, qthr, qt, stats, inner)
    return inner, Text(code, values).unique()


def _nest_with_labels(thr, start, end, label: Text, qthr, qt, stats: dict, inner=None) -> tuple[np.ndarray, Text]:
    """The paths as `nest_intervals` builds them, one range at a time (its cut rules, missing labels)."""
    from collectors.readers.nesting import nest_intervals

    inner2, _, paths = nest_intervals(thr, start, end, label.objects().tolist(), qthr, qt, stats, query_paths=False)
    return inner2, from_objects(np.array(paths + [None], dtype=object)[:-1], lambda v: v)
