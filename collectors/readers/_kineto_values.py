"""What rooftop keeps of a Kineto event, and how: the categories read, each value as an exact
int64 (µs text to ns without a float in between, ids, launch shapes; `NULL` for unknown), and the
append-only columns they go into. Shared by every decoding path (`_kineto_events`: compiled and
typed; `_kineto_exact`: one event at a time) and by the joins, which look ids up (`first_index`)."""
from __future__ import annotations

from decimal import Decimal
from itertools import chain
from typing import Any

import numpy as np

NULL = -(1 << 62)  # "unknown" in the integer columns, turned into null when the frame is built

GPU_KINDS = {"kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2, "Kernel": 0}
KIND_NAMES = ("kernel", "memcpy", "memset")
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
WANTED = {"cpu_op", "user_annotation", "gpu_user_annotation", "python_function"} | RUNTIME_CATS | set(GPU_KINDS)
SHAPE_KEYS = ("Input Dims", "Input type", "Concrete Inputs")


_LIMIT = 2**62  # times and ids beyond this are corrupt, not data (they would overflow int64 columns)


def ns_of(v: Any) -> int:
    """µs as JSON text (from `parse_float=str`) or int -> int ns, exactly; NULL when absurd."""
    out = _ns_of(v)
    return out if out == NULL or -_LIMIT < out < _LIMIT else NULL


def _ns_of(v: Any) -> int:
    if type(v) is int:
        return v * 1000
    if type(v) is str:
        neg = v.startswith("-")
        s = v[1:] if neg else v
        whole, _, frac = s.partition(".")
        if len(frac) <= 3 and whole.isdigit() and (not frac or frac.isdigit()):
            if len(whole.lstrip("0")) > 18:  # beyond the limit (and no digit string is read whole)
                return NULL
            out = int(whole) * 1000 + (int((frac + "00")[:3]) if frac else 0)
        else:  # exponents or sub-ns digits: rare, exact via Decimal
            try:
                d = Decimal(s)
                # `1e999999999`: a finite Decimal whose product overflows the context (and whose
                # integer would have a billion digits): beyond the limit, judged by its exponent
                if not d.is_finite() or d.adjusted() > 18:
                    return NULL
                out = int((d * 1000).to_integral_value())
            except (ArithmeticError, ValueError):  # "NaN", "Infinity", junk
                return NULL
        return -out if neg else out
    if isinstance(v, float):
        return round(v * 1000) if abs(v) < 1e18 else NULL
    return NULL


def int_of(v: Any) -> int:
    if type(v) is int:
        return v if -_LIMIT < v < _LIMIT else NULL
    if type(v) is float:  # (a launch size msgspec decoded: read as the exact path reads its text)
        return int(v) if abs(v) < _LIMIT else NULL
    if type(v) is str:
        try:
            f = float(v)
        except ValueError:
            return NULL
        return int(f) if abs(f) < _LIMIT else NULL
    return NULL


def key_of(v: Any) -> Any:
    """A process or thread id as a dict key: ids are ints or strings; anything else by its text."""
    return v if v is None or type(v) in (int, str, float, bool) else repr(v)


def text_of(v: Any) -> str:
    """A name is text; anything else (a number, an object) is not a name."""
    return v if type(v) is str else ""


def exact_ns(us: np.ndarray) -> np.ndarray | None:
    """Doubles decoded from µs text with at most 3 decimals -> int ns, or None where that is not
    provably exact. Below 2**43 µs (~100 days: Kineto's times relative to baseTimeNanoseconds) a
    double is within 0.49 ns of the text, so rounding the exact fraction recovers it; integers
    (old epoch µs) are exact below 2**53. Fractional epoch µs are not: the caller re-reads them."""
    whole = np.floor(us)
    frac = us - whole  # exact (Sterbenz)
    known = ~np.isnan(us)
    ok = (np.abs(us) < 2.0 ** 43) | ((frac == 0) & (np.abs(us) < 2.0 ** 53))
    if not ok[known].all():
        return None
    out = np.full(len(us), NULL, dtype=np.int64)
    out[known] = whole[known].astype(np.int64) * 1000 + np.rint(frac[known] * 1000).astype(np.int64)
    return out


def first_index(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the first row of `keys` equal to each query, -1 where none (or query unknown)."""
    out = np.full(len(queries), -1, dtype=np.int64)
    if not len(keys) or not len(queries):
        return out
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo <= 4 * len(keys) + 1024:  # ids of one run (correlation, External id) lie close together:
        n = len(keys)                    # a table over their range, not a sort of every key
        first = np.full(hi - lo + 1, n, dtype=np.int64)
        np.minimum.at(first, keys - lo, np.arange(n, dtype=np.int64))
        inside = np.flatnonzero((queries >= lo) & (queries <= hi) & (queries != NULL))
        at = first[queries[inside] - lo]
        hit = at < n
        out[inside[hit]] = at[hit]
        return out
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, queries).clip(0, len(uniq) - 1)
    hit = (uniq[pos] == queries) & (queries != NULL)
    out[hit] = first[pos[hit]]
    return out


class Interner(dict):
    def __missing__(self, key):
        self[key] = n = len(self)
        return n

    def values_list(self) -> list:
        out = [None] * len(self)
        for k, i in self.items():
            out[i] = k
        return out


class Columns:
    """Append-only int64 columns in arrays grown geometrically (no chunk lists to concatenate: the
    peak stays near the data, and big arrays go back to the OS when replaced)."""

    def __init__(self, *fields: str):
        self.fields = fields
        self.data = {f: np.empty(0, np.int64) for f in fields}
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def extend(self, cols: dict) -> None:
        arrays = [np.asarray(cols[f], dtype=np.int64) for f in self.fields]
        m = len(arrays[0])
        if any(len(a) != m for a in arrays):
            raise AssertionError("ragged columns")
        end = self.n + m
        for f, a in zip(self.fields, arrays):
            buf = self.data[f]
            if end > len(buf):
                grown = np.empty(max(end, len(buf) * 3 // 2 + 4096), np.int64)
                grown[:self.n] = buf[:self.n]
                self.data[f] = buf = grown
            buf[self.n:end] = a
        self.n = end

    def adopt(self, cols: dict) -> None:
        """Take whole columns as they are (a worker's, just unpickled): no copy, where `extend`
        would copy them into new arrays (the next `extend` grows them, as it grows its own)."""
        if self.n:
            raise AssertionError("adopt into filled columns")
        arrays = {f: np.ascontiguousarray(cols[f], dtype=np.int64) for f in self.fields}
        m = len(arrays[self.fields[0]])
        if any(len(a) != m for a in arrays.values()):
            raise AssertionError("ragged columns")
        self.data, self.n = arrays, m

    def np(self, f: str) -> np.ndarray:
        return self.data[f][:self.n]

    def release(self) -> None:
        """Drop the data once joined (a large share of a 1M-kernel import's memory)."""
        self.data = {f: np.empty(0, np.int64) for f in self.fields}
        self.n = 0


def _ints(vals: list) -> np.ndarray:
    """Integers (or the odd string, None) -> int64 with NULL for unknown."""
    try:  # (fromiter: what np.array gives here, the same errors too, ~40% faster)
        return np.fromiter(vals, dtype=np.int64, count=len(vals))
    except (TypeError, ValueError, OverflowError):
        return np.array([int_of(v) if not isinstance(v, int) or -(1 << 63) <= v < 1 << 63 else NULL
                         for v in vals], dtype=np.int64)


_NONE3 = (NULL, NULL, NULL)


def _shapes(vals: list) -> np.ndarray:
    """Launch shapes ([x, y, z] lists, else unknown) -> (n, 3) int64."""
    rows = [v if type(v) is list and len(v) == 3 else _NONE3 for v in vals]
    try:  # flattened: what np.array(rows, int64) gives (the same errors too), 2x faster
        return np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=3 * len(rows)).reshape(-1, 3)
    except (TypeError, ValueError, OverflowError):
        return np.array([[int_of(x) for x in r] for r in rows], dtype=np.int64).reshape(-1, 3)
