"""The table as read, checked against the schema: every column in its schema type (or dropped, with a
warning), impossible values refused or made unknown, rows that cannot be placed in time dropped."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from rooftop.trace.schema import NUMERIC_CHECKED, REQUIRED, SCHEMA, TraceError


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
