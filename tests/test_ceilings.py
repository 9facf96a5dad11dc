"""Each kernel judged against the peak of its compute dtype (rooftop/analysis/ceilings.py)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import analyze, ceilings
from rooftop.analysis.ceilings import group_peak, kernel_dtypes, name_dtype, op_dtype, row_peak_flops
from rooftop.hardware.gpus import peaks
from rooftop.trace import load_trace, write_trace

H100 = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "workload": {"dtype": "bf16"}}


@pytest.mark.parametrize("name,dtype", [
    # CUTLASS / cuBLAS / cuBLASLt / nvjet / DeepGEMM / vLLM spellings
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
     "cutlass::float_e4m3_t, cutlass::bfloat16_t>>(Params)", "fp8"),
    ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128", "fp8"),
    ("deep_gemm::fp8_gemm_kernel<4096, 7168, 128>", "fp8"),
    ("cutlass_scaled_mm_sm90_fp8_kernel", "fp8"),
    ("nvjet_qqtst_128x256_64x4_2x1_v_bz_coopA_NTN", "fp8"),
    ("void cutlass::device_kernel<...tcgen05 kind::f8f6f4 ... cutlass::float_e2m1_t ...>", "fp8"),  # f8f6f4 runs at fp8 rate
    ("void cutlass::device_kernel<cutlass_sm100_nvfp4_gemm<...>>", "fp4"),
    ("bmm_E2m1_E2m1E2m1_Fp32_t128x128x256_mxfp4", "fp4"),
    ("void cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, int const*)", "fp4"),
    ("sm80_xmma_gemm_i8i8_i32f32_i8i32_tn_n_tilesize128x128x64", "int8"),
    ("cutlass_80_tensorop_s8_i16832gemm_s8_256x128_64x3_tn_align16", "int8"),
    ("nvjet_tst_192x192_64x3_2x1_v_bz_coopA_TNT", "bf16"),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8", "bf16"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>(Params)", "bf16"),
    ("gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 2, 4>", "bf16"),
    ("nvjet_hsh_64x8_64x16_4x1_v_bz_splitK_TNN", "fp16"),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize64x64x64", "fp16"),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>", "fp16"),
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16", "tf32"),
    ("cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4", "tf32"),
    ("ampere_sgemm_128x64_nn", "fp32"),
    ("basic(int, int, int, const float *, const float *, float *)", "fp32"),
    ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<..., signed char, cutlass::layout::RowMajor, ..., float>>", "int8"),
    # CUDA's float4 is four floats, not FP4
    ("distribution_nullary_kernel<c10::Half, float, float4, at::CUDAGeneratorImpl *>", "fp16"),
    ("Kernel", None), ("triton_poi_fused_add_0", None), ("", None), (None, None),
    ("half2_unpack", None),  # "half" only as a whole word
])
def test_name_dtype(name, dtype):
    assert name_dtype(name) == dtype


def _plain(series):
    return [None if pd.isna(v) else v for v in series]


def test_kernel_dtypes_classifies_each_distinct_name_once(monkeypatch):
    calls = []
    real = ceilings.name_dtype
    monkeypatch.setattr(ceilings, "name_dtype", lambda n: calls.append(n) or real(n))
    names = pd.Series(["a_fp8_gemm", "b_bf16", "a_fp8_gemm", None, "plain"] * 1000)
    got = kernel_dtypes(names)
    assert sorted(calls) == ["a_fp8_gemm", "b_bf16", "plain"]
    assert _plain(got.iloc[:5]) == ["fp8", "bf16", "fp8", None, None] and len(got) == 5000
    assert got.index.equals(names.index)
    # a categorical column (as traces load) is classified from its categories
    cat = kernel_dtypes(names.astype("category"))
    assert _plain(cat) == _plain(got)


def test_ops_fill_names_that_say_nothing():
    names = pd.Series(["triton_mm_0", "a_e4m3_gemm", "triton_mm_0", "x"], index=[10, 11, 12, 13])
    ops = pd.Series(["['c10::BFloat16', 'c10::BFloat16']", "['float']", "['c10::Float8_e4m3fn', 'float']", None],
                    index=[10, 11, 12, 13])
    got = kernel_dtypes(names, ops)
    assert _plain(got) == ["bf16", "fp8", "fp8", None]  # the name wins where it speaks
    assert op_dtype("['c10::Half', 'float']") == "fp16" and op_dtype("") is None


def test_row_peak_flops_per_dtype():
    p = peaks(H100)
    rows = pd.DataFrame({"name": ["x_fp8_gemm", "x_bf16", "s8_gemm", "mystery", "x_tf32", "ampere_sgemm", "nvfp4_gemm"]})
    got = row_peak_flops(rows, p).tolist()
    assert got[:2] == [1978.9e12, 989.4e12]
    assert math.isnan(got[2])          # int8: integer ops, no FLOP/s ceiling
    assert got[3] == 989.4e12          # unknown: the trace's own dtype (bf16)
    assert got[4:6] == [494.7e12, 67e12]
    assert math.isnan(got[6])          # Hopper has no FP4 rate


def test_group_peak_is_the_time_at_peak_mix():
    # one group, 1e12 FLOP at 1e15 and 1e12 at 2e15: ideal 1.5 ms for 2e12 -> 1.333e15
    got = group_peak(np.array([1e12, 1e12, np.nan]), np.array([1e15, 2e15, 1e15]), np.array([0, 0, 1]), 2)
    assert got[0] == pytest.approx(2e12 / (1e-3 + 0.5e-3)) and got[1] == 1e15
    # no FLOPs known: the peak of the group's longest row
    got = group_peak(np.full(3, np.nan), np.array([1e15, 2e15, 3e15]), np.array([0, 0, 0]), 1, np.array([5, 9, 1]))
    assert got.tolist() == [2e15]


def test_groups_and_roofline_use_their_own_dtype(tmp_path):
    def k(name, start, dur, **kw):
        return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, device=0, stream=7, **kw)
    # both GEMMs: 2e9 FLOP, 1e6 bytes (AI 2000, right of both ridges) in 2 us = 1e15 FLOP/s
    rows = [k("sm90_fp8_gemm_kernel", 0, 2000, model_flops=2e9, model_bytes=1e6),
            k("cutlass_bf16_gemm", 5000, 2000, model_flops=2e9, model_bytes=1e6),
            k("int8_gemm_i8", 10000, 2000, model_flops=2e9, model_bytes=1e6)]
    trace = load_trace(write_trace(tmp_path / "t.parquet", rows, H100))
    a = analyze(trace)
    g = a.groups().set_index("key")
    fp8, bf16, i8 = (g.loc[a.timed.set_index("name").loc[n, "short_name"]] for n in
                     ("sm90_fp8_gemm_kernel", "cutlass_bf16_gemm", "int8_gemm_i8"))
    assert fp8["dtype"] == "fp8" and fp8["peak_flops"] == 1978.9e12
    assert fp8["pct_of_roof"] == pytest.approx(1e15 / 1978.9e12)
    assert bf16["pct_of_roof"] == pytest.approx(1e15 / 989.4e12)
    assert fp8["bound"] == bf16["bound"] == "compute"
    # int8: FP FLOPs unknown (not 0), so no FLOP rate and no bound; judged by its bytes alone
    assert math.isnan(i8["tflops"]) and i8["bound"] is None
    assert i8["pct_of_roof"] == pytest.approx(1e6 / 2e-6 / 3.35e12)
    pts = a.roofline().set_index("key")
    assert pts.loc[fp8.name, "peak_flops"] == 1978.9e12 and pts.loc[fp8.name, "dtype"] == "fp8"
    detail = dict((label, value) for label, value, _ in a.kernel_detail(fp8.name))
    assert detail["compute dtype"] == "fp8" and detail["peak"].startswith("1.98")


def test_phase_and_step_mfu_count_each_kernel_at_its_own_peak(tmp_path):
    def k(name, start, dur, step, **kw):
        return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, device=0, stream=7,
                    path=f"decode/step={step}", **kw)
    rows = [k("sm90_fp8_gemm", 0, 1000, 0, model_flops=2e9, model_bytes=1e6),
            k("cutlass_bf16_gemm", 1000, 1000, 0, model_flops=1e9, model_bytes=1e6),
            k("int8_gemm_i8", 2000, 1000, 1, model_flops=5e9, model_bytes=1e6),
            k("cutlass_bf16_gemm", 3000, 1000, 1, model_flops=1e9, model_bytes=1e6)]
    steps = [{"phase": "decode", "index": 0}, {"phase": "decode", "index": 1}]
    a = analyze(load_trace(write_trace(tmp_path / "t.parquet", rows, dict(H100, steps=steps))))
    fp8, bf16 = 1978.9e12, 989.4e12
    st = a.steps.set_index("step")
    if st.empty or "decode" not in set(a.phases["phase"]):
        pytest.skip("this build does not step the trace by path")  # steps belong to another module
    # step 0: 2e9 at fp8 + 1e9 at bf16 over a 2 us span
    assert st.loc[0, "mfu"] == pytest.approx((2e9 / fp8 + 1e9 / bf16) / 2e-6)
    # step 1: the int8 GEMM's integer ops are not FLOPs; only the bf16 GEMM counts
    assert st.loc[1, "mfu"] == pytest.approx((1e9 / bf16) / 2e-6)
    ph = a.phases.set_index("phase").loc["decode"]
    assert ph["mfu"] == pytest.approx((2e9 / fp8 + 2e9 / bf16) / ph["span_ns"] * 1e9)
