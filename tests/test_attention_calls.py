"""Attention counted as calls (one per layer per step) and the materialized verdict found by its
structure (batched GEMM -> softmax -> batched GEMM), on kernel sequences built from the engines'
own kernel names, from Kineto-style rows, and from an ncu CSV (docs/definitions.md, "Attention
verdict"). `confirmed` only where bytes or op shapes back the verdict.

Kernel names, from the engines' sources:
- vLLM csrc/cache_kernels.cu @693083ae: `reshape_and_cache_flash_kernel` (KV-cache write);
  csrc/attention/merge_attn_states.cu @48dca59e: `merge_attn_states_kernel` (split-KV merge);
  csrc/attention/paged_attention_v2.cu: `paged_attention_v2_kernel` + `paged_attention_v2_reduce_kernel`.
- nano-vllm / SGLang-style Triton `store_kvcache_kernel` (KV-cache write).
- flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h: `flash_fwd_splitkv_kernel` +
  `flash_fwd_splitkv_combine_kernel`; hopper/flash_fwd_combine_kernel.h `FlashAttnFwdCombine`,
  hopper/flash_prepare_scheduler.cu `prepare_varlen_num_blocks_kernel` (FA3 scheduling).
- FlashInfer include/flashinfer/attention/cascade.cuh: `MergeStatesKernel`; decode.cuh
  `BatchDecodeWithPagedKVCacheKernel`; page.cuh `AppendPagedKVCacheKernel` (KV-cache write).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop.analysis import attention as at
from rooftop.analysis import attention_structure as st
from rooftop.llm.shapes import preset
from rooftop.trace import load_trace, write_trace


def k(name, start, dur, path=None, **kw):
    return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, path=path, device=0,
                stream=kw.pop("stream", 7), **kw)


def build(tmp_path, rows, name="t.parquet", **meta):
    base = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "workload": {"batch": 1, "dtype": "bf16"}}
    base.update(meta)
    return load_trace(write_trace(tmp_path / name, rows, base))


FA2_SPLIT = "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)"
FA2_COMBINE = "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>, 4, 2, true>(Flash_fwd_params)"
KV_WRITE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"
FA3_PREP = "void flash::prepare_varlen_num_blocks_kernel<1, true>(int, int, int, int const*, int const*)"


@pytest.mark.parametrize("name", [
    KV_WRITE, "vllm::reshape_and_cache_kernel<float, float, 0>", "vllm::concat_and_cache_mla_kernel<...>",
    "store_kvcache_kernel", "void vllm::copy_blocks_kernel<float>(long*, long*, long const*, int)",
    "void flashinfer::AppendPagedKVCacheKernel<8, 16, __nv_bfloat16, int>(...)", "set_kv_buffer_kernel"])
def test_kv_cache_writes_are_kv_cache_work(name):
    assert at.KV_CACHE_RE.search(name) and not at.COMBINE_RE.search(name)


@pytest.mark.parametrize("name", [
    FA2_COMBINE, "void vllm::merge_attn_states_kernel<__nv_bfloat16, 128>(...)",
    "void vllm::paged_attention_v2_reduce_kernel<unsigned short, 128, 128, 512>(...)",
    "void flashinfer::MergeStatesKernel<8, 16, 2, 2, __nv_bfloat16, __nv_bfloat16>(...)",
    "void flashinfer::PersistentVariableLengthMergeStatesKernel<8, 16, 4, 8, half, half, int>(...)",
    "void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<...>, 7, 256, 1, false, true>>(...)"])
def test_split_kv_combine_kernels_belong_to_their_call(name):
    assert at.COMBINE_RE.search(name) and not at.KV_CACHE_RE.search(name)


def _decode(layers, steps, *, paths=True, prep=False, extra=()):
    rows, t = [], 0
    for s in range(steps):
        if prep:
            rows.append(k(FA3_PREP, t, 2_000, f"decode/step={s}" if paths else None)); t += 3_000
        for layer in range(layers):
            p = f"decode/step={s}/layer={layer}/attn" if paths else None
            for name in (KV_WRITE, FA2_SPLIT, FA2_COMBINE) + tuple(extra):
                rows.append(k(name, t, 1_000, p)); t += 1_500
    return rows


@pytest.mark.parametrize("paths", [True, False])
def test_decode_calls_leave_out_kv_writes_and_count_combines_in_their_call(tmp_path, paths):
    # 4 layers x 2 steps: 8 attention calls, each a KV write + a split-KV kernel + its combine,
    # plus one FA3 scheduling kernel per step (the 72 kernels for 36 calls; 720 combines +
    # 10 scheduling kernels beside 800 calls)
    rows = _decode(4, 2, paths=paths, prep=True)
    meta = {"steps": [{"phase": "decode", "index": s, "batch": 1, "new_tokens": 1, "context": 64} for s in range(2)]} \
        if paths else {}
    (v,) = analyze(build(tmp_path, rows, **meta)).attention
    assert v.calls == 8 and v.fused_kernels == 8
    assert v.kv_cache_kernels == 8 and v.combine_kernels == 8 + 2
    assert v.verdict == "fused" and not v.confirmed and v.evidence_kind == "names"
    assert "by name" in v.evidence


def test_calls_are_one_per_layer_per_step_with_paths(tmp_path):
    # two FlashInfer decode kernels in one layer of one step (e.g. two wrappers) are one call there
    extra = ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>(...)",)
    (v,) = analyze(build(tmp_path, _decode(3, 2, extra=extra))).attention
    assert v.fused_kernels == 12 and v.calls == 6


def test_paged_attention_v2_reduce_is_not_a_second_call(tmp_path):
    rows = []
    for i in range(5):
        rows += [k("void vllm::paged_attention_v2_kernel<unsigned short, 128, 16, 128, 0, false, 512>(...)", 3000 * i, 1000),
                 k("void vllm::paged_attention_v2_reduce_kernel<unsigned short, 128, 128, 512>(...)", 3000 * i + 1200, 500)]
    (v,) = analyze(build(tmp_path, rows)).attention
    assert v.calls == 5 and v.fused_kernels == 5 and v.combine_kernels == 5


# --- materialized attention by its structure -------------------------------------------------------

SGEMM_NN = "ampere_sgemm_128x64_nn"
SGEMM_TN = "ampere_sgemm_128x64_tn"
SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(...)"
DIV = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float>>>(...)"
WHERE = "void at::native::elementwise_kernel<128, 2, at::native::where_kernel_impl(...)>(...)"


def _gpt2_layer(t, *, grid_z=12, op=True, flops=None, counters=None, path=None, stream=7):
    """HF GPT-2 eager `_attn`: matmul(q, k^T) -> / scale -> where(causal) -> softmax -> matmul(p, v)."""
    g = dict(grid=[8, 16, grid_z]) if grid_z else {}
    mm = dict(op="aten::bmm") if op else {}
    fl = dict(model_flops=flops) if flops else {}
    cs = counters or {}
    return [k(SGEMM_TN, t, 100, path, stream=stream, **g, **mm, **fl),
            k(DIV, t + 100, 10, path, stream=stream), k(WHERE, t + 110, 10, path, stream=stream),
            k(SOFTMAX, t + 120, 50, path, stream=stream, **cs),
            k(SGEMM_NN, t + 170, 100, path, stream=stream, **g, **mm, **fl)]


def test_unfused_attention_is_found_by_structure_not_by_ranges(tmp_path):
    rows = _gpt2_layer(0) + _gpt2_layer(1000)
    (v,) = analyze(build(tmp_path, rows)).attention
    assert v.verdict == "materialized" and v.calls == 2 and v.materialized_calls == 2
    assert v.evidence_kind == "structure" and not v.confirmed
    assert "kernel order" in v.evidence


def test_op_shapes_confirm_the_structure(tmp_path):
    # Q K^T and P V: 2 x (B.H) x Sq x Sk x d FLOPs each, from their op shapes
    f = 2 * 12 * 1024 * 1024 * 64
    (v,) = analyze(build(tmp_path, _gpt2_layer(0, flops=f) + _gpt2_layer(1000, flops=f))).attention
    assert v.confirmed and v.evidence_kind == "shapes"
    # a gate and an expert GEMM do different FLOPs: structure only
    rows = _gpt2_layer(0, flops=f)
    rows[-1]["model_flops"] = f / 3
    (v,) = analyze(build(tmp_path, rows, "b.parquet")).attention
    assert not v.confirmed and v.evidence_kind == "structure"


def test_bytes_confirm_against_the_scores_of_the_step(tmp_path):
    cfg = preset("tiny")  # 8 heads
    steps = [{"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 128, "context": 128}]
    scores = 2 * 1 * cfg.heads * 128 * 128  # bf16 elements of one call's S x S scores
    path = "prefill/step=0/layer=0"
    for moved, ok in ((2.0 * scores, True), (0.25 * scores, False)):
        rows = _gpt2_layer(0, path=path, counters=dict(counters=True, dram_read=moved / 2, dram_write=moved / 2))
        (v,) = analyze(build(tmp_path, rows, f"b{ok}.parquet", model=cfg.to_meta("bf16"), steps=steps)).attention
        assert v.verdict == "materialized"
        assert v.confirmed is ok and v.evidence_kind == ("bytes" if ok else "structure")


def test_moe_router_softmax_is_not_attention(tmp_path):
    # gate: a plain linear over the hidden state (aten::linear / mm; grid z 1, or split-K z > 1 with a
    # plain-GEMM op), a softmax over the expert logits, then the experts' GEMMs; a bmm elsewhere
    # in the run must not turn the router's softmax into attention
    router = [k("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", 0, 50, "decode/step=0/layer=0/moe",
                op="aten::linear", grid=[1, 1, 4]),
              k("void (anonymous namespace)::softmax_warp_forward<float, float, float, 3, false, false>(...)", 60, 10,
                "decode/step=0/layer=0/moe", op="aten::softmax"),
              k("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)", 80, 10, "decode/step=0/layer=0/moe"),
              k("fused_moe_kernel", 100, 300, "decode/step=0/layer=0/moe", grid=[64, 1, 1]),
              k("fused_moe_kernel", 420, 300, "decode/step=0/layer=0/moe", grid=[64, 1, 1]),
              k("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn", 800, 50, "decode/step=0/layer=0/mla", op="aten::bmm",
                grid=[1, 1, 16])]
    assert analyze(build(tmp_path, router)).attention == []
    # the same without ops (an ncu report): the gate's grid has z == 1
    bare = [dict(r) for r in router]
    for r in bare:
        r.pop("op", None)
        r["path"] = None
    bare[0]["grid"] = [1, 1, 1]
    assert analyze(build(tmp_path, bare, "n.parquet")).attention == []


def test_triples_never_span_streams_or_too_many_kernels():
    soft = np.array([0, 0, 1, 0, 0], bool)
    gemm = np.array([1, 0, 0, 0, 1], bool)
    filler = np.array([0, 1, 0, 1, 0], bool)
    same = np.zeros(5, np.int64)
    assert st.find_triples(same, gemm, soft, filler, gemm).tolist() == [[0, 2, 4]]
    assert st.find_triples(np.array([0, 0, 0, 1, 1]), gemm, soft, filler, gemm).tolist() == []
    # more than MAX_FILLERS kernels between: not adjacent
    n = st.MAX_FILLERS + 1
    soft2 = np.r_[False, np.zeros(n, bool), True, False]
    gemm2 = np.r_[True, np.zeros(n, bool), False, True]
    filler2 = np.r_[False, np.ones(n, bool), False, False]
    assert st.find_triples(np.zeros(n + 3, np.int64), gemm2, soft2, filler2, gemm2).tolist() == []
    # no op: the grids decide; z > 1 on both and the same batch (B x heads)
    no_op = np.zeros(5, bool)
    grids = pd.Series([[8, 16, 12], None, None, None, [1, 16, 12]], dtype=object)

    def grid(at):
        return grids.iloc[at]
    assert st.find_triples(same, gemm, soft, filler, no_op, grid).tolist() == [[0, 2, 4]]
    grids[4] = [1, 16, 4]
    assert st.find_triples(same, gemm, soft, filler, no_op, grid).tolist() == []
    grids[0], grids[4] = [8, 16, 1], [1, 16, 1]   # not batched: a plain GEMM's grid
    assert st.find_triples(same, gemm, soft, filler, no_op, grid).tolist() == []
    assert st.find_triples(same, gemm, soft, filler, no_op, None).tolist() == []  # no op, no grid: no structure


NCU_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value",'
              '"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"')


def _ncu_row(i, name, grid, metric, unit, value):
    return (f'"{i}","4242","python3","host","{name}","1","7","(256, 1, 1)","{grid}","0","8.6",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}","","","","",""')


def test_ncu_csv_of_gpt2_unfused_attention_gets_a_verdict(tmp_path):
    # GPT-2 small eager attention under ncu: sgemm (12 heads in grid z) -> softmax_warp_forward -> sgemm
    from collectors.readers.importers import convert
    seq = [("ampere_sgemm_64x64_tn", "(16, 16, 12)"), ("void (anonymous namespace)::softmax_warp_forward"
           "<float, float, float, 10, false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
           "(1536, 1, 1)"), ("ampere_sgemm_128x64_nn", "(1, 16, 12)")] * 2
    lines = [NCU_HEADER]
    for i, (name, grid) in enumerate(seq):
        lines += [_ncu_row(i, name, grid, "gpu__time_duration.sum", "usecond", "20.5"),
                  _ncu_row(i, name, grid, "dram__bytes_read.sum", "Mbyte", "50.3"),
                  _ncu_row(i, name, grid, "dram__bytes_write.sum", "Mbyte", "50.3")]
    src = tmp_path / "gpt2_attn.csv"
    src.write_text("\n".join(lines) + "\n")
    table, meta = convert(src)
    t = load_trace(write_trace(tmp_path / "gpt2.parquet", table, meta))
    (v,) = analyze(t).attention
    assert v.verdict == "materialized" and v.calls == 2
    # no model or steps in an ncu CSV: the scores' size is unknown, so nothing confirms it
    assert not v.confirmed and "by name" in v.evidence


def test_report_json_keeps_keys_and_adds_calls_and_evidence(tmp_path):
    from rooftop.present.report import report_dict

    t = build(tmp_path, _decode(2, 1))
    doc = json.loads(json.dumps(report_dict(analyze(t), keys=("attention",))))
    (a,) = doc["attention"]
    for key in ("phase", "verdict", "evidence", "fused_kernels", "softmax_kernels", "attn_ns", "attn_bytes",
                "min_bytes", "ratio", "bytes_source", "confirmed", "calls", "evidence_kind"):
        assert key in a
    assert a["calls"] == 2 and a["evidence_kind"] == "names" and a["confirmed"] is False


def test_finding_titles_say_by_name_unless_backed(tmp_path):
    a = analyze(build(tmp_path, _gpt2_layer(0)))
    (f,) = [x for x in a.findings if x.id.endswith("-attention")]
    assert "looks materialized" in f.title and "by name" in f.title and "(1 call)" in f.title
    assert f.severity == "warn"
    fl = 2 * 12 * 1024 * 1024 * 64
    b = analyze(build(tmp_path, _gpt2_layer(0, flops=fl), "s.parquet"))
    (g,) = [x for x in b.findings if x.id.endswith("-attention")]
    assert g.title.endswith("from op shapes") and "by name" not in g.title and g.severity == "bad"
