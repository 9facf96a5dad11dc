"""The Arrow table as the pandas frame a `Trace` holds: a column at a time, text as categoricals, empty
columns as one repeated null, launch shapes shared; the memory given back as it goes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop import heap
from rooftop.trace.schema import NUMERIC_CHECKED, SCHEMA, TEXT_COLUMNS
from rooftop.trace.conform import _is_text


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
