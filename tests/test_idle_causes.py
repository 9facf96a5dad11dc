"""What the GPU waited for: idle by cause (rooftop.analysis.idle), exposed communication
(rooftop.analysis.comm), host copies against their link (rooftop.analysis.copies, rooftop.hardware.links),
on hand-built traces whose answers are worked out below, then on real captures."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rooftop.hardware import links
from rooftop.analysis import comm, copies, findings, gap, idle
from rooftop.analysis import work as _work


class metrics:  # noqa: N801 (the prepare the analysis uses, on rows with only the columns a test names)
    LINK_COPY = _work.LINK_COPY

    @staticmethod
    def prepare(rows: pd.DataFrame) -> pd.DataFrame:
        for col in ("dram_read", "dram_write", "flops", "model_flops", "model_bytes"):
            if col not in rows.columns:
                rows = rows.assign(**{col: np.nan})
        if "counters" not in rows.columns:
            rows = rows.assign(counters=False)
        return _work.prepare(rows)

# One decode step on device 0. Stream 7 runs the compute kernels K1..K7 (100 ns each), stream 8 a
# memset, two NCCL kernels, a HtoD copy and a lone late DtoH copy. Idle stretches (no compute kernel):
#   [0, 100)        memset [0, 50) then nothing: copies 50, edge 50 (before the first kernel)
#   [200, 300)      N1 (comm) runs: comm 100
#   [400, 10400)    K3 launched at 10300 from aten::addmm, after the GPU ran dry: host 10000
#   [10500, 20500)  the thread sat in cudaStreamSynchronize until 10520: sync 10000
#   [20600, 21600)  1000 ns, under the 2 us launch floor: launch 1000
#   [21700, 31700)  K6 was launched at 1000, long before: other 10000
#   [31800, 41800)  the HtoD copy runs: copies 10000
#   [41900, 142000) nothing until the late DtoH [141900, 142000): edge 100000, copies 100
# N2 [100, 150) runs under K1: overlapped. Span 142000, compute busy 700, idle 141300.
K = [(100, 1), (300, 2), (10400, 3), (20500, 4), (21600, 5), (31700, 6), (41800, 7)]
GPU = pd.DataFrame({
    "kind": ["kernel"] * 7 + ["memset", "kernel", "kernel", "memcpy", "memcpy"],
    "name": [f"K{i}" for _, i in K] + ["[CUDA memset]", "ncclKernel_AllReduce", "ncclKernel_AllReduce",
                                       "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)"],
    "category": ["gemm"] * 7 + ["memory", "comm", "comm", "memory", "memory"],
    "start_ns": [s for s, _ in K] + [0, 200, 100, 31800, 141900],
    "dur_ns": [100] * 7 + [50, 100, 50, 10000, 100],
    "device": 0, "stream": [7] * 7 + [8] * 5,
    "correlation": [i for _, i in K] + [20, 21, 22, 23, 24],
    "phase": "decode", "step": 3,
    "op": [None, None, "aten::addmm", None, None, None, None, None, None, None, None, None],
    "model_bytes": [np.nan] * 7 + [np.nan, 1e6, 5e5, 6.3e5, 1e2],
})
HOST = pd.DataFrame({
    "name": ["cudaLaunchKernel"] * 7 + ["cudaStreamSynchronize"],
    "start_ns": [50, 290, 10300, 20400, 21550, 1000, 41700, 10450],
    "dur_ns": [5, 5, 5, 5, 5, 5, 5, 70],
    "correlation": [1, 2, 3, 4, 5, 6, 7, 99], "thread": 9, "op": [None] * 8,
})


def _causes() -> idle.Causes:
    return idle.Causes(metrics.prepare(GPU), HOST)


def test_idle_is_cut_by_cause_and_adds_up():
    t = _causes().table()
    assert len(t) == 1
    r = t.iloc[0]
    assert (r["phase"], r["step"], r["device"]) == ("decode", 3, 0)
    assert r["span_ns"] == 142_000 and r["idle_ns"] == 142_000 - 700
    want = {"comm": 100, "copies": 10_150, "edge": 100_050, "host": 10_000, "sync": 10_000, "launch": 1_000,
            "other": 10_000}
    assert {c: r[f"{c}_ns"] for c in idle.CAUSES} == want
    assert sum(want.values()) == r["idle_ns"]
    # launch gaps: idle between kernels of the work with nothing on the GPU (edge excluded)
    assert r["launch_gaps_ns"] == 31_000
    assert r["host_frac"] == pytest.approx(10_000 / 141_300)


def test_gap_list_names_the_host_op_and_the_sync_call():
    g = _causes().listed()
    by_start = {int(s): row for s, row in zip(g["start_ns"], g.to_dict("records"))}
    assert by_start[400]["main"] == "host" and by_start[400]["what"] == "aten::addmm"
    assert by_start[10_500]["main"] == "sync" and by_start[10_500]["what"] == "cudaStreamSynchronize"
    assert by_start[21_700]["main"] == "other"
    assert by_start[31_800]["main"] == "copies"
    assert by_start[41_900]["main"] == "edge" and by_start[41_900]["dur_ns"] == 100_100
    assert 20_600 not in by_start  # under the launch floor: not listed
    assert g["dur_ns"].is_monotonic_decreasing


def test_without_host_rows_interior_gaps_are_other():
    t = idle.Causes(metrics.prepare(GPU), None).table().iloc[0]
    assert t["host_ns"] == 0 and t["sync_ns"] == 0 and t["other_ns"] == 30_000 and t["launch_ns"] == 1_000


def test_blocking_calls():
    assert idle.is_blocking("cudaStreamSynchronize") and idle.is_blocking("cudaDeviceSynchronize_v3020")
    assert idle.is_blocking("cudaMemcpy") and idle.is_blocking("cuMemcpyDtoH_v2")
    assert not idle.is_blocking("cudaMemcpyAsync") and not idle.is_blocking("cudaLaunchKernel")


def test_exposed_communication_is_interval_arithmetic():
    o = comm.Overlap(metrics.prepare(GPU))
    t = o.table().iloc[0]
    # comm union [100,150) + [200,300) = 150; compute covers [100,150) of it
    assert (t["comm_ns"], t["overlapped_ns"], t["exposed_ns"]) == (150, 50, 100)
    assert t["exposed_frac"] == pytest.approx(100 / 150)
    c = o.collectives()
    assert sorted(c["exposed_ns"].tolist()) == [0, 100]
    top = comm.top_exposed(c)
    # N1 (1 MB, wholly exposed) and N2 (hidden under K1) share a name: one entry, both calls, both sizes
    assert (top.iloc[0]["exposed_ns"], top.iloc[0]["calls"]) == (100, 2) and top.iloc[0]["bytes"] == pytest.approx(1.5e6)


def test_overlap_is_per_rank_and_device():
    # rank 0: comm [0,1000) under compute [500,1500): 500 overlapped. rank 1 (same times): no compute.
    rows = pd.DataFrame({"kind": "kernel", "name": ["nccl", "gemm", "nccl"], "category": ["comm", "gemm", "comm"],
                         "start_ns": [0, 500, 0], "dur_ns": [1000, 1000, 1000], "device": 0, "stream": [2, 1, 2],
                         "rank": [0, 0, 1], "phase": None, "step": None})
    t = comm.overlap_table(rows).set_index("rank")
    assert t.loc[0, "overlapped_ns"] == 500 and t.loc[0, "exposed_ns"] == 500
    assert t.loc[1, "overlapped_ns"] == 0 and t.loc[1, "exposed_ns"] == 1000
    d = comm.per_device(comm.overlap_table(rows))
    assert d["exposed_frac"].tolist() == [0.5, 1.0]


def test_pcie_rates_from_the_spec():
    # PCI-SIG: gen4 16 GT/s, gen5 32 GT/s per lane, 128b/130b encoding; x16, per direction
    assert links.pcie_bw(4) == pytest.approx(16e9 * 16 * 128 / 130 / 8)
    assert links.host_link("h100-pcie").bw == pytest.approx(63.0e9, rel=1e-3)
    assert links.host_link("a100-80gb").bw == pytest.approx(31.5e9, rel=1e-3)
    assert links.host_link("gh200").name == "NVLink-C2C" and links.host_link("gh200").bw == 450e9
    assert links.peer_link("h100-sxm").name == "NVLink" and links.host_link("no-such-gpu") is None


def test_host_copies_against_the_link_and_the_copy_bound_finding():
    # 6.3 GB HtoD in 0.2 s of a 0.25 s span on an H100 PCIe: 31.5 GB/s, half of gen5 x16, 80% of the time
    rows = pd.DataFrame({"kind": ["memcpy", "kernel"], "name": ["Memcpy HtoD (Pinned -> Device)", "gemm"],
                         "category": ["memory", "gemm"], "start_ns": [0, 200_000_000], "dur_ns": [200_000_000, 50_000_000],
                         "device": 0, "stream": [3, 7], "model_bytes": [6.3e9, np.nan], "phase": None, "step": None})
    t = copies.copy_table(metrics.prepare(rows), "h100-pcie").set_index("direction")
    assert t.loc["all", "share"] == pytest.approx(0.8) and np.isnan(t.loc["all", "link_bw"])
    assert t.loc["HtoD", "rate"] == pytest.approx(31.5e9)
    assert t.loc["HtoD", "link_frac"] == pytest.approx(0.5, rel=1e-3)
    f = findings.copy_findings(t.reset_index())
    assert len(f) == 1 and f[0].id == "copy-bound" and "80%" in f[0].title and "PCIe gen5 x16" in f[0].detail
    assert copies.copy_table(metrics.prepare(rows.iloc[1:]), "h100-pcie") is None


def _gap_rows(modeled_share: float) -> pd.DataFrame:
    # one step: a costed GEMM and an uncosted kernel, a HtoD copy, then a lone late copy far away
    costed = 1000 * modeled_share
    return metrics.prepare(pd.DataFrame({
        "kind": ["kernel", "kernel", "memcpy", "memcpy"], "name": ["gemm", "norm", "Memcpy HtoD", "Memcpy DtoH"],
        "category": ["gemm", "norm", "memory", "memory"], "start_ns": [0, costed, 1000, 100_000],
        "dur_ns": [costed, 1000 - costed, 500, 10], "device": 0, "stream": 7, "phase": "decode", "step": 0,
        "model_flops": [1e6, np.nan, np.nan, np.nan], "model_bytes": [1e6, np.nan, 5e5, 10.0],
        "counters": False, "correlation": [1, 2, 3, 4]}))


def test_gap_has_no_basis_below_half_and_copies_are_not_slow_kernels():
    steps = pd.DataFrame({"phase": ["decode"], "step": [0], "span_ns": [100_010.0], "busy_ns": [1510.0]})
    rows = _gap_rows(0.3)
    edges = idle.Causes(rows).table()[["phase", "step", "edge_ns"]]
    s = gap.split(rows, 1e15, 3e12, steps, edges)
    r = s.iloc[0]
    assert r["basis"] is None and np.isnan(r["ideal_ns"]) and np.isnan(r["slow_kernels_ns"])
    assert "30.0%" in r["basis_reason"] and "--model" in r["basis_reason"]
    assert r["copies_ns"] == 510  # both host copies: their link's business
    # idle [1500, 100000) comes before a lone late copy: edge, not launch gaps
    assert r["edge_idle_ns"] == 98_500 and r["launch_gaps_ns"] == 0
    ok = gap.split(_gap_rows(0.6), 1e15, 3e12, steps, edges).iloc[0]
    assert ok["basis"] == "kernels" and ok["basis_reason"] is None
    # the costed kernel's slow part never includes the copies
    assert ok["slow_kernels_ns"] + ok["ideal_ns"] == pytest.approx(600)


# --- real captures -----------------------------------------------------------------------------

def _load(path):
    from collectors.open import open_trace
    return open_trace(str(path), None)


def test_hta_rank_trace_exposed_comm_by_hand(fixtures_dir):
    path = fixtures_dir / "traces" / "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz"
    rows = metrics.prepare(_load(path).timed())
    t = comm.per_device(comm.overlap_table(rows))
    # by hand, as HTA does it: a sweep over start/end events of the merged comm and compute kernels
    k = rows[rows["kind"] == "kernel"]
    is_comm = (k["category"] == "comm").to_numpy()
    ev = []
    for s, d, c in zip(k["start_ns"], k["dur_ns"], is_comm):
        ev += [(int(s), 1 if c else 2), (int(s + d), -1 if c else -2)]
    ev.sort()
    cnt, t_prev, comm_t, both_t = {1: 0, 2: 0}, None, 0, 0
    for time, delta in ev:
        if t_prev is not None:
            if cnt[1] > 0:
                comm_t += time - t_prev
                if cnt[2] > 0:
                    both_t += time - t_prev
        cnt[abs(delta)] += 1 if delta > 0 else -1
        t_prev = time
    assert int(t["comm_ns"].sum()) == comm_t
    assert int(t["overlapped_ns"].sum()) == both_t
    assert 0 < t["exposed_frac"].iloc[0] < 1


def test_two_gpu_nsys_capture_is_copy_bound_not_slow_kernels(fixtures_dir):
    from rooftop.analysis import Analysis
    from rooftop.hardware.gpus import Override, peaks
    tr = _load(fixtures_dir / "traces" / "GindaChen__nsys-ai__tests__fixtures__h100_2gpu_1s.sqlite")
    a = Analysis(tr, peaks(tr.meta, override=Override(gpu="h100-sxm")))
    f = {x.id: x for x in a.findings}
    assert "copy-bound" in f and "PCIe gen5" in f["copy-bound"].detail
    c = a.copies.set_index(["device", "direction"])
    for dev in (0, 1):
        assert c.loc[(dev, "all"), "share"] > 0.9  # 921 ms of 969 ms
        assert c.loc[(dev, "HtoD"), "bytes"] == pytest.approx(25.5e9, rel=0.01)
    g = a.gap.iloc[0]
    # the gap table is the headline device's (issue 34: one GPU at a time): GPU 0's 921 ms of HtoD
    # are its link's time, not slow kernels
    assert 0.9e9 < g["copies_ns"] < 0.97e9
    assert g["basis"] is None or g["kernel_coverage"] >= 0.5
    t = a.idle_phases.iloc[0]
    assert t["copies_frac"] > 0.9


def test_timeline_gaps_carry_their_cause():
    from rooftop.analysis import lanes as tl
    t = tl.build(metrics.prepare(GPU), HOST.assign(kind="runtime"))
    frame = t.gaps.frame()
    cause, what = t.gap_causes(np.arange(len(t.gaps)))
    by_start = dict(zip(frame["start_ns"].tolist(), zip(cause.tolist(), what.tolist())))
    assert by_start[400] == ("host", "aten::addmm")
    assert by_start[10_500] == ("sync", "cudaStreamSynchronize")
    assert by_start[20_600][0] == "launch" and by_start[21_700][0] == "other"
    assert by_start[41_900][0] == "edge"


def test_edge_idle_is_not_launch_bound():
    # a decode step of 1 ms whose GPU is idle 60%: 55% after its last kernel (a lone late copy), 5% between
    row = pd.Series({"phase": "decode", "idle_frac": 0.6, "idle_ns": 600_000.0, "span_ns": 1_000_000.0, "steps": 1})
    causes = pd.Series({"edge_ns": 550_000.0, "host_ns": 40_000.0, "sync_ns": 0.0, "launch_ns": 10_000.0,
                        "other_ns": 0.0})
    out = findings._gap_findings(row, graphs=False, modeled=False, causes=causes)
    assert [f.id for f in out] == ["decode-edge-idle"] and "55%" in out[0].title
    # the same step with the idle between kernels: launch-bound, and the gaps say what they waited for
    causes = causes.copy()
    causes["edge_ns"], causes["host_ns"] = 0.0, 590_000.0
    out = findings._gap_findings(row, graphs=False, modeled=False, causes=causes)
    assert [f.id for f in out] == ["decode-launch-bound"] and "host-bound" in out[0].detail


def test_nsys_device_to_device_copies_move_twice_their_bytes(fixtures_dir):
    import sqlite3
    path = fixtures_dir / "traces" / "GindaChen__nsys-ai__tests__fixtures__h100_2gpu_1s.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:  # CUPTI copyKind 8: device to device
        n = db.execute("select sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY where copyKind = 8").fetchone()[0]
        h = db.execute("select sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY where copyKind = 1").fetchone()[0]
    rows = _load(path).timed()
    names = rows["name"].astype(str)
    assert rows.loc[names.str.contains("DtoD"), "model_bytes"].sum() == pytest.approx(2 * n)
    prepared = _work.prepare(rows)
    link = prepared["copy_class"].to_numpy() == _work.LINK_COPY
    assert link.sum() == names.str.contains("HtoD|DtoH").sum()
    assert prepared.loc[link & names.str.contains("HtoD").to_numpy(), "model_bytes"].sum() == pytest.approx(h)


def test_timeline_states_its_communication():
    from rooftop.analysis import lanes as tl
    t = tl.build(metrics.prepare(GPU), HOST.assign(kind="runtime"))
    assert t.comm_summary() == (150.0, 50.0, 100.0)
    assert tl.build(metrics.prepare(GPU[GPU["category"] != "comm"])).comm_summary() is None
