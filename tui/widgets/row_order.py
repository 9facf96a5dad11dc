"""The row order of a sort by one column, as `sort_values(kind="stable")` gives it (nulls last): each
value's rank as a whole number (text: its distinct value's lexical rank, kept for the last columns
sorted), sorted packed with its position; a key with fractions by argsort."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from tui.widgets.table_values import _codes, _numeric


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
