"""Arrow-backed tables (textual-fastdatatable): a frame, a column spec, sort, filter, search.

The stock DataTable freezes for seconds on 100k rows; fastdatatable with an Arrow backend mounts a
million in a fraction of a second (a plotext 5 quirk, measured here). Cells keep their numeric types (so a
sort is numeric and a million rows never pass through Python formatting); units live in the headers.
Text cells are sanitized and rendered without markup: names from traces are data.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.worker import get_current_worker
from textual_fastdatatable import DataTable

from .frame_backend import MAX_DIGITS, FrameBackend, NumberCells, TextCells, round_cells
from .order_cache import OrderCache, compact
from .plain_cells import PlainCellTable
from .text import sanitize, sanitize_series
from rooftop import speedups
from rooftop.apart import fit_apart
from rooftop.text import has_unsafe


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
    most like it (`rooftop.apart.fit_apart`: `sm90_xmma_gemm…tilesize128…`). Where two cuts still
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


def sort_order(values: pd.Series, descending: bool, kind: str = "num") -> np.ndarray:
    """Row positions sorting `values` (stable, nulls last), as `sort_values(kind="stable")` would,
    but on one column: each value's rank as a whole number (text: its distinct value's lexical
    rank), sorted packed with its position (`_packed_order`); a key with fractions by argsort."""
    if kind == "text":
        codes, uniques = _codes(values)
        rank = _text_ranks(uniques, keep=isinstance(values.dtype, pd.CategoricalDtype))
        codes = np.asarray(codes)
        null = codes < 0
        return _order_of_ranks(rank[np.where(null, 0, codes)] if len(uniques) else np.zeros(len(codes), np.int64),
                               null, descending)
    whole = _integer_values(values)
    if whole is not None:
        return _order_of_ranks(*whole, descending)
    key = _numeric(values).to_numpy(dtype="float64", na_value=np.nan)
    fast = _whole_number_order(key, descending)
    if fast is not None:
        return fast
    return np.argsort(-key if descending else key, kind="stable")  # NaN sorts last either way


def _text_ranks(uniques, keep: bool = False) -> np.ndarray:
    """Each distinct text's lexical rank. `keep` (a categorical column's categories, the same
    object for every view of the column): kept for the last few columns sorted, so a sort by the
    same column again, the other way or filtered skips ranking them (343k range paths at 1M kernels)."""
    with _RANKS_LOCK:  # (orders are computed on worker threads)
        held = _RANKS.pop(id(uniques), None)
        if held is not None and held[0] is uniques:
            _RANKS[id(uniques)] = held  # (the most recent again)
            return held[1]
    rank = np.empty(len(uniques), dtype=np.int64)
    # Arrow's stable sort of the distinct texts: by UTF-8 bytes, which is code-point order, as
    # Python compares str (an order of magnitude faster than through Python objects)
    rank[pa.compute.sort_indices(_distinct_texts(uniques)).to_numpy()] = np.arange(len(uniques))
    rank.flags.writeable = False
    if keep:
        with _RANKS_LOCK:  # (the categories held with their ranks: their id is not reused meanwhile)
            _RANKS[id(uniques)] = (uniques, rank)
            while len(_RANKS) > KEPT_RANKS:
                _RANKS.pop(next(iter(_RANKS)))
    return rank


KEPT_RANKS = 4
_RANKS: dict[int, tuple[object, np.ndarray]] = {}
_RANKS_LOCK = threading.Lock()


def _distinct_texts(uniques) -> pa.Array:
    """The distinct values as Arrow text, each as `str(value)`. Strings (names, paths: the usual
    case) go to Arrow as they are; walking a pandas Index of 343k range paths in Python to call
    `str` on each was most of a 1M-row sort."""
    held = getattr(uniques, "array", None)
    if isinstance(getattr(uniques, "dtype", None), pd.StringDtype) and hasattr(held, "__arrow_array__"):
        # pandas' Arrow-backed text (the categories of a loaded trace): its own Arrow array, no
        # Python string made (making them and handing them to Arrow cost more than the sort)
        arr = pa.array(held)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            if arr.null_count == 0:
                return arr
    values = np.asarray(uniques, dtype=object)
    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # every one a str (one C-level pass)
        return pa.array(values, type=pa.string())
    return pa.array([str(u) for u in values], type=pa.string())


def _integer_values(values: pd.Series) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(int64 values, null mask or None) of an integer column (timestamps, durations, steps,
    layers), without a detour through float64; None for any other dtype."""
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype) or not pd.api.types.is_integer_dtype(dtype):
        return None
    if isinstance(dtype, np.dtype):
        return values.to_numpy(dtype=np.int64), None
    null = values.isna().to_numpy()
    return values.to_numpy(dtype=np.int64, na_value=0), (null if null.any() else None)


def _order_of_ranks(whole: np.ndarray, null: np.ndarray | None, descending: bool) -> np.ndarray:
    """The stable order of int64 `whole` (rows in `null` last), by `_packed_order` when it fits,
    else by a stable argsort."""
    n = len(whole)
    if n >= PACKED_SORT_FROM:
        fast = _packed_order(whole, null, descending)
        if fast is not None:
            return fast
    key = whole.astype(np.float64)
    if null is not None:
        key[null] = np.nan
    return np.argsort(-key if descending else key, kind="stable")


# From this many rows a key of whole numbers sorts by the packed-integer path below.
PACKED_SORT_FROM = 10_000


def _whole_number_order(key: np.ndarray, descending: bool) -> np.ndarray | None:
    """`_packed_order` of a float key (NaN last) when every value is a whole number, else None."""
    n = len(key)
    if n < PACKED_SORT_FROM:
        return None
    nan = np.isnan(key)
    has_nan = bool(nan.any())
    present = key[~nan] if has_nan else key
    if not len(present) or not np.isfinite(present.min()) or not np.isfinite(present.max()) \
            or not (np.floor(present) == present).all():
        return None
    if max(abs(float(present.min())), abs(float(present.max()))) >= 2**62:
        return None
    whole = (np.where(nan, 0.0, key) if has_nan else key).astype(np.int64)
    return _packed_order(whole, nan if has_nan else None, descending)


def _packed_order(whole: np.ndarray, null: np.ndarray | None, descending: bool) -> np.ndarray | None:
    """The stable order of int64 `whole` (rows in `null` last either way), or None when it does not
    pack. Each value's rank goes in the high bits of an int64 and its row position in the low
    bits; NumPy's unstable SIMD sort then leaves ties by position, as a stable sort does, in a
    fifth of the time of `argsort(kind="stable")` at a million rows; worked in place (one array)."""
    n = len(whole)
    present = whole[~null] if null is not None else whole
    if not len(present):
        return np.arange(n)
    lo, hi = int(present.min()), int(present.max())
    bits = max(1, (n - 1).bit_length())
    if (hi - lo + 2) << bits >= 2**62:
        return None  # the packed value would not fit in an int64
    if descending:
        packed = np.subtract(hi, whole, dtype=np.int64)
    else:
        packed = np.subtract(whole, lo, dtype=np.int64)
    if null is not None:
        packed[null] = hi - lo + 1  # after every value, either way
    np.left_shift(packed, bits, out=packed)
    np.bitwise_or(packed, np.arange(n, dtype=np.int64), out=packed)
    packed.sort()
    np.bitwise_and(packed, (1 << bits) - 1, out=packed)
    return packed


def compile_pattern(pattern: str) -> re.Pattern:
    """A case-insensitive regex; a bad regex falls back to a literal substring."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE)


def matches(values: pd.Series, pattern: str) -> np.ndarray:
    """Whether each row matches `pattern`, searched once per distinct value."""
    rx = compile_pattern(pattern)
    codes, uniques = _codes(values)
    hit = np.array([bool(rx.search(str(u))) for u in uniques] + [False], dtype=bool)
    return hit[codes]


class FrameTable(Vertical):
    """A DataFrame shown through fastdatatable, with keyboard sort, regex filter and n/N search.

    The frame is the state; the table widget shows a view of it through a `FrameBackend`. Another
    frame or other columns mount a new table widget; a sort or a filter (the same cells in another
    order) gives the mounted one a new backend in place. A big view keeps its last few orders and,
    once a sort is painted, computes the two a user asks for next (`s`, `S`) in a thread
    (`OrderCache`): a million-row sort then costs its repaint, not its ordering.
    """

    class _RowMessage(Message):
        def __init__(self, table: "FrameTable", row: pd.Series) -> None:
            super().__init__()
            self.table = table
            self.row = row  # the frame's row: all columns, not only the shown ones

        @property
        def control(self) -> "FrameTable":
            return self.table

    class Selected(_RowMessage):
        """Enter on a row."""

    class Highlighted(_RowMessage):
        """The cursor moved onto a row."""

    class Changed(Message):
        """The view was rebuilt (another frame, sort or filter): a screen's status line follows it."""

        def __init__(self, table: "FrameTable") -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> "FrameTable":
            return self.table

    # The state a user changes; the watchers rebuild the view. (sort column, descending) is one
    # value so that choosing a column and its direction is one rebuild, not two.
    # `repaint=False`: this container paints nothing of its own, and the table in it repaints
    # itself when it shows the new view; a repaint of the container, asked for at the key press,
    # drew the whole table region once with the new view and once more when the table's own
    # repaint came (two frames per sort at a million rows).
    sort: reactive[tuple[str | None, bool]] = reactive((None, False), init=False, repaint=False)
    filter: reactive[str | None] = reactive(None, init=False, repaint=False)

    # Views from this many rows derive their order (regex filter, argsort) in a thread worker,
    # which a newer sort or filter cancels; smaller ones inline (a few ms, and screens that await
    # `set_frame` see the table at once).
    DERIVE_IN_WORKER_FROM = 100_000
    # Such views also compute, once a sort is painted, the orders of `s` and `S` from it.
    PREFETCH_ORDERS = True

    @dataclass
    class OrderReady(Message):
        """A worker derived the view's row order for `state` (sort, filter, source)."""

        state: tuple
        order: np.ndarray
        keep_cursor: bool

    def __init__(self, cols: list[Col], frame: pd.DataFrame | None = None, *, search_key: str | None = None,
                 sort: tuple[str, bool] | None = None, on_view: Callable[[], None] | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        """`on_view`: called on the UI thread each time the view changes, right after the table is
        given it, before `Changed` is posted: a status line it updates is painted in the same frame
        as the rows (from the `Changed` message it came a frame after them)."""
        super().__init__(id=id, classes=classes)
        self.on_view = on_view
        self.cols = cols
        self.search_key = search_key or next((c.key for c in cols if c.kind == "text"), cols[0].key)
        self.set_reactive(FrameTable.sort, sort if sort else (None, False))
        self.pattern: str | None = None  # last search pattern: n/N jump between its matches
        self.source = frame if frame is not None else pd.DataFrame(columns=[c.key for c in cols])
        self._order: np.ndarray = np.arange(len(self.source))  # source positions, in view order
        self._view: pd.DataFrame | None = None
        self._serial = 0
        self._cells: list = []
        self._cells_key: tuple | None = None
        self._orders = OrderCache()  # big views: orders by `_state()`, for the frame shown

    def compose(self) -> ComposeResult:
        self._derive()
        yield self._make_table()

    # --- state -> view ------------------------------------------------------------------------
    # The view is `_order`, positions into the source: a million-row frame of ~60 columns is never
    # sorted or copied as a whole; only the shown columns are, as Arrow, and rows on demand.
    @property
    def sort_key(self) -> str | None:
        return self.sort[0]

    @sort_key.setter
    def sort_key(self, key: str | None) -> None:  # no rebuild: the caller refreshes (or sets `sort`)
        self.set_reactive(FrameTable.sort, (key, self.sort[1]))

    @property
    def sort_desc(self) -> bool:
        return self.sort[1]

    @sort_desc.setter
    def sort_desc(self, desc: bool) -> None:
        self.set_reactive(FrameTable.sort, (self.sort[0], desc))

    def _state(self) -> tuple:
        return (self.sort, self.filter, id(self.source), self.search_key)

    def _order_of(self, state: tuple | None = None, cancelled=lambda: False,
                  source: pd.DataFrame | None = None) -> np.ndarray | None:
        """Positions in `source` (the shown frame by default) in view order for `state` (`_state()`,
        the current one by default: the sort and filter), None if `cancelled()` says a newer state
        superseded this one."""
        (sort_key, sort_desc), pattern, _, search_key = state or self._state()
        src = self.source if source is None else source
        rows = None  # every row, in frame order (no array of positions made for them)
        if pattern and len(src):
            rows = np.flatnonzero(matches(src[search_key], pattern))
        if cancelled():
            return None
        if sort_key and sort_key in src.columns and len(src) and (rows is None or len(rows)):
            key = src[sort_key] if rows is None else src[sort_key].iloc[rows]
            order = sort_order(key, sort_desc, self._kind(sort_key))
            # over every row the sort's positions are the rows themselves: no second 1M-row array
            return order if rows is None else rows[order]
        return np.arange(len(src)) if rows is None else rows

    def _kept_order(self, view: tuple, cancelled=lambda: False) -> np.ndarray | None:
        """The order of `view` = (state, source, the cache's generation), all read together on the UI
        thread, through the table's `OrderCache` (blocking: for workers). The frame travels with
        the state: a worker never reads `self.source`, which another frame may have replaced."""
        state, source, generation = view
        return self._orders.get(state, lambda: self._order_of(state, cancelled, source), generation)

    def _view_key(self, state: tuple) -> tuple:
        return state, self.source, self._orders.generation

    def _derive(self) -> None:
        self._order, self._view = self._order_of(), None

    async def watch_sort(self) -> None:
        await self._rederive(keep_cursor=False)

    async def watch_filter(self, pattern: str | None) -> None:
        if pattern:
            self.pattern = pattern
        await self._rederive(keep_cursor=False)

    async def _rederive(self, keep_cursor: bool) -> None:
        if not self.is_mounted:
            return  # compose derives the first view
        if len(self.source) >= self.DERIVE_IN_WORKER_FROM:
            state = self._state()
            order = self._orders.peek(state)
            if order is not None:  # computed ahead (`_prefetch_orders`) or shown before
                self.workers.cancel_group(self, "frame-table-order")  # an older state's order, if any
                await self._rebuild(order, keep_cursor)
            else:
                self._derive_worker(self._view_key(state), keep_cursor)
        else:
            await self.refresh_view(keep_cursor)

    # `description`: without one, Textual names a worker by the repr of its arguments, and a view
    # carries its frame (the repr of a million-row frame, on the UI thread, per sort)
    @work(thread=True, exclusive=True, exit_on_error=False, group="frame-table-order", description="the view's order")
    def _derive_worker(self, view: tuple, keep_cursor: bool) -> None:
        worker = get_current_worker()
        order = self._kept_order(view, lambda: worker.is_cancelled)
        if order is not None and not worker.is_cancelled:
            self.post_message(self.OrderReady(view[0], order, keep_cursor))

    def _next_sort(self) -> tuple[str, bool]:
        """What `cycle_sort` sorts by next: the next column, numbers descending first (biggest on
        top), text ascending."""
        keys = [c.key for c in self.cols]
        i = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        col = self.cols[i % len(keys)]
        return col.key, col.kind != "text"

    def _reversed_sort(self) -> tuple[str, bool]:
        """What `reverse_sort` sorts by: the same column (the first if none), the other direction."""
        return self.sort_key or self.cols[0].key, not self.sort_desc

    def _prefetch_orders(self) -> None:
        """Start computing the orders of the next two likely keys, `s` and `S`, unless kept."""
        if not self.PREFETCH_ORDERS or not speedups.on("SORT_AHEAD") or not self.is_mounted or len(self.source) < self.DERIVE_IN_WORKER_FROM \
                or not self.cols:
            return
        _, pattern, source, search_key = self._state()
        states = [(sort, pattern, source, search_key)
                  for sort in (self._next_sort(), self._reversed_sort())]
        wanted = [state for state in states if state not in self._orders]
        if wanted:
            self._prefetch_worker([self._view_key(state) for state in wanted])

    @work(thread=True, exclusive=True, exit_on_error=False, group="frame-table-prefetch",
          description="the orders of s and S")
    def _prefetch_worker(self, views: list[tuple]) -> None:
        # Cancelled by the next prefetch (a newer view): the order being computed is finished (a key
        # may be waiting for it), the rest are skipped.
        worker = get_current_worker()
        for view in views:
            if worker.is_cancelled or view[1] is not self.source:
                return
            self._kept_order(view)

    @on(OrderReady)
    async def _order_ready(self, message: OrderReady) -> None:
        message.stop()
        if message.state != self._state():
            return  # superseded (another sort, filter or frame came after it)
        await self._rebuild(message.order, message.keep_cursor)

    def _kind(self, key: str) -> str:
        col = next((c for c in self.cols if c.key == key), None)
        if col is not None:
            return "text" if col.kind == "text" else "num"
        dtype = self.source[key].dtype
        return "num" if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else "text"

    @property
    def view(self) -> pd.DataFrame:
        """The rows as shown (filtered, sorted), every column; built on first use."""
        if self._view is None:
            self._view = self.source.iloc[self._order].reset_index(drop=True)
        return self._view

    @property
    def shown(self) -> int:
        """How many rows the view has."""
        return len(self._order)

    def row(self, i: int) -> pd.Series:
        """Row `i` of the view, all columns (without building the view)."""
        return self.source.iloc[int(self._order[i])]

    def column(self, key: str) -> pd.Series:
        """One column of the view."""
        return self.source[key].iloc[self._order].reset_index(drop=True)

    def _labels(self) -> list[str]:
        arrow = " ▼" if self.sort_desc else " ▲"
        return [c.label + (arrow if c.key == self.sort_key else "") for c in self.cols]

    def _widest(self) -> int:
        # Long kernel names must not push every number off an 80-column screen; the name column is
        # cut here, head…tail, so that two names never show the same text (the table's own cut
        # keeps only the head).
        return max(16, min(60, self.app.size.width - 48))

    def _cells_for(self, widest: int) -> tuple:
        """What identifies the shown cells: the source, the columns, the cut. A sort or a filter
        reorders rows and keeps them."""
        return (id(self.source), tuple(self.cols), self.search_key, widest)

    def _backend(self, widest: int) -> FrameBackend:
        # Cells are formatted when painted (FrameBackend): a million-row view costs its row order
        # and a float array per numeric column, never a million display values.
        key = self._cells_for(widest)
        if self._cells_key != key:
            self._cells, self._cells_key = frame_cells(self.source, self.cols, fit={self.search_key: widest}), key
        return FrameBackend([c.label for c in self.cols], self._cells,
                            None if self._is_identity() else self._order, len(self.source))

    def _make_table(self) -> DataTable:
        self._serial += 1
        widest = self._widest()
        # PlainCellTable: the library's table, plain cells painted without Rich's layout (a page of a
        # million-row view within a key's time; docs/speed.md)
        return PlainCellTable(backend=self._backend(widest), column_labels=self._labels(), cursor_type="row",
                         render_markup=False, null_rep="—", show_row_labels=False, zebra_stripes=True,
                         max_column_content_width=widest, id=f"{self.id or 'frame'}-table-{self._serial}")

    def _is_identity(self) -> bool:
        n = len(self.source)
        return len(self._order) == n and (n == 0 or (self._order[0] == 0 and bool((np.diff(self._order) == 1).all())))

    @property
    def table(self) -> DataTable | None:
        return next(iter(self.query(DataTable)), None)

    async def refresh_view(self, keep_cursor: bool = False) -> None:
        """Derive the order and rebuild now (on the UI thread)."""
        await self._rebuild(self._order_of(), keep_cursor)

    async def _rebuild(self, order: np.ndarray, keep_cursor: bool) -> None:
        old = self.table
        row = old.cursor_row if old is not None and keep_cursor else 0
        had_focus = old is not None and old.has_focus
        if len(self.source) >= self.DERIVE_IN_WORKER_FROM:
            order = compact(order)
            self._orders.put(self._state(), order)  # `S` twice comes back to it
            self.call_after_refresh(self._prefetch_orders)  # once this view is painted
        self._order, self._view = order, None
        # the same cells (the cut made for the mounted table's width included): a sort or a filter
        if isinstance(old, PlainCellTable) and self._cells_key == self._cells_for(self._widest()):
            self._show_in_place(old, row)
            return
        if old is not None:
            await old.remove()
        new = self._make_table()
        await self.mount(new)
        if had_focus:  # `g`, `c`, a sort: the rebuilt table keeps the keyboard
            self.screen.set_focus(new)
        if self.shown:
            new.move_cursor(row=min(row, self.shown - 1))
        self._view_changed()

    def _view_changed(self) -> None:
        if self.on_view is not None:
            self.on_view()
        self.post_message(self.Changed(self))

    def _show_in_place(self, table: PlainCellTable, row: int) -> None:
        """The same cells in another order (a sort, a filter): the mounted table shows the new view,
        keeping its focus and place in the layout."""
        self._serial += 1
        before = table.cursor_row
        table.show_view(self._backend(table.max_column_content_width), self._labels())
        if self.shown:
            table.move_cursor(row=min(row, self.shown - 1))
            if table.cursor_row == before:  # the cursor did not move, but the row under it changed
                self.post_message(self.Highlighted(self, self.row(table.cursor_row)))
        self._view_changed()

    async def set_frame(self, frame: pd.DataFrame, cols: list[Col] | None = None, search_key: str | None = None,
                        default_sort: tuple[str, bool] | None = None) -> None:
        """Show another frame; the sort stays if its column is still shown, else `default_sort`
        applies (set before the one rebuild: a million rows must not be laid out twice)."""
        self.source = frame
        self._orders.clear()
        if cols is not None:
            self.cols = cols
            if self.sort_key not in {c.key for c in cols}:
                self.sort_key = None
        if self.sort_key is None and default_sort is not None:
            self.sort_key, self.sort_desc = default_sort
        if search_key:
            self.search_key = search_key
        await self.refresh_view()

    def cycle_sort(self) -> str:
        """Next column becomes the sort column (numbers descending first: biggest on top); the
        watcher rebuilds the view."""
        self.sort = self._next_sort()
        return next(c.label for c in self.cols if c.key == self.sort_key)

    def reverse_sort(self) -> None:
        self.sort = self._reversed_sort()

    def set_filter(self, pattern: str | None) -> None:
        if pattern:
            self.pattern = pattern
        self.filter = pattern or None

    def jump(self, forward: bool = True) -> bool:
        """Move the cursor to the next/previous row matching the last pattern (wrapping)."""
        table = self.table
        if not self.pattern or table is None or not self.shown:
            return False
        hits = np.flatnonzero(matches(self.source[self.search_key], self.pattern)[self._order])
        if not len(hits):
            return False
        cur = table.cursor_row
        if forward:
            after = hits[hits > cur]
            target = after[0] if len(after) else hits[0]
        else:
            before = hits[hits < cur]
            target = before[-1] if len(before) else hits[-1]
        table.move_cursor(row=int(target))
        return True

    def current(self) -> pd.Series | None:
        table = self.table
        if table is None or not self.shown:
            return None
        return self.row(min(table.cursor_row, self.shown - 1))

    def status(self) -> str:
        parts = [f"{self.shown:,} of {len(self.source):,} rows" if self.filter else f"{self.shown:,} rows"]
        label = next((c.label for c in self.cols if c.key == self.sort_key), None)
        if label:
            parts.append(f"sort: {label} {'▼' if self.sort_desc else '▲'}")
        if self.filter:
            parts.append(f"filter: /{self.filter}/")
        return " · ".join(parts)

    def shown_frame(self) -> pd.DataFrame:
        """The rows as shown (filtered, sorted), with the shown columns under their labels."""
        return display_table(self.source, self.cols, self._order).to_pandas()

    # --- events -------------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < self.shown:
            self.post_message(self.Selected(self, self.row(event.cursor_row)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < self.shown:
            self.post_message(self.Highlighted(self, self.row(event.cursor_row)))
