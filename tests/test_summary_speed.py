"""The faster paths of the analysis and of the stored summary give exactly what the plain ones gave:
the grouper against pandas' groupby, the masked sums against their definition, the per-step lists'
text against `json.dumps`, the column-wise records against the per-value `_clean`, the Arrow path
test against the Python one, a group's fallback peak against a sort."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis.attention import _attention_path, matches
from rooftop.analysis.ceilings import group_peak
from rooftop.analysis.aggregate import grouped, known_sums
from rooftop.analysis.step_entries import step_meta
from rooftop.analysis.work import COMPUTE, LINK_COPY
from rooftop.present.report import _clean, records
from rooftop.present.summary import _json_text, _records_text


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    phase = pd.Categorical(rng.choice(["decode", "prefill", None], n, p=[0.6, 0.3, 0.1]),
                           categories=["unused", "prefill", "decode"])  # an unused category, nulls
    rank = pd.array(rng.choice([0, 1, None], n), dtype="Int32")
    step = rng.choice([0.0, 1.0, 2.0, -1.0, np.nan], n)
    name = rng.choice(np.array(["a", "b", "c", None], dtype=object), n)
    text = pd.Series(rng.choice(["x", "y", "z"], n), dtype="str")  # pandas 3's text, none missing
    count = rng.choice([3, 1, 2], n)
    return pd.DataFrame({"phase": phase, "rank": rank, "step": step, "name": name, "text": text, "count": count})


def _same_index(got, want):
    """The same values, dtypes and names, as pandas' own groupby would index them."""
    pd.testing.assert_index_equal(got, want, exact=True, check_exact=True, check_categorical=True)
    if isinstance(got, pd.MultiIndex):
        assert got.dtypes.equals(want.dtypes)
        for a, b in zip(range(got.nlevels), range(want.nlevels)):
            pd.testing.assert_index_equal(got.get_level_values(a), want.get_level_values(b), exact=True)


@pytest.mark.parametrize("keys", [["phase"], ["name"], ["step"], ["rank", "phase", "step"], ["phase", "name"],
                                  ["text"], ["count"], ["phase", "text", "count"], ["step", "count"]])
@pytest.mark.parametrize("dropna", [False, True])
@pytest.mark.parametrize("complete", [False, True])
def test_grouped_numbers_and_indexes_groups_as_pandas_does(keys, dropna, complete):
    frame = _frame()
    if complete:  # no missing key: the index is made from the first rows, not by a groupby
        frame = frame.dropna().astype({"rank": "int64"})
    gid, sizes = grouped(frame, keys, dropna=dropna)
    g = frame.groupby(keys, sort=False, dropna=dropna)
    want = g.ngroup().to_numpy()
    if dropna:  # pandas numbers rows with a missing key apart; grouped leaves those frames to it
        assert np.array_equal(np.asarray(gid, dtype="float64"), np.asarray(want, dtype="float64"), equal_nan=True)
    else:
        assert gid.tolist() == want.tolist()
    pd.testing.assert_series_equal(sizes, g.size(), check_names=False)
    _same_index(sizes.index, g.size().index)


def test_grouped_without_missing_keys_takes_its_own_path_and_agrees():
    frame = _frame().dropna()
    gid, sizes = grouped(frame, ["phase", "name"])
    g = frame.groupby(["phase", "name"], sort=False)
    assert gid.tolist() == g.ngroup().tolist()
    pd.testing.assert_series_equal(sizes, g.size(), check_names=False)
    # numbered by first appearance: the first row is group 0, and each new group the next number
    assert gid[0] == 0 and (np.maximum.accumulate(gid)[1:] - np.maximum.accumulate(gid)[:-1]).max() == 1


def _known_sums_by_definition(rows, gid, n):
    def known(values):
        ok = ~np.isnan(values)
        total = np.bincount(gid, weights=np.where(ok, values, 0.0), minlength=n)
        return np.where(np.bincount(gid, weights=ok, minlength=n) > 0, total, np.nan)

    b, f, dur = rows["bytes"].to_numpy(), rows["work_flops"].to_numpy(), rows["dur_ns"].to_numpy(dtype="float64")
    cls = rows["copy_class"].to_numpy()
    compute, hbm = cls == COMPUTE, cls != LINK_COPY
    # bytes are HBM bytes: a host/peer copy's bytes cross a link, so they are not counted
    kb, kf = ~np.isnan(b) & hbm, ~np.isnan(f) & compute
    both = kb & kf

    def time_of(mask):
        return np.bincount(gid, weights=np.where(mask, dur, 0.0), minlength=n)
    return {"flops": known(f), "bytes": known(np.where(hbm, b, np.nan)), "bytes_ns": time_of(kb), "flops_ns": time_of(kf),
            "both_ns": time_of(both), "both_flops": known(np.where(both, f, np.nan)),
            "both_bytes": known(np.where(both, b, np.nan)), "hbm_known_ns": time_of(kb & hbm),
            "hbm_ns": time_of(hbm), "compute_ns": time_of(compute)}


@pytest.mark.parametrize("case", ["mixed", "all_known", "none_known", "same_masks"])
def test_known_sums_are_the_plain_bincounts(case):
    rng = np.random.default_rng(3)
    n_rows, n = 500, 7
    gid = np.concatenate([np.arange(n), rng.integers(0, n, n_rows - n)])
    b = rng.random(n_rows) * 1e6
    f = rng.random(n_rows) * 1e9
    cls = rng.choice([COMPUTE, 1, LINK_COPY], n_rows).astype(np.int8)
    if case == "mixed":
        b[rng.random(n_rows) < 0.4] = np.nan
        f[rng.random(n_rows) < 0.3] = np.nan
        gid[gid == 3] = 2  # group 3 then has no rows at all: every sum 0, every known sum NaN
    elif case == "none_known":
        b[:], f[:] = np.nan, np.nan
    elif case == "same_masks":
        gone = rng.random(n_rows) < 0.5
        b[gone], f[gone] = np.nan, np.nan
        cls[:] = COMPUTE
    rows = pd.DataFrame({"bytes": b, "work_flops": f, "dur_ns": rng.integers(1, 10_000, n_rows), "copy_class": cls})
    got = known_sums(rows, gid, n)
    want = _known_sums_by_definition(rows, gid, n)
    assert list(got) == list(want)
    for k in want:
        assert np.array_equal(got[k], want[k], equal_nan=True), k
    assert len({id(v) for v in got.values()}) == len(got)  # no two columns share an array


RECORDS = [
    [],
    [{"a": 1, "b": -2.5, "c": "x\"y\\z\n\t\u00e9\u2603\U0001f600", "d": None, "e": True, "f": False}],
    [{"phase": "decode", "step": 3, "span_ns": 1e-320, "big": 10 ** 30, "small": 1.0, "neg0": -0.0,
      "e": 1e22, "f": 0.1 + 0.2}, {"phase": "prefill", "step": 0}],
    [{"\u00fc key": "v", "k\u0000": "\u0001"}],
    [{"a": "},\n  {"}, {"b": "}\n {"}],  # the text that separates records, inside a value
]


@pytest.mark.parametrize("value", RECORDS)
def test_records_text_is_json_dumps_indent_one(value):
    assert _records_text(value) == json.dumps(value, indent=1, default=str, allow_nan=False)
    assert _json_text(value) == json.dumps(value, indent=1, default=str, allow_nan=False)


@pytest.mark.parametrize("value", [[{"a": [1]}], [{"a": np.float64(1.5)}], [{1: "x"}], [1, 2], {"a": 1},
                                   [{"a": {"b": 1}}], [{"a": True}, 3], [{}], [{"a": 1}, {}],
                                   [{"a": [{"b": 1}, {"c": 2}]}]])
def test_records_text_leaves_anything_else_to_json(value):
    assert _records_text(value) is None
    assert _json_text(value) == json.dumps(value, indent=1, default=str, allow_nan=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_records_text_refuses_what_json_refuses(bad):
    assert _records_text([{"a": bad}]) is None
    with pytest.raises(ValueError):
        _json_text([{"a": 1.0, "b": bad}])


def test_records_column_by_column_are_the_per_value_clean():
    frame = pd.DataFrame({
        "f": [1.5, np.nan, np.inf, -np.inf, 0.0],
        "i": np.array([1, 2, 3, 4, 5], dtype=np.int64),
        "u": np.array([1, 2, 3, 4, 2 ** 63], dtype=np.uint64),
        "b": [True, False, True, False, True],
        "I": pd.array([1, None, 3, 4, 5], dtype="Int64"),
        "o": np.array(["x", None, np.nan, 3, 2.5], dtype=object),
        "c": pd.Categorical(["p", None, "q", "p", "q"]),
        "f32": np.array([0.1, np.nan, 2, 3, 4], dtype=np.float32),
        "s": pd.array(["a", None, "b", "a", "c"], dtype="str"),  # pandas 3's text
        "t": pd.Series(["x", None, "y", "x", "z"], dtype=object),  # text and None only
        "ci": pd.Categorical([3, None, 4, 3, 4]),
        "cn": pd.Categorical([np.float64(2.5), 3.0, None, 2.5, 3.0]),
    })
    keys = list(frame.columns) + ["absent"]
    want = [{k: _clean(v) for k, v in zip(frame.columns, row)} for row in frame.itertuples(index=False, name=None)]
    got = records(frame, keys)
    assert got == want
    assert [[type(v) for v in r.values()] for r in got] == [[type(v) for v in r.values()] for r in want]
    assert got[1]["f"] is None and got[2]["f"] is None and got[1]["I"] is None and got[0]["u"] == 1


def test_attention_path_flags_match_the_python_test_on_any_text():
    paths = ["decode/step=0/layer=0/ATTN", "decode/step=0/layer=0/mlp", "model/Self_Attention/q", "x/MHA",
             "\u0130attn/\u00e9", "attent\u0130on", "\u017fdpa", "", "sdpa", "\u00fcber/mlp"]
    cats = pd.Index(pd.array(paths, dtype=pd.StringDtype("pyarrow", na_value=np.nan)))
    codes = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 4, 0]
    col = pd.Series(pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(cats)))
    want = [c >= 0 and _attention_path(paths[c]) for c in codes]
    assert want[:4] == [True, False, True, True] and want[10] is False
    assert matches(col, _attention_path).tolist() == want
    assert matches(col.astype(object), _attention_path).tolist() == want


def test_group_fallback_peak_is_the_longest_rows_the_last_among_equals():
    gid = np.array([0, 0, 0, 1, 1, 2])
    flops = np.full(6, np.nan)  # no FLOPs known: every group takes its longest row's peak
    peak = np.array([1e15, 2e15, 3e15, 4e15, 5e15, np.nan])
    got = group_peak(flops, peak, gid, 3, np.array([7, 9, 9, 3, 1, 100]))
    # group 0: rows 1 and 2 both last 9, the later one (row 2) counts; group 1: row 3; group 2: no peak
    assert got[:2].tolist() == [3e15, 4e15] and math.isnan(got[2])


def test_grouped_with_many_key_combinations_agrees_too():
    # 400 x 400 possible pairs over 1000 rows: numbered through a hash, not a table
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"a": rng.integers(0, 400, 1000).astype("float64"),
                          "b": pd.Categorical(rng.integers(0, 400, 1000).astype(str))})
    frame.loc[::7, "a"] = np.nan
    gid, sizes = grouped(frame, ["a", "b"], dropna=False)
    g = frame.groupby(["a", "b"], sort=False, dropna=False)
    assert gid.tolist() == g.ngroup().tolist()
    pd.testing.assert_series_equal(sizes, g.size(), check_names=False)


def test_split_runtime_text_is_what_encoding_after_the_split_gives():
    """Names are dictionary-encoded before the runtime rows are split off; each part then holds
    its own values only, in order of first appearance, as if encoded after the split."""
    import pyarrow as pa

    from rooftop.trace.frame import _to_frame
    from rooftop.trace.runtime import split_runtime
    kinds = ["runtime", "kernel", "range", "runtime", "kernel", "memcpy", "runtime", "kernel"]
    names = ["cudaLaunchKernel", "gemm", None, "cudaMemcpyAsync", "softmax", "HtoD", "cudaLaunchKernel", "gemm"]
    paths = ["host/x", "decode/a", "decode", None, "decode/b", "decode/a", "host/y", "decode/b"]
    n = len(kinds)

    def part(lo, hi):
        return pa.table({"id": pa.array(range(lo, hi), pa.int64()), "kind": pa.array(kinds[lo:hi]).dictionary_encode(),
                         "name": pa.array(names[lo:hi], pa.string()), "path": pa.array(paths[lo:hi], pa.string()),
                         "start_ns": pa.array(range(lo, hi), pa.int64()), "dur_ns": pa.array([5] * (hi - lo), pa.int64())})
    table = pa.concat_tables([part(0, 3), part(3, 8)])  # two chunks
    events, host = split_runtime(table)
    frame = _to_frame([events])
    gpu_first = [1, 4, 5, 7, 2]  # GPU rows first, then the range
    assert frame["name"].astype(object).tolist()[:4] == ["gemm", "softmax", "HtoD", "gemm"]
    assert list(frame["name"].cat.categories) == ["gemm", "softmax", "HtoD"]  # no runtime name among them
    assert list(frame["path"].cat.categories) == ["decode/a", "decode/b", "decode"]
    assert frame["path"].astype(object).tolist() == [paths[i] for i in gpu_first]
    assert list(host["name"].cat.categories) == ["cudaLaunchKernel", "cudaMemcpyAsync"]
    assert host["name"].astype(object).tolist() == ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaLaunchKernel"]
    assert frame["id"].tolist() == gpu_first and n == 8


def test_split_runtime_cuts_slices_of_rows_stored_in_its_order():
    """Rows stored GPU first, then the other events, then the runtime calls (as an import writes
    them): both parts are slices of the table (no column copied), and they are what the same rows
    in another order split into."""
    import pyarrow as pa

    from rooftop.trace.frame import _to_frame
    from rooftop.trace.runtime import split_runtime
    kinds = ["kernel", "memcpy", "kernel", "range", "range", "runtime", "runtime"]
    names = ["gemm", "HtoD", "softmax", "step=1", None, "cudaLaunchKernel", "cudaMemcpyAsync"]
    table = pa.table({"id": pa.array(range(7), pa.int64()), "kind": pa.array(kinds).dictionary_encode(),
                      "name": pa.array(names, pa.string()).dictionary_encode(),
                      "start_ns": pa.array([3, 4, 9, 1, 8, 2, 5], pa.int64()), "dur_ns": pa.array([5] * 7, pa.int64())})
    events, host = split_runtime(table)
    start = table.column("start_ns").chunk(0).buffers()[1].address
    assert events.column("start_ns").chunk(0).buffers()[1].address == start  # a slice: the same buffer
    assert events.num_rows == 5 and host["start_ns"].tolist() == [2, 5]
    shuffled = table.take(pa.array([3, 5, 0, 1, 6, 2, 4]))
    other_events, other_host = split_runtime(shuffled)
    assert other_events.column("start_ns").chunk(0).buffers()[1].address != start
    a, b = _to_frame([events]), _to_frame([other_events])
    assert a.sort_values("id").reset_index(drop=True).equals(b.sort_values("id").reset_index(drop=True))
    assert list(a["name"].cat.categories) == ["gemm", "HtoD", "softmax", "step=1"]
    assert host["name"].astype(object).tolist() == other_host["name"].astype(object).tolist()


def _step_meta_by_pandas(meta):
    """What `step_meta` was: a frame of the entries, each number column through `pd.to_numeric`."""
    rows = [{"phase": s.get("phase"), "step": s.get("index", s.get("step")), "batch": s.get("batch"),
             "new_tokens": s.get("new_tokens"), "tokens": s.get("tokens", s.get("new_tokens")),
             "context": s.get("context")} for s in meta.get("steps") or [] if isinstance(s, dict)]
    frame = pd.DataFrame(rows, columns=["phase", "step", "batch", "new_tokens", "tokens", "context"])
    for c in frame.columns[1:]:
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
    return frame.drop_duplicates(["phase", "step"])


@pytest.mark.parametrize("seed", range(40))
def test_step_meta_reads_the_entries_as_pandas_does(seed):
    rng = np.random.default_rng(seed)
    # mostly plain numbers (the arrays' path), sometimes what only pandas' conversion reads
    odd = [None, "12", "x", True, 2 ** 70, 1.5, float("nan")] if seed % 3 else [None, 2.5]
    phases = ["decode", "prefill"] + ([None, 7] if seed % 4 == 0 else [])

    def value():
        return int(rng.integers(0, 100)) if rng.random() < 0.8 else odd[int(rng.integers(len(odd)))]
    steps = []
    for i in range(int(rng.integers(0, 30))):
        s = {"phase": phases[int(rng.integers(len(phases)))], "index" if rng.random() < 0.9 else "step": value()}
        for k in ("batch", "new_tokens", "tokens", "context"):
            if rng.random() < 0.7:
                s[k] = value()
        steps.append(s)
    meta = {"steps": steps}
    pd.testing.assert_frame_equal(step_meta(meta), _step_meta_by_pandas(meta), check_exact=True)
