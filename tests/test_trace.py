"""Trace format v1: write, load, validate; multi-rank directories; plain Parquet readers."""
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rooftop.trace import (COLUMNS, FORMAT_VERSION, META_KEY, SCHEMA, TraceError, check_writable, load_trace,
                           read_meta, to_table, write_trace)

ROWS = [
    dict(kind="kernel", name="void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, X)",
         start_ns=100, dur_ns=50, path="decode/step=3/layer=1/mlp", grid=(4, 1, 1), block=(128, 1, 1), device=0, stream=7),
    dict(kind="memcpy", name="Memcpy HtoD", start_ns=0, dur_ns=20, device=0, stream=7),
    dict(kind="range", name="decode", start_ns=0, dur_ns=500, path="decode"),
]


def test_round_trip_and_derived_columns(tmp_path):
    p = write_trace(tmp_path / "t.parquet", ROWS, {"model": {"name": "m"}})
    t = load_trace(p)
    assert t.meta["format"] == FORMAT_VERSION and t.meta["model"]["name"] == "m"
    ev = t.events
    assert list(ev.columns[: len(COLUMNS)]) == list(COLUMNS)
    k = ev.iloc[0]
    assert (k["phase"], k["step"], k["layer"]) == ("decode", 3, 1)
    assert k["short_name"] == "vectorized_elementwise_kernel<>"
    assert k["category"] == "elementwise"
    assert list(k["grid"]) == [4, 1, 1]
    assert ev.iloc[1]["category"] == "memory"
    # unknown is null, never 0
    assert ev["flops"].isna().all() and ev["dram_read"].isna().all()
    assert ev.iloc[1]["step"] is None or str(ev.iloc[1]["step"]) == "<NA>"


def test_file_is_plain_parquet_with_dictionary_columns(tmp_path):
    p = write_trace(tmp_path / "t.parquet", ROWS, {})
    schema = pq.read_schema(p)
    assert pa.types.is_dictionary(schema.field("kind").type)
    assert schema.field("grid").type == pa.list_(pa.int32(), 3)
    meta = json.loads(schema.metadata[META_KEY])
    assert meta["format"] == 1
    assert pq.read_metadata(p).row_group(0).column(0).compression == "ZSTD"
    assert read_meta(p)["format"] == 1


def test_climbing_ids_and_times_are_stored_as_deltas(tmp_path):
    # 20k rows whose ids, starts and correlations climb: deltas, not a dictionary of 20k values;
    # the text and the launch shapes keep their dictionary pages, and everything reads back the same
    n = 20_000
    rows = [dict(kind="kernel", name=f"k{i % 7}", start_ns=1_000 * i, dur_ns=100 + i % 3, correlation=i,
                 device=0, stream=7, grid=(i % 4 + 1, 1, 1)) for i in range(n)]
    p = write_trace(tmp_path / "t.parquet", rows, {})
    md = pq.read_metadata(p).row_group(0)
    enc = {md.column(j).path_in_schema: md.column(j).encodings for j in range(md.num_columns)}
    for col in ("id", "start_ns", "correlation"):
        assert "DELTA_BINARY_PACKED" in enc[col] and "RLE_DICTIONARY" not in enc[col], (col, enc[col])
    for col in ("name", "dur_ns", "grid.list.element"):
        assert "RLE_DICTIONARY" in enc[col], (col, enc[col])
    ev = load_trace(p).events
    assert ev["start_ns"].tolist() == [1_000 * i for i in range(n)]
    assert ev["correlation"].tolist() == list(range(n))
    assert ev["id"].is_unique and [list(g) for g in ev["grid"][:5]] == [[i + 1, 1, 1] for i in range(4)] + [[1, 1, 1]]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    write_trace(tmp_path / "t.parquet", ROWS, {})
    assert [f.name for f in tmp_path.iterdir()] == ["t.parquet"]


@pytest.mark.parametrize("content,problem", [
    (b"", "empty file"),
    (b"hello, not parquet at all", "not a Parquet file"),
])
def test_not_parquet(tmp_path, content, problem):
    p = tmp_path / "x.parquet"
    p.write_bytes(content)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert problem in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_truncated(tmp_path):
    p = write_trace(tmp_path / "t.parquet", ROWS, {})
    data = p.read_bytes()
    for cut in (8, len(data) // 2, len(data) - 3):
        q = tmp_path / f"cut{cut}.parquet"
        q.write_bytes(data[:cut])
        with pytest.raises(TraceError, match="truncated"):
            load_trace(q)


def test_missing_required_column(tmp_path):
    table = to_table(ROWS).drop(["dur_ns"])
    table = table.replace_schema_metadata({META_KEY: b'{"format": 1}'})
    pq.write_table(table, tmp_path / "m.parquet")
    with pytest.raises(TraceError, match="missing required column.*dur_ns"):
        load_trace(tmp_path / "m.parquet")


def test_newer_format_version(tmp_path):
    table = to_table(ROWS).replace_schema_metadata({META_KEY: b'{"format": 2}'})
    pq.write_table(table, tmp_path / "v2.parquet")
    with pytest.raises(TraceError, match="format version 2 is newer"):
        load_trace(tmp_path / "v2.parquet")


def test_no_rooftop_metadata(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "plain.parquet")
    with pytest.raises(TraceError, match="without rooftop metadata"):
        load_trace(tmp_path / "plain.parquet")


def test_negative_duration(tmp_path):
    rows = [dict(ROWS[0], dur_ns=-5)]
    table = to_table(rows).replace_schema_metadata({META_KEY: b'{"format": 1}'})
    pq.write_table(table, tmp_path / "neg.parquet")
    with pytest.raises(TraceError, match="1 event.*negative duration"):
        load_trace(tmp_path / "neg.parquet")


def test_nan_and_negative_work_become_unknown(tmp_path):
    rows = [dict(ROWS[0], model_bytes=float("nan"), flops=-3.0)]
    t = load_trace(write_trace(tmp_path / "n.parquet", rows, {}))
    assert t.events["model_bytes"].isna().all() and t.events["flops"].isna().all()
    assert any("negative or NaN" in w for w in t.warnings)


def test_multi_rank_directory(tmp_path):
    for r in (0, 1, 2):
        rows = [dict(ROWS[0], start_ns=100 * r)]
        write_trace(tmp_path / "run" / f"rank={r}" / "trace.parquet", rows, {"device": {"name": f"gpu{r}"}})
    t = load_trace(tmp_path / "run")
    assert t.ranks == [0, 1, 2]
    assert len(t.events) == 3
    assert [m["device"]["name"] for m in t.meta["ranks"]] == ["gpu0", "gpu1", "gpu2"]


def test_multi_rank_directory_is_plain_parquet_for_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    for r in (0, 1):
        rows = [dict(ROWS[0], dur_ns=10 * (r + 1)), dict(ROWS[0], dur_ns=1)]
        write_trace(tmp_path / "run" / f"rank={r}" / "trace.parquet", rows, {})
    q = (f"SELECT rank, sum(dur_ns) AS t FROM read_parquet('{tmp_path}/run/*/*.parquet', hive_partitioning=true) "
         "WHERE kind = 'kernel' GROUP BY rank ORDER BY rank")
    assert duckdb.sql(q).fetchall() == [(0, 11), (1, 21)]


def test_empty_directory(tmp_path):
    with pytest.raises(TraceError, match="no .parquet"):
        load_trace(tmp_path)


def test_check_writable(tmp_path):
    check_writable(tmp_path / "sub" / "x.parquet")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(TraceError, match="cannot write"):
        check_writable(tmp_path / "afile" / "x.parquet")   # parent is a file: fails even as root
    with pytest.raises(TraceError, match="is a directory"):
        check_writable(tmp_path / "sub")


def test_schema_has_all_stall_reasons():
    assert sum(1 for n in SCHEMA.names if n.startswith("stall_")) == 19


def test_written_file_honours_umask(tmp_path):
    import os
    old = os.umask(0o022)
    try:
        p = write_trace(tmp_path / "t.parquet", ROWS, {})
    finally:
        os.umask(old)
    assert (p.stat().st_mode & 0o777) == 0o644


@pytest.mark.parametrize("typ", [pa.list_(pa.int32(), 3), pa.list_(pa.int32())])
def test_launch_shapes_load_as_shared_arrays(typ):
    """grid/block load as pandas converts them (NumPy arrays, float when the column holds null
    lists, None for null), one array per distinct shape shared by its rows; a shape with a null
    inside converts row by row."""
    from rooftop.trace.frame import _shared_lists

    cases = [pa.chunked_array([pa.array([[1, 2, 3], None, [1, 2, 3], [4, 5, 6]], type=typ),
                               pa.array([[4, 5, 6], None], type=typ)]),
             pa.chunked_array([pa.array([[1, 2, 3], [4, 5, 6], [1, 2, 3]], type=typ)]),
             pa.chunked_array([pa.array([None, None], type=typ)]),
             pa.chunked_array([pa.array([[1, None, 3], [1, 2, 3]], type=typ)]),
             # packed into one int64 each, numbered by hashing (more possible shapes than a table holds)
             pa.chunked_array([pa.array([[70000, 2, 3], [1, 2, 3], [70000, 2, 3]], type=typ)]),
             # too large to pack into one int64, and negative: keyed by their text instead
             pa.chunked_array([pa.array([[2**31 - 1] * 3, [1, 2, 3], [2**31 - 1] * 3], type=typ)]),
             pa.chunked_array([pa.array([[-1, 2, 3], [1, 2, 3], [-1, 2, 3]], type=typ)])]
    for col in cases:
        got, want = _shared_lists(col), col.to_pandas().to_numpy(dtype=object)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    got = _shared_lists(cases[0])
    assert got[0] is got[2] and got[3] is got[4]  # one object per distinct shape
    for col in cases[-3:]:
        got = _shared_lists(col)
        assert got[0] is got[2] and got[0] is not got[1]


def test_lazy_runtime_rows_load_as_the_eager_ones(tmp_path, monkeypatch):
    """`lazy_host`: the events and warnings are those of the ordinary load, the runtime rows come
    when asked (`runtime_rows`), equal to the ordinary load's `host`, text scrubbed the same way;
    batches smaller than the file (the read filters batch by batch) change nothing."""
    from rooftop.trace import parquet as R

    monkeypatch.setattr(R.pq.ParquetFile, "iter_batches", _small_batches)  # batches of 2 rows
    rows = ROWS + [dict(kind="runtime", name="cudaLaunchKernel", start_ns=90 + i, dur_ns=3, correlation=i, thread=11,
                        op="aten::add token=ghp_0123456789abcdefghijABCDEFGHIJ0123456789" if i == 1 else "aten::add", id=100 + i) for i in range(5)]
    p = write_trace(tmp_path / "h.parquet", rows, {})
    eager, lazy = load_trace(p), load_trace(p, lazy_host=True)
    assert lazy.host is None and lazy.load_host is not None
    assert lazy.events.drop(columns=["grid", "block"]).equals(eager.events.drop(columns=["grid", "block"]))
    assert [None if v is None else list(v) for v in lazy.events["grid"]] == \
           [None if v is None else list(v) for v in eager.events["grid"]]
    assert lazy.warnings == eager.warnings
    host = lazy.runtime_rows()
    assert host.equals(eager.host) and len(host) == 5 and lazy.load_host is None
    assert "ghp_" not in " ".join(map(str, host["op"].dropna())) and "[redacted]" in " ".join(map(str, host["op"]))
    assert load_trace(write_trace(tmp_path / "none.parquet", ROWS, {}), lazy_host=True).runtime_rows() is None


_ITER_BATCHES = pq.ParquetFile.iter_batches


def _small_batches(self, **kw):
    kw.pop("batch_size", None)
    return _ITER_BATCHES(self, batch_size=2, **kw)


def test_empty_columns_load_as_one_repeated_null(tmp_path):
    """A schema column without any value (left out of the file, or all null in it) loads as nulls of
    its usual dtype that all view one slot (NumPy stride 0) instead of a slot per row; writing into
    such a column copies it (copy-on-write) and leaves the trace as loaded."""
    rows = [dict(ROWS[0], id=1), dict(ROWS[1], id=2), dict(ROWS[2], id=3)]
    ev = load_trace(write_trace(tmp_path / "t.parquet", rows, {})).events
    dtypes = {"sm_pct": "float32", "flops": "float64", "registers": "Int32", "counters": "boolean",
              "thread": "Int64", "op": "category"}
    for col, dtype in dtypes.items():
        assert str(ev[col].dtype) == dtype and ev[col].isna().all(), col
        arr = ev[col].array
        slots = arr.codes if isinstance(arr, pd.Categorical) else getattr(arr, "_data", None)
        slots = arr.to_numpy() if slots is None else slots
        assert slots.strides == (0,), col
    assert ev["registers"].iloc[0] is pd.NA and np.isnan(ev["sm_pct"].iloc[2])
    changed = ev.copy(deep=False)
    changed.loc[changed.index[:1], "sm_pct"] = 50.0
    assert changed["sm_pct"].iloc[0] == 50.0 and np.isnan(changed["sm_pct"].iloc[1])
    assert ev["sm_pct"].isna().all()


def test_empty_columns_get_a_slot_per_row_without_copy_on_write(tmp_path, monkeypatch):
    """pandas 2 without copy-on-write writes into a column's own array: there the shared null slot
    would be written through (or refuse the write), so each row gets its own slot, as before."""
    from rooftop.trace import frame

    monkeypatch.setattr(frame, "_copy_on_write", lambda: False)
    rows = [dict(ROWS[0], id=1), dict(ROWS[1], id=2), dict(ROWS[2], id=3)]
    ev = load_trace(write_trace(tmp_path / "t.parquet", rows, {})).events
    assert ev["sm_pct"].to_numpy().strides != (0,) and ev["registers"].array._data.strides != (0,)
    assert ev["sm_pct"].isna().all() and str(ev["registers"].dtype) == "Int32" and ev["registers"].isna().all()


def test_gpu_rows_come_first_and_timed_is_a_view(tmp_path):
    """Events load with the GPU rows first (each part in file order), eager and lazy alike, so the
    timed rows are a slice of the events, not a copy; the runtime rows are left out of both."""
    rows = [dict(kind="range", name="decode", start_ns=0, dur_ns=500, path="decode", id=1),
            dict(kind="runtime", name="cudaLaunchKernel", start_ns=5, dur_ns=3, correlation=7, id=2),
            dict(kind="kernel", name="k1", start_ns=10, dur_ns=50, path="decode", id=3, device=0, stream=7),
            dict(kind="range", name="layer", start_ns=9, dur_ns=100, path="decode/layer", id=4),
            dict(kind="memcpy", name="Memcpy HtoD", start_ns=70, dur_ns=20, id=5, device=0, stream=7),
            dict(kind="kernel", name="k2", start_ns=95, dur_ns=5, id=6, device=0, stream=7)]
    p = write_trace(tmp_path / "t.parquet", rows, {})
    for t in (load_trace(p), load_trace(p, lazy_host=True)):
        assert t.events["id"].tolist() == [3, 5, 6, 1, 4]
        timed = t.timed()
        assert timed["id"].tolist() == [3, 5, 6]
        assert np.shares_memory(timed["start_ns"].to_numpy(), t.events["start_ns"].to_numpy())
        assert t.runtime_rows()["correlation"].tolist() == [7]


def test_text_columns_convert_as_pyarrow_converts_them():
    """`_categorical` (text columns to pandas from the unified dictionary) gives what pyarrow's own
    conversion gives: dtype, categories in order, codes, nulls."""
    from rooftop.trace.frame import _categorical

    typ = pa.dictionary(pa.int32(), pa.string())
    a = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 1], type=pa.int32()), pa.array(["b", "a"]))
    b = pa.DictionaryArray.from_arrays(pa.array([2, 0], type=pa.int32()), pa.array(["c", "x", "a"]))
    empty = pa.DictionaryArray.from_arrays(pa.array([], type=pa.int32()), pa.array(["z"]))
    for col in (pa.chunked_array([a, b]), pa.chunked_array([empty, a]), pa.chunked_array([a])):
        got, want = _categorical(col), pa.table({"c": col}).to_pandas()["c"].array
        assert got.dtype == want.dtype and list(got.categories) == list(want.categories)
        assert got.codes.dtype == want.codes.dtype and got.codes.tolist() == want.codes.tolist()
    assert _categorical(pa.chunked_array([pa.array(["a"])])) is None
    assert _categorical(pa.chunked_array([], type=typ)) is None


@pytest.mark.parametrize("group_rows", [7, 2])  # 5 row groups, then 18 (past ONE_DICTIONARY_MAX_GROUPS)
def test_lazy_read_of_many_row_groups_loads_as_the_eager_one(tmp_path, group_rows):
    """Row groups each with names and paths of their own, the GPU rows apart from the ranges (as an
    import stores them): the lazy load is the eager one; up to `ONE_DICTIONARY_MAX_GROUPS` groups
    every chunk of a text column shares one dictionary (the earlier chunks keep their indices)."""
    import pyarrow.parquet as pq

    from rooftop.trace import parquet as R

    rows = [dict(kind="kernel", name=f"k{i % 7}", start_ns=10 * i, dur_ns=5, path=f"step={i // 4}/k", id=i)
            for i in range(14)]
    rows += [dict(kind="range", name=f"step={i}", start_ns=40 * i, dur_ns=40, path=f"step={i}", id=100 + i)
             for i in range(4)]
    rows += [dict(kind="runtime", name=f"cudaLaunch{i % 3}", start_ns=10 * i - 2, dur_ns=1, id=200 + i)
             for i in range(14)]
    p = write_trace(tmp_path / "t.parquet", rows, {})
    table = pq.read_table(p)
    pq.write_table(table.replace_schema_metadata(table.schema.metadata), p, row_group_size=group_rows)
    groups = pq.ParquetFile(p).metadata.num_row_groups
    eager, lazy = load_trace(p), load_trace(p, lazy_host=True)
    # (the same values; a row group's dictionary also names its runtime calls, which the lazy load's
    # categories then keep unused: so it was before this read kept one dictionary)
    plain = [c for c in eager.events.columns if isinstance(eager.events[c].dtype, pd.CategoricalDtype)]
    a, b = (t.events.drop(columns=["grid", "block"]).astype(dict.fromkeys(plain, object)) for t in (eager, lazy))
    assert a.equals(b)
    assert lazy.runtime_rows().equals(eager.host)
    read = R._read_filtered(pq.ParquetFile(p, read_dictionary=["name", "path"]), ["kind", "name", "path"], "runtime",
                            keep=False)
    for c in ("name", "path"):
        chunks = read.column(c).chunks
        shared = {ch.dictionary.buffers()[2].address for ch in chunks}
        assert (len(shared) == 1) == (groups <= R.ONE_DICTIONARY_MAX_GROUPS), (c, groups)
        assert [v for ch in chunks for v in ch.to_pylist()] == \
               [r.get(c) for r in sorted((r for r in rows if r["kind"] == "kernel"), key=lambda r: r["start_ns"])] + \
               [r.get(c) for r in rows if r["kind"] == "range"]


def test_one_dictionary_keeps_every_value_whatever_the_chunks_dictionaries():
    """Chunks of one row group may carry dictionaries of their own (a column read in batches), a
    later group's may add values or add none: every value stays, and all chunks share one dictionary."""
    import pyarrow as pa

    from rooftop.trace import parquet as R

    def enc(values, dictionary):
        return pa.DictionaryArray.from_arrays(pa.array([dictionary.index(v) if v is not None else None for v in values],
                                                       pa.int32()), pa.array(dictionary))

    type_ = pa.dictionary(pa.int32(), pa.string())
    first, rest = {"c": []}, {"c": []}
    groups = [[(first, [enc(["b", "a"], ["b", "a"]), enc(["c", None], ["c", "x"])]), (rest, [enc(["x"], ["x", "b"])])],
              [(first, [enc(["a"], ["a"])]), (rest, [enc([], ["b"])])],  # nothing new
              [(first, [enc(["z", "b"], ["z", "b"])]), (rest, [enc(["y", "x"], ["x", "y"])])]]
    want_first, want_rest = [], []
    for got in groups:
        for parts, chunks in R._one_dictionary(first, rest, "c", got, type_):
            parts["c"] += chunks
        want_first += [v for _, chunks in got[:1] for ch in chunks for v in ch.to_pylist()]
        want_rest += [v for _, chunks in got[1:] for ch in chunks for v in ch.to_pylist()]
        chunks = first["c"] + rest["c"]
        assert len({ch.dictionary.buffers()[2].address for ch in chunks}) == 1
        assert [v for ch in first["c"] for v in ch.to_pylist()] == want_first
        assert [v for ch in rest["c"] for v in ch.to_pylist()] == want_rest
    assert chunks[0].dictionary.to_pylist() == ["b", "a", "c", "x", "z", "y"]
