"""Issue 33 items 1-3 and 7: each kernel against its own roof, integer and unknown work, peaks that
respect physics, every GPU and the file's own word. Each rule is built from the format's definition:
ncu metric names (../shared/reference/ncu.md, NVIDIA's roofline section files), CUPTI's device
record units (nsys's older TARGET_INFO_CUDA_GPU), libkineto's CuptiRangeProfiler.cpp output."""
from __future__ import annotations

import gzip
import json
import sqlite3
import pandas as pd
import pytest

from collectors.readers import nsys_device
from collectors.readers.kineto_ranges import device_meta, range_rows
from collectors.readers.ncu import peaks_from_metrics, pipe_dtype, row_from_metrics
from rooftop.analysis import analyze
from rooftop.analysis.bounds import mix_text
from rooftop.hardware.gpus import by_key, identify, peaks, physical_limits
from rooftop.present.format import fmt_bounded
from rooftop.trace import load_trace, write_trace

H100_SXM = "NVIDIA H100 80GB HBM3"


def k(name, start, dur, path="prefill/step=0", **kw):
    return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, path=path, device=0, stream=7, **kw)


def build(tmp_path, rows, name="t.parquet", **meta):
    base = {"device": {"name": H100_SXM}, "workload": {"batch": 1}}
    base.update(meta)
    return load_trace(write_trace(tmp_path / name, rows, base))


# --- 3. ncu peaks: dense rates at the run's clock ---------------------------------------------

SM = "sm__cycles_elapsed.avg.per_second"


def test_plain_tensor_total_peak_is_the_sparse_rate_and_is_halved():
    # H100 PCIe: 114 SMs x 4096 dense fp16 ops/cycle; the per-type total `src_fp16` covers the
    # 2:4-sparse path too, so its peak_sustained is 2x. At the 1.092 GHz ncu locked: 1.02 PFLOP/s
    # read as-is (the reported bug), 510 TFLOP/s dense.
    m = {"sm__ops_path_tensor_src_fp16.sum.peak_sustained": 114 * 4096 * 2, SM: 1.092e9,
         "device__attribute_compute_capability_major": 9}
    p = peaks_from_metrics(m)
    assert p["tensor_fp16_flops"] == pytest.approx(114 * 4096 * 1.092e9)
    assert p["tensor_fp16_flops"] < by_key("h100-pcie").peak_fp16


def test_sparsity_off_variants_win_and_sparsity_on_is_ignored():
    m = {"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained": 540672.0,
         "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_on.sum.peak_sustained": 1081344.0,
         "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained": 1081344.0,
         "sm__ops_path_tensor_src_fp8_sparsity_off.sum.peak_sustained": 1081344.0,
         "sm__ops_path_tensor_src_fp8_sparsity_on.sum.peak_sustained": 2162688.0,
         "sm__ops_path_tensor_src_int8.sum.peak_sustained": 2162688.0,
         "sm__ops_path_tensor_src_fp64.sum.peak_sustained": 8448.0,
         SM: 1.83e9, "device__attribute_compute_capability_major": 9}
    p = peaks_from_metrics(m)
    assert p["tensor_bf16_dst_fp32_flops"] == pytest.approx(540672 * 1.83e9)  # 989.4 TF: the dense H100 SXM rate
    assert p["flops"] == p["tensor_bf16_dst_fp32_flops"]
    assert p["tensor_fp8_flops"] == pytest.approx(1081344 * 1.83e9)
    assert p["tensor_int8_ops"] == pytest.approx(2162688 / 2 * 1.83e9)  # plain total: halved, and ops not FLOPs
    assert p["tensor_fp64_flops"] == pytest.approx(8448 * 1.83e9)      # fp64 has no sparse path
    assert not any("sparsity" in key for key in p)


def test_pre_ampere_totals_are_not_halved():
    m = {"sm__ops_path_tensor_src_fp16.sum.peak_sustained": 80 * 1024.0, SM: 1.53e9,
         "device__attribute_compute_capability_major": 7}
    assert peaks_from_metrics(m)["tensor_fp16_flops"] == pytest.approx(80 * 1024 * 1.53e9)


def test_no_peak_above_the_dense_datasheet_peak():
    meta = {"device": {"name": "NVIDIA H100 PCIe", "peaks": {"ncu": {"tensor_fp16_flops": 1.02e15, "fp32_flops": 30e12,
                                                                     "bw": 1.9e12}}}}
    p = peaks(meta)
    assert p.ncu_table["fp16"] is None and p.ncu_table["fp32"] == 30e12 and p.ncu_bw == 1.9e12
    assert any("1020" in n and "fp16" in n for n in p.notes)
    # a calibration above the datasheet measured something else
    meta = {"device": {"name": H100_SXM, "peaks": {"measured": {"flops": 1.5e15, "bw": 3.0e12, "dtype": "bf16"}}}}
    p = peaks(meta)
    assert p.measured_flops is None and p.flops == 989.4e12 and p.measured_bw == 3.0e12


def test_physical_limits_cover_every_row():
    for key in ("h100-sxm", "b300", "v100-sxm2-16gb", "t4", "rtx-4070"):
        lim = physical_limits(by_key(key))
        g = by_key(key)
        assert lim["bw"] > g.peak_bw and all((lim[d] is None) == (g.tflops[d] is None) for d in g.tflops)


# --- 2. integer and unknown work ----------------------------------------------------------------

def test_int8_tensor_work_is_integer_ops_never_zero_flops():
    # an int8 CUTLASS kernel: no floating-point instruction, integer tensor ops counted
    m = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 0.0,
         "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 0.0,
         "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 0.0,
         "sm__ops_path_tensor_src_int8.sum": 4.0e12, "gpu__time_duration.sum": 5e6}
    row = row_from_metrics(m)
    assert row["flops"] is None and row["int_ops"] == 4.0e12 and row["dtype"] == "int8"


@pytest.mark.parametrize("metrics,want", [
    ({"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e9}, "fp32"),
    ({"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 1e9, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e3}, "fp64"),
    ({"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e6, "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 1e9}, "bf16"),
    ({"sm__ops_path_tensor_src_tf32_dst_fp32.sum": 1e9}, "tf32"),
    ({"sm__ops_path_tensor_src_fp8_sparsity_off.sum": 1e9}, "fp8"),
    ({"sm__ops_path_tensor_src_int8.sum": 1e9}, "int8"),
    ({"smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 1e9}, None),  # no CUDA-core fp16 peak in the table
    ({}, None),
])
def test_pipe_dtype_from_instruction_counters(metrics, want):
    assert pipe_dtype(metrics) == want


def test_int8_judged_against_int8_tops_and_unknown_int8_unjudged(tmp_path):
    rows = [k("cutlass_kernel", 0, 10_000, counters=True, dtype="int8", int_ops=1e10, dram_read=1e6, dram_write=1e6),
            k("int8_gemm_i8", 20_000, 10_000, path="prefill/step=1", model_bytes=2e6)]
    a = analyze(build(tmp_path, rows))
    v = a.verdicts.set_index(a.timed["name"].astype(str))
    # AI 5e3 op/B against the int8 ridge 1978.9e12 / 3.35e12 = 590: compute-bound, at 1e10/10us of 1979 TOPS
    assert v.loc["cutlass_kernel", "bound_code"] == 1
    assert v.loc["cutlass_kernel", "peak_share"] == pytest.approx(1e10 / 1e-5 / 1978.9e12)
    assert v.loc["int8_gemm_i8", "bound_code"] == -1  # nothing counts its work: no bound stated
    st = a.steps.set_index("step")
    assert st.loc[0, "bound"] == "compute" and st.loc[1, "bound"] is None
    assert pd.isna(st.loc[0, "mfu"])  # integer ops are not FLOPs: MFU unknown, never 0


# --- 1. each kernel against its own roof ---------------------------------------------------------

def fp32_gemm_trace(tmp_path):
    # fp32 CUDA-core GEMMs (AI 118 FLOP/B: right of the fp32 ridge 67/3.35 = 20, left of the bf16
    # ridge 295) at 21% of the fp32 peak, 88% of the time; the rest bf16 elementwise (memory-bound)
    dur, flops = 88_000, 0.21 * 67e12 * 88e-6
    rows = [k("ampere_sgemm_128x64_tn", 0, dur, model_flops=flops, model_bytes=flops / 118),
            k("vectorized_elementwise_kernel<bf16>", dur, 12_000, model_flops=1e6, model_bytes=0.5 * 3.35e12 * 12e-6)]
    return build(tmp_path, rows, model={"dtype": "bf16"})


def test_fp32_gemms_are_compute_bound_against_the_fp32_roof(tmp_path):
    a = analyze(fp32_gemm_trace(tmp_path))
    ph = a.phases.set_index("phase").loc["prefill"]
    assert ph["bound"] == "compute"
    mix = ph["bound_mix"]
    assert mix["compute"]["time_share"] == pytest.approx(0.88) and mix["memory"]["time_share"] == pytest.approx(0.12)
    assert mix["compute"]["peak_share"] == pytest.approx(0.21) and mix["dtype"] == "fp32"
    assert mix["text"] == "compute-bound fp32 gemm, 88% of the time, at 21.0% of the fp32 peak"
    # MFU weighs each kernel's FLOPs against its own dtype's peak
    want = (0.21 * 67e12 * 88e-6 / 67e12 + 1e6 / 989.4e12) / 100e-6
    assert ph["mfu"] == pytest.approx(want)
    # the groups, the roofline and the findings say the same
    g = a.groups().set_index("key")
    assert g.loc["ampere_sgemm_128x64_tn", "bound"] == "compute" and g.loc["ampere_sgemm_128x64_tn", "dtype"] == "fp32"
    f = [x for x in a.findings if x.id == "prefill-mfu"]
    assert f and "compute-bound fp32 gemm" in f[0].detail


def test_the_gap_to_ideal_puts_each_kernel_at_its_own_dtypes_peak(tmp_path):
    """An fp32 GEMM at 21% of the fp32 peak: its ideal is its FLOPs at 67 TFLOP/s (not at the bf16
    tensor peak, which would call 98% of it "slow kernels")."""
    a = analyze(fp32_gemm_trace(tmp_path))
    g = a.gap.set_index("phase").loc["prefill"]
    gemm_flops = 0.21 * 67e12 * 88e-6
    peak32 = a.peaks.flops_for("fp32")
    ew_ideal = max(0.5 * 3.35e12 * 12e-6 / a.peaks.bw, 1e6 / a.peaks.flops) * 1e9
    assert g["ideal_ns"] == pytest.approx(gemm_flops / peak32 * 1e9 + ew_ideal, rel=1e-6)
    assert g["slow_kernels_ns"] == pytest.approx(100_000 - g["ideal_ns"], rel=1e-6)
    assert g["ideal_ns"] > 0.2 * 88_000  # at the bf16 peak it would be ~1.4% of it


def test_a_split_mix_says_so(tmp_path):
    rows = [k("ampere_sgemm_128x64_tn", 0, 50_000, model_flops=0.5 * 67e12 * 50e-6, model_bytes=1e6),
            k("vectorized_elementwise_kernel<bf16>", 50_000, 50_000, model_flops=1e6, model_bytes=0.8 * 3.35e12 * 50e-6)]
    ph = analyze(build(tmp_path, rows)).phases.set_index("phase").loc["prefill"]
    assert ph["bound"] == "mixed"
    assert ph["bound_mix"]["text"].startswith("mixed: ") and "compute-bound 50%" in ph["bound_mix"]["text"]


def test_unknown_dtype_bound_only_where_every_ridge_agrees(tmp_path):
    # no dtype in the name, none in the metadata: AI 5 is left of every ridge (memory-bound
    # whatever the dtype); AI 100 lies between the fp32 (20) and fp8 (590) ridges: not judged
    rows = [k("mystery_a", 0, 100_000, model_flops=5e8, model_bytes=1e8),
            k("mystery_b", 200_000, 100_000, path="prefill/step=1", model_flops=1e10, model_bytes=1e8)]
    a = analyze(build(tmp_path, rows))
    codes = dict(zip(a.timed["name"].astype(str), a.verdicts["bound_code"]))
    assert codes == {"mystery_a": 0, "mystery_b": -1}


def test_phase_verdict_agrees_with_its_groups(tmp_path):
    a = analyze(fp32_gemm_trace(tmp_path))
    g = a.groups(phase="prefill")
    share = g.groupby("bound")["time_ns"].sum() / g["time_ns"].sum()
    assert share.idxmax() == a.phases.set_index("phase").loc["prefill", "bound"]


# --- one formatter ------------------------------------------------------------------------------

def test_one_formatter_for_unknown_and_lower_bounds():
    assert fmt_bounded(None, "verdict") == "—" and fmt_bounded(0.0004, "unknown") == "—"
    assert fmt_bounded(0.03, "lower bound") == ">=3.0%" and fmt_bounded(0.5, "verdict") == "50.0%"
    assert mix_text(None) is None


def test_report_and_tui_format_the_same_rows(tmp_path):
    from rooftop.present.report import report_dict
    from rooftop.present.render import render_report
    from rooftop.present.overview import OverviewData
    from tui.screens.overview import PhaseTable

    # bytes known for one step in three: MBU is a lower bound; FLOPs known for none: MFU unknown
    rows = [k("gemv_bf16", i * 10_000, 5_000, path=f"decode/step={i}", **({"model_bytes": 1e7} if i == 0 else {}))
            for i in range(3)]
    a = analyze(build(tmp_path, rows))
    r = a.phases.iloc[0]
    assert r["mbu_status"] == "lower bound" and r["mfu_status"] == "unknown" and pd.isna(r["mfu"])
    want_mbu, want_mfu = fmt_bounded(r["mbu"], "lower bound"), fmt_bounded(r["mfu"], "unknown")
    assert want_mbu.startswith(">=") and want_mfu == "—"
    # the report's text and the TUI's phase table show the same cells
    doc = report_dict(a)
    text = render_report(doc)
    assert want_mbu in text
    table = PhaseTable(OverviewData.of_analysis(a).phases)  # what the Overview renders (the document's records)
    table.style_of = lambda name: ""
    table.update = lambda renderable: None
    table.on_mount()
    cells = {c.header: list(c.cells) for c in table.table.columns}
    assert cells["MBU"] == [want_mbu] and cells["MFU"] == [want_mfu]
    # JSON: the numbers themselves, null where unknown, with their status
    ph = doc["phases"][0]
    assert ph["mfu"] is None and ph["mbu_status"] == "lower bound" and ph["mbu"] == pytest.approx(r["mbu"])


# --- 3. nsys bandwidth units by export layout --------------------------------------------------

def test_nsys_units_by_column():
    assert nsys_device.bandwidth_bps(3352320000000, None) == 3352320000000  # 2022+: B/s
    assert nsys_device.bandwidth_bps(None, 1555000000) == 1.555e12           # older: CUPTI kB/s
    assert nsys_device.clock_hz(None, 1410000) == 1.41e9 and nsys_device.clock_hz(1.98e9, 5) == 1.98e9
    assert nsys_device.bandwidth_bps(0, None) is None


def test_old_nsys_export_identifies_an_a100_pcie(tmp_path):
    from collectors.readers.nsys import _Db, _device_meta

    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE TARGET_INFO_GPU (vmId INT, deviceId INT, name TEXT, busLocation TEXT, isDiscrete INT)")
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'A100-PCIE-40GB', '0000:3b:00.0', 1)")
    con.execute("CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INT, numMultiprocessors INT, globalMemoryBandwidth INT, "
                "coreClockRate INT, computeCapabilityMajor INT, computeCapabilityMinor INT, totalGlobalMemory INT)")
    con.execute("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (0, 108, 1555200000, 1410000, 8, 0, 42314694656)")
    con.commit()
    con.close()
    meta = _device_meta(_Db(db), 0)
    assert meta["memory_bandwidth"] == pytest.approx(1.5552e12) and meta["clocks"]["sm_hz"] == 1.41e9
    got = identify(meta)
    assert got.spec is not None and got.spec.key == "a100-40gb-pcie" and "bw" in got.by


# --- 7. Kineto deviceProperties and range-profiler traces --------------------------------------

A100 = {"name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42505273344, "computeMajor": 8, "computeMinor": 0, "numSms": 108}


def test_device_properties_name_the_device_without_kernels():
    props = [dict(A100, id=i) for i in range(8)]
    got = device_meta(props, None)
    assert got["name"] == A100["name"] and got["count"] == 8 and got["cc"] == "8.0"
    assert identify(got).spec.key == "a100-40gb"
    mixed = props[:1] + [dict(A100, id=1, name="NVIDIA H100 80GB HBM3")]
    assert device_meta(mixed, None)["name"] is None  # two different GPUs: not guessed
    assert device_meta(props, 3)["index"] == 3


def _range_event(name, ts, dur, pid=0, **counters):
    return {"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": pid, "tid": 0, "ts": ts, "dur": dur,
            "args": {f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": v for op, v in counters.items()}}


def test_range_profiler_rows_carry_measured_flops():
    events = [_range_event("ampere_sgemm_32x32_sliced1x4_tn", 100.0, 50.0, ffma=1e9, fmul=2e6, fadd=0, dfma=0),
              _range_event("__missing__", 150.0, 50.0, pid=3, hfma=4e6, ffma=0, fmul=0, fadd=0)]
    rows = range_rows(events)
    assert list(rows["flops"]) == [2e9 + 2e6, 4 * 4e6]
    assert rows["dtype"].iloc[0] == "fp32" and pd.isna(rows["dtype"].iloc[1]) and rows["counters"].all()
    assert rows["device"].tolist() == [0, 3] and rows["name"].iloc[1].startswith("(range")


def test_range_profiler_trace_imports_as_kernels(tmp_path):
    from collectors.readers.kineto import read_kineto

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 90.0, "dur": 200.0, "args": {}}]
    events += [_range_event(f"ampere_sgemm_{i}", 100.0 + 50 * i, 50.0, ffma=1e9 * (i + 1)) for i in range(4)]
    doc = {"schemaVersion": 1, "deviceProperties": [dict(A100, id=i) for i in range(8)], "traceEvents": events}
    path = tmp_path / "range.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    rows, meta = read_kineto(path, workers=1)
    kern = rows[rows["kind"].astype(object) == "kernel"]
    assert len(kern) == 4 and list(kern["flops"]) == [2e9, 4e9, 6e9, 8e9]
    assert meta["device"]["name"] == A100["name"]
    assert any("range-profiler" in w and "placeholders" in w for w in meta["warnings"])


def test_a_kernel_faster_than_its_own_roof_is_not_judged(tmp_path):
    # 1e8 bytes in 10 us is 10 TB/s on a 3.35 TB/s part: those bytes are not what ran
    a = analyze(build(tmp_path, [k("gemv_bf16", 0, 10_000, model_flops=1e8, model_bytes=1e8)]))
    assert a.verdicts["bound_code"].tolist() == [-1] and a.verdicts["ideal_ns"].isna().all()


# --- 1. op input dtypes (Kineto `Input type`) as evidence --------------------------------------

def _op_trace(tmp_path, types, kernel):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1002.0, "dur": 10.0,
           "args": {"External id": 7, "Input Dims": [[128, 256], [256, 512]], "Input type": types}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1003.0,
           "dur": 2.0, "args": {"correlation": 11, "External id": 7}},
          {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1010.0, "dur": 30.0,
           "args": {"device": 0, "stream": 7, "correlation": 11}}]
    path = tmp_path / f"{kernel}.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev,
                                "deviceProperties": [dict(A100, id=0)]}))
    from collectors.open import open_trace
    return open_trace(path)


def test_op_input_types_name_the_dtype_where_the_kernel_name_does_not(tmp_path):
    a = analyze(_op_trace(tmp_path, ["c10::BFloat16", "c10::BFloat16"], "cutlass_kernel_mystery"))
    row = a.timed[a.timed["kind"].astype(object) == "kernel"].iloc[0]
    assert row["dtype"] == "bf16" and row["dtype_from"] == "op"


def test_a_kernel_name_that_spells_a_dtype_outranks_the_op_inputs(tmp_path):
    # fp32 inputs with TF32 enabled run a tf32 tensor-core kernel: the kernel name says so
    a = analyze(_op_trace(tmp_path, ["float", "float"], "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n"))
    row = a.timed[a.timed["kind"].astype(object) == "kernel"].iloc[0]
    assert row["dtype"] == "tf32" and row["dtype_from"] == "name"


def test_scoped_groups_use_the_same_judgement(tmp_path):
    a = analyze(fp32_gemm_trace(tmp_path))
    scoped = a.scoped_groups(phase="prefill", step=0).set_index("key")
    whole = a.groups(phase="prefill").set_index("key")
    key = "ampere_sgemm_128x64_tn"
    assert scoped.loc[key, "bound"] == whole.loc[key, "bound"] == "compute"
    assert scoped.loc[key, "dtype"] == "fp32" and scoped.loc[key, "bound_mix"]["text"] == whole.loc[key, "bound_mix"]["text"]
    assert [w for w in a.warnings if w[0] == "physics"] == []


def test_range_profiler_kernels_take_their_launching_op_in_launch_order(tmp_path):
    from collectors.readers.kineto import read_kineto

    ev = []
    for i, op in enumerate(("aten::mm", "aten::add")):
        ev += [{"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 10.0 + 20 * i, "dur": 10.0,
                "args": {"External id": i + 1}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12.0 + 20 * i,
                "dur": 2.0, "args": {"correlation": 100 + i, "External id": i + 1}}]
    ev += [_range_event(f"kernel_{i}", 100.0 + 50 * i, 50.0, ffma=1e6) for i in range(2)]
    path = tmp_path / "launch.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [dict(A100, id=0)], "traceEvents": ev}))
    rows, _ = read_kineto(path, workers=1)
    kern = rows[rows["kind"].astype(object) == "kernel"].sort_values("start_ns")
    assert kern["op"].astype(object).tolist() == ["aten::mm", "aten::add"]


def test_the_steps_grid_keeps_the_reports_lower_bounds(tmp_path):
    """Issue 33 item 8 on the Steps screen: a step whose costs cover part of its time shows `>=x`
    for its rates (as the report does), a step with full coverage plain numbers, sorting stays numeric."""
    import asyncio

    from tui.app import RooftopApp

    rows = []
    for s in range(3):
        b = s * 100_000
        rows.append(k("gemv", b, 50_000, path=f"decode/step={s}", model_bytes=1e8, model_flops=2e8))
        rows.append(k("custom", b + 50_000, 30_000 if s else 1, path=f"decode/step={s}"))  # steps 1, 2: 62% known
    path = write_trace(tmp_path / "lb.parquet", rows, {"device": {"name": H100_SXM},
                                                       "steps": [{"phase": "decode", "index": i} for i in range(3)]})

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(160, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("2")
            await app.workers.wait_for_complete()
            await pilot.pause()
            table = app.screen.query_one("#steps-table")
            dt = table.query_one("DataTable")
            heads = [c.label for c in table.cols]
            return heads, [[str(c) for c in dt.get_row_at(i)] for i in range(3)], table.view
    heads, cells, view = asyncio.run(main())
    steps = analyze(load_trace(path)).steps
    for i, rate in enumerate(("tflops", "tbps", "mfu", "mbu")):
        col = heads.index({"tflops": "TFLOP/s", "tbps": "TB/s", "mfu": "MFU %", "mbu": "MBU %"}[rate])
        by_step = {int(r["step"]): cells[j][col] for j, r in enumerate(view.to_dict("records"))}
        cov = steps.set_index("step")["flops_coverage" if rate in ("tflops", "mfu") else "bytes_coverage"]
        assert not by_step[0].startswith(">=") and cov[0] > 0.995
        assert by_step[1].startswith(">=") and by_step[2].startswith(">=") and cov[1] < 0.7
