"""Kernel names: demangling, short names that stay unique, categories from the kernel's own name,
and kernel counts that never include copies. Names are real kernel names (vLLM, PyTorch, CUTLASS,
FlashAttention, FlashInfer, cuBLAS, NCCL, DeepEP, TensorRT-LLM), written out by hand."""
from __future__ import annotations

import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop.trace.names import (CATEGORIES, category_of, categorize, demangle, demangle_all, fit, gpu_work_counts,
                           short_name, short_names, unique_short_names, whole_names, with_whole_names)
from rooftop.present.report import report_dict
from rooftop.trace import load_trace, to_table, write_trace

# `c++filt` agrees on both (checked when the test was written).
RMS_MANGLED = "_ZN4vllm15rms_norm_kernelIN3c108BFloat16EEEvPT_PKS3_S6_fii"
RMS = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, "
       "int, int)")
TOPK_MANGLED = "_ZN4vllm3moe17topkGatingSoftmaxILi8ELi8ELi4ELi16ELi32EiEEvPKfPKbPfiPT4_Piiii"
TOPK = ("void vllm::moe::topkGatingSoftmax<8, 8, 4, 16, 32, int>(float const*, bool const*, float*, int, int*, int*, "
        "int, int, int)")

FLASH = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t, "
         "Flash_kernel_traits<128, 64, 64, 4, cutlass::bfloat16_t> >, true, false, false, false, true, true, false, "
         "false>(Flash_fwd_params)")
ADD_INT = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, std::array<char*, 3ul> >"
           "(int, at::native::CUDAFunctor_add<int>, std::array<char*, 3ul>)")
FILL_INT = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
            "(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)")
DIV_FLOOR = ("void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<int, int, int, "
             "at::native::binary_internal::div_floor_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() "
             "const::{lambda()#3}::operator()() const::{lambda(int, int)#1}>, std::array<char*, 2ul> >(int, "
             "at::native::BUnaryFunctor<int, int, int, at::native::binary_internal::div_floor_kernel_cuda("
             "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#3}::operator()() const::"
             "{lambda(int, int)#1}>, std::array<char*, 2ul>)")


# --- demangling ---------------------------------------------------------------------------------

def test_demangle_gives_the_cpp_name():
    assert demangle(RMS_MANGLED) == RMS
    assert demangle(TOPK_MANGLED) == TOPK


@pytest.mark.parametrize("text", ["triton_poi_fused_0", "Memcpy HtoD (Pinned -> Device)", "", "_ZN3foo", "_Zgarbage"])
def test_demangle_leaves_other_text_and_broken_symbols_alone(text):
    assert demangle(text) == text


def test_demangle_all_maps_each_row():
    s = pd.Series([RMS_MANGLED, "x", None, RMS_MANGLED, TOPK_MANGLED])
    out = demangle_all(s)
    assert out.tolist()[:2] == [RMS, "x"] and pd.isna(out.iloc[2]) and out.iloc[3] == RMS and out.iloc[4] == TOPK


def test_to_table_stores_demangled_names_for_every_reader():
    rows = [dict(kind="kernel", name=RMS_MANGLED, start_ns=0, dur_ns=10),
            dict(kind="kernel", name=TOPK_MANGLED, start_ns=10, dur_ns=10)]
    t = to_table(rows).to_pandas()
    assert t["name"].tolist() == [RMS, TOPK]
    assert t["short_name"].tolist() == ["rms_norm_kernel<>", "topkGatingSoftmax<>"]
    assert t["category"].tolist() == ["norm", "routing"]


# --- short names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,short", [
    (FLASH, "flash_fwd_kernel<>"),
    (DIV_FLOOR, "vectorized_elementwise_kernel<>"),
    ("at::native::(anonymous namespace)::fill_index_and_segment_kernel(int2*, int, at::cuda::detail::IntDivider<"
     "unsigned int>)", "fill_index_and_segment_kernel"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::FillFunctor<bool> >("
     "at::TensorIteratorBase&, at::native::FillFunctor<bool> const&)::{lambda(int)#1}>(int, at::native::"
     "gpu_kernel_impl_nocast<at::native::FillFunctor<bool> >(at::TensorIteratorBase&, at::native::FillFunctor<bool> "
     "const&)::{lambda(int)#1})", "elementwise_kernel<>"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8>("
     "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8::Params)",
     "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8>"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, "
     "cute::C<1>, cute::C<1> >, 128, cutlass::bfloat16_t>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<128> >> > >("
     "flash::FlashAttnFwdSm90<int>::Params)", "device_kernel<FlashAttnFwdSm90>"),
    ("void thrust::cuda_cub::core::_kernel_agent<Op<std::less<int> > >::operator()(int) const", "_kernel_agent<>::operator()"),
    ("Foo<int>::operator<(Foo<int> const&) const", "Foo<>::operator<"),
    ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pinned -> Device)"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
    (RMS_MANGLED, "rms_norm_kernel<>"),
    # cuBLAS GEMV (the RTX 5090 ncu export): a return type other than void, and a wrapper whose
    # first template arguments are builtin types; its first named argument tells what it is
    ("enable_if<!T7, void>::type kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, 0, 1, 1, 0, "
     "7, 0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, float>>(T13)",
     "kernel<cublasGemvParamsEx>"),
    ("unsigned long long at::native::count_kernel<int>(int*)", "count_kernel<>"),
    ("kernel<4, float>(int)", "kernel<4>"),
])
def test_short_name_handles_nested_brackets_lambdas_and_operators(name, short):
    assert short_name(name) == short


def test_a_long_name_is_cut_at_the_limit():
    name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    assert short_name(name) == name[:79] + "…"


def test_fit_keeps_head_and_tail():
    name = "triton_red_fused__to_copy_add_copy__mean_mul_pow_rsqrt_scaled_fp4_quant_zeros_5"
    cut = fit(name, 40)
    assert len(cut) == 40 and cut.startswith("triton_red_fused") and cut.endswith("zeros_5") and "…" in cut
    assert fit("short", 40) == "short"


def test_instantiations_of_one_template_get_their_differing_argument():
    got = unique_short_names([ADD_INT, FILL_INT, DIV_FLOOR])
    assert len(set(got.values())) == 3
    assert "CUDAFunctor_add<int>" in got[ADD_INT] and "FillFunctor<int>" in got[FILL_INT]
    assert "BUnaryFunctor" in got[DIV_FLOOR]
    assert all(v.startswith("vectorized_elementwise_kernel<") for v in got.values())
    # alone in its trace, a kernel keeps the plain short name
    assert unique_short_names([ADD_INT]) == {ADD_INT: "vectorized_elementwise_kernel<>"}


def test_names_that_differ_only_in_the_middle_or_the_parameters_stay_apart():
    # long names that differ only past the cut: the differing part is shown
    head, tail = "triton_red_fused_" + "add_" * 20, "_mean_mul_pow_rsqrt_" + "zeros_" * 8 + "4"
    a, b = head + "scaled_fp4_quant" + tail, head + "to_copy_clone_xx" + tail
    cuda_a, cuda_b = "void foo<int>(int)", "void foo<int>(float)"
    got = unique_short_names([a, b, cuda_a, cuda_b, "ns1::bar(int)", "ns2::bar(int)"])
    assert len(set(got.values())) == 6
    assert "fp4" in got[a] and "to_copy" in got[b]
    assert "int" in got[cuda_a].split("<>")[-1] and "float" in got[cuda_b]


def test_many_colliding_names_never_share_a_display_name():
    names = [f"void k<{i % 3}, std::array<char*, {i}ul>, Tile<{'x' * 60}{i}>, {i % 5}>(int)" for i in range(40)]
    names += [f"void ns{i}::k<0, std::array<char*, 0ul>, Tile<{'x' * 60}0>, 0>(int)" for i in range(3)]
    names += ["foo", "foo ", "", " "]  # nothing to show but a tag
    got = unique_short_names(names)
    assert len(set(got.values())) == len(names)


def test_short_names_series_keeps_given_names_unless_they_collide():
    names = pd.Series([ADD_INT, FILL_INT, ADD_INT, "gemv_a"])
    given = pd.Series(["elementwise<>", "elementwise<>", "elementwise<>", "my_gemv"])
    out = short_names(names, given)
    assert out.iloc[3] == "my_gemv"
    assert out.iloc[0] == out.iloc[2] != out.iloc[1]


def test_whole_names_replace_display_names_in_an_export():
    names = pd.Series([ADD_INT, FILL_INT, FLASH])
    shorts = short_names(names)
    mapping = whole_names(names, shorts)
    frame = pd.DataFrame({"kernel": shorts.iloc[[2, 0]].tolist(), "category": ["attention", "elementwise"],
                          "time µs": [1.0, 2.0]})
    out = with_whole_names(frame, mapping)
    assert out["kernel"].tolist() == [FLASH, ADD_INT]
    assert out["category"].tolist() == ["attention", "elementwise"]  # not names: left alone


# --- categories -----------------------------------------------------------------------------------

CASES = {
    "gemm": [
        "nvjet_tst_128x64_64x6_1x1_v_bz_coopB_NNT",
        "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_cluster1x2x1_warpgroupsize2x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<"
        "int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmmaWarp"
        "SpecializedFP8<4, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> > > > > >(cutlass::gemm::kernel::Params)",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::"
        "gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm120TmaWarpSpecializedBlockScaled<2, 3> > > >(Params)",
        "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 160u, 128u, 1u, 8u, 128u, 128u, 1u, 1u, (deep_gemm::"
        "GemmType)0>(float*, int*, int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
        "bmm_E2m1_E2m1E2m1_Fp32_t128x8x256u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a",
        "bmm_MxE2m1MxE4m3_Fp32_t128x8x256u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a",
        "fused_moe_kernel",
        "_w8a8_block_fp8_matmul",
        "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(float)",
    ],
    "routing": [
        TOPK,
        "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int, unsigned "
        "long, int*)",
        "void vllm::moe::count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, unsigned long)",
        "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)",
        "void tensorrt_llm::kernels::finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16, (tensorrt_llm::kernels::"
        "ScaleMode)1>(__nv_bfloat16 const*, __nv_bfloat16*, float const*, int const*)",
        "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::KernelParams<int, float> >("
        "moe::dev::routing::KernelParams<int, float>)",
        "void vllm::moe::grouped_topk_kernel<float>(float*, float const*, int*, int, int)",
        "void moe::dev::routing::routingRenormalize::routingIndicesClusterKernel<moe::dev::routing::routingRenormalize::"
        "KernelParams<int, __nv_bfloat16, 128, 8, true> >(moe::dev::routing::routingRenormalize::KernelParams<int, "
        "__nv_bfloat16, 128, 8, true>)",
        "void moe::dev::finalize::finalizeKernel<moe::dev::finalize::KernelParams<__nv_bfloat16, __nv_bfloat16> >("
        "moe::dev::finalize::KernelParams<__nv_bfloat16, __nv_bfloat16>)",
        "void vllm::moe::shuffleInputRowsKernel<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16*, int const*, long, "
        "long)",
    ],
    "quantize": [
        "void vllm::cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, int, __nv_bfloat16 const*, float const*, unsigned "
        "int*, unsigned int*)",
        "void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 "
        "const*, float const*, long)",
        "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
        "float*, c10::BFloat16 const*, float const*, int)",
        "_per_token_group_quant_fp8",
    ],
    "comm": [
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
        "c10::BFloat16*, int, int)",
        "void vllm::cross_device_reduce_2stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
        "c10::BFloat16*, int, int)",
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<16, 8>(unsigned long, unsigned long, unsigned long)",
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*)",
        "void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int*, void*)",
    ],
    "attention": [
        FLASH,
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t, "
        "Flash_kernel_traits<128, 64, 128, 4, cutlass::half_t> >, true, false, false, false, true, false, false, "
        "false>(Flash_fwd_params)",
        "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)0, 16u, 1u, "
        "1u, 16u, 16u, 1u, 4u, (flashinfer::PosEncodingMode)0, __nv_bfloat16, __nv_fp8_e4m3, __nv_bfloat16, float, int, "
        "flashinfer::DefaultAttention<false, false, false, false> >, PagedParams>(PagedParams)",
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, "
        "flashinfer::DefaultAttention<false, false, false, false>, Params>(Params)",
        "void vllm::paged_attention_v2_kernel<unsigned short, unsigned short, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, "
        "false, 512>(float*, float*, unsigned short*, unsigned short const*)",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
        "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
    ],
    "memory": [
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>("
        "__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long)",
        "void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>("
        "__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, long const*)",
        # FlashInfer include/flashinfer/page.cuh: the KV-cache append of a paged cache
        "void flashinfer::AppendPagedKVCacheKernel<8u, 16u, __nv_bfloat16, int>(flashinfer::paged_kv_t<__nv_bfloat16, "
        "int>, __nv_bfloat16*, __nv_bfloat16*, int*, int*, unsigned int, unsigned int, unsigned int, unsigned int)",
        # the parameter list names attention; the kernel copies
        "void at::native::copy_kernel_impl<float>(FlashAttnParams const*, float*)",
    ],
    "norm": [
        RMS,
        "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
        "unsigned int, unsigned int, unsigned int, float, float)",
        "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_4",
        "void at::native::(anonymous namespace)::l2_normalize_kernel<float>(float*, float const*, int)",
    ],
    "elementwise": [
        # RNG: the sampler's random numbers, not a norm (`normal`)
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::"
        "templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, "
        "at::CUDAGeneratorImpl*)::{lambda(curandStatePhilox4_32_10*)#2}>(long, at::PhiloxCudaState, int)",
        "void at::native::(anonymous namespace)::normal_kernel<at::CUDAGeneratorImpl*>(at::TensorBase const&, double)",
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, "
        "c10::BFloat16 const*, int)",
    ],
    "reduction": [
        # a softmax outside attention (the sampler's) is not attention
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
        "namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
        # a radix sort histogram is not MoE routing
        "void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortHistogramKernel<at_cuda_detail::cub::detail::"
        "radix::policy_hub<float, at::cuda::cub::detail::OpaqueType<8>, unsigned long long>::Policy1000, "
        "(at_cuda_detail::cub::SortOrder)0, float, unsigned long long>(unsigned long long*, float const*)",
    ],
}


@pytest.mark.parametrize("category,name", [(c, n) for c, names in CASES.items() for n in names])
def test_category_from_the_kernel_name(category, name):
    assert category in CATEGORIES
    assert category_of(name) == category


def test_category_of_mangled_names_and_copies():
    assert category_of(TOPK_MANGLED) == "routing"
    assert category_of("Memcpy HtoD (Pinned -> Device)", kind="memcpy") == "memory"
    assert category_of("anything", kind="memset") == "memory"


def test_categorize_is_category_of_per_row():
    names = pd.Series([RMS, TOPK, RMS, None])
    assert categorize(names).tolist() == ["norm", "routing", "norm", "other"]


# --- kernels are kernels --------------------------------------------------------------------------

def test_totals_count_kernels_memcpy_and_memset_apart(tmp_path):
    rows = [dict(kind="kernel", name=FLASH, start_ns=0, dur_ns=100, device=0, stream=7),
            dict(kind="kernel", name=RMS, start_ns=200, dur_ns=50, device=0, stream=7),
            dict(kind="memcpy", name="Memcpy HtoD (Pinned -> Device)", start_ns=300, dur_ns=30, device=0, stream=7),
            dict(kind="memcpy", name="Memcpy DtoH (Device -> Pinned)", start_ns=400, dur_ns=20, device=0, stream=7),
            dict(kind="memset", name="Memset (Device)", start_ns=500, dur_ns=5, device=0, stream=7),
            dict(kind="range", name="step", start_ns=0, dur_ns=600)]
    t = load_trace(write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}}))
    assert gpu_work_counts(t.events) == {"kernel": 2, "memcpy": 2, "memset": 1}
    doc = report_dict(analyze(t))
    tot = doc["totals"]
    assert (tot["kernels"], tot["memcpy"], tot["memset"]) == (2, 2, 1)
    assert (tot["kernel_time_ns"], tot["memcpy_time_ns"], tot["memset_time_ns"]) == (150, 50, 5)
    assert tot["span_ns"] == 505
    keys = [k["key"] for k in doc["top_kernels"]]
    assert FLASH in keys and RMS in keys  # whole names, never a cut one
    flash = next(k for k in doc["top_kernels"] if k["key"] == FLASH)
    assert flash["short_name"] == "flash_fwd_kernel<>" and flash["category"] == "attention"


def test_the_launching_op_fills_in_but_never_makes_attention():
    # vLLM's linear-attention op launches a causal conv1d: the op names the layer, not the kernel
    assert category_of("_causal_conv1d_update_kernel", op="vllm::gdn_attention_core") == "other"
    assert category_of("Kernel", op="aten::mm") == "gemm"
    assert category_of("aten::scaled_dot_product_attention", kind="op") == "attention"


def test_phase_and_step_kernel_counts_leave_copies_out(tmp_path):
    rows = [dict(kind="kernel", name=FLASH, start_ns=0, dur_ns=100, device=0, stream=7, path="decode/step=0"),
            dict(kind="kernel", name=RMS, start_ns=200, dur_ns=50, device=0, stream=7, path="decode/step=0"),
            dict(kind="memcpy", name="Memcpy HtoD (Pinned -> Device)", start_ns=300, dur_ns=30, device=0, stream=7,
                 path="decode/step=0"),
            dict(kind="memset", name="Memset (Device)", start_ns=400, dur_ns=5, device=0, stream=7, path="decode/step=0")]
    a = analyze(load_trace(write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})))
    assert a.phases.set_index("phase").loc["decode", "kernels"] == 2
    assert a.steps["kernels"].tolist() == [2]
    assert a.phases.set_index("phase").loc["decode", "span_ns"] == 405  # copies still take time in the span


def test_nsys_style_demangled_names():
    # Nsight Systems' demangler writes `<unnamed>` and `[lambda() (instance 1)]`
    a = ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::"
         "templates::cuda::normal_and_transform<c10::BFloat16, float>(at::TensorIteratorBase &)::[lambda() (instance 1)]"
         ">(long, at::PhiloxCudaState, T3, T4)")
    b = a.replace("normal_and_transform<c10::BFloat16", "normal_and_transform<c10::Half")
    assert short_name(a) == "distribution_elementwise_grid_stride_kernel<>"
    assert category_of(a) == "elementwise"
    got = unique_short_names([a, b])
    assert "BFloat16" in got[a] and "Half" in got[b]


def test_fbgemm_is_not_a_gemm():
    assert category_of("void fbgemm_gpu::bounds_check_indices_kernel<long, 32>(long*, long*)") != "gemm"


def test_identity_exposes_gpu_work_counts(tmp_path):
    rows = [dict(kind="kernel", name=FLASH, start_ns=0, dur_ns=100, device=0, stream=7),
            dict(kind="memcpy", name="Memcpy HtoD (Pinned -> Device)", start_ns=300, dur_ns=30, device=0, stream=7),
            dict(kind="memset", name="Memset (Device)", start_ns=400, dur_ns=5, device=0, stream=7),
            dict(kind="memset", name="Memset (Device)", start_ns=500, dur_ns=5, device=0, stream=7)]
    a = analyze(load_trace(write_trace(tmp_path / "t.parquet", rows, {})))
    assert a.identity["gpu_work"] == {"kernel": 1, "memcpy": 1, "memset": 2}
