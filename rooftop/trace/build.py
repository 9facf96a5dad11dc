"""Building a v1 table from rows: missing columns become null, derived columns are filled."""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from .schema import SCHEMA


def _as_frame(events: pd.DataFrame | pa.Table | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    if isinstance(events, pd.DataFrame):
        return events
    if isinstance(events, pa.Table):
        return events.to_pandas()
    return pd.DataFrame(list(events))


def _column(frame: pd.DataFrame, name: str, typ: pa.DataType, n: int) -> pa.Array:
    if name not in frame.columns:
        return pa.nulls(n, type=typ)
    col = frame[name]
    if pa.types.is_dictionary(typ):
        arr = pa.array(col.astype(object).where(col.notna(), None), type=pa.string(), from_pandas=True)
        return arr.dictionary_encode().cast(typ)
    if pa.types.is_fixed_size_list(typ):
        values = [None if v is None or (isinstance(v, float) and math.isnan(v)) else [int(x) for x in v]
                  for v in col.tolist()]
        return pa.array(values, type=typ)
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


def to_table(events: pd.DataFrame | pa.Table | Iterable[Mapping[str, Any]], fill_derived: bool = True) -> pa.Table:
    """Conform rows to the v1 schema: missing columns become null, derived columns are filled.

    `fill_derived` computes `short_name`, `category`, `phase`, `step` and `layer` where the
    producer left them null. Every row's `name` is demangled here (Itanium `_Z...` symbols, as CUPTI
    reports some kernels), so every importer stores C++ names; short names are made unique within
    the table (two different kernels never share one).
    """
    from ..names import categorize, demangle_all, short_names
    from ..steps import OUTSIDE_STEPS, parse_paths

    frame = _as_frame(events).copy()
    n = len(frame)
    if "id" not in frame.columns or frame["id"].isna().all():
        frame["id"] = np.arange(n, dtype="int64")
    if n and "name" in frame.columns:
        frame["name"] = demangle_all(frame["name"])
    if fill_derived and n:
        if "name" in frame.columns:
            frame["name"] = frame["name"].astype(object).where(frame["name"].notna(), "")
            given = frame["short_name"] if "short_name" in frame.columns else None
            frame["short_name"] = short_names(frame["name"], given)
        if "category" not in frame.columns or frame["category"].isna().any():
            cat = frame["category"].astype(object) if "category" in frame.columns else pd.Series(None, index=frame.index, dtype=object)
            need = cat.isna()
            cat[need] = categorize(frame.loc[need, "name"], frame.loc[need, "op"] if "op" in frame.columns else None,
                                   frame.loc[need, "kind"] if "kind" in frame.columns else None)
            frame["category"] = cat
        if "path" in frame.columns:
            parsed = parse_paths(frame["path"])
            for c in ("phase", "step", "layer"):
                if c not in frame.columns:
                    frame[c] = parsed[c]
                else:
                    cur = frame[c]
                    if c == "phase":
                        frame[c] = cur.astype(object).where(cur.notna(), parsed[c])
                    else:
                        frame[c] = _fill_int(cur, parsed[c])
            # work the importer found outside every step window is no step, whatever its launch path says
            outside = frame["phase"].isin(OUTSIDE_STEPS).to_numpy()
            if outside.any():
                frame["step"] = frame["step"].mask(outside)
    arrays = [_column(frame, f.name, f.type, n) for f in SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=SCHEMA)
    if "rank" in frame.columns:
        table = table.append_column("rank", _column(frame, "rank", pa.int32(), n))
    return table


def _fill_int(cur: pd.Series, fallback: pd.Series) -> pd.Series:
    cur = pd.array(pd.to_numeric(cur, errors="coerce"), dtype="Int32")
    out = pd.Series(cur, index=fallback.index)
    return out.where(out.notna(), fallback)
