"""A textual-fastdatatable backend that reads a pandas frame through a row order, cell by cell.

The widget asks its backend for the rows it paints (a screenful, cached) and for each column's
widest value once. The Arrow backend answers from a table of every display value, built up front:
at 1M raw launches that is a million-row Arrow table, its sorted copy, and a cast of every name to
text to measure it (far above the TUI's memory budget). This one keeps, per shown column, what a cell needs
(category codes and each distinct cleaned name; numbers as one float array) and formats a cell
when the widget asks for it: cost follows the rows on screen, not the rows in the frame.

Cells hold the same values the Arrow backend would return (rounded floats, ints, text), and
widths are measured by the library's own rules (numbers: the widest of the column's min and max,
nulls as 0; text: every distinct value shown), so a table looks the same either way.
"""
from __future__ import annotations

from typing import Any, Iterable, Literal, Sequence

import numpy as np
import pandas as pd
from textual_fastdatatable.backend import DataTableBackend
from textual_fastdatatable.format import measure_width


MAX_DIGITS = 9  # decimals a cell ever shows


def round_cells(values: np.ndarray, digits: int) -> np.ndarray:
    """Each value rounded to `digits` decimals, or, when non-zero and too small for them, to two
    significant digits (see table._number_format)."""
    mag = np.abs(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.clip(1 - np.floor(np.log10(mag)), digits, MAX_DIGITS)
        small = (mag > 0) & (mag < 0.5 * 10.0 ** -digits)
    if not small.any():
        return np.round(values, digits)
    scale = 10.0 ** np.where(small, own, digits)
    return np.round(values * scale) / scale


class _Cells:
    """A column's cells; `width(order, markup)` of the subclass, and of all rows computed once."""

    def __init__(self) -> None:
        self._whole: dict[bool, int] = {}

    def width(self, order: np.ndarray | None, markup: bool) -> int:
        raise NotImplementedError

    def whole_width(self, markup: bool) -> int:
        """`width` of every row (any order of them all), computed once."""
        if markup not in self._whole:
            self._whole[markup] = self.width(None, markup)
        return self._whole[markup]


class TextCells(_Cells):
    """Codes into distinct display strings (-1: null)."""

    def __init__(self, codes: np.ndarray, labels: list) -> None:
        super().__init__()
        self.codes, self.labels = codes, labels
        self._label_widths: dict[bool, np.ndarray] = {}

    @property
    def rows(self) -> int:
        return len(self.codes)

    def label_widths(self, markup: bool) -> np.ndarray:
        """Cells each distinct value takes. Arrow counts the one-byte-per-character values (most
        names; 200k distinct range paths at 1M launches would take seconds through Rich); the
        rest, and any `[` when markup is on, are measured as the widget renders them."""
        if markup not in self._label_widths:
            import pyarrow as pa
            import pyarrow.compute as pc

            arr = pa.array(self.labels, type=pa.string())
            chars = pc.utf8_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            odd = pc.not_equal(pc.binary_length(arr), pc.utf8_length(arr))
            if markup:
                odd = pc.or_(odd, pc.match_substring(arr, "["))
            for i in np.flatnonzero(odd.fill_null(False).to_numpy(zero_copy_only=False)):
                chars[i] = measure_width(self.labels[i], render_markup=markup)
            self._label_widths[markup] = chars
        return self._label_widths[markup]

    def value(self, pos: int) -> Any:
        code = int(self.codes[pos])
        return None if code < 0 else self.labels[code]

    def values_at(self, pos: np.ndarray) -> list:
        """`value` of each position."""
        labels = self.labels
        return [None if c < 0 else labels[c] for c in self.codes[pos].tolist()]

    def width(self, order: np.ndarray | None, markup: bool) -> int:
        codes = self.codes if order is None else self.codes[order]
        if not len(codes):
            return 0
        used = np.bincount(codes.astype(np.int64) + 1, minlength=len(self.labels) + 1)[1:] > 0
        widths = self.label_widths(markup)[used]
        return int(widths.max()) if len(widths) else 0


class NumberCells(_Cells):
    """One float array; `how` says how a value reads (see table._number_format): rounded to
    `digits`, whole, or fixed-point text."""

    def __init__(self, values: np.ndarray, how: str, digits: int, lower: np.ndarray | None = None) -> None:
        super().__init__()
        self.values, self.how, self.digits = values, how, digits
        # rows whose value is a lower bound (a rate over part of the time): shown `>=x`, right-aligned
        self.lower = lower if lower is not None and lower.any() else None

    def _bounded(self, pos, shown: list) -> list:
        """`shown` (the values at `pos`) with each lower bound as `>=x`, aligned as numbers are."""
        if self.lower is None:
            return shown
        from rich.text import Text

        low = self.lower[pos].tolist()
        return [Text(f">={v:n}" if not isinstance(v, str) else f">={v}", justify="right") if lo and v is not None
                else v for v, lo in zip(shown, low)]

    @property
    def rows(self) -> int:
        return len(self.values)

    def _shown(self, x: float) -> Any:
        if np.isnan(x):
            return None
        if self.how == "int":
            return int(np.round(x))
        if self.how == "fixed":
            return f"%.{self.digits}f" % x
        return float(round_cells(np.array([x]), self.digits)[0])

    def value(self, pos: int) -> Any:
        return self._bounded(np.array([pos]), [self._shown(float(self.values[pos]))])[0]

    def values_at(self, pos: np.ndarray) -> list:
        return self._bounded(pos, self._values_at(pos))

    def _values_at(self, pos: np.ndarray) -> list:
        """`value` of each position, rounded in one call (`round_cells` of an array rounds each value
        as it rounds that value alone)."""
        vals = self.values[pos]
        nan = np.isnan(vals).tolist()
        if self.how == "fixed":
            return [None if n else f"%.{self.digits}f" % v for v, n in zip(vals.tolist(), nan)]
        if self.how == "int":
            return [None if n else int(v) for v, n in zip(np.round(vals).tolist(), nan)]
        return [None if n else v for v, n in zip(round_cells(vals, self.digits).tolist(), nan)]

    def width(self, order: np.ndarray | None, markup: bool) -> int:
        vals = self.values if order is None else self.values[order]
        if not len(vals):
            return 0
        nulls = bool(np.isnan(vals).any())
        if nulls and np.isnan(vals).all():
            lo = hi = np.nan
        else:
            lo, hi = float(np.nanmin(vals)), float(np.nanmax(vals))
        if self.how == "fixed":  # text: the longest string (length grows with magnitude and sign)
            return max(len(self._shown(v)) for v in (lo, hi) if not np.isnan(v)) if not np.isnan(lo) else 0
        # the Arrow backend measures max and min with nulls as 0, as the rounded values they show
        ends = [lo, hi]
        if self.how == "round":  # the smallest magnitude may keep the most decimals (round_cells)
            with np.errstate(invalid="ignore"):
                tiny = vals[(vals != 0) & ~np.isnan(vals)]
            if len(tiny):
                ends.append(float(tiny[np.argmin(np.abs(tiny))]))
        shown = [self._shown(v) for v in ends if not np.isnan(v)]
        if nulls:
            shown.append(0 if self.how == "int" else 0.0)
        widest = max(measure_width(v) for v in shown)
        if self.lower is not None and (self.lower if order is None else self.lower[order]).any():
            widest += 2  # `>=`
        return widest


class FrameBackend(DataTableBackend[pd.DataFrame]):
    """Rows `order` (positions in the frame; None: as they are) of the shown columns `cells`.

    The widget asks for a painted page cell by cell; the cells of BLOCK rows around the one asked
    are made at once (one take and one rounding per column) and the last few blocks kept, so a cell
    costs a list lookup instead of a handful of NumPy scalar calls."""

    BLOCK = 64
    KEEP_BLOCKS = 8

    def __init__(self, labels: Sequence[str], cells: list, order: np.ndarray | None, rows: int) -> None:
        self._render_markup = None
        self._labels = list(labels)
        self._cells = cells
        self._order = order
        self._rows = rows if order is None else len(order)
        self._widths: list[int] | None = None
        self._blocks: dict[int, list[list[Any]]] = {}

    def _block(self, b: int) -> list[list[Any]]:
        """Rows b*BLOCK .. (b+1)*BLOCK (fewer at the end), each the list of its shown cells."""
        rows = self._blocks.get(b)
        if rows is None:
            lo = b * self.BLOCK
            idx = np.arange(lo, min(lo + self.BLOCK, self._rows))
            pos = idx if self._order is None else self._order[idx]
            cols = [c.values_at(pos) for c in self._cells]
            rows = [list(r) for r in zip(*cols)] if cols else [[] for _ in range(len(idx))]
            if len(self._blocks) >= self.KEEP_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))  # the oldest
            self._blocks[b] = rows
        return rows

    def _index(self, index: int) -> int:
        if index < 0:
            index += self._rows
        if not 0 <= index < self._rows:
            raise IndexError(f"row {index} of {self._rows}")
        return index

    @classmethod
    def from_pydict(cls, data, max_rows=None, column_names=None):  # the widget never builds one itself
        raise NotImplementedError("FrameBackend is built by FrameTable")

    def _pos(self, index: int) -> int:
        index = self._index(index)
        return index if self._order is None else int(self._order[index])

    @property
    def source_data(self) -> pd.DataFrame:
        return pd.DataFrame({lab: self.get_column_at(i) for i, lab in enumerate(self._labels)})

    @property
    def source_row_count(self) -> int:
        return self._rows

    @property
    def row_count(self) -> int:
        return self._rows

    @property
    def columns(self) -> Sequence[str]:
        return self._labels

    @property
    def column_content_widths(self) -> list[int]:
        if self._widths is None:
            # A view of every row (a sort) holds the same values as the frame: its widths are the
            # frame's, measured once per column and kept by the cells (a 1M-row sort skips 9 takes).
            whole = self._order is None or all(len(self._order) == c.rows for c in self._cells)
            self._widths = [c.whole_width(self.render_markup) if whole else c.width(self._order, self.render_markup)
                            for c in self._cells]
        return self._widths

    def get_row_at(self, index: int) -> list[Any]:
        index = self._index(index)
        return list(self._block(index // self.BLOCK)[index % self.BLOCK])

    def get_column_at(self, index: int) -> list[Any]:
        cells = self._cells[index]
        return [cells.value(self._pos(i)) for i in range(self._rows)]

    def get_cell_at(self, row_index: int, column_index: int) -> Any:
        row_index = self._index(row_index)
        return self._block(row_index // self.BLOCK)[row_index % self.BLOCK][column_index]

    # The table is a view of a frame the FrameTable owns: it changes by a new backend, never in place.
    def append_column(self, label: str, default: Any | None = None) -> int:
        raise NotImplementedError("read-only view")

    def append_rows(self, records: Iterable[Iterable[Any]]) -> list[int]:
        raise NotImplementedError("read-only view")

    def drop_row(self, row_index: int) -> None:
        raise NotImplementedError("read-only view")

    def update_cell(self, row_index: int, column_index: int, value: Any) -> None:
        raise NotImplementedError("read-only view")

    def sort(self, by: list[tuple[str, Literal["ascending", "descending"]]] | str) -> None:
        raise NotImplementedError("FrameTable sorts by row order")
