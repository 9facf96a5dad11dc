"""nsys SQLite importer against the real Extra-P export (plain sqlite3 as the independent reader)
and against small exports built here to cover schema drift."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from collectors.readers.nsys import NsysError, read_nsys
from rooftop.trace import to_table

SQLITE = "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite"


@pytest.fixture
def export(fixtures_dir) -> Path:
    return fixtures_dir / "traces" / SQLITE


def _plain(path: Path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    return con


def test_counts_durations_names_and_args(export):
    con = _plain(export)
    rows, meta = read_nsys(export)
    for table, kind in (("KERNEL", "kernel"), ("MEMCPY", "memcpy"), ("MEMSET", "memset")):
        n, total = con.execute(f"SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_{table}").fetchone()
        got = rows[rows["kind"] == kind]
        assert (len(got), int(got["dur_ns"].sum())) == (n, total), kind
    assert (len(rows[rows["kind"] == "kernel"]), len(rows[rows["kind"] == "memcpy"])) == (12, 30)
    want = sorted(con.execute(
        "SELECT s.value, k.gridX, k.blockX, k.registersPerThread, k.staticSharedMemory + k.dynamicSharedMemory,"
        " k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName").fetchall())
    k = rows[rows["kind"] == "kernel"]
    got = sorted((r.name, r.grid[0], r.block[0], int(r.registers), int(r.shared_mem), int(r.correlation))
                 for r in k.itertuples())
    assert got == want
    assert meta["device"]["name"] == "GeForce GTX 1060 with Max-Q Design"
    assert (meta["device"]["cc"], meta["device"]["sms"], meta["device"]["memory_bandwidth"]) == ("6.1", 10, 192192000000)
    assert meta["source"]["version"] == "2022.1.1.61"
    assert "Alexander" not in repr(meta)  # user names and local paths of EXPORT_META_DATA stay behind



def test_rows_come_by_kind_each_in_time_order(export):
    """The GPU rows, the ranges, the runtime calls, each in time order (the order a load splits
    them into, `split_runtime`), numbered in that order."""
    import numpy as np

    rows, _ = read_nsys(export)
    kind = rows["kind"].astype(str)
    part = np.select([kind.isin(["kernel", "memcpy", "memset"]), kind == "runtime"], [0, 2], 1)
    assert (np.diff(part) >= 0).all() and sorted(set(part)) == [0, 1, 2]
    for p in range(3):
        assert (np.diff(rows["start_ns"].to_numpy(dtype="int64")[part == p]) >= 0).all()
    assert rows["id"].tolist() == list(range(len(rows)))

def test_memsets_of_host_memory_carry_no_hbm_bytes(export):
    # CUPTI memory kinds 1/2 (pageable/pinned) are host memory: no HBM bytes of this GPU, so no
    # "1000% of the roof" for a memset that never touched DRAM; device memsets keep their bytes
    con = _plain(export)
    kinds = [k for (k,) in con.execute("SELECT memKind FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY start")]
    rows, _ = read_nsys(export)
    sets = rows[rows["kind"] == "memset"].sort_values("start_ns")
    assert len(sets) == len(kinds) and set(kinds) <= {1, 2, 3}
    on_host = [k in (1, 2) for k in kinds]
    assert sets["model_bytes"].isna().tolist() == on_host
    assert any(on_host)


def test_nvtx_paths_match_plain_join(export):
    """kernel -> runtime (correlationId) -> push/pop ranges open on that thread at the launch."""
    con = _plain(export)
    want = {}
    for corr, tid, t in con.execute("SELECT k.correlationId, r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                    "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId"):
        names = con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 59 AND globalTid = ? AND start <= ? "
                            "AND ? < end ORDER BY start, end DESC", (tid, t, t)).fetchall()
        want[corr] = "/".join(n for (n,) in names)
    rows, _ = read_nsys(export)
    k = rows[rows["kind"] == "kernel"]
    assert dict(zip(k["correlation"].astype(int), k["path"])) == want
    assert want[120].endswith("main->test_max_par->phase->kernel0")
    ranges = rows[rows["kind"] == "range"]
    assert len(ranges) == 76 and ranges["path"].iloc[0] == "main"


@pytest.mark.parametrize("name", ["NVIDIA__Fuser__report1.sqlite", "NVIDIA__Fuser__report1.h100-8fa9ec29.sqlite"])
def test_fuser_nvtx_ranges_are_paths_not_steps(fixtures_dir, name):
    """nvFuser's host NVTX ranges (H200, H100 exports): each kernel's path is the push/pop ranges open
    on the launching thread at the launch; none of them marks a step, so no kernel gets one."""
    path = fixtures_dir / "traces" / name
    con = _plain(path)
    want = {}
    for corr, tid, t in con.execute("SELECT k.correlationId, r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                    "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId"):
        names = con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 59 AND globalTid = ? AND start <= ? "
                            "AND ? < end ORDER BY start, end DESC", (tid, t, t)).fetchall()
        want[corr] = "/".join(n for (n,) in names) or None
    rows, meta = read_nsys(path)
    k = rows[rows["kind"] == "kernel"]
    got = k["path"].astype(object).where(k["path"].notna(), None)
    assert len(k) == len(want) and dict(zip(k["correlation"].astype(int), got)) == want
    assert any(p is not None for p in want.values())
    n_ranges = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()[0]
    assert (rows["kind"] == "range").sum() == n_ranges
    assert meta["steps"] == [] and k["step"].isna().all() and k["phase"].isna().all()


def _build_steps(path: Path) -> Path:
    """TensorRT-LLM's executor ranges around two steps: a context step, then a CUDA-graph decode step
    whose two node kernels carry the cudaGraphLaunch's correlation; a kernel launched before both."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "warmup_kernel"), (2, "fmha_prefill"),
                                                            (3, "graph_gemm"), (4, "graph_norm")])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)",
                    [(100, 110, 5, 1), (1000, 1010, 5, 2), (3000, 3010, 5, 3)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?)", [
        (150, 160, 0, 7, 1, 1), (1500, 2500, 0, 7, 2, 2), (3200, 3300, 0, 7, 3, 3), (3300, 3350, 0, 7, 3, 4)])
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)", [
        (900, 1200, 59, "[Executor] _forward_step 7: 2 ctx reqs, 0 gen reqs", None, 5),
        (2900, 3100, 59, "[Executor] _forward_step 8: 0 ctx reqs, 2 gen reqs", None, 5)])
    con.commit()
    con.close()
    return path


def test_nvtx_step_markers_give_steps_and_phases(tmp_path):
    rows, meta = read_nsys(_build_steps(tmp_path / "trt.sqlite"))
    t = to_table(rows).to_pandas()
    k = t[t["kind"] == "kernel"].set_index("name")
    assert k.loc["fmha_prefill", ["phase", "step"]].tolist() == ["prefill", 7]
    # the GPU ran the context step long after its range closed: still step 7, by its window
    for name in ("graph_gemm", "graph_norm"):
        assert k.loc[name, ["phase", "step"]].tolist() == ["decode", 8]
    assert k.loc["warmup_kernel", "phase"] == "before first step" and pd.isna(k.loc["warmup_kernel", "step"])
    assert [(s["phase"], s["index"], s["prefill_requests"], s["decode_requests"]) for s in meta["steps"]] == [
        ("prefill", 7, 2, 0), ("decode", 8, 0, 2)]
    origin = 100  # the first row: a runtime call (host rows, kept for the timeline)
    assert (meta["steps"][1]["gpu_start_ns"], meta["steps"][1]["gpu_end_ns"]) == (3200 - origin, 3350 - origin)


def test_input_is_not_modified(export):
    before = (hashlib.sha256(export.read_bytes()).hexdigest(), export.stat().st_mtime_ns)
    read_nsys(export)
    assert (hashlib.sha256(export.read_bytes()).hexdigest(), export.stat().st_mtime_ns) == before
    assert not Path(str(export) + "-journal").exists() and not Path(str(export) + "-wal").exists()


def _build(path: Path, *, old_gpu: bool = True, nvtx: bool = True) -> Path:
    """A minimal export in an older layout: TARGET_INFO_CUDA_GPU, NVTX text through textId, a
    CUDA graph replay, a start/end range, non-UTF-8 bytes, no memcpy/memset tables."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, shortName INT, registersPerThread INT, gridX INT, gridY INT,
            gridZ INT, blockX INT, blockY INT, blockZ INT, staticSharedMemory INT, dynamicSharedMemory INT,
            graphNodeId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                    [(1, "gemv_kernel"), (2, "gemv"), (3, "cudaGraphLaunch"), (4, "decode"), (5, "rms_norm")])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?)",
                    [(1000, 1100, 77, 1, 3), (2000, 2050, 77, 2, 3)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", [
        (1500, 1700, 0, 7, 1, 1, 2, 32, 8, 1, 1, 128, 1, 1, 512, 1024, 11),
        (1700, 1710, 0, 7, 1, None, 5, 16, 1, 1, 1, 64, 1, 1, 0, 0, 12),   # same graph replay, shortName only
        (2100, 2400, 0, 7, 2, 1, 2, 32, 8, 1, 1, 128, 1, 1, 512, 1024, 11)])
    if nvtx:
        con.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, "
                    "globalTid INT, domainId INT)")
        con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?, ?)", [
            (900, 1900, 59, None, 4, 77, 0),                # registered string -> "decode"
            (950, 1200, 59, b"step=3\xff", None, 77, 0),    # inline text, not UTF-8
            (1950, 2500, 59, "step=4", None, 77, 0),
            (500, 3000, 60, "warmup", None, 99, 0)])        # start/end: flat, another thread
    if old_gpu:
        con.execute("CREATE TABLE TARGET_INFO_GPU (vmId INT, deviceId INT, name TEXT, busLocation TEXT)")
        con.execute("INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H200', '0000:01:00.0')")
        con.execute("CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INT, numMultiprocessors INT, "
                    "globalMemoryBandwidth INT, coreClockRate INT, computeCapabilityMajor INT, "
                    "computeCapabilityMinor INT)")
        # CUPTI's device record units (CUpti_ActivityDevice): globalMemoryBandwidth in kB/s, coreClockRate in kHz
        con.execute("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (0, 132, 4800000000, 1980000, 9, 0)")
    con.commit()
    con.close()
    return path


def test_schema_drift_old_gpu_tables_textid_graphs_and_bad_utf8(tmp_path):
    rows, meta = read_nsys(_build(tmp_path / "old.sqlite"))
    k = rows[rows["kind"] == "kernel"].reset_index(drop=True)
    assert k["name"].tolist() == ["gemv_kernel", "rms_norm", "gemv_kernel"]
    # both kernels of the first graph replay inherit the ranges around cudaGraphLaunch
    assert k["path"].tolist() == ["decode/step=3\ufffd", "decode/step=3\ufffd", "step=4"]
    assert k["start_ns"].tolist() == [1000, 1200, 1600] and k["dur_ns"].tolist() == [200, 10, 300]
    assert k["shared_mem"].tolist() == [1536, 0, 1536]
    assert meta["device"] == {"index": 0, "name": "NVIDIA H200", "cc": "9.0", "sms": 132, "memory_bytes": None,
                              "memory_bandwidth": 4800000000000, "clocks": {"sm_hz": 1980000000}}
    assert meta["workload"]["cuda_graphs"] is True
    warm = rows[rows["name"] == "warmup"].iloc[0]
    assert warm["kind"] == "range" and warm["path"] == "warmup" and int(warm["start_ns"]) == 0
    t = to_table(rows)
    assert t.column("step").to_pylist()[rows.index[rows["name"] == "gemv_kernel"][1]] == 4


def test_no_nvtx_no_gpu_info(tmp_path):
    rows, meta = read_nsys(_build(tmp_path / "bare.sqlite", old_gpu=False, nvtx=False))
    assert (rows["kind"] == "kernel").sum() == 3 and rows["path"].isna().all()
    assert meta["device"]["name"] is None


@pytest.mark.parametrize("content", [b"", b"SQLite format 2\x00garbage", b"PAR1...."])
def test_not_sqlite(tmp_path, content):
    p = tmp_path / "x.sqlite"
    p.write_bytes(content)
    with pytest.raises(NsysError) as info:
        read_nsys(p)
    assert "\n" not in str(info.value)


def test_sqlite_without_nsys_tables(tmp_path):
    p = tmp_path / "other.sqlite"
    sqlite3.connect(p).executescript("CREATE TABLE t (a INT); INSERT INTO t VALUES (1);")
    with pytest.raises(NsysError, match="not an Nsight Systems export"):
        read_nsys(p)


def test_corrupt_database(tmp_path, export):
    p = tmp_path / "cut.sqlite"
    p.write_bytes(export.read_bytes()[:8192])
    with pytest.raises(NsysError):
        read_nsys(p)
