"""Building a v1 table from rows: missing columns become null, derived columns are filled."""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop.trace.codes import by_first_seen, by_identity
from rooftop.trace.paired import built
from rooftop.trace.schema import SCHEMA


def _as_frame(events: pd.DataFrame | pa.Table | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    if isinstance(events, pd.DataFrame):
        return events
    if isinstance(events, pa.Table):
        return events.to_pandas()
    return pd.DataFrame(list(events))


def _column(frame: pd.DataFrame, name: str, typ: pa.DataType, n: int, dictionary: bool = False) -> pa.Array:
    if name not in frame.columns:
        return pa.nulls(n, type=typ)
    return _converted(frame[name], typ, dictionary)


def _converted(col: pd.Series, typ: pa.DataType, dictionary: bool = False) -> pa.Array:
    """One column of rows as the schema's Arrow type (`dictionary`: see `to_table`)."""
    if isinstance(col.dtype, pd.CategoricalDtype) and (pa.types.is_dictionary(typ) or pa.types.is_string(typ)):
        arr = _from_categories(col, typ, dictionary)
        if arr is not None:
            return arr
    if pa.types.is_dictionary(typ):
        arr = pa.array(col.astype(object).where(col.notna(), None), type=pa.string(), from_pandas=True)
        return arr.dictionary_encode().cast(typ)
    if pa.types.is_fixed_size_list(typ):
        if isinstance(col.dtype, pd.ArrowDtype):  # already lists (a Kineto import's): a cast
            try:
                return pa.array(col.array).cast(typ)
            except (pa.ArrowException, TypeError):
                pass  # not lists of three numbers after all: converted row by row, as others are
        return _shapes(col.to_numpy(dtype=object), typ)
    if pa.types.is_string(typ):
        return pa.array(col.astype(object).where(col.notna(), None), type=typ, from_pandas=True)
    if pa.types.is_floating(typ):
        return pa.array(pd.to_numeric(col, errors="coerce").astype("float64"), type=pa.float64(),
                        from_pandas=True).cast(typ)
    if pa.types.is_integer(typ):
        num = pd.to_numeric(col, errors="coerce")
        return pa.array(num.astype("Int64"), type=pa.int64(), from_pandas=True).cast(typ)
    if pa.types.is_boolean(typ):
        return pa.array(col.astype(object).where(col.notna(), None), type=typ, from_pandas=True)
    return pa.array(col, type=typ, from_pandas=True)


def _from_categories(col: pd.Series, typ: pa.DataType, dictionary: bool = False) -> pa.Array | None:
    """A categorical text column as Arrow, each distinct text converted once: what the per-row
    conversion gives (a dictionary of the values in order of first appearance), without hashing
    a million strings; a plain-text `typ` kept as that dictionary when `dictionary`. None when a
    category is no text (the per-row path then says what)."""
    # the categories present, in order of first appearance, and each row's number in that order
    # (through a table, not a hash of every row's code again: ~6x cheaper for a few hundred names;
    # code -1, a missing value, is no entry of the dictionary)
    used, local = by_first_seen(np.asarray(col.cat.codes, dtype=np.int64), len(col.cat.categories))
    try:
        values = pa.array(np.asarray(col.cat.categories, dtype=object)[used], type=pa.string(),
                          from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if values.null_count:  # a NaN category: per-row conversion (it would be null there)
        return None
    indices = pa.array(local.astype(np.int32), mask=local < 0)
    if pa.types.is_dictionary(typ) or dictionary:
        return pa.DictionaryArray.from_arrays(indices, values).cast(
            typ if pa.types.is_dictionary(typ) else pa.dictionary(pa.int32(), typ))
    return values.take(indices)


def _shape(v: Any) -> list | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else [int(x) for x in v]


def _shapes(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """Launch shapes ([x, y, z] per row, None where unknown) -> fixed-size lists, each distinct
    object converted once: importers share one list per shape, so a million rows hold a few
    hundred (converting every row took seconds at 1M kernels)."""
    if not len(values):
        return pa.array([], type=typ)
    local, first = by_identity(values)
    distinct = pa.array([_shape(v) for v in values[first].tolist()], type=typ)
    return distinct.take(pa.array(local))


def to_table(events: pd.DataFrame | pa.Table | Iterable[Mapping[str, Any]], fill_derived: bool = True,
             text_dictionaries: bool = False) -> pa.Table:
    """Conform rows to the v1 schema: missing columns become null, derived columns are filled.

    `text_dictionaries`: the plain-text columns (names, short names, paths, ops) that arrive as
    categoricals stay dictionaries, a type the readers accept for them and the writer stores as
    the schema's plain text (the same file). An import hands such a table on: its names are then
    never spelled out per row, and never hashed again by the scrub, the summary's read-back and
    the split of the host rows (over a second of hashing at 1M kernels, plus the text itself).

    `fill_derived` computes `short_name`, `category`, `phase`, `step` and `layer` where the
    producer left them null. Every row's `name` is demangled here (Itanium `_Z...` symbols, as CUPTI
    reports some kernels), so every importer stores C++ names; short names are made unique within
    the table (two different kernels never share one).
    """
    from rooftop.trace.names import categorize, demangle_all, short_names
    from rooftop.trace.steps import OUTSIDE_STEPS, parse_paths

    frame = _as_frame(events).copy(deep=False)  # columns are replaced, never written into (copy-on-write)
    n = len(frame)
    if "id" not in frame.columns or frame["id"].isna().all():
        frame["id"] = np.arange(n, dtype="int64")
    if n and "name" in frame.columns:
        frame["name"] = demangle_all(frame["name"])
    if fill_derived and n:
        if "name" in frame.columns:
            frame["name"] = _text_or_empty(frame["name"])
            given = frame["short_name"] if "short_name" in frame.columns else None
            frame["short_name"] = short_names(frame["name"], given)
        if "category" not in frame.columns or frame["category"].isna().all():  # (a categorical)
            frame["category"] = categorize(frame["name"], frame["op"] if "op" in frame.columns else None,
                                           frame["kind"] if "kind" in frame.columns else None)
        elif frame["category"].isna().any():
            cat = frame["category"].astype(object)
            need = cat.isna()
            cat[need] = categorize(frame.loc[need, "name"], frame.loc[need, "op"] if "op" in frame.columns else None,
                                   frame.loc[need, "kind"] if "kind" in frame.columns else None).astype(object)
            frame["category"] = cat
        if "path" in frame.columns:
            # the phase and step only where the producer left them null; the layer everywhere
            full = None
            if "phase" in frame.columns and "step" in frame.columns:
                full = (frame["phase"].isna() | frame["step"].isna()).to_numpy(dtype=bool)
            parsed = parse_paths(frame["path"], full)
            for c in ("phase", "step", "layer"):
                if c not in frame.columns:
                    frame[c] = parsed[c]
                else:
                    cur = frame[c]
                    if c == "phase":
                        frame[c] = _fill_text(cur, parsed[c])
                    else:
                        frame[c] = _fill_int(cur, parsed[c])
            # work the importer found outside every step window is no step, whatever its launch path says
            outside = frame["phase"].isin(OUTSIDE_STEPS).to_numpy()
            if outside.any():
                frame["step"] = frame["step"].mask(outside)
    # columns the producer left out: one all-null array per type, shared (Arrow arrays are
    # immutable), not one each: millions of rows of ~25 counter and stall columns otherwise
    nulls: dict = {}

    def null(typ: pa.DataType) -> pa.Array:
        if typ not in nulls:
            nulls[typ] = pa.nulls(n, type=typ)
        return nulls[typ]
    # the producer's columns converted two at a time (`rooftop.trace.paired`): Arrow and NumPy do most of
    # it without the GIL. Each Series is taken from the frame here, on one thread.
    given = {f.name: (frame[f.name], f.type) for f in SCHEMA if f.name in frame.columns}
    done = built({c: (lambda col=col, typ=typ: _converted(col, typ, text_dictionaries)) for c, (col, typ) in given.items()})
    arrays = [done[f.name] if f.name in done else null(f.type) for f in SCHEMA]
    schema = pa.schema([f.with_type(a.type) if pa.types.is_dictionary(a.type) and pa.types.is_string(f.type) else f
                        for f, a in zip(SCHEMA, arrays)], metadata=SCHEMA.metadata)
    table = pa.Table.from_arrays(arrays, schema=schema)
    if "rank" in frame.columns:
        table = table.append_column("rank", _column(frame, "rank", pa.int32(), n))
    return table


def _text_or_empty(col: pd.Series) -> pd.Series:
    """Missing names as "" (a categorical stays one: its rows are not turned into objects)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        if not col.isna().any():
            return col
        if "" not in col.cat.categories:
            col = col.cat.add_categories([""])
        return col.fillna("")
    return col.astype(object).where(col.notna(), "")


def _fill_text(cur: pd.Series, fallback: pd.Series) -> pd.Series:
    """`cur` where present, else `fallback`; two categoricals stay one (no Python object per row)."""
    if not (isinstance(cur.dtype, pd.CategoricalDtype) and isinstance(fallback.dtype, pd.CategoricalDtype)):
        return cur.astype(object).where(cur.notna(), fallback.astype(object))
    cats = cur.cat.categories.append(fallback.cat.categories).unique()

    def codes(col: pd.Series) -> np.ndarray:  # into `cats`; -1 stays -1 (missing)
        return np.append(cats.get_indexer(col.cat.categories), -1)[np.asarray(col.cat.codes)]
    mine = codes(cur)
    return pd.Series(pd.Categorical.from_codes(np.where(mine >= 0, mine, codes(fallback)), categories=cats),
                     index=cur.index)


def _fill_int(cur: pd.Series, fallback: pd.Series) -> pd.Series:
    cur = pd.array(pd.to_numeric(cur, errors="coerce"), dtype="Int32")
    out = pd.Series(cur, index=fallback.index)
    return out.where(out.notna(), fallback)
