"""Import an Nsight Systems SQLite export (`nsys export --type sqlite`).

Kernels, memcpy and memset come from the CUPTI activity tables; each is attributed to the NVTX
push/pop ranges open on the thread that launched it, found through the runtime call with the same
correlation id (what nsys's `nvtx_gpu_proj_*` reports do). For CUDA graphs the correlation goes to
`cudaGraphLaunch`, so every node kernel of a replay inherits the ranges around the replay call.
Ranges that mark steps (vLLM, SGLang, TensorRT-LLM, the Recorder's `step=N`, `--steps`: rooftop.trace.steps)
give each kernel its step: the step whose GPU window the kernel runs in.
The schema drifts between nsys versions: tables are created lazily (any may be absent), columns come
and go, text may not be UTF-8. The input file is opened read-only and never modified.
Tables are read column-wise and every name-shaped value is kept as a code into its distinct
strings (`_nsys_columns`): decoding, redaction, NVTX paths and step markers run once per distinct
string, never once per row.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop.trace import steps as st
from rooftop import limits
from rooftop.trace.redact import redact

from collectors.readers import nsys_device
from collectors.readers.nesting import MAX_PATH_CHARS, MAX_PATH_DEPTH, clean_text
from collectors.readers._nsys_columns import Ahead, NsysError, rowid_halves, Text, concat_text, fetch, from_objects, nest_ranges, open_fast, redacted

SQLITE_MAGIC = b"SQLite format 3\x00"
PUSH_POP, START_END = 59, 60  # NVTX eventType (NvtxPushPopRange, NvtxStartEndRange)
# CUpti_ActivityMemcpyKind
HOST_MEMORY_KINDS = (1, 2)  # CUpti_ActivityMemoryKind PAGEABLE, PINNED
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}


def _text(v) -> str | None:
    """Text from the database: bytes decoded with replacement, cut at the text budget."""
    if v is None:
        return None
    return clean_text(v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v))


class _Db:
    def __init__(self, path: Path):
        self.path = path
        try:
            with open(path, "rb") as fh:
                magic = fh.read(16)
        except OSError as exc:
            raise NsysError(path, f"cannot read: {exc.strerror or exc}") from None
        if magic != SQLITE_MAGIC:
            raise NsysError(path, "not an SQLite file", "export the report with `nsys export --type sqlite`")
        try:
            # read-only and immutable: no lock, no journal, and no -wal/-shm files created next to a
            # WAL-mode export (the input directory is left exactly as it was)
            self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            # one text or blob beyond the budget fails its query instead of filling memory
            self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_sql_value())
            # nsys writes user/host names in the local code page: decode ourselves, with replacement
            self.con.text_factory = bytes
            guard_connection(self.con, path)
            self.tables = {_text(r[0]) for r in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as exc:
            raise NsysError(path, f"unreadable SQLite database: {exc}") from None

    def columns(self, table: str) -> set[str]:
        return {_text(r[1]) for r in self.con.execute(f"PRAGMA table_info([{table}])")}

    def select(self, table: str, cols: list[str], where: str = "") -> pd.DataFrame:
        """The named columns of a table, NULL for the ones this schema version lacks; empty if absent."""
        if table not in self.tables:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
        have = self.columns(table)
        sel = ", ".join(f"[{c}]" if c in have else f"NULL AS [{c}]" for c in cols)
        self.check_rows(table)
        try:
            cur = self.con.execute(f"SELECT {sel} FROM [{table}] {where}")
            return pd.DataFrame(cur.fetchall(), columns=cols)
        except sqlite3.Error as exc:
            raise NsysError(self.path, f"cannot read table {table}: {exc}") from None

    def check_rows(self, table: str, counted: int | None = None) -> None:
        """Refuse, before fetching, a table with more rows than the `ROOFTOP_MAX_ROWS` budget
        (`counted`: its rows, where a read counted them already)."""
        cap = limits.max_rows()
        # counting stops at the budget: a huge table costs as much as the budget, not its size
        n = counted if counted is not None else \
            self.con.execute(f"SELECT count(*) FROM (SELECT 1 FROM [{table}] LIMIT {cap + 1})").fetchone()[0]
        if n > cap:
            raise NsysError(self.path, limits.over_budget(f"table {table}", limits.MAX_ROWS_ENV, cap))


# The names of Nsight Systems' own schema (tables nsys creates, which the reader may query).
NSYS_NAMES = ("CUPTI_", "NVTX_", "StringIds", "TARGET_INFO_", "META_DATA_", "ThreadNames", "ENUM_", "CUDA_",
              "COMPOSITE_", "OSRT_", "PROCESSES", "ThreadNames", "StringTable")


def guard_connection(con: sqlite3.Connection, path: Path) -> None:
    """Bound what an export can make SQLite do, before any of its rows is read. Its data must be
    stored data: a generated column (whose every read runs an expression of the file's choosing),
    or a view or virtual table under a name of nsys's schema, is refused with one line. Every
    query then runs under a progress-handler budget (`ROOFTOP_MAX_SQL_WORK` steps per byte of the
    file): past it, the query is interrupted and the read ends in one line."""
    size = os.stat(path).st_size
    steps = limits.max_sql_steps(size)
    every = 10_000
    count = [0]

    def progress() -> int:
        count[0] += 1
        return 1 if count[0] * every > steps else 0
    con.set_progress_handler(progress, every)
    try:
        rows = con.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        for kind, name, sql in rows:
            name = _text(name) or ""
            if not name.startswith(NSYS_NAMES):
                continue  # another tool's table (the reader never queries it)
            if kind == b"view" or kind == "view":
                raise NsysError(path, f"{name} is a view, not a table: rooftop reads only stored data")
            text = (sql or b"").decode("utf-8", "replace") if isinstance(sql, bytes) else (sql or "")
            if text.lstrip().upper().startswith("CREATE VIRTUAL"):
                raise NsysError(path, f"{name} is a virtual table: rooftop reads only stored data")
            for col in con.execute(f"PRAGMA table_xinfo([{name}])").fetchall():
                if col[-1] in (2, 3):  # hidden: 2 a virtual, 3 a stored generated column
                    raise NsysError(path, f"table {name}: column {_text(col[1])} is a generated column"
                                          " (computed by an expression of the file): rooftop reads only stored data")
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise NsysError(path, limits.over_budget("the SQLite work of reading its schema", limits.MAX_SQL_WORK_ENV,
                                                     limits.budget(limits.MAX_SQL_WORK_ENV,
                                                                   limits.MAX_SQL_WORK_DEFAULT))) from None
        raise


def _id(v) -> int | None:
    """A StringIds key as the schema means it; None for a value that is no integer (damaged row)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    try:
        f = float(v.decode("ascii", "replace") if isinstance(v, bytes) else v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def read_nsys(path: str | os.PathLike, progress=None) -> tuple[pd.DataFrame, dict]:
    """Read an nsys SQLite export -> (rows for `rooftop.trace.to_table`, metadata document)."""
    db = _Db(Path(path))
    try:
        return _read(db, progress)
    except sqlite3.Error as exc:  # a damaged or half-written export
        if "too big" in str(exc):
            raise NsysError(db.path, limits.over_budget("a text or blob value", limits.MAX_SQL_VALUE_ENV,
                                                        limits.max_sql_value())) from None
        raise NsysError(db.path, f"unreadable SQLite database: {exc}") from None
    finally:
        db.con.close()


_SENTINEL_END = np.iinfo(np.int64).max // 2  # an NVTX range never closed: open to the end


def _strings(db: _Db) -> tuple[np.ndarray, Text]:
    """StringIds as (ids, their texts), each text decoded and cut once; the last row of a repeated id
    wins (as a dict built from the rows would)."""
    if "StringIds" not in db.tables:
        return np.zeros(0, np.int64), Text.nulls(0)
    db.check_rows("StringIds")
    pairs = {_id(i): v for i, v in db.con.execute("SELECT id, value FROM StringIds")}
    pairs.pop(None, None)
    ids = np.fromiter(pairs.keys(), dtype=np.int64, count=len(pairs))
    texts = from_objects(np.array(list(pairs.values()) + [None], dtype=object)[:-1], _text)
    return ids, texts


def _lookup(ids: np.ndarray, texts: Text, key: pd.arrays.IntegerArray) -> Text:
    """The StringIds text of each row's id (null where the id is null or not in the table)."""
    if not len(ids) or not len(key):
        return Text.nulls(len(key))
    at = pd.Index(ids).get_indexer(np.asarray(key.to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).min)))
    at = np.where(np.asarray(key.isna()), -1, at)
    return Text(np.where(at >= 0, texts.codes[at.clip(0)], -1), texts.values)


def _i64(a) -> np.ndarray:
    """Integers for the interval code: null as -1."""
    return np.asarray(pd.array(a, dtype="Int64").to_numpy(dtype=np.int64, na_value=-1))


def _int_nulls(n: int) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, dtype=bool))


def _cat_ints(parts: list, n: list[int]) -> pd.arrays.IntegerArray:
    arrs = [p if p is not None else _int_nulls(k) for p, k in zip(parts, n)]
    return pd.arrays.IntegerArray(np.concatenate([np.asarray(a.to_numpy(dtype=np.int64, na_value=0)) for a in arrs]),
                                  np.concatenate([np.asarray(a.isna()) for a in arrs]))


def _place(values: pd.arrays.IntegerArray, at: np.ndarray) -> pd.arrays.IntegerArray:
    """`values[at]`, null where `at` is -1 (a row of another kind)."""
    if not len(values):
        return _int_nulls(len(at))
    return values.take(at, allow_fill=True)


def _shape(cols: list[pd.arrays.IntegerArray]) -> pa.Array:
    """A launch shape per row as a list of three, null where any of the three is unknown."""
    n = len(cols[0])
    missing = np.zeros(n, dtype=bool)
    for c in cols:
        missing |= np.asarray(c.isna())
    flat = np.stack([np.asarray(c.to_numpy(dtype=np.int64, na_value=0)) for c in cols], axis=1).reshape(-1)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.int64()), 3, mask=pa.array(missing))


def _read(db: _Db, progress) -> tuple[pd.DataFrame, dict]:
    known = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
             "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}
    if not db.tables & known:
        raise NsysError(db.path, "SQLite file without CUPTI or NVTX tables: not an Nsight Systems export",
                        "was the report captured with `--trace cuda,nvtx`?")
    fast = open_fast(db.path)
    ahead = Ahead(db.path) if fast is not None else None
    halves: dict = {}
    try:
        if ahead is not None and ahead.pool is not None:
            # the upper halves of the kernels and NVTX ranges, then the runtime calls, read while
            # this thread reads the lower halves (where a fetch has not begun when this thread needs
            # it, as the runtime calls behind the ~5 ranges per kernel of a PyTorch capture, this
            # thread reads it itself)
            for spec in (KERNELS, NVTX):
                halves[spec[0]] = rowid_halves(db, spec[0], spec[3])
                if halves[spec[0]] is not None:
                    ahead.start(db, spec[0], spec[1], spec[2], halves[spec[0]][1])
            ahead.start(db, *RUNTIME)
        return _read_tables(db, fast, ahead, halves, progress)
    finally:
        if ahead is not None:
            ahead.close()
        if fast is not None:
            fast.close()


# (table, columns, text columns, filter) of the tables read ahead (`Ahead`). The kernels and NVTX ranges
# are read in two halves by rowid, one on each connection (`rowid_halves`): SQLite stores rows
# whole, so halving the rows, not the columns, halves each connection's pages.
KERNELS = ("CUPTI_ACTIVITY_KIND_KERNEL", ["start", "end", "deviceId", "streamId", "correlationId", "demangledName",
                                          "shortName", "registersPerThread", "gridX", "gridY", "gridZ", "blockX",
                                          "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory",
                                          "graphNodeId", "graphId"], (), "")
RUNTIME = ("CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "globalTid", "start", "end", "nameId"], (), "")
NVTX = ("NVTX_EVENTS", ["start", "end", "eventType", "text", "textId", "globalTid"], ("text",),
        f"WHERE eventType IN ({PUSH_POP}, {START_END})")


def _in_halves(db: _Db, fast, ahead, spec: tuple, halves: dict) -> dict:
    """A table's columns (`spec`): its two rowid halves (`halves[table]`, the upper one read ahead)
    joined in rowid order, or one read."""
    table, cols, text, where = spec
    split = halves.get(table)
    if split is None:
        return fetch(db, fast, *spec)
    low = fetch(db, fast, table, cols, text, split[0])
    high = fetch(db, fast, table, cols, text, split[1], ahead=ahead)
    joined = {c: (_join_text([low[c], high[c]]) if c in text else
                  _cat_ints([low[c], high[c]], [len(low[c]), len(high[c])])) for c in cols}
    db.check_rows(table, counted=len(joined[cols[0]]))
    return joined


def _join_text(parts: list):
    """Raw text columns one after the other: Arrow binary, or objects where a half was read through
    sqlite3 (its ADBC fetch refused)."""
    if all(isinstance(p, (pa.Array, pa.ChunkedArray)) for p in parts):
        chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
        return pa.chunked_array([c.cast(pa.binary()) for c in chunks], type=pa.binary())
    return np.concatenate([np.asarray(p.to_pylist() if isinstance(p, (pa.Array, pa.ChunkedArray)) else p, dtype=object)
                           for p in parts])


def _read_tables(db: _Db, fast, ahead, halves: dict, progress) -> tuple[pd.DataFrame, dict]:
    sid, stext = _strings(db)
    warnings: list[str] = []
    k = _in_halves(db, fast, ahead, KERNELS, halves)
    name_id = k["demangledName"].copy()
    name_id[name_id.isna()] = k["shortName"][name_id.isna()]
    nk = len(name_id)
    graphs = bool((~k["graphNodeId"].isna()).any() or (~k["graphId"].isna()).any())
    if progress:
        progress(1, 4, "stages")
    m = fetch(db, fast, "CUPTI_ACTIVITY_KIND_MEMCPY", ["start", "end", "deviceId", "streamId", "correlationId",
                                                       "bytes", "copyKind"])
    nm = len(m["start"])
    # each distinct copy kind named once
    kinds, kind_at = np.unique(np.asarray(m["copyKind"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).min)),
                               return_inverse=True)
    copy_names = [f"[CUDA memcpy {COPY_KINDS.get(int(c), int(c))}]" if c != np.iinfo(np.int64).min
                  else "[CUDA memcpy None]" for c in kinds]
    copy_kind = m["copyKind"].to_numpy(dtype="float64", na_value=np.nan)
    s = fetch(db, fast, "CUPTI_ACTIVITY_KIND_MEMSET", ["start", "end", "deviceId", "streamId", "correlationId",
                                                      "bytes", "memKind"])
    ns = len(s["start"])
    # A memset of host memory (CUPTI memory kind 1 pageable, 2 pinned) writes no HBM of this GPU:
    # its bytes are not HBM bytes (a GTX 1060 capture "sets" 4 MB of pinned memory in 2.3 us,
    # 9x that GPU's DRAM bandwidth). Unknown (NULL) kinds keep their bytes.
    on_host = np.isin(s["memKind"].to_numpy(dtype="float64", na_value=np.nan), HOST_MEMORY_KINDS)
    gn = [nk, nm, ns]
    gpu_parts = (k, m, s)
    gcol = lambda c: _cat_ints([p[c] for p in gpu_parts], gn)  # noqa: E731
    g_start, g_end, g_corr = gcol("start"), gcol("end"), gcol("correlationId")
    ng = nk + nm + ns
    # HBM bytes: a device-to-device copy reads and writes its N bytes (rooftop.llm.op_cost.copy_hbm_bytes)
    model_bytes = np.concatenate([
        np.full(nk, np.nan),
        m["bytes"].to_numpy(dtype="float64", na_value=np.nan) * np.where(np.isin(copy_kind, [5, 6, 7, 8]), 2.0, 1.0),
        np.where(on_host, np.nan, s["bytes"].to_numpy(dtype="float64", na_value=np.nan))])
    if progress:
        progress(2, 4, "stages")
    # launching thread and time: the runtime call with the same correlation id (the first one)
    calls = fetch(db, fast, *RUNTIME, ahead=ahead)
    rcorr = calls["correlationId"]
    has_corr = np.flatnonzero(~np.asarray(rcorr.isna()))
    rc = np.asarray(rcorr.to_numpy(dtype=np.int64, na_value=0))[has_corr]
    ids, first = np.unique(rc, return_index=True)  # (sorted: found by binary search below)
    rt_rows = has_corr[first]  # one runtime row per correlation id, the first in table order
    want = np.asarray(g_corr.to_numpy(dtype=np.int64, na_value=0))
    at = np.searchsorted(ids, want).clip(0, max(len(ids) - 1, 0))
    matched = ~np.asarray(g_corr.isna()) & (ids[at] == want) if len(ids) else np.zeros(len(want), dtype=bool)
    at = np.where(matched, at, -1)
    if len(rt_rows):
        src = rt_rows[at.clip(0)]
        l_tid = pd.arrays.IntegerArray(np.asarray(calls["globalTid"].to_numpy(dtype=np.int64, na_value=0))[src],
                                       np.asarray(calls["globalTid"].isna())[src] | ~matched)
        l_start = pd.arrays.IntegerArray(np.asarray(calls["start"].to_numpy(dtype=np.int64, na_value=0))[src],
                                         np.asarray(calls["start"].isna())[src] | ~matched)
    else:  # no runtime calls: no launching thread known
        l_tid = l_start = _int_nulls(ng)
    # the join's sorted ids and positions go before the NVTX
    # table is read: they are not needed again, and the read's peak is at its end
    del has_corr, rc, ids, first, rt_rows, want, at, matched
    # NVTX: text inline (unregistered strings) or through StringIds (registered)
    nv = _in_halves(db, fast, ahead, NVTX, halves)
    inline = from_objects(nv["text"], _text)
    registered = _lookup(sid, stext, nv["textId"])
    nv_name = concat_text([inline, registered])
    n_nv = len(inline)
    nv_name = Text(np.where(inline.codes >= 0, nv_name.codes[:n_nv], nv_name.codes[n_nv:]), nv_name.values).unique()
    nv_end = nv["end"]
    unclosed = np.asarray(nv_end.isna())
    if unclosed.any():
        warnings.append(f"{int(unclosed.sum())} NVTX range(s) never closed: treated as open to the end")
    nv_end = pd.arrays.IntegerArray(np.where(unclosed, _SENTINEL_END, np.asarray(nv_end.to_numpy(dtype=np.int64, na_value=0))),
                                    np.zeros(len(nv_end), dtype=bool))
    etype = np.asarray(nv["eventType"].to_numpy(dtype=np.int64, na_value=-1))
    pp, se = np.flatnonzero(etype == PUSH_POP), np.flatnonzero(etype == START_END)
    pp_name, se_name = nv_name.take(pp), nv_name.take(se)
    pp_thr, pp_start, pp_end = _i64(nv["globalTid"][pp]), _i64(nv["start"][pp]), _i64(nv_end[pp])
    has = np.flatnonzero(~np.asarray(l_tid.isna()))
    nest_stats: dict = {}
    # where each graph-replayed kernel's node was captured: that moment's ranges are its layer (issue 37)
    cap_rows, cap_tid, cap_t = _capture_points(db, fast, k)
    inner, pp_path = nest_ranges(pp_thr, pp_start, pp_end, pp_name, np.concatenate([_i64(l_tid)[has], cap_tid]),
                                 np.concatenate([_i64(l_start)[has], cap_t]), nest_stats)
    inner, cap_inner = inner[:len(has)], inner[len(has):]
    if nest_stats.get("cut"):
        warnings.append(f"{nest_stats['cut']} NVTX path(s) deeper than {MAX_PATH_DEPTH} levels or longer than "
                        f"{MAX_PATH_CHARS} characters cut (\"…\")")
    g_path_codes = np.full(ng, -1, dtype=np.int64)
    g_path_codes[has] = np.where(inner >= 0, pp_path.codes[inner.clip(0)] if len(pp_path.codes) else -1, -1)
    g_path = Text(g_path_codes, pp_path.values)
    if len(cap_rows):
        g_path = _with_capture_paths(g_path, cap_rows, cap_inner, pp_path)
    # steps: NVTX push/pop ranges that are step markers (rooftop.trace.steps); GPU work by the window it runs in
    steps = st.find_steps(pp_name.objects(), pp_path.objects(), pp_thr, pp_start, pp_end,
                          user=st.user_pattern(), name_ids=(pp_name.codes, pp_name.values),
                          launches=(_i64(l_tid), _i64(l_start)))
    gs, ge = _i64(g_start), _i64(g_end)
    lo, hi, how = st.gpu_windows(steps, gs, ge, _i64(l_tid), _i64(l_start))
    kernel_text = _lookup(sid, stext, name_id)
    _infer_phases(steps, lo, hi, gs, kernel_text, k, ng)
    g_step, g_phase_codes, g_phase_labels = st.assign_codes(lo, hi, steps.index, steps.phase, gs)
    p_step, p_phase_codes, p_phase_labels = st.assign_cpu_codes(steps, pp_thr, pp_start)
    if progress:
        progress(3, 4, "stages")
    nr = len(pp) + len(se)
    nh = len(calls["start"])
    host_name = _lookup(sid, stext, calls["nameId"])
    sizes = [ng, nr, nh]
    kind = Text(np.repeat(np.arange(5, dtype=np.int64), [nk, nm, ns, nr, nh]),
                ["kernel", "memcpy", "memset", "range", "runtime"])
    name = concat_text([kernel_text, Text(kind_at.astype(np.int64).reshape(-1), copy_names),
                        Text.constant("[CUDA memset]", ns), pp_name, se_name, host_name])
    # start/end ranges may cross threads and overlap: flat, not nested (their path is their name)
    path = concat_text([g_path, pp_path, se_name, Text.nulls(nh)])
    phase = concat_text([Text(g_phase_codes, g_phase_labels), Text(p_phase_codes, p_phase_labels),
                         Text.nulls(len(se) + nh)])
    step = _cat_ints([g_step, p_step, None, None], [ng, len(pp), len(se), nh])
    start = _cat_ints([g_start, nv["start"][pp], nv["start"][se], calls["start"]], [ng, len(pp), len(se), nh])
    end = _cat_ints([g_end, nv_end[pp], nv_end[se], calls["end"]], [ng, len(pp), len(se), nh])
    range_open = np.zeros(len(start), dtype=bool)
    range_open[ng:ng + nr] = np.concatenate([unclosed[pp], unclosed[se]])
    # what is read is let go as soon as its rows are built (a 1M-kernel export's NVTX table alone
    # is ~5M rows)
    del nv, nv_end, g_end, g_start, pp_name, se_name, pp_path, g_path, inline, registered, nv_name
    origin = int(start.min()) if len(start) and (~start.isna()).any() else 0
    start_ns = start - origin
    dur_ns = end - start
    dur_ns[range_open] = pd.NA
    del start, end, range_open
    # by kind, each kind in time order: the GPU rows, the ranges, the runtime calls (the order a
    # load splits them into: `rooftop.trace.read.split_runtime` then cuts slices, copies nothing)
    part = np.repeat(np.arange(3, dtype=np.int64), sizes)
    s_null = np.asarray(start_ns.isna())
    order = np.lexsort((np.asarray(start_ns.to_numpy(dtype=np.int64, na_value=0)), s_null, part))
    del part, s_null
    # each output row's position in the kernels, the GPU rows and the runtime calls (-1: none): the
    # columns only some kinds have are placed straight from their own rows
    kidx = np.where(order < nk, order, -1)
    gidx = np.where(order < ng, order, -1)
    hidx = np.where(order >= ng + nr, order - (ng + nr), -1)
    gtid = calls["globalTid"]
    cols = {
        "kind": kind.take(order).categorical(),
        "name": redacted(name).take(order).categorical(),
        "start_ns": start_ns[order], "dur_ns": dur_ns[order],
        "device": _place(gcol("deviceId"), gidx),
        "stream": _place(gcol("streamId"), gidx),
        "correlation": _cat_ints([g_corr, None, calls["correlationId"]], sizes)[order],
        "registers": _place(k["registersPerThread"], kidx),
        # JSON (Kineto) only has the sum of static and dynamic shared memory; keep the same meaning
        "shared_mem": _place((k["staticSharedMemory"] + k["dynamicSharedMemory"]), kidx),
        "model_bytes": np.where(gidx >= 0, model_bytes[gidx.clip(0)] if ng else np.nan, np.nan),
        "path": redacted(path).take(order).categorical(),
        "step": step.astype("Int32")[order],
        "phase": phase.take(order).categorical(),
        # `globalTid` packs the process and thread ids (tid in its low 24 bits, as nsys's own
        # reports decode it)
        "thread": _place((gtid % (1 << 24)), hidx),
    }
    del start_ns, dur_ns, kind, name, path, phase, step, calls, gtid, order, gidx, hidx
    at = pa.array(kidx, mask=kidx < 0)
    del kidx
    for col, dims in (("grid", ("gridX", "gridY", "gridZ")), ("block", ("blockX", "blockY", "blockZ"))):
        shape = _shape([k[d] for d in dims]).take(at) if nk else pa.nulls(len(at), pa.list_(pa.int64(), 3))
        cols[col] = pd.Series(pd.arrays.ArrowExtensionArray(shape))
    # the kernels' own columns are placed: only their devices are read again (the metadata)
    kern_dev = k["deviceId"]
    gpu_parts = None  # (what `gcol` reads: released with the tables)
    del k, m, s, gcol, g_corr, l_tid, l_start, model_bytes, at
    # the columns as they are (no copy: nothing else holds them)
    rows = pd.DataFrame({c: (v.array if isinstance(v, pd.Series) else v) for c, v in cols.items()}, copy=False)
    del cols
    rows["id"] = np.arange(len(rows), dtype=np.int64)
    if progress:
        progress(4, 4, "stages")
    meta = _meta(db, origin, pd.DataFrame({"kind": "kernel", "device": kern_dev}), graphs, warnings)
    meta["steps"] = st.attach_windows(steps, lo, hi, how, origin)
    meta["warnings"].extend(steps.warnings)
    meta["step_rule"] = steps.rule
    return rows, redact(meta)


GRAPH_NODES = "CUDA_GRAPH_NODE_EVENTS"
MAX_CLONE_HOPS = 16  # a node instantiated from a clone of a clone: followed this far back


def _capture_points(db: _Db, fast, k: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the kernels run by a CUDA-graph replay (`graphNodeId` set, nsys --cuda-graph-trace=node):
    (kernel row, thread, time) of the moment their node was created, i.e. captured.

    nsys records each graph node's creation in CUDA_GRAPH_NODE_EVENTS (`graphNodeId`, `start`,
    `globalTid`); an instantiated graph's nodes are copies whose `originalGraphNodeId` names the node
    they were cloned from. A replayed kernel carries its executable node's id, so the chain of
    originals leads back to the node stream capture created, on the capturing thread, inside the
    NVTX ranges (layer, module) that were open then. Kernels with no such record are left out."""
    empty = np.zeros(0, dtype=np.int64)
    node = np.asarray(k["graphNodeId"].to_numpy(dtype=np.int64, na_value=-1)) if len(k["graphNodeId"]) else empty
    if GRAPH_NODES not in db.tables or not (node >= 0).any():
        return empty, empty, empty
    ev = fetch(db, fast, GRAPH_NODES, ["start", "graphNodeId", "originalGraphNodeId", "globalTid"])
    gid = np.asarray(ev["graphNodeId"].to_numpy(dtype=np.int64, na_value=-1))
    start = np.asarray(ev["start"].to_numpy(dtype=np.int64, na_value=-1))
    ok = (gid >= 0) & (start >= 0)
    if not ok.any():
        return empty, empty, empty
    at = np.flatnonzero(ok)
    at = at[np.lexsort((start[at], gid[at]))]  # by node, its earliest event (the creation) first
    ids, first = np.unique(gid[at], return_index=True)
    row = at[first]
    orig = np.asarray(ev["originalGraphNodeId"].to_numpy(dtype=np.int64, na_value=-1))[row]
    tid = np.asarray(ev["globalTid"].to_numpy(dtype=np.int64, na_value=-1))[row]
    index = pd.Index(ids)
    cur = index.get_indexer(node)  # each kernel's node among the recorded ones (-1: none)
    for _ in range(MAX_CLONE_HOPS):  # to the node it was cloned from, while that one was recorded
        up = np.where(cur >= 0, index.get_indexer(np.where(cur >= 0, orig[cur.clip(0)], -1)), -1)
        step = (cur >= 0) & (up >= 0) & (up != cur)
        if not step.any():
            break
        cur = np.where(step, up, cur)
    kept = np.flatnonzero((cur >= 0) & (tid[cur.clip(0)] >= 0))
    return kept, tid[cur[kept]], start[row][cur[kept]]


def _with_capture_paths(g_path: Text, rows: np.ndarray, inner: np.ndarray, ranges: Text) -> Text:
    """The GPU rows' paths with each replayed kernel's capture-time ranges after its launch's: the
    `cudaGraphLaunch` path (the step) + "/" + the path open when its node was captured (the layer);
    built once per distinct (launch path, capture path) pair."""
    found = inner >= 0
    rows, cap = rows[found], np.where(found, ranges.codes[inner.clip(0)] if len(ranges.codes) else -1, -1)[found]
    rows, cap = rows[cap >= 0], cap[cap >= 0]
    if not len(rows):
        return g_path
    launch = g_path.codes[rows]
    pairs, back = np.unique((launch + 1) * (len(ranges.values) + 1) + cap, return_inverse=True)
    values = list(g_path.values)
    new_codes = np.empty(len(pairs), dtype=np.int64)
    for j, pair in enumerate(pairs.tolist()):
        lp, cp = divmod(pair, len(ranges.values) + 1)
        text = ranges.values[cp] if lp == 0 else f"{g_path.values[lp - 1]}/{ranges.values[cp]}"
        if len(text) > MAX_PATH_CHARS:
            text = text[:MAX_PATH_CHARS - 1] + "…"
        new_codes[j] = len(values)
        values.append(text)
    codes = g_path.codes.copy()
    codes[rows] = new_codes[back.reshape(-1)]
    return Text(codes, values).unique()


def _infer_phases(steps, lo, hi, gs, kernel_names: Text, k, ng: int) -> None:
    """rooftop.trace.steps.infer_phases on this export: the kernels come first among the `ng` GPU rows (copies
    and memsets after them, never per-token work); a kernel with a `graphNodeId` ran inside a CUDA-graph
    replay."""
    nk = len(kernel_names.codes)
    pad = ng - nk
    codes = np.concatenate([np.asarray(kernel_names.codes, dtype=np.int64), np.full(pad, -1, dtype=np.int64)])
    gx = np.concatenate([np.asarray(k["gridX"].to_numpy(dtype="float64", na_value=np.nan)), np.full(pad, np.nan)])
    replay = np.concatenate([~np.asarray(k["graphNodeId"].isna()), np.zeros(pad, dtype=bool)])
    is_kernel = np.concatenate([np.ones(nk, dtype=bool), np.zeros(pad, dtype=bool)])
    st.infer_phases(steps, lo, hi, gs, codes, kernel_names.values, gx, replay, is_kernel)


def _gpu_rows(db: _Db) -> list[dict]:
    out = []
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        if table in db.tables:
            cur = db.con.execute(f"SELECT * FROM [{table}]")
            cols = [d[0] for d in cur.description]
            out += [{c: (_text(v) if isinstance(v, bytes) else v) for c, v in zip(cols, r)} for r in cur]
    return out


def _device_meta(db: _Db, dev: int | None) -> dict:
    """TARGET_INFO_GPU (2022+, full details) or the older TARGET_INFO_GPU + TARGET_INFO_CUDA_GPU."""
    rows = _gpu_rows(db)
    ids = ("id", "deviceId", "cuDevice", "cudaId")
    match = [r for r in rows if dev is not None and any(r.get(k) == dev for k in ids)] or rows
    pick = lambda *keys: next((r[k] for r in match for k in keys if r.get(k) not in (None, 0, "")), None)  # noqa: E731
    major, minor = pick("computeMajor", "computeCapabilityMajor"), pick("computeMinor", "computeCapabilityMinor")
    return {"index": dev, "name": pick("name"),
            "cc": f"{major}.{minor or 0}" if major is not None else None,
            "sms": pick("smCount", "numMultiprocessors"),
            "memory_bytes": pick("totalMemory", "totalGlobalMemory"),
            "memory_bandwidth": nsys_device.bandwidth_bps(pick("memoryBandwidth"), pick("globalMemoryBandwidth")),
            "clocks": {"sm_hz": nsys_device.clock_hz(pick("clockRate"), pick("coreClockRate"))}}


def _meta(db: _Db, origin: int, gpu: pd.DataFrame, graphs: bool, warnings: list[str]) -> dict:
    kern = gpu[gpu["kind"] == "kernel"]["device"].dropna() if len(gpu) else pd.Series(dtype=object)
    dev = int(kern.mode().iloc[0]) if len(kern) else None
    info = {}
    for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
        if table in db.tables:
            info.update({_text(k): _text(v) for k, v in db.con.execute(f"SELECT name, value FROM [{table}]")})
    epoch = None
    if "TARGET_INFO_SESSION_START_TIME" in db.tables and "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        row = db.con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        epoch = int(row[0]) if row and row[0] is not None else None
    # only what rooftop needs: user names, hosts and local paths in EXPORT_META_DATA stay behind
    source = {"tool": "nsys", "importer": "rooftop.collectors.readers.nsys", "file": db.path.name,
              "version": info.get("EXPORT_PRODUCT_VERSION"), "schema": info.get("EXPORT_SCHEMA_VERSION")}
    return {"source": source, "device": _device_meta(db, dev),
            "origin_ns": epoch + origin if epoch is not None else None,
            "workload": {"cuda_graphs": graphs}, "steps": [], "modeled": False, "warnings": warnings}
