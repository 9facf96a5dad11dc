"""What a frame's columns show in a table: `Col` (one displayed column), the display values
(`display_table`), what `FrameBackend` formats a cell from (`frame_cells`: codes and cleaned distinct
text, or one float array and how it reads), and names cut to a width without two reading alike.
Cells keep their numeric types (so a sort is numeric and a million rows never pass through Python
formatting); units live in the headers. Text cells are sanitized: names from traces are data."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tui.widgets.frame_backend import MAX_DIGITS, NumberCells, TextCells, round_cells
from tui.widgets.text import sanitize, sanitize_series
from rooftop.present.apart import fit_apart
from rooftop.present.text import has_unsafe


@dataclass(frozen=True)
class Col:
    """One displayed column: `key` in the frame, `label` with its unit, how to show the values."""

    key: str
    label: str
    kind: str = "num"  # text | int | num | ns (shown in µs) | pct (0..1 shown as %) | mb (bytes shown in MB)
    digits: int = 1
    lower: str | None = None  # a boolean frame column: where true, the value is a lower bound (`>=x`)


def _numeric(values: pd.Series) -> pd.Series:
    return pd.to_numeric(values, errors="coerce").astype("float64")


def fit_unique(names: list[str], width: int) -> dict[str, str]:
    """Each name longer than `width` cut to it, keeping the whole words that tell it from the names
    most like it (`rooftop.present.apart.fit_apart`: `sm90_xmma_gemm…tilesize128…`). Where two cuts still
    read alike, those keep their tail instead, `head…tail`, with the shortest tail that tells them
    apart: no two rows show the same text."""
    names = list(dict.fromkeys(names))
    if width < 5:
        return {}
    cut = fit_apart(names, width)
    if not cut:
        return {}
    seen: dict[str, list[str]] = {}
    for n, c in cut.items():
        seen.setdefault(c, []).append(n)
    taken = {n for n in names if len(n) <= width} | {c for c, group in seen.items() if len(group) == 1}
    for group in (g for c, g in seen.items() if len(g) > 1 or c in {n for n in names if len(n) <= width}):
        for tail in range(4, width - 4):
            head = width - 1 - tail
            trial = {n: n[:head] + "…" + n[-tail:] for n in group}
            if len(set(trial.values())) == len(group) and not set(trial.values()) & taken:
                cut.update(trial)
                taken |= set(trial.values())
                break
    return cut


def _text_array(s: pd.Series, fit: int | None = None) -> pa.Array:
    """Sanitized strings. A categorical column (names and paths from a trace) is cleaned once per
    category and stays dictionary-encoded: a million rows hold a few thousand distinct names.
    `fit`: cut to that many characters, keeping distinct names distinct (see `fit_unique`)."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        clean = sanitize_series(pd.Series(s.cat.categories, dtype=object))
        if fit:
            clean = clean.replace(fit_unique([c for c in clean if isinstance(c, str)], fit))
        codes = s.cat.codes.to_numpy()
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), pa.array(clean, type=pa.string()))
    clean = sanitize_series(s.astype(object))
    if fit:
        cut = fit_unique([c for c in pd.unique(clean) if isinstance(c, str)], fit)
        if cut:
            clean = clean.map(lambda v: cut.get(v, v) if isinstance(v, str) else v)
    return pa.array(clean, type=pa.string())


# The table prints a float with Python's `n` format (6 significant digits, then an exponent): a
# value from a million up reads `1.23457e+06`, and one that rounds to nothing reads `0`.
BIG = 1e6
# What a column kind's values are multiplied by to read in its header's unit: ns as µs, a 0..1
# share as %, bytes as MB.
_SCALE = {"ns": 1e-3, "pct": 100.0, "mb": 1e-6}


def _number_format(values: np.ndarray, digits: int) -> tuple[str, int]:
    """How a column of numbers reads: ("round", d): each value rounded to d digits, or to two
    significant digits if it is non-zero and too small for d (`round_cells`: 81.4 and 0.076 in one
    column, never `0`, never 81.4109); ("int", 0) whole numbers (a column reaching a million);
    ("fixed", d) text with d decimals, for a column whose smallest non-zero value would otherwise
    print with an exponent (`7.97e-05`). Decided once per column, over all its rows, from two
    reductions."""
    mag = np.abs(values)
    with np.errstate(invalid="ignore"):
        small = mag[(mag > 0) & (mag < 0.5 * 10.0 ** -digits)]
    top = np.nanmax(mag) if len(mag) and not np.isnan(mag).all() else np.nan
    if len(small) and (small.min() < 1e-4 or top >= BIG):
        return "fixed", min(MAX_DIGITS, max(digits, 1 - int(np.floor(np.log10(small.min())))))
    if top >= BIG:
        return "int", 0
    return "round", digits


def _number_array(values: pd.Series, digits: int) -> pa.Array:
    """Numbers as the table shows them (see `_number_format`). Sorting reads the frame, not these
    cells, so it stays numeric either way."""
    arr = values.to_numpy(dtype="float64", na_value=np.nan)
    how, d = _number_format(arr, digits)
    if how == "fixed":
        text = np.char.mod(f"%.{d}f", np.where(np.isnan(arr), 0.0, arr)).astype(object)
        text[np.isnan(arr)] = None
        return pa.array(text, type=pa.string())
    if how == "int":
        return pa.array(values.round().astype("Int64"), type=pa.int64(), from_pandas=True)
    return pa.array(round_cells(arr, d), type=pa.float64(), mask=np.isnan(arr))


def display_table(frame: pd.DataFrame, cols: list[Col], order: np.ndarray | None = None,
                  fit: dict[str, int] | None = None) -> pa.Table:
    """The frame's columns as display values (still typed), named by their labels, rows in `order`
    (positions in the frame; None: as they are). Only the shown columns are touched. `fit`: text
    columns to cut to a width, distinct values kept distinct."""
    arrays = []
    for c in cols:
        s = frame[c.key] if c.key in frame.columns else pd.Series([None] * len(frame), index=frame.index)
        if c.kind == "text":
            arrays.append(_text_array(s, (fit or {}).get(c.key)))
        elif c.kind == "int":
            arrays.append(pa.array(_numeric(s).round().astype("Int64"), type=pa.int64(), from_pandas=True))
        else:
            scale = _SCALE.get(c.kind, 1.0)
            arrays.append(_number_array(_numeric(s) * scale, c.digits))
    table = pa.Table.from_arrays(arrays, names=[c.label for c in cols])
    return table if order is None else table.take(pa.array(order))


def _clean_labels(uniques) -> list[str | None]:
    """Distinct values as printable text (None for a missing one). One scan of them all joined
    decides whether any needs cleaning: 200k distinct range paths are cleaned in one C-level
    search, not 200k Python calls, when none holds a control character (the usual case)."""
    values = pd.Index(uniques).astype(object).tolist() if not isinstance(uniques, list) else uniques
    values = [v if isinstance(v, str) or v is None else (None if v != v else str(v)) for v in values]
    present = [v for v in values if v is not None]
    if has_unsafe(" ".join(present)):
        return [sanitize(v) if v is not None else None for v in values]
    return values


def frame_cells(frame: pd.DataFrame, cols: list[Col], fit: dict[str, int] | None = None) -> list:
    """Per shown column, what `FrameBackend` formats a cell from (the same values `display_table`
    holds, without building them for every row): codes and cleaned distinct text, or one float
    array and how it reads. A million rows cost an array per numeric column, no strings."""
    out = []
    for c in cols:
        s = frame[c.key] if c.key in frame.columns else pd.Series([None] * len(frame), index=frame.index)
        if c.kind == "text":
            codes, uniques = _codes(s)
            labels = _clean_labels(uniques)
            width = (fit or {}).get(c.key)
            if width:
                cut = fit_unique([v for v in labels if v is not None], width)
                labels = [cut.get(v, v) if v is not None else None for v in labels]
            out.append(TextCells(np.asarray(codes), labels))
        elif c.kind == "int":
            out.append(NumberCells(_numeric(s).to_numpy(dtype="float64", na_value=np.nan), "int", 0))
        else:
            scale = _SCALE.get(c.kind, 1.0)
            values = _numeric(s).to_numpy(dtype="float64", na_value=np.nan)
            if scale != 1.0:
                values = values * scale
            how, digits = _number_format(values, c.digits)
            lower = (frame[c.lower].to_numpy(dtype=bool, na_value=False)
                     if c.lower is not None and c.lower in frame.columns else None)
            out.append(NumberCells(values, how, digits, lower))
    return out


def _codes(values: pd.Series) -> tuple[np.ndarray, pd.Index | np.ndarray]:
    """(code per row, distinct values); code -1 is null. A categorical already has both."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(), values.cat.categories
    return pd.factorize(values.astype(object), use_na_sentinel=True)
