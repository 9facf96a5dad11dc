"""Reading a trace: the footer's metadata, validation, conforming, scrubbing, multi-rank directories."""
from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import heap, limits
from ..records import flat_text, plain_copy, strict
from ..codes import by_first_seen
from .schema import (FORMAT_VERSION, GPU_KINDS, HOST_COLUMNS, META_KEY, NUMERIC_CHECKED, REQUIRED, SCHEMA,
                     TEXT_COLUMNS, Trace, TraceError, one_line)


_RANK_RE = re.compile(r"rank[=_\-]?(\d+)", re.IGNORECASE)


def _parse_meta(path: Path, raw: dict[bytes, bytes] | None, without: tuple[str, ...] = ()) -> dict[str, Any]:
    if not raw or META_KEY not in raw:
        raise TraceError(path, "Parquet file without rooftop metadata",
                         "not a rooftop trace; try `rooftop import` on the original file")
    try:
        meta = json.loads(raw[META_KEY].decode("utf-8", errors="replace"))
    except RecursionError:
        raise TraceError(path, f"rooftop metadata is nested too deep (more than {limits.MAX_META_DEPTH} levels)") from None
    except ValueError as exc:
        raise TraceError(path, f"rooftop metadata is not valid JSON ({one_line(exc, 80)})") from None
    if not isinstance(meta, dict):
        raise TraceError(path, "rooftop metadata is not a JSON object")
    for key in without:  # left out before the walk below (a 1M-kernel run's steps: ~0.1 s of it)
        meta.pop(key, None)
    meta = json_safe(meta, path)
    version = meta.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(path, f"rooftop metadata has no valid format version ({version!r})")
    if version > FORMAT_VERSION:
        raise TraceError(path, f"format version {version} is newer than this rooftop reads ({FORMAT_VERSION})",
                         "upgrade rooftop")
    if version < 1:
        raise TraceError(path, f"unknown format version {version}")
    return meta


def json_safe(obj: Any, path=None, depth: int = 0) -> Any:
    """The metadata as strict JSON: NaN/inf and integers beyond int64 become null (unknown), lone
    surrogates are replaced; deeper than `limits.MAX_META_DEPTH` levels is an error naming the file."""
    if depth > limits.MAX_META_DEPTH:
        raise TraceError(path, f"rooftop metadata is nested too deep (more than {limits.MAX_META_DEPTH} levels)")
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return obj if -(2 ** 63) <= obj < 2 ** 63 else None
    if isinstance(obj, str):
        return _no_surrogates(obj)
    if isinstance(obj, dict):
        return {_no_surrogates(str(k)): json_safe(v, path, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        text = flat_text(obj, allow_nan=False) if depth + 2 <= limits.MAX_META_DEPTH else None
        if text is not None and strict(text):  # thousands of step entries, checked in C (rooftop/records.py)
            return plain_copy(text)
        return [json_safe(v, path, depth + 1) for v in obj]
    return str(obj)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_surrogates(text: str) -> str:
    """A lone surrogate (from a JSON `\\udcff` escape) is not text: U+FFFD, as a decoder would."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


# The shape every reader of the metadata relies on: sections are objects, lists are lists, names
# are text. A file written by another tool (or by hand) may hold anything under these keys.
_META_DICTS = ("source", "device", "model", "workload")
_META_SUBDICTS = {"device": ("peaks", "clocks")}
_META_TEXT = {"source": ("tool", "version"), "device": ("name", "cc"), "model": ("name", "dtype"),
              "workload": ("dtype", "kv_dtype", "attn", "device")}


_STEP_NUMBERS = ("index", "step", "batch", "new_tokens", "tokens", "context")


def _conform_step(step: dict) -> dict:
    out = dict(step)
    if out.get("phase") is not None and not isinstance(out["phase"], str):
        out["phase"] = None
    for k in _STEP_NUMBERS:
        v = out.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            out[k] = None
    return out


def conform_meta(meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `meta` in the shape the analysis reads, and a warning per field that was ignored."""
    meta = dict(meta)
    bad: list[str] = []

    def want_dict(doc: dict, key: str, where: str) -> None:
        if key in doc and doc[key] is not None and not isinstance(doc[key], dict):
            bad.append(where)
            doc[key] = None

    for key in _META_DICTS:
        want_dict(meta, key, key)
        if isinstance(meta.get(key), dict):
            section = meta[key] = dict(meta[key])
            for sub in _META_SUBDICTS.get(key, ()):
                want_dict(section, sub, f"{key}.{sub}")
            for leaf in _META_TEXT.get(key, ()):
                v = section.get(leaf)
                if v is not None and not isinstance(v, str):
                    section[leaf] = str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    peaks = (meta.get("device") or {}).get("peaks")
    if isinstance(peaks, dict):
        peaks = meta["device"]["peaks"] = dict(peaks)
        for sub in ("datasheet", "measured"):
            want_dict(peaks, sub, f"device.peaks.{sub}")
    if meta.get("steps") is not None and not isinstance(meta["steps"], list):
        bad.append("steps")
        meta["steps"] = []
    elif isinstance(meta.get("steps"), list):
        meta["steps"] = [_conform_step(s) for s in meta["steps"] if isinstance(s, dict)]
    w = meta.get("warnings")
    if w is not None:
        meta["warnings"] = [str(x) for x in w] if isinstance(w, list) else [str(w)]
    warnings = [f"metadata field(s) of the wrong type ignored: {', '.join(bad)}"] if bad else []
    return meta, warnings


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_input(path: str | os.PathLike, allow_dir: bool = True) -> os.stat_result:
    """The `stat` of an input, or the one-line error for what rooftop cannot read: missing,
    permission denied, a FIFO, a device, a socket (checked before any open: opening a FIFO blocks
    until a writer comes), a /proc or /sys pseudo-file, a directory where a file is expected."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TraceError(path, "no such file or directory") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    for test, what in _KINDS:
        if test(st.st_mode):
            raise TraceError(path, f"not a regular file: {what}", "give a trace file or a run directory")
    if stat.S_ISDIR(st.st_mode):
        if not allow_dir:
            raise TraceError(path, "is a directory", "give a trace file")
        if not os.access(path, os.R_OK | os.X_OK):  # its files can be neither listed nor opened
            raise TraceError(path, "permission denied")
        return st
    resolved = str(path.resolve())
    if resolved.startswith(("/proc/", "/sys/")):  # (/dev/shm holds real files: devices are caught above)
        raise TraceError(path, "not a trace file: a /proc or /sys pseudo-file")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "permission denied")
    return st


def is_parquet(path: str | os.PathLike) -> bool:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # never open a FIFO or a device to sniff it
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _read_filtered(pf: pq.ParquetFile, columns: list[str], kind: str, keep: bool) -> pa.Table:
    """The rows whose `kind` is (`keep`) or is not `kind`, the GPU rows kept first (in file order),
    then the others (see `split_runtime`). Read one column of one row group at a time and filtered
    as it comes: the file is never decoded whole (read whole and then filtered, a large Kineto
    import's load peaked far higher). See `_row_group_column` for how each column is read."""
    import pyarrow.compute as pc

    first: dict[str, list] = {c: [] for c in columns}
    rest: dict[str, list] = {c: [] for c in columns}
    types: dict[str, pa.DataType] = {}
    for g in range(pf.metadata.num_row_groups):
        kinds = pf.read_row_group(g, columns=["kind"], use_threads=False).column(0)
        hit = _kind_is(kinds, kind)
        if not keep:
            hit = pc.invert(hit)
        gpu = _kind_in(kinds, GPU_KINDS)
        masks = [(first, pc.and_(hit, gpu).combine_chunks()), (rest, pc.and_(hit, pc.invert(gpu)).combine_chunks())]
        masks = [(parts, mask, pc.sum(mask).as_py() or 0) for parts, mask in masks]
        for c in columns:
            col = kinds if c == "kind" else _row_group_column(pf, g, c)
            types[c] = col.type
            got = []
            for parts, mask, hits in masks:
                if hits == len(col):
                    got.append((parts, list(col.chunks)))
                elif hits:
                    got.append((parts, list(col.filter(mask).chunks)))
                else:  # no row, but the dictionary: text columns keep the categories a whole read has
                    got.append((parts, [chunk.slice(0, 0) for chunk in col.chunks[:1]]))
            del col
            if pa.types.is_dictionary(types[c]) and pf.metadata.num_row_groups <= ONE_DICTIONARY_MAX_GROUPS:
                # one dictionary for the column, not one per row group: the GPU rows and the ranges
                # of an import, stored apart, name mostly the same paths (held twice otherwise)
                got = _one_dictionary(first, rest, c, got, types[c])
            for parts, chunks in got:
                parts[c] += chunks
        pa.default_memory_pool().release_unused()  # the row group's decoded pages, as we go
    schema = pf.schema_arrow
    fields = [pa.field(c, types.get(c, schema.field(c).type)) for c in columns]
    return pa.table({f.name: pa.chunked_array(first[f.name] + rest[f.name], type=f.type) for f in fields},
                    schema=pa.schema(fields, metadata=schema.metadata))


# Up to this many row groups (an import writes one per 1Mi rows: 1M kernels make 3) the lazy read
# keeps one dictionary per column as it goes; each group costs a pass over the dictionary so far,
# so a file of more groups (other writers use small ones) is unified once, after the read.
ONE_DICTIONARY_MAX_GROUPS = 8


def _one_dictionary(first: dict, rest: dict, c: str, got: list, type_: pa.DataType) -> list:
    """A row group's chunks of dictionary column `c` (`got`: [(parts, chunks)]) over one dictionary
    with the chunks read before them, which share one already. The new chunks are unified behind an
    empty chunk carrying that dictionary, so a group costs its size and theirs, not a pass over
    every earlier chunk again (quadratic in the row groups). Arrow numbers the
    values in the order it meets them, so the unified dictionary begins with the earlier one and
    the earlier chunks keep their indices; checked, else everything is unified again."""
    before = first[c] + rest[c]
    new = [chunk for _, chunks in got for chunk in chunks]
    if not new:
        return got
    lead = [before[0].slice(0, 0)] if before else []
    both = pa.chunked_array(lead + new, type=type_).unify_dictionaries()
    dictionary = both.chunk(0).dictionary
    known = before[0].dictionary if before else dictionary
    if not dictionary.slice(0, len(known)).equals(known):  # (not seen)
        both = pa.chunked_array(before + new, type=type_).unify_dictionaries()
        first[c], rest[c] = both.chunks[:len(first[c])], both.chunks[len(first[c]):len(before)]
        out = iter(both.chunks[len(before):])
        return [(parts, [next(out) for _ in chunks]) for parts, chunks in got]

    def retag(chunk: pa.DictionaryArray, values: pa.Array) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(chunk.indices, values, safe=False)  # (no copy)

    if len(dictionary) > len(known):  # grown: the earlier chunks take it, their indices unchanged
        first[c], rest[c] = [retag(x, dictionary) for x in first[c]], [retag(x, dictionary) for x in rest[c]]
    else:  # nothing new: the new chunks take the earlier one (not a second copy of the same values)
        dictionary = known
    out = iter([retag(x, dictionary) for x in both.chunks[len(lead):]])
    return [(parts, [next(out) for _ in chunks]) for parts, chunks in got]


def _row_group_column(pf: pq.ParquetFile, group: int, name: str) -> pa.ChunkedArray:
    """One column of one row group. Text is read whole (one dictionary for the row group: read in
    batches, each batch carried its own copy of it); other columns in 64k-row batches (decoding a
    launch shape of a 1M-row group at once held many times its result in levels and builders)."""
    want = pf.schema_arrow.field(name).type
    if _is_text(want):
        return pf.read_row_group(group, columns=[name], use_threads=False).column(0)
    batches = pf.iter_batches(batch_size=1 << 16, row_groups=[group], columns=[name], use_threads=False)
    return pa.chunked_array([b.column(0) for b in batches], type=want)


def _read_file(path: Path, skip_runtime: bool = False) -> tuple[pa.Table, dict[str, Any]]:
    size = check_input(path, allow_dir=False).st_size
    if size == 0:
        raise TraceError(path, "empty file")
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file", "import other formats with `rooftop import`")
    try:
        # Names and paths repeat (a decode step launches the same kernels in every layer): read them
        # dictionary-encoded, as pandas categoricals: ~6x faster to load and smaller than strings.
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        meta = _parse_meta(path, schema.metadata)
        rows, cap = pf.metadata.num_rows, limits.max_rows()
        if rows > cap:
            raise TraceError(path, limits.over_budget(f"{rows:,} rows", limits.MAX_ROWS_ENV, cap))
        text = [c for c in TEXT_COLUMNS if c in schema.names and pa.types.is_string(schema.field(c).type)]
        columns = _columns_with_values(pf)
        if skip_runtime and "kind" in schema.names:
            # filtered row group by row group: the runtime rows (one per kernel in a Kineto import)
            # are never held beside the events, and never split off a 2M-row table
            table = _read_filtered(pq.ParquetFile(path, read_dictionary=text), columns, "runtime", keep=False)
        else:
            table = pq.ParquetFile(path, read_dictionary=text).read(columns=columns)
        table.validate(full=True)  # a flipped byte can leave dictionary indices out of range
    except TraceError:
        raise
    except (pa.ArrowException, OSError, ValueError, IndexError, TypeError) as exc:
        reason = "truncated or corrupt Parquet"
        with open(path, "rb") as fh:
            fh.seek(max(0, size - 4))
            if fh.read(4) != b"PAR1":
                reason = "truncated Parquet file (no footer)"
        raise TraceError(path, f"{reason}: {one_line(exc, 160)}") from None
    return table, meta


def _columns_with_values(pf: pq.ParquetFile) -> list[str]:
    """The file's columns less the optional schema columns its statistics say hold no value at
    all (a trace without ncu leaves ~30 counter and stall columns empty; read, each would still
    fill a buffer per row). `_to_frame` gives them back as nulls."""
    md, names = pf.metadata, pf.schema_arrow.names
    empty = set()
    if md.num_row_groups:
        flat = {md.schema.column(j).path: j for j in range(md.num_columns)}
        for name in names:
            j = flat.get(name)
            if name in REQUIRED or name not in SCHEMA.names or j is None:
                continue
            stats = [md.row_group(g).column(j).statistics for g in range(md.num_row_groups)]
            if all(st is not None and st.has_null_count and st.null_count == md.row_group(g).num_rows
                   for g, st in enumerate(stats)):
                empty.add(name)
    return [n for n in names if n not in empty]


def _type_name(t: pa.DataType) -> str:
    return str(t).replace("dictionary<values=string, indices=int32, ordered=0>", "dictionary<string>")


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _conform_column(col: pa.ChunkedArray, want: pa.DataType) -> pa.ChunkedArray | None:
    """`col` as the schema's type, or None when its type cannot mean that (a number where text is
    expected, text where a number is, an integer that overflows the column)."""
    t = col.type
    if t == want:
        return col
    if _is_text(want):
        if not _is_text(t):
            return None
        if pa.types.is_dictionary(want):
            return col.cast(pa.string()).dictionary_encode().cast(want)
        return col if pa.types.is_dictionary(t) else col.cast(want)  # dictionaries stay categoricals
    if pa.types.is_integer(want) and not pa.types.is_integer(t):
        return None
    if pa.types.is_floating(want) and not (pa.types.is_floating(t) or pa.types.is_integer(t)):
        return None
    if pa.types.is_boolean(want) and not pa.types.is_boolean(t):
        return None
    if pa.types.is_fixed_size_list(want):
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
                or not pa.types.is_integer(t.value_type):
            return None
    try:
        return col.cast(want)  # safe: an int64 that does not fit int32 is refused, not wrapped
    except (pa.ArrowException, ValueError, TypeError):
        return None


def conform_types(table: pa.Table, path: Path | str | None) -> tuple[pa.Table, list[str]]:
    """Every schema column in its schema type: a required column of the wrong type is an error
    naming the column and both types; an optional one is dropped (unknown) with a warning."""
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise TraceError(path, f"missing required column(s): {', '.join(missing)}")
    ignored: list[str] = []
    for f in SCHEMA:
        if f.name not in table.column_names:
            continue
        i = table.column_names.index(f.name)
        col = table.column(i)
        fixed = _conform_column(col, f.type)
        if fixed is None:
            what = f"column {f.name} has type {_type_name(col.type)}, expected {_type_name(f.type)}"
            if f.name in REQUIRED:
                raise TraceError(path, what)
            ignored.append(f"{f.name} ({_type_name(col.type)})")
            table = table.remove_column(i)
        elif fixed is not col:
            table = table.set_column(i, f.name, fixed)
    if "rank" in table.column_names:
        i = table.column_names.index("rank")
        fixed = _conform_column(table.column(i), pa.int32())
        if fixed is None:
            ignored.append(f"rank ({_type_name(table.column(i).type)})")
            table = table.remove_column(i)
        else:
            table = table.set_column(i, "rank", fixed)
    warnings = [f"column(s) of the wrong type or range ignored (unknown): {', '.join(ignored)}"] if ignored else []
    return table, warnings


def validate(table: pa.Table, path: Path | str | None) -> list[str]:
    """Check required columns and impossible values; return warnings for what can be tolerated."""
    return _validate(table, path)[1]


def _validate(table: pa.Table, path: Path | str | None) -> tuple[pa.Table, list[str]]:
    table, warnings = conform_types(table, path)
    import pyarrow.compute as pc

    dur = table.column("dur_ns")
    neg = pc.sum(pc.less(dur, 0)).as_py() or 0
    if neg:
        raise TraceError(path, f"{neg} event(s) with negative duration")
    for c in NUMERIC_CHECKED:
        if c in table.column_names and pa.types.is_floating(table.column(c).type):
            col = table.column(c)
            bad = pc.sum(pc.or_(pc.is_nan(col), pc.less(col, 0))).as_py() or 0
            if bad:
                warnings.append(f"{bad} negative or NaN value(s) in {c} treated as unknown")
    return table, warnings


# Columns that are never null once validated: plain int64 keeps arithmetic NA-free and fast.
_TIME_COLUMNS = ("id", "start_ns", "dur_ns")
_PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.bool_(): pd.BooleanDtype()}.get


def _to_frame(held: list[pa.Table]) -> pd.DataFrame:
    """pandas rows of the table in `held` (which it empties: the caller keeps no other reference,
    so each column's Arrow buffers can go once converted): text columns as categoricals (the
    dictionary columns of the file, and names and paths, which repeat), nullable ints, plain int64
    time columns.

    Memory (a 1M-kernel trace): the Arrow pages the caller just dropped (the table as read, before
    the runtime rows were split off) are handed back first, since pandas allocates elsewhere; the
    time columns go to numpy straight (not through nullable Int64 and a cast); columns are
    converted one at a time, each dropped from the table once converted (all at once, the whole
    table and the whole frame were held together); blocks
    are not consolidated (that would copy every same-typed column into one 2-D array at once)."""
    table = held.pop()
    give_back_memory()
    # the schema's order, then any other column (free in Arrow: empty columns came back at the end)
    known = [c for c in SCHEMA.names if c in table.column_names]
    table = table.select(known + [c for c in table.column_names if c not in known])
    for c in TEXT_COLUMNS:
        if c in table.column_names and not pa.types.is_dictionary(table.column(c).type):
            i = table.column_names.index(c)
            table = table.set_column(i, c, table.column(c).cast(pa.string()).dictionary_encode())
    n = table.num_rows
    names = table.column_names
    late = {c: _int64_numpy(table.column(c)) for c in _TIME_COLUMNS}
    # A column without any value (most counters and stall columns of a trace without ncu) is
    # converted from one row and repeated: its Arrow nulls are never held beside their pandas copy.
    empty = [c for c in names if c not in late and n and table.column(c).null_count == n]
    missing = [f for f in SCHEMA if f.name not in names]  # left out by the producer or by the read
    if empty or missing:
        one = {c: table.column(c).slice(0, 1) for c in empty}
        for f in missing:
            null = pa.nulls(1, f.type)
            one[f.name] = null.dictionary_encode() if f.name in TEXT_COLUMNS else null
        one = pa.table(one).to_pandas(types_mapper=_PANDAS_TYPES, split_blocks=True)
        late.update({c: _repeated(one[c].array, n) for c in one.columns})
        given = set(names) | {f.name for f in missing}
        names = [c for c in SCHEMA.names if c in given] + [c for c in names if c not in SCHEMA.names]
    for c in table.column_names:  # launch shapes: a few distinct ones over a million rows
        if c not in late and _is_list(table.column(c).type):
            late[c] = _shared_lists(table.column(c))
    rest = table.drop_columns([c for c in late if c in table.column_names])
    del table
    for i, c in enumerate(rest.column_names):
        col = _categorical(rest.column(c))
        if col is None:
            col = rest.select([c]).to_pandas(types_mapper=_PANDAS_TYPES, split_blocks=True)[c]
            if c in NUMERIC_CHECKED:
                col = col.astype("float64")
                col = col.where(col >= 0)
            col = col.array
        rest = rest.drop_columns([c])
        late[c] = col
        del col
        if i % 4 == 3:
            pa.default_memory_pool().release_unused()
    del rest
    # Put together in order without a copy (`insert` would copy each array it is given).
    late = {c: v.to_numpy() if isinstance(v, pd.arrays.NumpyExtensionArray) else v for c, v in late.items()}
    return pd.DataFrame({c: late[c] for c in names}, index=pd.RangeIndex(n), copy=False)


def _copy_on_write() -> bool:
    """Whether pandas copies a column before writing into it: always from pandas 3, by option in 2."""
    return int(pd.__version__.split(".")[0]) >= 3 or pd.options.mode.copy_on_write is True


def _repeated(one: Any, n: int) -> Any:
    """The one-row pandas array `one` (a null) as `n` rows that all view its single slot (NumPy
    stride 0): a trace without ncu has ~30 counter and stall columns with no value, a slot per
    row each otherwise. The views are read-only: pandas (copy-on-write) copies a
    column before writing into it, and a filter, sort or arithmetic makes an ordinary array; values,
    dtypes and null-ness are those of the repeated row (unknown stays null)."""
    from pandas.arrays import BooleanArray, FloatingArray, IntegerArray, NumpyExtensionArray

    if not _copy_on_write():  # pandas 2 without copy-on-write would write into the shared slot
        return one.take(np.zeros(n, dtype=np.intp))

    def spread(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values[:1], (n,))

    if isinstance(one, NumpyExtensionArray):
        return spread(one.to_numpy())
    if isinstance(one, np.ndarray):
        return spread(one)
    if isinstance(one, (IntegerArray, FloatingArray, BooleanArray)):
        return type(one)(spread(one._data), spread(one._mask))
    if isinstance(one, pd.Categorical):
        return pd.Categorical.from_codes(spread(one.codes), dtype=one.dtype)
    return one.take(np.zeros(n, dtype=np.intp))  # any other array: one slot per row, as before


def _categorical(col: pa.ChunkedArray) -> pd.Categorical | None:
    """A dictionary-encoded text column as the categorical pyarrow's `to_pandas` makes (same
    categories in the same order, same codes), built from the unified dictionary directly: pyarrow
    went through a Python string per category on the way (a Kineto import's range paths are 340k
    distinct at 1M kernels, which raised the load's peak). None for any other column."""
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(col.type) or not _is_text(col.type) or not col.num_chunks:
        return None
    col = col.unify_dictionaries()
    dictionary = col.chunk(0).dictionary
    if dictionary.null_count:
        return None  # (a null category: left to pyarrow)
    codes = np.concatenate([pc.fill_null(c.indices, -1).to_numpy(zero_copy_only=False) for c in col.chunks])
    categories = pd.Index(pd.array(dictionary.cast(pa.string()), dtype=pd.StringDtype("pyarrow", na_value=np.nan)))
    out = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories, ordered=col.type.ordered))
    # Checking the categories are distinct left a hash table of them cached on the Index, with a
    # Python string per category (340k range paths at 1M kernels) that nothing may look up by value.
    # Dropped; pandas builds it again on the first lookup that needs it.
    getattr(out.categories, "_cache", {}).pop("_engine", None)
    return out


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t)


def _shared_lists(col: pa.ChunkedArray) -> np.ndarray:
    """A list column (grid, block) as pandas holds it (an object array of NumPy arrays, None for
    null), with one array per distinct list shared by every row that has it. Converted row by row,
    1M launches made 1M small arrays, viewing Arrow buffers that stayed allocated; shared, 8 bytes
    a row. Lists with a null inside
    are converted row by row, as before."""
    import pyarrow.compute as pc

    n = len(col)
    flat = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    out = np.full(n, None, dtype=object)
    found = _shape_codes(flat)
    if found is None:  # any other list: a text key per row
        key = pc.binary_join(pc.cast(flat, pa.list_(pa.string())), ",")
        if key.null_count != flat.null_count:  # a null element inside a list: no faithful key
            return flat.to_pandas().to_numpy(dtype=object)
        codes = pc.dictionary_encode(key).indices.to_numpy(zero_copy_only=False)
        valid = ~np.isnan(codes) if codes.dtype.kind == "f" else np.ones(n, dtype=bool)
        rows, codes = np.flatnonzero(valid), codes[valid].astype(np.int64)
    else:
        rows, codes = found
    if not len(rows):
        return out
    first = np.full(codes.max() + 1, -1, dtype=np.int64)
    first[codes[::-1]] = rows[::-1]  # the first row of each distinct list
    distinct = flat.take(pa.array(first)).to_pandas().to_numpy(dtype=object)
    if flat.values.null_count and pa.types.is_integer(flat.type.value_type):
        # converted whole, a child array holding nulls (the slots of null lists) turns float
        distinct = np.array([d.astype(np.float64) for d in distinct] + [None], dtype=object)[:-1]
    out[rows] = distinct[codes]
    return out


def _shape_codes(flat: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """(the rows holding a list, a code per such row naming its list) for fixed-size lists of
    non-negative integers (launch shapes), from the numbers themselves: the text key of every row
    (`binary_join`) was large at 1M rows. None for any other list column, or numbers
    too large to pack into one int64."""
    import pyarrow.compute as pc

    if not (pa.types.is_fixed_size_list(flat.type) and pa.types.is_integer(flat.type.value_type)):
        return None
    values = pc.list_flatten(flat)  # the values of the lists that are not null, row after row
    if values.null_count:
        return None
    shapes = values.to_numpy().astype(np.int64, copy=False).reshape(-1, flat.type.list_size)
    rows = np.flatnonzero(flat.is_valid().to_numpy(zero_copy_only=False))
    if not len(shapes):
        return rows, np.zeros(0, dtype=np.int64)
    if shapes.min() < 0:
        return None
    key, span = np.zeros(len(shapes), dtype=np.int64), 1
    for j in range(shapes.shape[1]):  # mixed radix: one int64 per distinct shape
        radix = int(shapes[:, j].max()) + 1
        span *= radix
        if span >= 1 << 62:
            return None
        key = key * radix + shapes[:, j]
    if span <= 4 * len(key) + 1024:
        # few possible shapes (launch sizes are small numbers): numbered through a table of them all,
        # not by hashing every row's key
        seen = np.zeros(span, dtype=bool)
        seen[key] = True
        number = np.cumsum(seen) - 1
        return rows, number[key]
    return rows, pd.factorize(key)[0].astype(np.int64, copy=False)


def give_back_memory() -> None:
    """Return freed memory to the system: pyarrow's allocator keeps the pages of freed buffers,
    and glibc keeps a heap whose top is still in use (a load frees hundreds of MB of temporaries
    between the arrays the frame keeps). Cheap. The first
    call also fixes glibc's mmap threshold (`rooftop.heap`: 1 MiB, unless an import set its own)."""
    pa.default_memory_pool().release_unused()
    heap.trim()


def _int64_numpy(col: pa.ChunkedArray) -> np.ndarray:
    """A never-null integer column as a writable int64 array (a one-chunk column converts to a
    read-only view of Arrow's buffer: copied, so the frame owns it)."""
    arr = col.to_numpy().astype("int64", copy=False)
    return arr if arr.flags.writeable else arr.copy()


def _drop_untimed(table: pa.Table, path) -> tuple[pa.Table, list[str]]:
    """Rows without a start or a duration cannot be placed on a timeline: drop them, say so."""
    import pyarrow.compute as pc

    bad = pc.or_(pc.is_null(table.column("start_ns")), pc.is_null(table.column("dur_ns")))
    if table.column("id").null_count:
        bad = pc.or_(bad, pc.is_null(table.column("id")))
    n = pc.sum(bad).as_py() or 0
    if not n:
        return table, []
    return table.filter(pc.invert(bad)), [f"{n} event(s) without id, start or duration dropped"
                                          f"{_first_names(table.filter(bad))}"]


def _first_names(dropped: pa.Table, n: int = 3) -> str:
    """`: kind name, kind name (and 4 more)`: what was dropped, so that a warning names it."""
    if "name" not in dropped.column_names:
        return ""
    kinds = dropped.column("kind").to_pylist() if "kind" in dropped.column_names else [None] * dropped.num_rows
    names = dropped.column("name").to_pylist()
    seen = list(dict.fromkeys(f"{k} {nm}" if k else str(nm) for k, nm in zip(kinds, names) if nm))
    if not seen:
        return ""
    more = f" (and {len(seen) - n} more)" if len(seen) > n else ""
    return ": " + ", ".join(seen[:n]) + more


def split_runtime(table: pa.Table) -> tuple[pa.Table, pd.DataFrame | None]:
    """The `runtime` rows out of the table, as a frame of HOST_COLUMNS (names as categoricals,
    nullable ints); None when there are none. Everything else stays an event row, the GPU rows
    (kernels, copies) first, each part in its original order: `Trace.timed()` is then a slice of
    the events, not a copy of them (a Kineto import's ranges, 340k rows at 1M kernels, would
    otherwise make the timed rows a second 1M-row frame of every column).

    Done in Arrow, before any pandas: the host rows take only their six columns; the event rows
    lose the schema columns that hold no value at all (a Kineto import leaves ~30 of the ~60
    empty; each still fills a buffer per row), which `_to_frame` gives back from one row; the
    filter copies the rest. At 1M kernels plus 1M runtime rows this halves what the filter
    copies, and the table as read can be freed before pandas. A table stored as an import stores
    it (the GPU rows, the other events, the runtime calls) is cut in slices instead: no copy."""
    rows = table.num_rows
    empty = [c for c in table.column_names
             if c in SCHEMA.names and c not in REQUIRED and table.column(c).null_count == rows]
    kinds = table.column("kind")
    runtime = _bools(_kind_is(kinds, "runtime"))
    gpu = _bools(_kind_in(kinds, GPU_KINDS))
    first = int(gpu.sum())
    if not runtime.any():
        if gpu[:first].all():  # (every file this reader wrote batch by batch, and any single-kind trace)
            return table.drop_columns(empty), None
        return table.drop_columns(empty).take(_gpu_first(gpu, runtime)), None
    # Text dictionary-encoded before the split, not after: the filter then copies int32 codes, not
    # the names and paths, and each string is hashed once, in one pass. Each part keeps only its
    # own values after (`_first_seen`).
    table = _encode_text(table)
    # every text column is a dictionary now (an import's came as one): each part keeps its own values
    encoded = [c for c in TEXT_COLUMNS if c in table.column_names and pa.types.is_dictionary(table.column(c).type)]
    present = [c for c in HOST_COLUMNS if c in table.column_names]
    calls = table.select(present)
    # the runtime rows last (as an import stores them): each part a slice, no column copied
    tail = rows - int(runtime.sum())
    last = tail > 0 and bool(runtime[tail:].all())  # (no event left: filtered, as before)
    if last:
        calls = calls.slice(tail)
    elif not runtime.all():  # (runtime rows read alone, `_read_host`: no copy)
        calls = calls.filter(pa.array(runtime))
    host = {}
    for c in HOST_COLUMNS:
        col = calls.column(c) if c in present else pa.nulls(calls.num_rows, pa.string() if c in ("name", "op")
                                                               else pa.int64())
        if c in ("name", "op"):
            col = col.cast(pa.string()).dictionary_encode() if not pa.types.is_dictionary(col.type) else col
            col = _first_seen(col) if c in encoded else col
            host[c] = col.to_pandas()
        elif c in ("start_ns", "dur_ns"):  # never null once validated
            host[c] = pd.Series(_int64_numpy(col))
        else:
            host[c] = col.to_pandas(types_mapper=_PANDAS_TYPES)
    del calls
    events = table.drop_columns(empty)
    kept = gpu[~runtime]
    if kept[:int(kept.sum())].all():  # GPU rows first already
        events = events.slice(0, tail) if last else events.filter(pa.array(~runtime))
    else:
        events = events.take(_gpu_first(gpu, runtime))
    for c in encoded:
        if c in events.column_names:
            events = events.set_column(events.column_names.index(c), c, _first_seen(events.column(c)))
    return events, pd.DataFrame(host)


def _encode_text(table: pa.Table) -> pa.Table:
    """The table with its plain-text `TEXT_COLUMNS` dictionary-encoded."""
    for c in TEXT_COLUMNS:
        if c in table.column_names and not pa.types.is_dictionary(table.column(c).type) \
                and _is_text(table.column(c).type):
            table = table.set_column(table.column_names.index(c), c,
                                     table.column(c).cast(pa.string()).dictionary_encode())
    return table


def _first_seen(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column encoded over more rows than it holds now, as `dictionary_encode` of its
    own values makes it: the values it holds only, in order of first appearance (so the categories,
    and all that follows their order, are those of encoding after the split)."""
    import pyarrow.compute as pc

    col = col.unify_dictionaries()
    if not col.num_chunks:
        return col
    dictionary = col.chunk(0).dictionary
    codes = np.concatenate([pc.fill_null(c.indices, -1).to_numpy(zero_copy_only=False) for c in col.chunks]).astype(np.int64)
    used, new = by_first_seen(codes, len(dictionary))  # (the filter kept the rows' order)
    # codes in that order already: the dictionary cut after the last one used, not copied
    values = dictionary.slice(0, len(used)) if new is codes else dictionary.take(pa.array(used))
    new = new.astype(np.int32)
    indices = pa.array(new, type=pa.int32(), mask=new < 0)
    return pa.chunked_array([pa.DictionaryArray.from_arrays(indices, values)])


def _bools(mask: pa.ChunkedArray) -> np.ndarray:
    return mask.to_numpy() if mask.num_chunks else np.zeros(0, dtype=bool)


def _gpu_first(gpu: np.ndarray, runtime: np.ndarray) -> pa.Array:
    """The positions of the rows that are not runtime calls: the GPU rows, then the others."""
    return pa.array(np.concatenate([np.flatnonzero(gpu), np.flatnonzero(~gpu & ~runtime)]))


def _kind_is(kind: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    """`kind == value` (null: False); see `_kind_in`."""
    return _kind_in(kind, (value,))


def _kind_in(kind: pa.ChunkedArray, values: tuple[str, ...]) -> pa.ChunkedArray:
    """Whether `kind` is one of `values` (null: False), on the dictionary codes when the column is
    dictionary-encoded (one comparison per distinct kind, not a million string compares)."""
    import pyarrow.compute as pc

    wanted = pa.array(values, type=pa.string())
    if not pa.types.is_dictionary(kind.type):
        return pc.fill_null(pc.is_in(pc.cast(kind, pa.string()), value_set=wanted), False)
    chunks = []
    for chunk in kind.chunks:
        hit = pc.is_in(chunk.dictionary.cast(pa.string()), value_set=wanted)  # per distinct value
        chunks.append(pc.fill_null(pc.take(hit, chunk.indices), False))
    return pa.chunked_array(chunks, type=pa.bool_())


_PARTITION_DIR = re.compile(r"^[^=/]+=[^/]*$|rank", re.IGNORECASE)


def parquet_files(path: Path) -> list[Path]:
    """The .parquet files of a run directory: directly in it, or one level down in partition
    directories (`rank=0/`, `rank_1/`, hive-style `key=value/`). Never a walk of the whole tree:
    `rooftop report /` must not read the file system, nor unreadable corners of it like /proc."""
    def listing(d: Path) -> list[Path]:
        try:
            return sorted(e for e in d.iterdir() if not e.name.startswith("."))
        except OSError:
            return []

    found = []
    for e in listing(path):
        try:
            if e.suffix == ".parquet" and e.is_file():
                found.append(e)
            elif _PARTITION_DIR.search(e.name) and e.is_dir():
                found += [f for f in listing(e) if f.suffix == ".parquet" and f.is_file()]
        except OSError:
            continue
    return sorted(found)


def _rank_files(path: Path) -> list[tuple[int | None, Path]]:
    files = parquet_files(path)
    out = []
    for f in files:
        check_input(f, allow_dir=False)  # permission denied names the file (not "cannot be read")
        rel = f.relative_to(path).as_posix()
        m = _RANK_RE.search(rel)
        out.append((int(m.group(1)) if m and len(m.group(1)) <= 9 else None, f))
    return out


class NotOneRun(TraceError):
    """A directory whose traces are not the ranks of one run: open one of `files` instead.
    `message` replaces the generic sentence where the problem is more precise (a duplicate rank)."""

    def __init__(self, path: Path, files: list[Path], why: str, message: str | None = None):
        self.files, self.why = files, why
        names = [f.relative_to(path).as_posix() for f in files]
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        super().__init__(path, message or f"holds {len(files)} traces that are not one multi-rank run ({why}): {shown}",
                         "open or report one of them")


def _duplicate_rank(path: Path, ranks: list, files: list[Path]) -> None:
    """Two files claiming one rank are two runs (or a copy) mixed in one directory: never merged."""
    seen: dict = {}
    for r, f in zip(ranks, files):
        if r in seen:
            a, b = (x.relative_to(path).as_posix() for x in (seen[r], f))
            why = f"rank {r} appears twice"
            raise NotOneRun(path, files, why, f"{why} ({a} and {b}): a duplicate rank is not one multi-rank run")
        seen[r] = f


def _run_identity(meta: Mapping[str, Any]) -> str:
    """What names the run a rank file belongs to: the model and the workload (not the device or the
    time, which differ between ranks of one run)."""
    import json

    model = meta.get("model") if isinstance(meta.get("model"), dict) else {}
    return json.dumps({"model": model.get("name"), "workload": meta.get("workload")}, sort_keys=True, default=str)


def run_files(path: Path) -> list[tuple[int | None, Path]]:
    """The (rank, file) pairs of a directory that is one run: a single trace; rank folders
    (`rank=0/`, `rank_1/`); or files whose metadata name the same run (model, workload) and distinct
    ranks (from the name or the metadata). Any other directory raises `NotOneRun`, naming its files."""
    files = _rank_files(path)
    if len(files) <= 1:
        return files
    ranks = [r for r, _ in files]
    in_folders = all(r is not None and "/" in f.relative_to(path).as_posix() for r, f in files)
    if in_folders and len(set(ranks)) == len(ranks):
        return files
    metas = []
    for _, f in files:
        try:
            metas.append(_parse_meta(f, pq.read_schema(f).metadata))
        except (TraceError, pa.ArrowException, OSError):
            raise NotOneRun(path, [f for _, f in files], f"{f.name} cannot be read") from None
    ranks = [r if r is not None else _small_int(m.get("rank"), default=-1) if "rank" in m else None
             for (r, _), m in zip(files, metas)]
    if len({_run_identity(m) for m in metas}) > 1:
        raise NotOneRun(path, [f for _, f in files], "their metadata name different runs")
    if any(r is None for r in ranks):
        raise NotOneRun(path, [f for _, f in files], "no distinct rank for each")
    _duplicate_rank(path, ranks, [f for _, f in files])
    return [(r, f) for r, (_, f) in zip(ranks, files)]


# Names of trace files any reader takes (the importers decide by content; this only lists them).
TRACE_SUFFIXES = (".parquet", ".json", ".json.gz", ".sqlite", ".ncu-rep", ".csv", ".nsys-rep")


def check_run_directory(path: str | os.PathLike, header_rank: Callable[[Path], int | None] | None = None) -> None:
    """Raise `NotOneRun` unless the directory is one run: its Parquet files pass `run_files`, or,
    holding other traces (Kineto JSON, ...), each of them names a distinct rank: in its header
    (`header_rank`, the readers' look at a file's `distributedInfo`), else in its name (`rank0`)."""
    path = Path(path)
    if parquet_files(path):
        run_files(path)
        return
    try:
        files = sorted(f for f in path.iterdir()
                       if not f.name.startswith(".") and f.name.lower().endswith(TRACE_SUFFIXES) and f.is_file())
    except OSError:
        return  # the reader that follows says what is wrong with the directory
    if len(files) <= 1:
        return
    ranks = [header_rank(f) if header_rank is not None else None for f in files]
    ranks = [r if r is not None else int(m.group(1)) if (m := _RANK_RE.search(f.name)) and len(m.group(1)) <= 9
             else None for r, f in zip(ranks, files)]
    if None in ranks:
        why = "no distinct rank in each file's header or name" if header_rank else "no distinct rank in each file's name"
        raise NotOneRun(path, files, why)
    _duplicate_rank(path, ranks, files)


def load_trace(path: str | os.PathLike, lazy_host: bool = False) -> Trace:
    """Load a trace file, or a directory of per-rank files as one multi-rank run. `lazy_host` (a
    file): the runtime rows stay on disk until `Trace.runtime_rows()` asks for them."""
    path = Path(path)
    if not path.exists():
        raise TraceError(path, "no such file or directory")
    if path.is_dir():
        return _load_dir(path)
    # handed over in a list that `_trace_from` empties: no frame here keeps the table as read
    # alive once its runtime rows are split off (it is the biggest thing a load allocates)
    trace = _trace_from(list(_read_file(path, skip_runtime=lazy_host)), path)
    if lazy_host and trace.host is None:
        trace.load_host = lambda: _read_host(path, trace.warnings)
    return trace


def _read_host(path: Path, warnings: list[str]) -> pd.DataFrame | None:
    """The runtime rows of a file, as `split_runtime` makes them, read alone (six columns, filtered
    row group by row group), their text scrubbed like every other. Rows without a start, or with a
    negative duration, are left out; a file that can no longer be read gives None, and a warning."""
    import pyarrow.compute as pc

    try:
        names = pq.ParquetFile(path).schema_arrow.names
        if "kind" not in names:
            return None
        columns = [c for c in dict.fromkeys([*REQUIRED, *HOST_COLUMNS]) if c in names]  # (kind is required)
        text = [c for c in ("name", "op") if c in columns]
        table = _read_filtered(pq.ParquetFile(path, read_dictionary=text), columns, "runtime", keep=True)
        if not table.num_rows:
            return None
        table, _ = conform_types(table, path)
        table, _, _ = scrub_all(table, {})
        ok = pc.and_(pc.and_(pc.is_valid(table.column("start_ns")), pc.is_valid(table.column("dur_ns"))),
                     pc.greater_equal(table.column("dur_ns"), 0))
        ok = pc.fill_null(ok, False)
        if not pc.all(ok).as_py():  # (a copy of every column only when some row goes)
            table = table.filter(ok)
        _, host = split_runtime(table)
        give_back_memory()
        return host
    except (TraceError, pa.ArrowException, OSError, ValueError, KeyError) as exc:
        warnings.append(f"runtime calls could not be read: {one_line(exc, 160)}")
        return None


def scrub(table: pa.Table, meta: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """Secrets out of every text column and every metadata string (see `scrub_all`)."""
    table, meta, _ = scrub_all(table, meta)
    return table, meta


def scrub_all(table: pa.Table, meta: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any], list[str]]:
    """The one place every load and every import goes through before anything is shown or written:
    - every text column (plain, large or dictionary strings: names, paths, ops, kinds, phases...)
      loses token-shaped and secret-assigned values (`rooftop.redact`), and text longer than the
      `ROOFTOP_MAX_TEXT` budget is cut (so no later pattern meets an absurd string);
    - the metadata: secret-named keys and secret-shaped strings, at any depth; absolute source
      paths become the file's name.
    Each distinct value is looked at once, and a C-level (RE2) gate leaves untouched the values
    that cannot hold a secret. Returns the table, the metadata and warnings."""
    cut = 0
    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if not _is_text(col.type):
            continue
        fixed, n = _scrub_column(col)
        cut += n
        if fixed is not col:
            table = table.set_column(i, name, fixed)
    warnings = [f"{cut} text value(s) longer than {limits.max_text():,} characters cut "
                f"(budget {limits.MAX_TEXT_ENV})"] if cut else []
    return table, _scrub_meta(meta), warnings


def _scrub_column(col: pa.ChunkedArray) -> tuple[pa.ChunkedArray, int]:
    import pyarrow.compute as pc

    from ..redact import GATE, redact_text

    if col.num_chunks == 0 or len(col) == 0:
        return col, 0
    was_dict = pa.types.is_dictionary(col.type)
    if was_dict:
        col = col.unify_dictionaries()
        values = col.chunk(0).dictionary
        chunks = col.chunks
    else:
        encoded = col.dictionary_encode().unify_dictionaries()
        values = encoded.chunk(0).dictionary
        chunks = encoded.chunks
    if len(values) == 0:
        return col, 0
    cap = limits.max_text()
    too_long = pc.greater(pc.utf8_length(values), cap)
    suspect = pc.or_(pc.match_substring_regex(values, GATE.removeprefix("(?i)"), ignore_case=True), too_long)
    hits = pc.indices_nonzero(pc.fill_null(suspect, False)).to_pylist()
    if not hits:
        return col, 0
    texts = values.to_pylist()
    cut = 0
    for j in hits:
        t = texts[j]
        if t is None:
            continue
        if len(t) > cap:
            t = t[: cap - 1] + "…"
            cut += 1
        texts[j] = redact_text(t)
    new_values = pa.array(texts, type=values.type)
    out = pa.chunked_array([pc.take(new_values, c.indices) for c in chunks], type=values.type)
    if was_dict:  # re-encoded: two names may have become one ("k_[redacted]")
        return out.dictionary_encode().cast(col.type), cut
    return out.cast(col.type), cut


_PATH_KEYS = ("file", "path", "src", "source", "input", "report", "trace")


def _scrub_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    from ..redact import redact

    meta = redact(dict(meta))
    source = meta.get("source")
    if isinstance(source, dict):
        for k in _PATH_KEYS:
            v = source.get(k)
            if isinstance(v, str) and (v.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", v)):
                source[k] = re.split(r"[\\/]", v.rstrip("/\\"))[-1] or None  # the name, not where it lived
    return meta


def trace_from_table(table: pa.Table, meta: dict[str, Any], path: str | os.PathLike | None = None,
                     scrubbed: bool = False) -> Trace:
    """A `Trace` from an in-memory table (a file just read, or an import converted on the fly):
    validated, untimed rows dropped with a warning, optional columns added as nulls. `scrubbed`:
    the table and metadata already went through `scrub_all` (an import about to be written),
    which would change nothing a second time."""
    held = [table, meta]
    del table
    return _trace_from(held, path, scrubbed)


def trace_from_handover(held: list, path: str | os.PathLike | None = None, scrubbed: bool = False,
                        unread: tuple[str, ...] = ()) -> Trace:
    """`trace_from_table` of `held` = [table, meta], which it empties (the caller keeps no other
    reference to the table, which is then freed once converted). `unread`: columns the caller
    will not look at, null in the trace rather than converted."""
    return _trace_from(held, path, scrubbed, unread)


def _trace_from(held: list, path: str | os.PathLike | None, scrubbed: bool = False, unread: tuple[str, ...] = ()) -> Trace:
    """`trace_from_table` of `held` = [table, meta], which it empties, so that each step can drop
    the table it replaced (the caller keeps no reference)."""
    table, meta = held
    held.clear()
    table, warnings = _validate(table, path)
    if scrubbed:
        meta = json_safe(meta, path)
    else:
        table, meta, found = scrub_all(table, json_safe(meta, path))
        warnings += found
        give_back_memory()  # (the dictionaries it unified: ~90 MB of pages at 1M kernels)
    meta, meta_warnings = conform_meta(meta)
    warnings += meta_warnings
    table, dropped = _drop_untimed(table, path)
    table, host = split_runtime(table)
    rank = table.column("rank") if "rank" in table.column_names else None
    held.append(table.drop_columns([c for c in unread if c in table.column_names]) if unread else table)
    del table
    events = _to_frame(held)  # (it adds the schema columns the file left out)
    if rank is not None:
        events["rank"] = rank.to_pandas().astype("Int32")
    give_back_memory()
    meta = {**meta, "format": meta.get("format", FORMAT_VERSION)}
    return Trace(events, meta, str(path) if path is not None else None,
                 warnings + dropped + list(meta.get("warnings") or []), host)


def _small_int(v: Any, default: int) -> int:
    ok = isinstance(v, int) and not isinstance(v, bool) and -(2 ** 31) <= v < 2 ** 31
    return v if ok else default


def _load_dir(path: Path) -> Trace:
    files = run_files(path)
    if not files:
        raise TraceError(path, "directory holds no .parquet trace files")
    frames, metas, warnings, hosts = [], [], [], []
    for i, (rank, f) in enumerate(files):
        table, meta = _read_file(f)
        table, checked = _validate(table, f)
        table, meta, scrubbed = scrub_all(table, meta)
        warnings += checked + scrubbed
        table, dropped = _drop_untimed(table, f)
        warnings += dropped
        table, host = split_runtime(table)
        held = [table]
        del table
        frame = _to_frame(held)  # (it adds the schema columns the file left out, from one row)
        r = rank if rank is not None else _small_int(meta.get("rank"), default=i)
        frame["rank"] = pd.array([r] * len(frame), dtype="Int32")
        frames.append(frame)
        if host is not None:
            hosts.append(host.assign(rank=pd.array([r] * len(host), dtype="Int32")))
        metas.append(meta)
    events = pd.concat(frames, ignore_index=True)
    meta, meta_warnings = conform_meta(metas[0])
    warnings += meta_warnings
    meta["ranks"] = [{"rank": int(fr["rank"].iloc[0]) if len(fr) else None, "file": str(f.relative_to(path)),
                      "device": m.get("device")} for fr, m, (_, f) in zip(frames, metas, files)]
    host = pd.concat(hosts, ignore_index=True) if hosts else None
    return Trace(events, meta, str(path), warnings, host)


def read_meta(path: str | os.PathLike, without: tuple[str, ...] = (), footer: Any = None) -> dict[str, Any]:
    """Only the metadata document (cheap: reads the footer), less the top-level keys `without`.
    `footer`: the file's `rooftop.footer.read_footer`, when the caller has it already."""
    path = Path(path)
    if path.is_dir():
        files = run_files(path)
        if not files:
            raise TraceError(path, "directory holds no .parquet trace files")
        path = files[0][1]
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file")
    from ..footer import read_footer

    if footer is None:
        footer = read_footer(path)  # pure Python, a few ms; pyarrow copies the whole footer (the summary too)
    if footer is not None:
        return _parse_meta(path, footer.metadata, without)
    try:
        return _parse_meta(path, pq.read_schema(path).metadata, without)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(path, f"truncated or corrupt Parquet: {one_line(exc, 160)}") from None
