"""Integer codes numbered by first appearance: what `groupby(sort=False)` and `dictionary_encode`
give, for codes of few distinct values, through a table instead of a hash or a sort of the rows."""
from __future__ import annotations

import numpy as np


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
