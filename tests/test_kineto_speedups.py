"""The import's fast paths give what their plain definitions give (random inputs, hand-checked cases)."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from collectors.readers._kineto_join import _distinct_rows
from collectors.readers.nesting import _nest_by_loop, nest_intervals
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


def _parent_finders() -> dict:
    """Both ways `_pass_parents` finds parents: NumPy's jumps, and the pass in C where it is built
    (required where CI builds it: ROOFTOP_REQUIRE_COMPILED=1)."""
    from collectors.readers import nesting

    finders = {"jumps": nesting._parents_by_jumps}
    try:
        from collectors.readers import _nesting_fast
    except ImportError:
        if os.environ.get("ROOFTOP_REQUIRE_COMPILED") == "1":
            pytest.fail("ROOFTOP_REQUIRE_COMPILED=1 but collectors.readers._nesting_fast is not built")
        return finders
    finders["compiled"] = lambda thr, st, en: np.frombuffer(
        _nesting_fast.pass_parents(*(np.ascontiguousarray(a, dtype=np.int64) for a in (thr, st, en))), dtype=np.int64)
    return finders


@pytest.mark.parametrize("how", ["jumps", "compiled"])
def test_pass_parents_is_what_the_stack_pass_finds(how):
    """`_pass_parents`' two ways against the stack pass they stand for, on long runs (deep jump
    tables), many threads, ranges nested, overlapping partly, zero-length and sharing starts."""
    finders = _parent_finders()
    if how not in finders:
        pytest.skip("the compiled pass is not built")
    _pass_parents = finders[how]

    rng = np.random.default_rng(11)
    for n, nthr, span in ((3000, 1, 400), (2500, 5, 3000), (64, 2, 10), (1, 1, 5), (0, 1, 5)):
        thr, st = rng.integers(0, nthr, n), rng.integers(0, span, n)
        en = st + np.where(rng.random(n) < 0.1, 0, rng.integers(0, span // 3 + 1, n))
        order = np.lexsort((-(en - st), st, thr))
        thr, st, en = thr[order], st[order], en[order]
        want, stack, cur = [], [], None
        for k in range(n):
            if thr[k] != cur:
                cur, stack = thr[k], []
            while stack and en[stack[-1]] <= st[k]:
                stack.pop()
            want.append(stack[-1] if stack else -1)
            stack.append(k)
        assert _pass_parents(thr, st, en).tolist() == want


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


def _conform_rows(n: int, seed: int) -> pd.DataFrame:
    """Rows as an importer hands them over: shared launch-shape lists, repeated texts, gaps."""
    rng = np.random.default_rng(seed)
    shapes = [[1, 2, 3], [4, 1, 1], None, [65536, 1, 1]]
    texts = ["decode/step=3/layer=7/attn", "prefill/step=1", "step=2/layer=0", "", None, "ProfilerStep#4/layers.12"]
    pick = lambda vals: [vals[i] for i in rng.integers(0, len(vals), n)]  # noqa: E731
    return pd.DataFrame({
        "kind": pick(["kernel", "range", "memcpy"]), "name": pick(["gemm", "flash_fwd", None, ""]),
        "start_ns": rng.integers(0, 10**6, n), "dur_ns": rng.integers(0, 1000, n),
        "path": pick(texts), "phase": pick(["decode", None]), "step": pd.array(pick([1, None, 7]), dtype="Int32"),
        "op": pick(["aten::mm", None]), "grid": pick(shapes), "block": pick(shapes),
    })


def test_to_table_per_distinct_value_is_the_per_row_conversion():
    """Categorical text and shared shape lists (the importer's fast forms) conform to the same table
    as plain object columns and one list per row (the per-row conversion)."""
    import pyarrow as pa

    from rooftop.trace import to_table

    for seed in range(6):
        rows = _conform_rows(300, seed)
        plain = rows.assign(grid=[None if v is None else list(v) for v in rows["grid"]],
                            block=[None if v is None else list(v) for v in rows["block"]])
        fast = rows.assign(**{c: _as_category(rows[c].to_numpy(dtype=object)) for c in ("kind", "name", "path", "phase", "op")})
        a, b = to_table(plain), to_table(fast)
        assert a.schema == b.schema
        for c in a.column_names:
            assert a[c].equals(b[c]), c
    # by hand: shapes and the dictionary in order of first appearance, nulls kept
    t = to_table(pd.DataFrame({"kind": pd.Categorical(["range", None, "kernel", "range"]),
                               "name": ["a", "b", "c", "d"], "start_ns": [0, 1, 2, 3], "dur_ns": [1, 1, 1, 1],
                               "grid": [[1, 2, 3], None, [1, 2, 3], [2, 1, 1]]}))
    assert t["kind"].to_pylist() == ["range", None, "kernel", "range"]
    assert t["kind"].chunk(0).dictionary.to_pylist() == ["range", "kernel"]
    assert t["grid"].to_pylist() == [[1, 2, 3], None, [1, 2, 3], [2, 1, 1]]
    assert t["flops"].null_count == 4 and t["stall_wait"].type == pa.float32()


def test_parse_paths_full_only_where_asked():
    from rooftop.trace.steps import parse_path, parse_paths

    paths = pd.Series(["decode/step=3/layer=7/attn", None, "prefill/step=1", "decode/step=3/layer=7/attn",
                       "layers.12/mlp", ""], dtype=object)
    full = parse_paths(paths)
    assert full["phase"].tolist()[:3] == ["decode", full["phase"][1], "prefill"] and pd.isna(full["phase"][1])
    assert full["step"].tolist() == [3, pd.NA, 1, 3, pd.NA, pd.NA]
    assert full["layer"].tolist() == [7, pd.NA, pd.NA, 7, 12, pd.NA]
    for i, p in enumerate(paths):
        want = parse_path(p)
        assert (full["step"][i] if pd.notna(full["step"][i]) else None) == want[1]
    # phase and step only for the rows asked (and every row sharing their path); the layer everywhere
    part = parse_paths(paths, np.array([False, False, True, True, False, False]))
    assert part["phase"].tolist()[2:4] == ["prefill", "decode"] and part["phase"][0] == "decode"
    assert part["step"].tolist()[4] is pd.NA and part["layer"].tolist() == full["layer"].tolist()
    assert pd.isna(part["phase"][4]) and part["step"][0] == 3 and isinstance(part["phase"].dtype, pd.CategoricalDtype)


@pytest.mark.parametrize("overlap", [True, False])
def test_write_handed_over_writes_what_write_trace_writes(tmp_path, monkeypatch, overlap):
    """The summary computed beside the rows' write (or after it, for a large table): the same file,
    the hand-over lists emptied."""
    import pyarrow.parquet as pq

    from rooftop.trace import to_table, write_trace
    from rooftop.trace import write as write_module
    from rooftop.trace.write import write_handed_over

    monkeypatch.setattr(write_module, "OVERLAP_MAX_BYTES", 1 << 40 if overlap else 0)
    table = to_table(_conform_rows(500, 1))
    entries = {b"rooftop.summary": b'{"x": 1}', b"rooftop.summary.steps": b"[]"}
    seen = []

    def footer(mine):
        seen.append(mine[0].num_rows)
        mine.clear()
        return entries

    held = [table]
    write_handed_over(tmp_path / "a.parquet", held, {"k": "v"}, footer)
    write_trace(tmp_path / "b.parquet", table, {"k": "v"}, conform=False, extra=entries)
    assert held == [] and seen == [500]
    a, b = pq.read_table(tmp_path / "a.parquet"), pq.read_table(tmp_path / "b.parquet")
    assert a.equals(b) and a.schema.metadata == b.schema.metadata
    assert pq.read_metadata(tmp_path / "a.parquet").metadata == pq.read_metadata(tmp_path / "b.parquet").metadata


def test_parse_layers_matches_parse_layer():
    """Arrow's regex over plain ASCII paths, `parse_layer` for the rest: the same layers, hand-checked
    edge cases (int32 bound, 10 digits, newline, non-ASCII digits) and random paths of the tokens."""
    from rooftop.trace.steps import parse_layer, parse_layers

    cases = ["a/layer=3/b", "layers.12", "layer_2147483647", "layer_2147483648", "layer_0000000001",
             "layer_00000000001", "a/layerx3", "layer3\n", "layer\u0663", "\u00e9/layer=4", None, "",
             "/layer=1/layer=2", "alayer=1", "layer=1x", "LAYER=3", "layer/layer5"]
    expected = [3, 12, 2147483647, None, 1, None, None, 3, 3, 4, None, None, 1, None, None, None, 5]
    rng = np.random.default_rng(3)
    tokens = ["layer", "layers", "/", "=", "_", ".", "#", " ", "1", "23", "x", "9999999999", "\n", "\u0663"]
    random = ["".join(rng.choice(tokens, rng.integers(0, 10))) for _ in range(5000)]
    expected += [parse_layer(p) for p in random]
    got = parse_layers(np.array(cases + random, dtype=object))
    assert [None if np.isnan(v) else int(v) for v in got] == expected
    assert sum(e is not None for e in expected) > 50  # the random paths do name layers


def test_phases_and_steps_match_parse_path():
    """Arrow's regex for plain ASCII paths that name their phase, `parse_path` for the rest (engine
    markers, other text): the same phase and step for hand-checked edge cases and random paths."""
    from rooftop.trace.steps import parse_path
    from rooftop.trace.steps.paths import _phases_and_steps

    cases = ["decode/step=12/layer=3/attn", "a/PREFILL/step_4", "prefill=3", "decode_batch", "xdecode/step=1",
             "decode", "/decode/", "decoder/step=2", "ProfilerStep#7/x", "step#12", "step 5/", "step=99999999999",
             "step=2147483648", "step=0000000007", "decode\n/step=1", "d\u00e9code/decode/step=3",
             "execute_context_1(100)_generation_3(3)/step=9", "DECODE bs=4", "prefill_extend", "x/decode=1/step_2",
             "", "decode step=3", "a/decode/b/prefill", "step=3/step=4", "stepx=3"]
    rng = np.random.default_rng(5)
    tokens = ["decode", "prefill", "DeCoDe", "step", "/step=", "step_", "ProfilerStep#", "/", "=", "_", "#", " ", "3", "42",
              "9999999999", "x", "\n", "\u00e9", "execute_context_1(4)_generation_2(2)"]
    random = ["".join(rng.choice(tokens, rng.integers(0, 9))) for _ in range(5000)]
    segments = ["decode", "prefill", "step=3", "step_12", "ProfilerStep#4", "layer=2", "attn", "DECODE", "step 7",
                "step=99999999999", "d\u00e9code", "x\ny", "execute_context_1(4)_generation_2(2)", "decode_x"]
    random += ["/".join(rng.choice(segments, rng.integers(1, 5))) for _ in range(3000)]  # paths of segments
    paths = cases + random
    phase, step = _phases_and_steps(np.array(paths, dtype=object))
    want = [parse_path(p)[:2] for p in paths]
    assert list(phase) == [w[0] for w in want]
    assert [None if np.isnan(v) else int(v) for v in step] == [w[1] for w in want]
    assert sum(w[0] is not None for w in want) > 500 and sum(w[1] is not None for w in want) > 200


@pytest.mark.parametrize("depth, label_len", [(63, 5), (64, 5), (65, 5), (70, 3), (3, 400), (2, 1100), (40, 20)])
def test_nest_intervals_paths_by_level_and_at_the_bounds(depth, label_len):
    """Paths built a level at a time where nothing is cut, and by the pass where the depth or the
    length bound cuts them: the same paths and cut count as the one-pass loop, on chains around
    MAX_PATH_DEPTH and labels around MAX_PATH_CHARS, beside a second thread of plain ranges."""
    rng = np.random.default_rng(depth * 1000 + label_len)
    ist = np.concatenate([np.arange(depth), rng.integers(0, 50, 30)])
    ien = np.concatenate([10**6 - np.arange(depth), rng.integers(50, 100, 30)])
    ithr = np.concatenate([np.zeros(depth, np.int64), np.ones(30, np.int64)])
    labels = [("x" * label_len) + str(i) for i in range(depth)] + [f"r{i % 7}" for i in range(30)]
    qthr, qt = np.array([0, 0, 1, 1]), np.array([depth - 1, 10**6 + 5, 60, 10])
    s1, s2 = {}, {}
    fast = nest_intervals(ithr, ist, ien, labels, qthr, qt, s1)
    slow = _nest_by_loop(ithr, ist, ien, labels, qthr, qt, s2)
    assert fast[0].tolist() == slow[0].tolist() and fast[1] == slow[1] and fast[2] == slow[2] and s1 == s2
    deepest = max(fast[2][:depth], key=lambda p: p.count("/"))
    cut = depth > 64 or (depth * (label_len + 3) > 1024)
    assert deepest.endswith("/…") == cut and bool(s1.get("cut")) == cut


def test_first_index_is_the_first_equal_key():
    """Keys close together (a run's correlation ids) are looked up through a table over their range,
    others by a sort: either way the first row holding each query, -1 for none and for NULL."""
    from collectors.readers._kineto_values import NULL, first_index

    rng = np.random.default_rng(11)
    for _ in range(300):
        spread = int(rng.choice([5, 50, 10**6, 2**40]))
        keys = rng.integers(-3, spread, int(rng.integers(0, 60)))
        queries = rng.integers(-5, spread + 3, int(rng.integers(0, 60)))
        if rng.random() < 0.3 and len(keys):
            keys[rng.integers(0, len(keys), 3)] = NULL
        if rng.random() < 0.3 and len(queries):
            queries[rng.integers(0, len(queries), 3)] = NULL
        want = [-1 if q == NULL or q not in keys.tolist() else keys.tolist().index(q) for q in queries.tolist()]
        assert first_index(keys, queries).tolist() == want
    null = np.full(4, NULL, dtype=np.int64)
    assert first_index(null, null).tolist() == [-1] * 4
