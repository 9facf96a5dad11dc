"""read_ncu_rep against real reports, checked by a plain ncu_report reader written here."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from collectors.readers.ncu import NcuError, flops_from_metrics, row_from_metrics
from rooftop.trace import STALL_REASONS, load_trace, to_table, write_trace

CUTLASS = "ncu/panjd123__cutlass__report.ncu-rep"
A10G = "ncu/AveryClapp__ESMM-Research__profile.ncu-rep"


@pytest.fixture
def ncu_fixtures(fixtures_dir) -> Path:
    return fixtures_dir  # tests/conftest.py: skips when absent, fails under ROOFTOP_REQUIRE_FIXTURES=1


@pytest.fixture
def ncu_report():
    return pytest.importorskip("ncu_report")


def plain(ncu_report, path):
    """Independent reader: the documented ncu_report calls, nothing from rooftop."""
    ctx = ncu_report.load_report(str(path))
    out = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            a = rng.action_by_idx(i)

            def get(name):
                m = a.metric_by_name(name)
                return None if m is None else m.value()
            st = a.nvtx_state()
            stack = []
            if st is not None:
                for d in st.domains():
                    stack += list(st.domain_by_id(d).push_pop_ranges())
            out.append({
                "name": a.name(ncu_report.IAction.NameBase_DEMANGLED),
                "dur": get("gpu__time_duration.sum"),
                "read": get("dram__bytes_read.sum"),
                "write": get("dram__bytes_write.sum"),
                "stalls": {s: get(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") for s in STALL_REASONS},
                "path": "/".join(stack) or None,
            })
    return out


def test_cutlass_report_matches_plain_reader(ncu_fixtures, ncu_report):
    from collectors.readers.ncu_rep import read_ncu_rep
    path = ncu_fixtures / CUTLASS
    rows, meta = read_ncu_rep(path)
    ref = plain(ncu_report, path)
    assert len(rows) == len(ref) == 3
    assert rows["path"].tolist() == ["Non-fused-GEMM", "Non-fused-GEMM", "Fused-GEMM"]
    assert rows["path"].tolist() == [r["path"] for r in ref]
    assert rows["name"].tolist() == [r["name"] for r in ref]
    assert rows["name"].str.startswith("void cutlass::Kernel<").all()
    assert rows["dur_ns"].tolist() == [11168, 10880, 25984] == [int(r["dur"]) for r in ref]
    assert rows["dram_read"].tolist() == [r["read"] for r in ref]
    assert rows["dram_read"].iloc[2] == 1522944.0
    assert rows["dram_write"].tolist() == [r["write"] for r in ref]
    assert rows["counters"].all() and (rows["kind"] == "kernel").all()
    for i, r in enumerate(ref):
        present = {s: v for s, v in r["stalls"].items() if v is not None}
        assert set(present) == set(STALL_REASONS) - {"gmma"}  # gmma is Hopper-only
        assert rows["stall_gmma"].isna().all()
        total = sum(present.values())
        assert total == pytest.approx(4.818, abs=1e-3) if i == 0 else True  # (docs/formats.md), A100
        ours = rows[[f"stall_{s}" for s in present]].iloc[i]
        shares = ours / ours.sum()
        assert shares.sum() == pytest.approx(1.0)
        for s, v in present.items():
            assert rows[f"stall_{s}"].iloc[i] == pytest.approx(v)
            assert shares[f"stall_{s}"] == pytest.approx(v / total)
    assert rows["stall_long_scoreboard"].iloc[2] == pytest.approx(2.062096623679996)
    # int8 tensor-core GEMMs: the tensor pipe was busy but no tensor-op counter exists -> unknown.
    assert rows["flops"].isna().all()
    assert rows["grid"].iloc[0] == [24, 4, 1] and rows["block"].iloc[0] == [128, 1, 1]
    assert rows["registers"].iloc[0] == 188 and rows["shared_mem"].iloc[0] == 43008  # 0 static + 43008 dynamic
    assert rows["start_ns"].tolist() == [0, 11168, 22048]


def test_cutlass_meta(ncu_fixtures, ncu_report):
    from collectors.readers.ncu_rep import read_ncu_rep
    _, meta = read_ncu_rep(ncu_fixtures / CUTLASS)
    dev = meta["device"]
    assert dev["name"] == "NVIDIA A100 80GB PCIe" and dev["cc"] == "8.0" and dev["sms"] == 108
    assert meta["source"]["tool"] == "ncu"
    peaks = dev["peaks"]["ncu"]
    # (docs/formats.md), ~14 TFLOP/s FP32.
    assert peaks["bw"] == pytest.approx(1280 * 1507163323.7822351)
    assert peaks["fp32_flops"] / 1e12 == pytest.approx(14.2, rel=0.02)
    assert peaks["flops"] is None  # no tensor roofline in this report
    assert dev["clocks"]["sm_max_hz"] == 1.41e9


def test_a10g_basic_set_missing_is_null(ncu_fixtures, ncu_report):
    from collectors.readers.ncu_rep import read_ncu_rep
    path = ncu_fixtures / A10G
    rows, meta = read_ncu_rep(path)
    ref = plain(ncu_report, path)
    assert len(rows) == len(ref) == 11
    assert rows["name"].tolist() == [r["name"] for r in ref]
    assert rows["dur_ns"].tolist() == [int(r["dur"]) for r in ref]
    assert rows["dur_ns"].iloc[0] == 10777184
    for col in ["dram_read", "dram_write", "flops", "l1_hit_pct", "l2_hit_pct"] + [f"stall_{s}" for s in STALL_REASONS]:
        assert rows[col].isna().all(), col
    assert rows["sm_pct"].notna().all() and rows["occupancy_pct"].notna().all()
    assert rows["path"].isna().all()
    assert meta["device"]["name"] == "NVIDIA A10G" and meta["device"]["cc"] == "8.6"
    assert meta["device"]["peaks"]["ncu"]["bw"] is None
    # The rows conform to the trace schema and survive a write/load round trip as nulls.
    table = to_table(rows)
    assert table.column("dram_read").null_count == 11


def test_round_trip_through_trace(ncu_fixtures, ncu_report, tmp_path):
    from collectors.readers.ncu_rep import read_ncu_rep
    rows, meta = read_ncu_rep(ncu_fixtures / CUTLASS)
    write_trace(tmp_path / "t.parquet", rows, meta)
    tr = load_trace(tmp_path / "t.parquet")
    assert tr.events["step"].isna().all()
    assert tr.events["stall_wait"].iloc[0] == pytest.approx(1.6593808694147882, rel=1e-6)
    assert tr.meta["device"]["peaks"]["ncu"]["bw"] == pytest.approx(1.929169e12, rel=1e-6)


def test_garbage_is_an_error(tmp_path, ncu_report):
    from collectors.readers.ncu_rep import read_ncu_rep
    bad = tmp_path / "x.ncu-rep"
    bad.write_bytes(b"this is not a report\n" * 10)
    with pytest.raises(NcuError, match="not an Nsight Compute report or empty") as exc:
        read_ncu_rep(bad)
    assert "\n" not in str(exc.value) and str(bad) in str(exc.value)
    with pytest.raises(NcuError, match="no such file"):
        read_ncu_rep(tmp_path / "missing.ncu-rep")


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    from collectors.readers.ncu_rep import read_ncu_rep
    f = tmp_path / "r.ncu-rep"
    f.write_bytes(b"x")
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import raises ImportError
    with pytest.raises(NcuError, match=r"pip install 'rooftop\[ncu\]'"):
        read_ncu_rep(f)


# --- metric mapping, hand-computed --------------------------------------------------------------

def test_flops_fp32_fp16_fp64_weights():
    m = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 10.0,
         "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 3.0,
         "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 2.0,
         "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 5.0,   # x4 (half2)
         "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 1.0,   # x2
         "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 7.0}   # x2
    assert flops_from_metrics(m) == 2 * 10 + 3 + 2 + 4 * 5 + 2 * 1 + 2 * 7


def test_flops_from_rates_and_tensor_ops():
    m = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed": 0.5,
         "smsp__cycles_elapsed.avg": 1000.0,
         "sm__cycles_elapsed.avg": 2000.0,
         "sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_cycle_elapsed": 4.0,   # 8000 ops
         "sm__ops_path_tensor_src_fp16.sum": 100.0,
         "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 60.0,  # covered by src_fp16: not counted twice
         "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum": 8000.0,  # a split, ignored
         "sm__ops_path_tensor_src_int8.sum": 999.0,  # integer ops are not FLOPs
         "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 30.0}
    assert flops_from_metrics(m) == 2 * 0.5 * 1000 + 8000 + 100


def test_flops_unknown():
    assert flops_from_metrics({}) is None
    busy = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 0.0,
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 17.8}
    assert flops_from_metrics(busy) is None
    idle = dict(busy, **{"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 0.0})
    assert flops_from_metrics(idle) == 0.0


def test_tensor_counters_alone_reading_zero_are_no_flop_count():
    # the RTX 5090 GEMV export: bf16 tensor ops 0 (the other tensor total n/a), no CUDA-core
    # counters; the GEMV's FMAs ran on CUDA cores that nothing counted: unknown, not 0 FLOPs
    only_tensor = {"sm__ops_path_tensor_src_bf16_dst_fp32.sum": 0.0,
                   "sm__ops_path_tensor_src_bf16_dst_bf16.sum": "n/a"}
    assert flops_from_metrics(only_tensor) is None
    assert flops_from_metrics({"sm__ops_path_tensor_src_bf16_dst_fp32.sum": 5e9}) == 5e9
    with_cores = dict(only_tensor, **{"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 10.0})
    assert flops_from_metrics(with_cores) == 20.0


def test_row_nan_and_strings_are_null():
    row = row_from_metrics({"gpu__time_duration.sum": float("nan"), "dram__bytes_read.sum": 5.0,
                            "lts__t_sector_hit_rate.pct": "n/a", "launch__grid_dim_x": 2.0})
    assert row["dur_ns"] is None and row["l2_hit_pct"] is None and row["grid"] is None
    assert row["dram_read"] == 5.0 and row["dram_write"] is None
    assert all(row[f"stall_{s}"] is None for s in STALL_REASONS)
    total = row_from_metrics({"dram__bytes.sum": 64.0})
    assert (total["dram_read"], total["dram_write"]) == (64.0, 0.0)
    assert not any(isinstance(v, float) and math.isnan(v) for v in row.values())
