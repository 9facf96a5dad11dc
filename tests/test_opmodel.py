"""rooftop.llm.op_cost: analytic op costs, checked against hand-computed numbers."""
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.llm.op_cost import (copy_hbm_bytes, dtype_size, gemm_cost, is_integer_gemm, is_link_copy, op_cost, sdpa_cost,
                             split_by_duration)


def test_gemm_cost_by_hand():
    # [128x256] @ [256x768] in bf16: 2*128*768*256 FLOPs; A 32768 + B 196608 + C 98304 elements x 2 B.
    assert gemm_cost(128, 768, 256) == (50_331_648.0, 655_360.0)
    f, b = gemm_cost(4, 5, 6, batch=3, a_bytes=4, b_bytes=1, out_bytes=2)
    assert f == 2 * 4 * 5 * 6 * 3
    assert b == 3 * (4 * 6 * 4 + 6 * 5 * 1 + 4 * 5 * 2)


def test_sdpa_cost_causal_prefill_is_halved_decode_is_not():
    full, _ = sdpa_cost(1, 8, 128, 128, 32)
    assert full == 4 * 1 * 8 * 128 * 128 * 32 == 16_777_216
    assert sdpa_cost(1, 8, 128, 128, 32, causal=True)[0] == 8_388_608
    # A decode query with the causal flag still attends to the whole cache.
    assert sdpa_cost(2, 8, 1, 300, 64, causal=True)[0] == 4 * 2 * 8 * 1 * 300 * 64


def test_sdpa_bytes_count_kv_at_kv_heads():
    # B=2 H=8 Hkv=2 Sq=1 Sk=100 D=64 bf16: Q 2*8*64 + K,V 2*(2*2*100*64) + O 2*8*64 elements.
    _, nbytes = sdpa_cost(2, 8, 1, 100, 64, kv_heads=2, elem_bytes=2)
    assert nbytes == 2 * (1024 + 25600 + 25600 + 1024)


@pytest.mark.parametrize("name,size", [("c10::BFloat16", 2), ("BFloat16", 2), ("float", 4), ("c10::Half", 2),
                                       ("double", 8), ("c10::Float8_e4m3fn", 1), ("long int", 8),
                                       ("Scalar", None), ("", None), (None, None)])
def test_dtype_names(name, size):
    assert dtype_size(name) == size


def test_mm_addmm_bmm_baddbmm():
    assert op_cost("aten::mm", [[128, 256], [256, 768]], ["c10::BFloat16"] * 2) == (50_331_648.0, 655_360.0)
    f, b = op_cost("aten::addmm", [[768], [128, 256], [256, 768], [], []], ["float"] * 3 + ["Scalar"] * 2)
    assert f == 50_331_648.0 and b == 4 * (128 * 256 + 256 * 768 + 128 * 768 + 768)
    f, b = op_cost("aten::bmm", [[4, 16, 32], [4, 32, 8]], ["c10::Half", "c10::Half"])
    assert f == 2 * 4 * 16 * 8 * 32 and b == 2 * 4 * (16 * 32 + 32 * 8 + 16 * 8)
    f, _ = op_cost("aten::baddbmm", [[4, 16, 8], [4, 16, 32], [4, 32, 8], [], []], ["float"] * 3)
    assert f == 2 * 4 * 16 * 8 * 32


def test_linear_and_matmul_fold_leading_dims():
    # x [1, 8, 16, 32] @ W[64, 32]^T: M = 128 rows, weight read once.
    expected = gemm_cost(128, 64, 32, a_bytes=4, b_bytes=4, out_bytes=4)
    assert op_cost("aten::linear", [[1, 8, 16, 32], [64, 32], []], ["float", "float", ""]) == expected
    assert op_cost("aten::matmul", [[1, 8, 16, 32], [32, 64]], ["float", "float"]) == expected
    # Batched matmul broadcasting [2,1,M,K] @ [3,K,N] -> batch 6.
    f, _ = op_cost("aten::matmul", [[2, 1, 5, 7], [3, 7, 11]], ["float", "float"])
    assert f == 2 * 5 * 11 * 7 * 6
    # With bias: bias bytes are read too.
    f, b = op_cost("aten::linear", [[4, 32], [64, 32], [64]], ["c10::BFloat16"] * 3)
    assert b == 2 * (4 * 32 + 64 * 32 + 4 * 64 + 64)


def test_sdpa_ops_read_the_causal_flag_at_their_schema_position():
    q, k = [1, 8, 128, 32], [1, 2, 128, 32]
    shapes = [q, k, k, [], [], [], [], []]
    dt = ["float"] * 3
    half = 8 * 128 * 128 * 32 * 2  # 4·B·H·S·S·D / 2
    assert op_cost("aten::scaled_dot_product_attention", shapes, dt, [None, None, None, None, 0.0, True])[0] == half
    assert op_cost("aten::scaled_dot_product_attention", shapes, dt, [None] * 5 + [False])[0] == 2 * half
    assert op_cost("aten::_scaled_dot_product_flash_attention_for_cpu", shapes, dt,
                   [None, None, None, 0.0, True])[0] == half
    assert op_cost("aten::_scaled_dot_product_flash_attention", shapes, ["c10::BFloat16"] * 3,
                   [None, None, None, 0.0, "True"])[0] == half
    assert op_cost("aten::_scaled_dot_product_efficient_attention", shapes, dt,
                   [None] * 6 + [True])[0] == half
    assert op_cost("aten::_scaled_dot_product_cudnn_attention", shapes, dt, [None] * 6 + ["1"])[0] == half
    assert op_cost("aten::_scaled_dot_product_attention_math", shapes, dt, [None] * 5 + [True])[0] == half
    # Without concrete inputs the call is costed as non-causal.
    assert op_cost("aten::scaled_dot_product_attention", shapes, dt)[0] == 2 * half
    # Bytes: Q, O at 8 heads, K, V at 2 heads, fp32.
    assert op_cost("aten::scaled_dot_product_attention", shapes, dt)[1] == 4 * (2 * 8 * 128 * 32 + 2 * 2 * 128 * 32)


def test_inner_flash_forward_uses_bshd_layout():
    q, k = [2, 1, 8, 64], [2, 300, 2, 64]  # [B, S, H, D]
    f, b = op_cost("aten::_flash_attention_forward", [q, k, k], ["c10::BFloat16"] * 3, [None] * 8 + [True])
    assert f == 4 * 2 * 8 * 1 * 300 * 64
    assert b == 2 * (2 * 8 * 64 * 2 + 2 * 2 * 300 * 64 * 2)


@pytest.mark.parametrize("op,shapes", [
    ("aten::mm", []), ("aten::mm", [[2, 3]]), ("aten::mm", [[2, 3], [4, 5]]), ("aten::mm", [[2], [2, 5]]),
    ("aten::bmm", [[2, 3, 4], [3, 4, 5]]), ("aten::linear", [[], [4, 4]]), ("aten::matmul", [[], []]),
    ("aten::scaled_dot_product_attention", [[1, 8, 4], [1, 2, 4, 8], [1, 2, 4, 8]]),
    ("aten::scaled_dot_product_attention", [[1, 8, 4, 16], [1, 3, 4, 16], [1, 3, 4, 16]]),
    ("aten::mm", [["a", 2], [2, 2]]), ("aten::mm", None), ("aten::mm", [[-1, 2], [2, 2]]),
])
def test_malformed_shapes_give_none(op, shapes):
    assert op_cost(op, shapes, ["float"] * 4) is None


def test_unknown_op_and_unknown_dtype():
    assert op_cost("aten::relu", [[4, 4]], ["float"]) is None
    assert op_cost(None, [[4, 4]]) is None
    # FLOPs known from shapes, bytes unknown without dtypes (null, not a guess).
    assert op_cost("aten::mm", [[2, 3], [3, 4]]) == (48.0, None)
    assert op_cost("mm", [[2, 3], [3, 4]], ["float", "float"])[0] == 48.0


_junk = st.recursive(st.none() | st.integers(-5, 10**6) | st.text(max_size=3) | st.floats(),
                     lambda c: st.lists(c, max_size=5), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(op=st.sampled_from(["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                           "aten::linear", "aten::scaled_dot_product_attention", "aten::_flash_attention_forward",
                           "aten::_efficient_attention_forward"]),
       shapes=_junk, dtypes=_junk, concrete=_junk)
def test_op_cost_never_raises(op, shapes, dtypes, concrete):
    out = op_cost(op, shapes, dtypes if isinstance(dtypes, list) else None,
                  concrete if isinstance(concrete, list) else None)
    assert out is None or (out[0] >= 0 and (out[1] is None or out[1] >= 0))


def test_split_by_duration_by_hand():
    assert split_by_duration(100.0, [10, 30, 60]) == [10.0, 30.0, 60.0]
    assert split_by_duration(90.0, [0, 0, 0]) == [30.0, 30.0, 30.0]  # no durations: equal split
    assert split_by_duration(None, [1, 2]) == [None, None]
    assert split_by_duration(5.0, []) == []
    assert split_by_duration(10.0, [None, 5]) == [0.0, 10.0]


@settings(max_examples=200, deadline=None)
@given(total=st.floats(0, 1e15), durs=st.lists(st.integers(0, 10**9), min_size=1, max_size=30))
def test_split_sums_to_total(total, durs):
    parts = split_by_duration(total, durs)
    assert len(parts) == len(durs)
    assert min(parts) >= 0
    assert sum(parts) == pytest.approx(total, rel=1e-12, abs=1e-6)


def test_opmodel_does_not_import_torch():
    code = "import sys, rooftop.llm.op_cost; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_integer_gemms_have_bytes_but_unknown_fp_flops():
    # torch._int_mm: int8 [M, K] x int8 [K, N] -> int32 [M, N]
    flops, nbytes = op_cost("aten::_int_mm", [[32, 64], [64, 16]], ["signed char", "signed char"])
    assert flops is None
    assert nbytes == 32 * 64 + 64 * 16 + 32 * 16 * 4
    flops, nbytes = op_cost("aten::mm", [[32, 64], [64, 16]], ["signed char", "signed char"])
    assert flops is None and nbytes == 32 * 64 + 64 * 16 + 32 * 16
    assert op_cost("aten::mm", [[32, 64], [64, 16]], ["c10::BFloat16"] * 2)[0] == 2 * 32 * 64 * 16


@pytest.mark.parametrize("name,integer", [
    ("sm80_xmma_gemm_s8s8_s32_tn_n_tilesize128x128x64", True),
    ("void cutlass::Kernel<cutlass_80_tensorop_i16832gemm_s8_128x128_64x3_tn_align16>", True),
    ("ampere_int8_i8816gemm_128x128_ldg16_nt", True),
    ("cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4", False),   # tf32 ("s" = fp32 accumulate)
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn", False),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", False),             # not a GEMM
    ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128", False),  # fp8 is floating point
])
def test_is_integer_gemm(name, integer):
    assert is_integer_gemm(name) is integer


def test_copy_hbm_bytes():
    assert copy_hbm_bytes("Memcpy DtoD (Device -> Device)", 1000) == 2000   # read N + write N
    assert copy_hbm_bytes("[CUDA memcpy DtoD]", 1000) == 2000
    assert copy_hbm_bytes("Memcpy HtoD (Pinned -> Device)", 1000) == 1000   # this GPU's side once
    assert copy_hbm_bytes("Memset (Device)", 1000) == 1000
    assert copy_hbm_bytes("Memcpy DtoD (Device -> Device)", None) is None
    assert is_link_copy("Memcpy DtoH (Device -> Pageable)") and is_link_copy("[CUDA memcpy PtoP]")
    assert not is_link_copy("Memcpy DtoD (Device -> Device)") and not is_link_copy("Memset (Device)")
