"""Numbering codes by first appearance (rooftop.trace.codes), and the dictionary columns built on it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop.trace.codes import by_first_seen, by_identity, categorical, first_appearance, first_rows, in_first_order
from rooftop.trace.runtime import _first_seen


def test_first_appearance_numbers_codes_as_factorize_does():
    rng = np.random.default_rng(3)
    for _ in range(200):
        size = int(rng.integers(1, 12))
        codes = rng.integers(0, size, int(rng.integers(0, 40)))
        present, first, number = first_appearance(codes, size)
        want, uniques = pd.factorize(codes)
        assert present.tolist() == uniques.tolist()
        assert number[codes].tolist() == want.tolist()
        assert first.tolist() == [int(np.flatnonzero(codes == c)[0]) for c in present]
        assert (number[np.setdiff1d(np.arange(size), present)] == -1).all()


def test_first_seen_is_dictionary_encode_of_the_values_held():
    full = pa.array(["a", "b", None, "c", "b", "d"]).dictionary_encode()
    part = pa.chunked_array([full.take(pa.array([4, 2, 1, 4, 5]))])  # "b", None, "b", "b", "d"
    got = _first_seen(part).combine_chunks()
    want = pa.array(["b", None, "b", "b", "d"]).dictionary_encode()
    assert got.dictionary.to_pylist() == want.dictionary.to_pylist() == ["b", "d"]
    assert got.indices.to_pylist() == want.indices.to_pylist()
    nulls = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array([], pa.string()))])
    assert _first_seen(nulls).combine_chunks().to_pylist() == [None, None]


def test_in_first_order_is_what_factorize_leaves_unchanged():
    rng = np.random.default_rng(7)
    for _ in range(400):
        codes = rng.integers(0, int(rng.integers(1, 6)), int(rng.integers(0, 12)))
        assert in_first_order(codes) == (pd.factorize(codes)[0].tolist() == codes.tolist())


def test_by_first_seen_numbers_by_first_appearance_and_keeps_ordered_codes():
    rng = np.random.default_rng(9)
    for _ in range(300):
        size = int(rng.integers(1, 8))
        codes = rng.integers(-1, size, int(rng.integers(0, 30)))
        used, new = by_first_seen(codes, size)
        present = codes >= 0
        order = pd.unique(codes[present])
        assert used.tolist() == order.tolist()
        assert new.tolist() == [-1 if c < 0 else order.tolist().index(c) for c in codes.tolist()]
        assert (new is codes) == in_first_order(codes[present])
    assert by_first_seen(np.full(3, -1), 0)[0].tolist() == []


def test_first_seen_of_leading_rows_cuts_the_dictionary():
    """The leading rows of a column encoded in order of first appearance (an import's events, the
    runtime calls after them): the codes kept, the dictionary cut, as encoding the rows would give."""
    texts = ["a", "b", None, "a", "c", "b", "d", "e", "a"]
    full = pa.array(texts).dictionary_encode()
    for n in range(len(texts) + 1):
        got = _first_seen(pa.chunked_array([full.slice(0, n)])).combine_chunks()
        want = pa.array(texts[:n], pa.string()).dictionary_encode()
        assert got.dictionary.to_pylist() == want.dictionary.to_pylist()
        assert got.indices.to_pylist() == want.indices.to_pylist()
        tail = _first_seen(pa.chunked_array([full.slice(n)])).combine_chunks()  # (not in order: renumbered)
        assert tail.to_pylist() == texts[n:] and tail.dictionary.to_pylist() == pa.array(
            texts[n:], pa.string()).dictionary_encode().dictionary.to_pylist()


def test_first_rows_of_factorized_codes():
    rng = np.random.default_rng(5)
    for _ in range(200):
        values = rng.integers(0, int(rng.integers(1, 9)), int(rng.integers(0, 40)))
        codes, uniques = pd.factorize(values)
        assert first_rows(codes).tolist() == [int(np.flatnonzero(values == u)[0]) for u in uniques]


def test_by_identity_groups_the_same_object_not_equal_values():
    a, b = [1, 2, 3], [1, 2, 3]  # equal, two objects
    values = np.empty(5, dtype=object)
    values[:] = [a, b, a, None, b]
    codes, first = by_identity(values)
    assert codes.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]
    assert by_identity(np.empty(0, dtype=object))[0].tolist() == []


def test_categorical_merges_equal_labels_and_keeps_missing_missing():
    got = categorical(["x", None, "y", "x"], np.array([0, 1, 2, 3, -1, 2]))
    assert list(got.categories) == ["x", "y"]
    assert [None if pd.isna(v) else v for v in got] == ["x", None, "y", "x", None, "y"]
    assert len(categorical([], np.zeros(0, dtype=np.int64))) == 0


def test_categorical_without_the_second_check_is_the_checked_categorical():
    """The categories come from `pd.factorize` (distinct, none missing): built without pandas'
    check, the result is what the checked constructor gives, the dtype and its lookups included."""
    rng = np.random.default_rng(3)
    labels = [f"step={i % 700}/layer={i % 13}" if i % 11 else None for i in range(3000)]
    codes = rng.integers(-1, len(labels), 20_000)
    got = categorical(labels, codes)
    uniq = list(dict.fromkeys(v for v in labels if v is not None))  # by first appearance
    want_codes = [-1 if c < 0 or labels[c] is None else uniq.index(labels[c]) for c in codes.tolist()]
    want = pd.Categorical.from_codes(want_codes, categories=pd.Index(uniq, dtype=object))  # checked
    assert got.dtype == want.dtype and list(got.categories) == list(want.categories)
    assert np.array_equal(got.codes, want.codes)
    assert got.categories.is_unique
    assert got.categories.get_loc("step=1/layer=1") == list(got.categories).index("step=1/layer=1")
    assert pd.Series(got).value_counts().sort_index().equals(pd.Series(want).value_counts().sort_index())
