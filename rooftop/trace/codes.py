"""Integer codes numbered by first appearance: what `groupby(sort=False)` and `dictionary_encode`
give, for codes of few distinct values, through a table instead of a hash or a sort of the rows."""
from __future__ import annotations

import numpy as np
import pandas as pd


def first_appearance(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For integer codes in [0, size): (the codes present, in order of first appearance; the row
    where each first appears; each code's number in that order, -1 for a code no row holds)."""
    n = len(codes)
    first = np.full(size, n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    present = np.flatnonzero(first < n)
    present = present[np.argsort(first[present], kind="stable")]
    number = np.full(size, -1, dtype=np.int64)
    number[present] = np.arange(len(present))
    return present, first[present], number


def in_first_order(codes: np.ndarray) -> bool:
    """Whether codes (none missing) are numbered by first appearance, from 0 with none skipped: each
    at most one above every code before it (what `first_appearance` would number them as they are)."""
    if not len(codes):
        return True
    top = np.maximum.accumulate(codes)
    return bool(codes[0] == 0 and (codes[1:] <= top[:-1] + 1).all())


def by_first_seen(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes into `size` values (-1: missing, kept) numbered again by first appearance, as encoding
    the rows would number them: (the values used, in that order; each row's new code). Codes
    numbered so already (the leading rows of a column encoded in that order: an import's events
    before its runtime calls) come back as they are, the very array, the values used the first
    ones; no table is made then."""
    valid = codes >= 0
    present = codes[valid]
    if in_first_order(present):
        return np.arange(int(present.max()) + 1 if len(present) else 0), codes
    # (a spare slot, so that `number` has a slot 0, where a missing code's clipped -1 points, even
    # for no values at all)
    used, _, number = first_appearance(present, size + 1)
    return used, np.where(valid, number[codes.clip(0)], -1)


def first_rows(codes: np.ndarray) -> np.ndarray:
    """For codes numbered by first appearance (`pd.factorize`'s, none missing): the row where each
    code first appears, in code order (the running maximum rises at each first row)."""
    return np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)


def by_identity(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An object array grouped by identity, not value: (each row's code, numbered by first
    appearance; the row where each code first appears). Importers share one object per distinct
    text or launch shape, so a million rows hold a few hundred, and only those need converting."""
    codes, _ = pd.factorize(np.fromiter(map(id, values), dtype=np.uint64, count=len(values)))
    return codes, first_rows(codes)


def categorical(labels, codes: np.ndarray) -> pd.Categorical:
    """Rows given as codes into per-distinct `labels` (a code of -1, or a None label: missing), as a
    categorical of the distinct labels (equal labels merged): no Python object per row, and Arrow
    then encodes each distinct text once, not every row's."""
    label_codes, uniq = pd.factorize(np.array(list(labels) + [None], dtype=object))  # the None: code -1
    return pd.Categorical.from_codes(label_codes[codes], dtype=_dtype_of(pd.Index(uniq, dtype=object)))


def _dtype_of(categories: pd.Index) -> pd.CategoricalDtype:
    """The dtype of categories already distinct and without a missing value (`pd.factorize`'s
    uniques), not checked again: the check hashes every category (the ~340k distinct range paths
    of a 1M-kernel Kineto import)."""
    try:
        return pd.CategoricalDtype._from_fastpath(categories, False)
    except (AttributeError, TypeError):  # (a private constructor: pandas may drop it)
        return pd.CategoricalDtype(categories, ordered=False)
