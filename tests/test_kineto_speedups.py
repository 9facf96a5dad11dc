"""The import's fast paths give what their plain definitions give (random inputs, hand-checked cases)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from collectors.readers._kineto_join import _distinct_rows, _nest_by_loop, nest_intervals
from collectors.readers.importers import _as_category


def test_nest_intervals_matches_the_one_pass_loop():
    rng = np.random.default_rng(7)
    for _ in range(1500):
        ni, nq, nthr = rng.integers(0, 25), rng.integers(0, 25), rng.integers(1, 4)
        ithr, ist = rng.integers(0, nthr, ni), rng.integers(0, 40, ni)
        ien = ist + rng.integers(0, 25, ni)  # zero-length ranges included
        labels = [f"r{i}" for i in range(ni)] if rng.random() < .8 else None
        qthr, qt = rng.integers(0, nthr + 1, nq), rng.integers(0, 70, nq)  # a thread without ranges too
        s1, s2 = {}, {}
        fast = nest_intervals(ithr, ist, ien, labels, qthr, qt, s1)
        slow = _nest_by_loop(ithr, ist, ien, labels, qthr, qt, s2)
        assert fast[0].tolist() == slow[0].tolist() and fast[1] == slow[1] and fast[2] == slow[2] and s1 == s2


def test_nest_intervals_by_hand_and_deep_nesting():
    # thread 0: A [0, 10) holds B [2, 5); thread 1: C [0, 100). Queries: in B, in A after B, after A, on 1
    inner, qpath, ipath = nest_intervals(np.array([0, 0, 1]), np.array([0, 2, 0]), np.array([10, 5, 100]),
                                         ["A", "B", "C"], np.array([0, 0, 0, 1]), np.array([3, 5, 10, 50]))
    assert inner.tolist() == [1, 0, -1, 2]
    assert qpath == ["A/B", "A", None, "C"] and ipath == ["A", "A/B", "C"]
    # 1,000 ranges inside each other: a query after the inner 900 closed climbs past the vectorised limit
    n = 1000
    ist, ien = np.arange(n), 10**6 - np.arange(n)
    qt = np.array([10**6 - 100, 10**6 + 1])
    fast = nest_intervals(np.zeros(n, np.int64), ist, ien, None, np.zeros(2, np.int64), qt)
    assert fast[0].tolist() == [99, -1]


def test_distinct_rows_is_unique_by_rows():
    rng = np.random.default_rng(3)
    rows = rng.integers(-3, 3, (500, 3))
    rows[::5, 1] = -(1 << 62)
    uniq, inverse = _distinct_rows(rows)
    assert (uniq[inverse] == rows).all()
    assert len(uniq) == len(np.unique(rows, axis=0))


def test_as_category_keeps_values_and_missing():
    shared = "decode/step=1"
    values = np.array([shared, None, "a", shared, np.nan, "decode/" + "step=1", "a"], dtype=object)
    cat = _as_category(values)
    assert list(cat.categories) == [shared, "a"]  # equal texts from different objects: one category
    assert [None if pd.isna(v) else v for v in cat] == [shared, None, "a", shared, None, shared, "a"]
