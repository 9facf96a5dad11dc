"""Import an Nsight Systems SQLite export (`nsys export --type sqlite`).

Kernels, memcpy and memset come from the CUPTI activity tables; each is attributed to the NVTX
push/pop ranges open on the thread that launched it, found through the runtime call with the same
correlation id (what nsys's `nvtx_gpu_proj_*` reports do). For CUDA graphs the correlation goes to
`cudaGraphLaunch`, so every node kernel of a replay inherits the ranges around the replay call.
Ranges that mark steps (vLLM, SGLang, TensorRT-LLM, the Recorder's `step=N`, `--steps`: rooftop.steps)
give each kernel its step: the step whose GPU window the kernel runs in.
The schema drifts between nsys versions: tables are created lazily (any may be absent), columns come
and go, text may not be UTF-8. The input file is opened read-only and never modified.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from rooftop import steps as st
from rooftop import limits
from rooftop.redact import redact, redact_names
from rooftop.trace import TraceError
from rooftop.trace.schema import GPU_KINDS

from . import nsys_device
from ._kineto_join import MAX_PATH_CHARS, MAX_PATH_DEPTH, clean_text
from .kineto import nest_intervals

SQLITE_MAGIC = b"SQLite format 3\x00"
PUSH_POP, START_END = 59, 60  # NVTX eventType (NvtxPushPopRange, NvtxStartEndRange)
# CUpti_ActivityMemcpyKind
HOST_MEMORY_KINDS = (1, 2)  # CUpti_ActivityMemoryKind PAGEABLE, PINNED
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}


class NsysError(TraceError):
    """An Nsight Systems export could not be read."""


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


    def check_rows(self, table: str) -> None:
        """Refuse, before fetching, a table with more rows than the `ROOFTOP_MAX_ROWS` budget."""
        cap = limits.max_rows()
        # counting stops at the budget: a huge table costs as much as the budget, not its size
        n = self.con.execute(f"SELECT count(*) FROM (SELECT 1 FROM [{table}] LIMIT {cap + 1})").fetchone()[0]
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


def _ints(s: pd.Series) -> pd.Series:
    """Integers, null where a damaged row holds text, a fraction or a value beyond int64."""
    num = pd.to_numeric(s, errors="coerce")
    if pd.api.types.is_float_dtype(num):
        num = num.where(num.abs().lt(2.0 ** 62) & (num % 1 == 0))
    return num.astype("Int64")


def _shape(frame: pd.DataFrame, cols: tuple[str, str, str]) -> list:
    vals = frame[list(cols)].to_numpy(dtype=object)
    return [None if any(v is None for v in row) else [int(v) for v in row] for row in vals]


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


def _read(db: _Db, progress) -> tuple[pd.DataFrame, dict]:
    known = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
             "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}
    if not db.tables & known:
        raise NsysError(db.path, "SQLite file without CUPTI or NVTX tables: not an Nsight Systems export",
                        "was the report captured with `--trace cuda,nvtx`?")
    if "StringIds" in db.tables:
        db.check_rows("StringIds")
    strings = {_id(i): _text(v) for i, v in db.con.execute("SELECT id, value FROM StringIds")} \
        if "StringIds" in db.tables else {}
    warnings: list[str] = []
    k = db.select("CUPTI_ACTIVITY_KIND_KERNEL", [
        "start", "end", "deviceId", "streamId", "correlationId", "demangledName", "shortName",
        "registersPerThread", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
        "staticSharedMemory", "dynamicSharedMemory", "graphNodeId", "graphId"])
    name_id = k["demangledName"].where(k["demangledName"].notna(), k["shortName"])
    kernels = pd.DataFrame({
        "kind": "kernel", "name": [strings.get(_id(i)) for i in name_id],
        "start": k["start"], "end": k["end"], "device": k["deviceId"], "stream": k["streamId"],
        "correlation": k["correlationId"], "grid": _shape(k, ("gridX", "gridY", "gridZ")),
        "block": _shape(k, ("blockX", "blockY", "blockZ")), "registers": k["registersPerThread"],
        # JSON (Kineto) only has the sum of static and dynamic shared memory; keep the same meaning
        "shared_mem": pd.to_numeric(k["staticSharedMemory"]) + pd.to_numeric(k["dynamicSharedMemory"]),
    })
    graphs = bool(k["graphNodeId"].notna().any() or k["graphId"].notna().any())
    if progress:
        progress(1, 4, "stages")
    m = db.select("CUPTI_ACTIVITY_KIND_MEMCPY", ["start", "end", "deviceId", "streamId", "correlationId",
                                                 "bytes", "copyKind"])
    copies = pd.DataFrame({
        "kind": "memcpy", "name": [f"[CUDA memcpy {COPY_KINDS.get(c, c)}]" for c in m["copyKind"]],
        "start": m["start"], "end": m["end"], "device": m["deviceId"], "stream": m["streamId"],
        "correlation": m["correlationId"],
        # HBM bytes: a device-to-device copy reads and writes its N bytes (rooftop.opmodel.copy_hbm_bytes)
        "model_bytes": pd.to_numeric(m["bytes"], errors="coerce")
        * np.where(pd.to_numeric(m["copyKind"], errors="coerce").isin([5, 6, 7, 8]), 2.0, 1.0)})
    s = db.select("CUPTI_ACTIVITY_KIND_MEMSET", ["start", "end", "deviceId", "streamId", "correlationId", "bytes",
                                                 "memKind"])
    # A memset of host memory (CUPTI memory kind 1 pageable, 2 pinned) writes no HBM of this GPU:
    # its bytes are not HBM bytes (a GTX 1060 capture "sets" 4 MB of pinned memory in 2.3 us,
    # 9x that GPU's DRAM bandwidth). Unknown (NULL) kinds keep their bytes.
    on_host = pd.to_numeric(s["memKind"], errors="coerce").isin(HOST_MEMORY_KINDS).to_numpy()
    sets = pd.DataFrame({
        "kind": "memset", "name": "[CUDA memset]", "start": s["start"], "end": s["end"], "device": s["deviceId"],
        "stream": s["streamId"], "correlation": s["correlationId"],
        "model_bytes": pd.to_numeric(s["bytes"], errors="coerce").where(~on_host)})
    gpu = pd.concat([f for f in (kernels, copies, sets) if len(f)], ignore_index=True) \
        if len(kernels) + len(copies) + len(sets) else kernels
    if progress:
        progress(2, 4, "stages")
    # launching thread and time: the runtime call with the same correlation id
    calls = db.select("CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "globalTid", "start", "end", "nameId"])
    rt = calls[["correlationId", "globalTid", "start"]].dropna(subset=["correlationId"]).drop_duplicates("correlationId")
    launch = gpu[["correlation"]].merge(rt, how="left", left_on="correlation", right_on="correlationId")
    # NVTX: text inline (unregistered strings) or through StringIds (registered)
    nv = db.select("NVTX_EVENTS", ["start", "end", "eventType", "text", "textId", "globalTid"],
                   f"WHERE eventType IN ({PUSH_POP}, {START_END})")
    nv["name"] = [_text(t) if t is not None else strings.get(_id(i))
                  for t, i in zip(nv["text"], nv["textId"])]
    unclosed = nv["end"].isna()
    if unclosed.any():
        warnings.append(f"{int(unclosed.sum())} NVTX range(s) never closed: treated as open to the end")
    nv["end"] = nv["end"].where(~unclosed, np.iinfo(np.int64).max // 2)
    pp = nv[nv["eventType"] == PUSH_POP].reset_index(drop=True)
    se = nv[nv["eventType"] == START_END].reset_index(drop=True)
    i64 = lambda c: pd.to_numeric(c, errors="coerce").fillna(-1).astype(np.int64).to_numpy()  # noqa: E731
    has = launch["globalTid"].notna().to_numpy()
    q = np.flatnonzero(has)
    nest_stats: dict = {}
    _, qpath, ppath = nest_intervals(i64(pp["globalTid"]), i64(pp["start"]), i64(pp["end"]),
                                     pp["name"].tolist(), i64(launch["globalTid"])[q], i64(launch["start"])[q],
                                     nest_stats)
    if nest_stats.get("cut"):
        warnings.append(f"{nest_stats['cut']} NVTX path(s) deeper than {MAX_PATH_DEPTH} levels or longer than "
                        f"{MAX_PATH_CHARS} characters cut (\"…\")")
    path = [None] * len(gpu)
    for j, p in zip(q.tolist(), qpath):
        path[j] = p
    gpu["path"] = path
    # steps: NVTX push/pop ranges that are step markers (rooftop.steps); GPU work by the window it runs in
    steps = st.find_steps(pp["name"].tolist(), ppath, i64(pp["globalTid"]), i64(pp["start"]), i64(pp["end"]),
                          user=st.user_pattern(), launches=(i64(launch["globalTid"]), i64(launch["start"])))
    gs, ge = i64(gpu["start"]), i64(gpu["end"])
    lo, hi, how = st.gpu_windows(steps, gs, ge, i64(launch["globalTid"]), i64(launch["start"]))
    _infer_phases(steps, lo, hi, gs, gpu, k)
    gpu["step"], gpu["phase"] = st.assign(lo, hi, steps.index, steps.phase, gs)
    pstep, pphase = st.assign_cpu(steps, i64(pp["globalTid"]), i64(pp["start"]))
    if progress:
        progress(3, 4, "stages")
    ranges = pd.DataFrame({"kind": "range", "name": pd.concat([pp["name"], se["name"]], ignore_index=True),
                           "start": pd.concat([pp["start"], se["start"]], ignore_index=True),
                           "end": pd.concat([pp["end"], se["end"]], ignore_index=True),
                           # start/end ranges may cross threads and overlap: flat, not nested
                           "path": ppath + se["name"].tolist(),
                           "step": pd.array(np.concatenate([pstep.to_numpy("float64", na_value=np.nan),
                                                            np.full(len(se), np.nan)]), dtype="Int32"),
                           "phase": np.concatenate([pphase, np.full(len(se), None, dtype=object)])})
    host = _runtime_rows(calls, strings)
    parts = [f for f in (gpu, ranges, host) if len(f)]
    rows = pd.concat(parts, ignore_index=True) if parts else gpu
    starts = pd.to_numeric(rows["start"], errors="coerce")
    origin = int(starts.min()) if len(rows) and starts.notna().any() else 0
    rows["start_ns"] = _ints(rows["start"]) - origin
    rows["dur_ns"] = _ints(rows["end"]) - _ints(rows["start"])
    rows.loc[rows["kind"] == "range", "dur_ns"] = rows["dur_ns"].where(~rows["end"].eq(np.iinfo(np.int64).max // 2))
    rows = rows.drop(columns=["start", "end"])
    # by kind, each kind in time order: the GPU rows, the ranges, the runtime calls (the order a
    # load splits them into: `rooftop.trace.read.split_runtime` then cuts slices, copies nothing)
    kind = rows["kind"]
    part = np.select([kind.isin(GPU_KINDS).to_numpy(), kind.eq("runtime").to_numpy()], [0, 2], 1)
    order = [rows["start_ns"][part == p].sort_values(kind="stable").index for p in range(3)]
    rows = rows.loc[np.concatenate(order)].reset_index(drop=True)
    rows["id"] = np.arange(len(rows), dtype=np.int64)
    for col in ("name", "path"):
        rows[col] = redact_names(rows[col].tolist())
    if progress:
        progress(4, 4, "stages")
    meta = _meta(db, origin, gpu, graphs, warnings)
    meta["steps"] = st.attach_windows(steps, lo, hi, how, origin)
    meta["warnings"].extend(steps.warnings)
    meta["step_rule"] = steps.rule
    return rows, redact(meta)


def _infer_phases(steps, lo, hi, gs, gpu: pd.DataFrame, k: pd.DataFrame) -> None:
    """rooftop.steps.infer_phases on this export: kernels come first among the GPU rows; a kernel
    with a `graphNodeId` ran inside a CUDA-graph replay."""
    nk = len(k) if len(gpu) and (gpu["kind"].iloc[0] == "kernel") else 0
    pad = np.full(len(gpu) - nk, np.nan)
    gx = np.concatenate([pd.to_numeric(k["gridX"], errors="coerce").to_numpy("float64")[:nk], pad])
    replay = np.concatenate([k["graphNodeId"].notna().to_numpy()[:nk], np.zeros(len(pad), bool)])
    codes, table = pd.factorize(gpu["name"].astype(object))
    st.infer_phases(steps, lo, hi, gs, codes, list(table), gx, replay, (gpu["kind"] == "kernel").to_numpy())


def _runtime_rows(calls: pd.DataFrame, strings: dict) -> pd.DataFrame:
    """CUDA runtime calls (cudaLaunchKernel, cudaStreamSynchronize, ...) as `runtime` rows: what the
    host thread was doing. `globalTid` packs the process and thread ids (tid in its low 24 bits,
    as nsys's own reports decode it)."""
    if not len(calls):
        return pd.DataFrame()
    gtid = _ints(calls["globalTid"])
    return pd.DataFrame({
        "kind": "runtime", "name": [strings.get(_id(i)) for i in calls["nameId"]],
        "start": calls["start"], "end": calls["end"], "correlation": calls["correlationId"],
        "thread": gtid % (1 << 24)})


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
