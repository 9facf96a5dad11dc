"""The runtime rows (host API calls) apart from the events, the GPU rows first: slices where the file stores
them in that order, else one filter; text keeps only the values each part holds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop.trace.codes import by_first_seen
from rooftop.trace.schema import GPU_KINDS, HOST_COLUMNS, REQUIRED, SCHEMA, TEXT_COLUMNS
from rooftop.trace.conform import _is_text
from rooftop.trace.frame import _int64_numpy, _PANDAS_TYPES


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
