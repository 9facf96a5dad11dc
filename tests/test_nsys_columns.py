"""The nsys reader's column-wise path: text as codes into distinct strings (decoded, redacted and
nested once per distinct value), the two table readers (ADBC, sqlite3) giving the same rows, and
bench/make_nsys.py's scaled copies."""
from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.readers import _nsys_columns as cols
from collectors.readers import nsys
from collectors.readers.nesting import MAX_PATH_DEPTH, nest_intervals
from collectors.readers._nsys_columns import Text, concat_text, from_objects, nest_ranges

HAVE_ADBC = importlib.util.find_spec("adbc_driver_sqlite") is not None
ROOT = Path(__file__).resolve().parent.parent


def test_text_work_runs_once_per_distinct_value():
    seen = []
    t = from_objects(np.array([b"a", b"b", None, b"a", b"\xff", b"b"], dtype=object),
                     lambda v: seen.append(v) or v.decode("utf-8", "replace"))
    assert sorted(seen) == [b"a", b"b", b"\xff"]  # three distinct values, three calls for six rows
    assert t.objects().tolist() == ["a", "b", None, "a", "\ufffd", "b"]
    calls = []
    up = t.map(lambda v: calls.append(v) or v.upper())
    assert len(calls) == 3 and up.objects().tolist() == ["A", "B", None, "A", "\ufffd", "B"]
    # two values that become one text share one code afterwards
    merged = t.map(lambda v: "x")
    assert merged.values == ["x"] and merged.codes.tolist() == [0, 0, -1, 0, 0, 0]
    both = concat_text([t, Text.constant("b", 2), Text.nulls(1)])
    assert both.objects().tolist() == ["a", "b", None, "a", "\ufffd", "b", "b", "b", None]
    assert len(both.values) == len(set(both.values))


def _random_ranges(rng, n_threads=3, n=200, nested=True):
    thr, st, en = [], [], []
    for t in range(n_threads):
        # a push/pop stack per thread (properly nested), or overlapping start/end ranges
        stack, now = [], 0
        for _ in range(n):
            now += int(rng.integers(1, 5))
            if nested and stack and rng.random() < 0.45:
                s = stack.pop()
                thr.append(t), st.append(s), en.append(now)
            elif nested:
                stack.append(now)
            else:
                thr.append(t), st.append(now), en.append(now + int(rng.integers(1, 30)))
        while stack:
            now += 1
            thr.append(t), st.append(stack.pop()), en.append(now)
    return np.array(thr), np.array(st), np.array(en)


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nest_ranges_matches_nest_intervals(seed, nested):
    rng = np.random.default_rng(seed)
    thr, st, en = _random_ranges(rng, nested=nested)
    labels = [f"r{int(x)}" for x in rng.integers(0, 6, len(st))]
    qthr = rng.integers(0, 4, 300)
    qt = rng.integers(0, int(en.max()) + 5, 300)
    want_inner, _, want_paths = nest_intervals(thr, st, en, labels, qthr, qt, {}, query_paths=False)
    inner, paths = nest_ranges(thr, st, en, from_objects(np.array(labels, dtype=object), str), qthr, qt, {})
    assert inner.tolist() == want_inner.tolist()
    assert paths.objects().tolist() == want_paths
    assert len(paths.values) == len(set(paths.values))  # one string per distinct path


def test_nest_ranges_cut_and_missing_labels_take_the_interval_code():
    # deeper than MAX_PATH_DEPTH: nest_intervals' cut rule ("…"), counted
    n = MAX_PATH_DEPTH + 5
    thr, st, en = np.zeros(n, np.int64), np.arange(n), 1000 - np.arange(n)
    labels = from_objects(np.array(["l"] * n, dtype=object), str)
    want_stats, stats = {}, {}
    _, _, want = nest_intervals(thr, st, en, ["l"] * n, thr[:1], st[-1:], want_stats, query_paths=False)
    _, got = nest_ranges(thr, st, en, labels, thr[:1], st[-1:], stats)
    assert got.objects().tolist() == want and stats["cut"] == want_stats["cut"] > 0
    # ranges without a label (no path), inside a labelled one and on their own
    lab = Text(np.array([0, -1, -1]), ["a"])
    st3, en3 = np.array([0, 1, 20]), np.array([10, 9, 30])
    _, _, want = nest_intervals(np.zeros(3), st3, en3, ["a", None, None], np.zeros(0), np.zeros(0), {},
                                query_paths=False)
    _, got = nest_ranges(np.zeros(3, np.int64), st3, en3, lab, np.zeros(0, np.int64), np.zeros(0, np.int64), {})
    assert got.objects().tolist() == want == ["a", None, None]


def test_redaction_runs_once_per_distinct_name(tmp_path, monkeypatch):
    import rooftop.trace.redact as redact

    path = tmp_path / "secret.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, shortName INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT);
    """)
    token = "hf_" + "a" * 30
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, f"kernel_token={token}"), (2, "cudaLaunchKernel")])
    n = 500
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)",
                    [(10 * i, 10 * i + 2, 7, i, 2) for i in range(n)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(10 * i + 3, 10 * i + 5, 0, 7, i, 1, 1) for i in range(n)])
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)",
                    [(10 * i, 10 * i + 9, 59, f"auth={token}", None, 7) for i in range(n)])
    con.commit()
    con.close()
    calls = []
    real = redact.redact_text
    monkeypatch.setattr(redact, "redact_text", lambda s: calls.append(s) or real(s))
    rows, _ = nsys.read_nsys(path)
    # a kernel name, a range name and a path (the range's and its kernels'), once each, and the
    # metadata (the repeated range is found as the steps, whose labels the meta carries): a handful,
    # never one per row (3 x 500 rows)
    assert 1 <= len([c for c in calls if token in c]) <= 8
    names = set(rows["name"].dropna().astype(str)) | set(rows["path"].dropna().astype(str))
    assert names and not any(token in s for s in names)


def _norm(v):
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.tolist() if isinstance(v, np.ndarray) else v


def _frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    for c in a.columns:
        assert [_norm(v) for v in a[c].astype(object)] == [_norm(v) for v in b[c].astype(object)], c


@pytest.mark.skipif(not HAVE_ADBC, reason="adbc-driver-sqlite not installed")
def test_adbc_and_sqlite3_readers_give_the_same_rows(fixtures_dir, monkeypatch):
    exports = sorted((fixtures_dir / "traces").glob("*.sqlite"))
    assert exports
    for path in exports:
        fast_rows, fast_meta = nsys.read_nsys(path)
        with monkeypatch.context() as m:
            m.setattr(nsys, "open_fast", lambda p: None)
            slow_rows, slow_meta = nsys.read_nsys(path)
        _frames_equal(fast_rows, slow_rows)
        assert fast_meta == slow_meta


def test_damaged_integer_column_is_read_by_sqlite3(tmp_path):
    """A text in an integer column (a damaged row): the ADBC driver refuses a column whose type
    changes, so the table is read through sqlite3; the integer-shaped text counts, the rest is null."""
    path = tmp_path / "damaged.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, shortName INT);
    """)
    con.execute("INSERT INTO StringIds VALUES (1, 'k')")
    rows = [(100 + i, 110 + i, 0, 7, i, 1, 1) for i in range(3000)]
    rows += [("5000", 5010, 0, 7, 9999, "1.0", 1), ("later", 6000, 0, 7, 10000, 1, 1), (7000, 7010.5, 0, 7, 10001, 1, 1)]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    got, _ = nsys.read_nsys(path)
    k = got[got["kind"] == "kernel"]
    assert len(k) == 3003 and (k["name"] == "k").all()
    tail = k.set_index("correlation").loc[[9999, 10000, 10001]]
    assert tail["start_ns"].tolist()[0] == 5000 - 100
    assert pd.isna(tail["start_ns"].tolist()[1]) and pd.isna(tail["dur_ns"].tolist()[2])


def _make_nsys_build():
    """bench/make_nsys.py's `build` (bench/ is not a package)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from make_nsys import build
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return build

def test_make_nsys_copies_shift_time_and_correlation(tmp_path, fixtures_dir):
    build = _make_nsys_build()
    src = fixtures_dir / "traces" / "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite"
    out = tmp_path / "big.sqlite"
    info = build(src, out, 12 * 4)
    assert info["copies"] == 4 and info["kernels"] == 48
    one, _ = nsys.read_nsys(src)
    four, _ = nsys.read_nsys(out)
    k1, k4 = one[one["kind"] == "kernel"], four[four["kind"] == "kernel"]
    assert len(k4) == 4 * len(k1)
    # every copy's kernels still meet their own launches: the same NVTX paths, four times over
    assert sorted(k4["path"].astype(object).fillna("").tolist()) == sorted(k1["path"].astype(object).fillna("").tolist() * 4)
    assert k4["correlation"].nunique() == 4 * k1["correlation"].nunique()
    assert int(k4["start_ns"].max()) > 3 * int(k1["start_ns"].max())



def test_make_nsys_step_ranges_give_a_step_per_range(tmp_path, fixtures_dir):
    """`--step-ranges N`: the source's NVTX ranges become N `decode_step_K` ranges of four layers
    each, on the busiest launching thread; every copy has its own steps."""
    build = _make_nsys_build()
    src = fixtures_dir / "traces" / "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite"
    out = tmp_path / "steps.sqlite"
    info = build(src, out, 12 * 2, steps=3)
    with sqlite3.connect(out) as con:
        texts = [r[0] for r in con.execute("SELECT text FROM NVTX_EVENTS")]
    assert len(texts) == info["copies"] * 3 * 5
    assert sorted(set(texts)) == ["decode_step_0", "decode_step_1", "decode_step_2",
                                  "layer_0", "layer_1", "layer_2", "layer_3"]
    rows, meta = nsys.read_nsys(out)
    assert len(meta["steps"]) == info["copies"] * 3
    ranges = rows[rows["kind"] == "range"]
    assert ranges["path"].astype(str).str.fullmatch(r"decode_step_\d(/layer_\d)?").all()

def test_export_without_kernels_or_runtime_calls(tmp_path):
    """Only NVTX ranges (a capture with `--trace nvtx`): ranges load, every GPU-only column null."""
    path = tmp_path / "nvtx_only.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT)")
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)",
                    [(0, 100, 59, "outer", None, 1), (10, 20, 59, "inner", None, 1), (5, None, 60, "open", None, 2)])
    con.commit()
    con.close()
    rows, meta = nsys.read_nsys(path)
    assert rows["kind"].astype(str).tolist() == ["range"] * 3
    assert rows["path"].astype(str).tolist() == ["outer", "open", "outer/inner"]
    assert rows["grid"].isna().all() and rows["registers"].isna().all() and rows["thread"].isna().all()
    assert pd.isna(rows["dur_ns"].tolist()[1]) and any("never closed" in w for w in meta["warnings"])


@pytest.fixture(params=[True, False], ids=["adbc", "sqlite3"])
def reader(request, monkeypatch) -> bool:
    """Each table reader in turn: ADBC (where installed; with its second connection, as a default
    run reads, even in the run with every speedup off), then Python's sqlite3 alone."""
    if request.param and not HAVE_ADBC:
        pytest.skip("adbc-driver-sqlite not installed")
    if request.param:
        monkeypatch.setenv("ROOFTOP_ADBC", "1")
        monkeypatch.setenv("ROOFTOP_THREADS", "1")
    else:
        monkeypatch.setattr(nsys, "open_fast", lambda p: None)
    return request.param


def test_large_ids_with_nulls_stay_exact(tmp_path, reader):
    """globalTid packs the process id above bit 24 (values past 2**53): a column of them with a
    NULL must not pass through floats on either reader (the thread would be rounded away)."""
    path = tmp_path / "ids.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT)")
    gtid = (1 << 56) + (4321 << 24) + 77
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)",
                    [(0, 10, gtid, 1, None), (20, 30, None, 2, None)])
    con.commit()
    con.close()
    rows, _ = nsys.read_nsys(path)
    assert rows["thread"].tolist()[0] == 77 and pd.isna(rows["thread"].tolist()[1])


@pytest.mark.skipif(not HAVE_ADBC, reason="adbc-driver-sqlite not installed")
def test_tables_read_ahead_give_the_same_rows(fixtures_dir, monkeypatch):
    """The kernels' upper half, the runtime calls and the NVTX ranges fetched on a second
    connection and thread (`Ahead`) give what one connection reads; `ROOFTOP_THREADS=0` reads
    nothing ahead."""
    exports = sorted((fixtures_dir / "traces").glob("*.sqlite"))
    assert exports
    started = []
    real_start = cols.Ahead.start
    monkeypatch.setattr(cols.Ahead, "start", lambda self, db, table, *a: (started.append(table), real_start(self, db, table, *a)))
    monkeypatch.setenv("ROOFTOP_ADBC", "1")  # (own switches win over ROOFTOP_SPEEDUPS=0: .ci/run's third run)
    for path in exports:
        monkeypatch.setenv("ROOFTOP_THREADS", "1")
        ahead_rows, ahead_meta = nsys.read_nsys(path)
        monkeypatch.setenv("ROOFTOP_THREADS", "0")
        assert cols.Ahead(path).pool is None
        plain_rows, plain_meta = nsys.read_nsys(path)
        _frames_equal(ahead_rows, plain_rows)
        assert ahead_meta == plain_meta
    assert {nsys.KERNELS[0], nsys.RUNTIME[0], nsys.NVTX[0]} <= set(started)


@pytest.mark.parametrize("shape", ["rowid", "sparse rowids", "integer primary key", "without rowid",
                                   "a column named rowid", "one row"])
def test_kernels_read_in_rowid_halves_are_every_row_once(tmp_path, reader, shape):
    """The kernel table is read as two halves by rowid (one per connection): every row once, in the
    table's order, whatever the table's rowid looks like; where it has none to split on (WITHOUT
    ROWID, a column of its own named rowid), in one read."""
    path = tmp_path / "halves.sqlite"
    con = sqlite3.connect(path)
    table, cols = nsys.KERNELS[0], nsys.KERNELS[1]
    n = 1 if shape == "one row" else 901
    decl = {"integer primary key": "k INTEGER PRIMARY KEY, ", "without rowid": "k INTEGER PRIMARY KEY, ",
            "a column named rowid": "rowid INT, "}.get(shape, "")
    tail = " WITHOUT ROWID" if shape == "without rowid" else ""
    con.execute(f"CREATE TABLE {table} ({decl}{', '.join(f'[{c}] INT' for c in cols)}){tail}")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO StringIds VALUES (1, 'k')")
    # kernels in reverse time order: the read's own order shows if a half is lost, doubled or swapped
    rows = [{"start": 1000 * (n - i), "end": 1000 * (n - i) + 10, "deviceId": 0, "streamId": 7, "correlationId": i,
             "demangledName": 1, "gridX": i + 1, "gridY": 1, "gridZ": 1, "blockX": 64, "blockY": 1, "blockZ": 1}
            for i in range(n)]
    lead = {"integer primary key": lambda i: [7 * i + 3], "without rowid": lambda i: [7 * i + 3],
            "a column named rowid": lambda i: [None if i % 2 else i]}.get(shape, lambda i: [])
    names = ([] if not decl else [decl.split()[0]]) + cols
    con.executemany(f"INSERT INTO {table} ({', '.join(f'[{c}]' for c in names)}) VALUES ({', '.join('?' * len(names))})",
                    [tuple(lead(i) + [r.get(c) for c in cols]) for i, r in enumerate(rows)])
    if shape == "sparse rowids":
        con.execute(f"DELETE FROM {table} WHERE correlationId % 3 = 1")
    con.commit()
    con.close()
    kept = [i for i in range(n) if shape != "sparse rowids" or i % 3 != 1]
    got, _ = nsys.read_nsys(path)
    k = got[got["kind"] == "kernel"]
    assert sorted(k["correlation"].tolist()) == kept  # every row once
    assert [g[0] for g in k.sort_values("correlation")["grid"]] == [i + 1 for i in kept]  # columns of one row
    assert k["start_ns"].is_monotonic_increasing


def test_rowid_halves_split_where_a_rowid_is(tmp_path):
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE a (x INT)")
    con.executemany("INSERT INTO a VALUES (?)", [(i,) for i in range(10)])
    con.execute("CREATE TABLE b (x INTEGER PRIMARY KEY) WITHOUT ROWID")
    con.execute("CREATE TABLE c (rowid INT, x INT)")
    con.commit()
    con.close()
    db = nsys._Db(path)
    assert cols.rowid_halves(db, "a") == ("WHERE rowid <= 5", "WHERE rowid > 5")
    assert cols.rowid_halves(db, "b") is None and cols.rowid_halves(db, "c") is None
    assert cols.rowid_halves(db, "missing") is None


@pytest.mark.skipif(not HAVE_ADBC, reason="adbc-driver-sqlite not installed")
def test_nvtx_ranges_read_in_rowid_halves_within_their_filter(tmp_path, monkeypatch):
    """The NVTX ranges are read in two rowid halves, each within the filter of range events: marks
    between them stay out, and a half whose texts are all registered (inline text all NULL) joins
    one whose texts are inline; the same rows as one read on one connection."""
    path = tmp_path / "nvtx.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, shortName INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "k"), (2, "registered"), (3, "cudaLaunchKernel")])
    ranges = []
    for i in range(40):  # the first half registered, the second inline; a mark (34) after every range
        text, tid = (None, 2) if i < 20 else (f"inline{i % 3}", None)
        ranges += [(100 * i, 100 * i + 50, 59, text, tid, 7), (100 * i + 1, None, 34, "mark", None, 7)]
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)", ranges)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)",
                    [(100 * i + 10, 100 * i + 12, 7, i, 3) for i in range(40)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(100 * i + 20, 100 * i + 30, 0, 7, i, 1, 1) for i in range(40)])
    con.commit()
    con.close()
    db = nsys._Db(path)
    lo, hi = cols.rowid_halves(db, "NVTX_EVENTS", nsys.NVTX[3])
    assert "eventType IN" in lo and "eventType IN" in hi and lo.endswith("rowid <= 40")
    monkeypatch.setenv("ROOFTOP_ADBC", "1")
    monkeypatch.setenv("ROOFTOP_THREADS", "1")
    halves, _ = nsys.read_nsys(path)
    monkeypatch.setenv("ROOFTOP_THREADS", "0")
    whole, _ = nsys.read_nsys(path)
    _frames_equal(halves, whole)
    kernels = halves[halves["kind"] == "kernel"]
    assert kernels["path"].astype(str).tolist() == ["registered"] * 20 + [f"inline{i % 3}" for i in range(20, 40)]
    assert (halves["kind"] == "range").sum() == 40  # the marks stay out
