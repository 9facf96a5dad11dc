"""The analytic model: the ideal per-kernel trace of a Llama-style model on a GPU.

Each kernel a real implementation launches (norms, GEMMs, RoPE, KV append, attention, residual
adds, the LM head, sampling) gets its analytic FLOPs and minimum bytes from `rooftop.llm.op_cost` and
lasts its roofline time (`rooftop.analysis.ideal_time.kernel_ideal_ns`); kernels run back to back on one stream.
The result is a what-if ("Llama-3-8B on an H200 at batch 64") and the reference line a measured
run is compared against. Traces it writes carry `modeled: true`; the measurement columns (`flops`,
`dram_read`, `dram_write`) stay null, the model values live in `model_flops`/`model_bytes`.

No torch: pure Python + pandas, vectorised over layers.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
import pandas as pd

from rooftop import __version__
from rooftop.hardware.gpus import GPUSpec, by_key, keys, normalize_dtype
from rooftop.analysis.ideal_time import LAUNCH_FLOOR_NS, kernel_ideal_ns
from rooftop.llm.shapes import PRESETS, ModelConfig, dtype_bytes, preset
from rooftop.llm.op_cost import gemm_cost, sdpa_cost

ATTN_CHOICES = ("fused", "materialized")
# The softmax of materialized attention computes in fp32; its scores and probabilities go through
# HBM at 4 bytes (docs/definitions.md).
SCORE_BYTES = 4

# cuBLAS GEMM kernel names by architecture family (compute capability major), as traces show them.
_GEMM_NAMES = {
    "8": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "9": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "10": "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT",
}
_AMD_GEMM = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB1_GRVW8_K1_MIWT2_2"
_FLASH = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, "
          "false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, "
          "false, true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)")
_FLASH_SPLITKV = ("void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, 128, "
                  "4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, 4, "
                  "cutlass::bfloat16_t>>, false, false, false, false, true, false, true, false>"
                  "(pytorch_flash::Flash_fwd_params)")
_SOFTMAX = ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 11, false, false>"
            "(float*, float const*, int, int, int, bool const*, int, bool)")
_RMSNORM = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
            "c10::BFloat16 const*, float, int, int)")
_ROPE = "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, " \
        "c10::BFloat16 const*, int, long, long, int, int, int)"
# The KV-cache append as torch writes it (`cache[:, pos] = k`): a plain copy kernel. (vLLM's
# `reshape_and_cache_flash_kernel` would do as well, but its name says "flash" without being attention.)
_KV_APPEND = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
              "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
              "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, "
              "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
              "at::native::memory::StoreWithCast<1>>(int, at::native::direct_copy_kernel_cuda("
              "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
              "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, "
              "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
              "at::native::memory::StoreWithCast<1>)")
_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
        "std::array<char*, 3ul>>(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
_SILU_MUL = ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
             "(c10::BFloat16*, c10::BFloat16 const*, int)")
_EMBED = ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, "
          "-2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
          "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, "
          "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)")
_ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, "
           "at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4>>(at::native::ReduceOp<c10::BFloat16, "
           "at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4>)")

_SDPA_FLASH_OP = "aten::_scaled_dot_product_flash_attention"


def gemm_kernel_name(gpu: GPUSpec) -> str:
    if gpu.cc is None:
        return _AMD_GEMM
    return _GEMM_NAMES.get(gpu.cc.split(".")[0], _GEMM_NAMES["9"])


# One kernel: (block, name, op, category, model_flops, model_bytes).
Kernel = tuple[str, str, str, str, float, float]


def layer_kernels(cfg: ModelConfig, batch: int, sq: int, sk: int, eb: int, attn: str, gemm: str,
                  prefill: bool) -> list[Kernel]:
    """The kernels of one decoder layer for one step: `batch` sequences of `sq` new tokens each,
    attending over `sk` keys. Returned in launch order."""
    h, d, nh, nkv, f = cfg.hidden, cfg.d, cfg.heads, cfg.kv_heads, cfg.ffn
    t = batch * sq
    qkv_n = (nh + 2 * nkv) * d
    norm = ("", _RMSNORM, "_C::rms_norm", "norm", 4.0 * t * h, float(2 * t * h * eb + h * eb))
    add = ("", _ADD, "aten::add_", "elementwise", float(t * h), float(3 * t * h * eb))
    out: list[Kernel] = [
        ("attn",) + norm[1:],
        ("attn", gemm, "aten::mm", "gemm", *gemm_cost(t, qkv_n, h, a_bytes=eb, b_bytes=eb, out_bytes=eb)),
        # RoPE rewrites Q and K in place: ~3 FLOPs per element (two multiplies and an add).
        ("attn", _ROPE, "_C::rotary_embedding", "elementwise", 3.0 * t * (nh + nkv) * d,
         float(2 * t * (nh + nkv) * d * eb)),
        # The new tokens' K and V copied into the cache: read once, written once.
        ("attn", _KV_APPEND, "aten::copy_", "memory", 0.0, float(4 * t * nkv * d * eb)),
    ]
    if attn == "fused":
        name = _FLASH if prefill else _FLASH_SPLITKV
        out.append(("attn", name, _SDPA_FLASH_OP, "attention",
                    *sdpa_cost(batch, nh, sq, sk, d, kv_heads=nkv, causal=prefill, elem_bytes=eb)))
    else:
        # The math path: K and V expanded to every query head (GQA repeat), the full sq x sk
        # square computed (the causal mask only zeroes it), scores and probabilities in HBM.
        bh, sb = batch * nh, SCORE_BYTES
        out += [
            ("attn", gemm, "aten::bmm", "gemm", *gemm_cost(sq, sk, d, batch=bh, a_bytes=eb, b_bytes=eb, out_bytes=sb)),
            # ~5 FLOPs per score: max, subtract, exp, sum, divide.
            ("attn", _SOFTMAX, "aten::_softmax", "attention", 5.0 * bh * sq * sk, float(2 * bh * sq * sk * sb)),
            ("attn", gemm, "aten::bmm", "gemm", *gemm_cost(sq, d, sk, batch=bh, a_bytes=sb, b_bytes=eb, out_bytes=eb)),
        ]
    out += [
        ("attn", gemm, "aten::mm", "gemm", *gemm_cost(t, h, nh * d, a_bytes=eb, b_bytes=eb, out_bytes=eb)),
        ("attn",) + add[1:],
        ("mlp",) + norm[1:],
        ("mlp", gemm, "aten::mm", "gemm", *gemm_cost(t, 2 * f, h, a_bytes=eb, b_bytes=eb, out_bytes=eb)),
        # silu(gate) * up: read both halves, write one; ~5 FLOPs per output element.
        ("mlp", _SILU_MUL, "_C::silu_and_mul", "elementwise", 5.0 * t * f, float(3 * t * f * eb)),
        ("mlp", gemm, "aten::mm", "gemm", *gemm_cost(t, h, f, a_bytes=eb, b_bytes=eb, out_bytes=eb)),
        ("mlp",) + add[1:],
    ]
    return out


def head_kernels(cfg: ModelConfig, batch: int, sq: int, eb: int, gemm: str) -> tuple[list[Kernel], list[Kernel]]:
    """(before the layers, after the layers): the embedding gather; the final norm, the LM head on
    each sequence's last token only (prefill skips the other positions), greedy sampling."""
    h, v, t = cfg.hidden, cfg.vocab, batch * sq
    before = [("embed", _EMBED, "aten::embedding", "memory", 0.0, float(2 * t * h * eb + 8 * t))]
    after = [
        ("lm_head", _RMSNORM, "_C::rms_norm", "norm", 4.0 * batch * h, float(2 * batch * h * eb + h * eb)),
        ("lm_head", gemm, "aten::mm", "gemm", *gemm_cost(batch, v, h, a_bytes=eb, b_bytes=eb, out_bytes=eb)),
        ("sample", _ARGMAX, "aten::argmax", "reduction", float(batch * v), float(batch * v * eb + 8 * batch)),
    ]
    return before, after


def _step_frame(cfg: ModelConfig, phase: str, step: int, batch: int, sq: int, sk: int, eb: int, attn: str,
                gemm: str) -> pd.DataFrame:
    layer = layer_kernels(cfg, batch, sq, sk, eb, attn, gemm, prefill=phase == "prefill")
    before, after = head_kernels(cfg, batch, sq, eb, gemm)
    n_layer, n_layers = len(layer), cfg.layers
    blocks, names, ops, cats, flops, nbytes = (list(c) for c in zip(*layer))
    layer_ids = np.repeat(np.arange(n_layers), n_layer)
    prefix = f"{phase}/step={step}"
    layer_paths = [f"{prefix}/layer={i}/{b}" for i in range(n_layers) for b in blocks]

    def flat(kernels: list[Kernel]) -> dict[str, list]:
        return {"path": [f"{prefix}/{k[0]}" for k in kernels], "name": [k[1] for k in kernels],
                "op": [k[2] for k in kernels], "category": [k[3] for k in kernels],
                "model_flops": [k[4] for k in kernels], "model_bytes": [k[5] for k in kernels],
                "layer": [None] * len(kernels)}

    pre, post = flat(before), flat(after)
    body = {"path": layer_paths, "name": names * n_layers, "op": ops * n_layers, "category": cats * n_layers,
            "model_flops": flops * n_layers, "model_bytes": nbytes * n_layers, "layer": list(layer_ids)}
    frame = pd.DataFrame({c: pre[c] + body[c] + post[c] for c in body})
    frame["phase"] = phase
    frame["step"] = step
    return frame


def predict(cfg: ModelConfig, gpu: GPUSpec, batch: int, prompt_len: int, gen_len: int, dtype: str = "bf16",
            attn: str = "fused", *, launch_floor_ns: float = LAUNCH_FLOOR_NS,
            command: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The ideal trace of one prefill of `prompt_len` tokens and `gen_len` decode steps.

    Returns (rows, meta) ready for `rooftop.trace.write_trace`. Decode step j attends over
    `prompt_len + j` keys (its `context` in the steps metadata). Each kernel lasts
    `kernel_ideal_ns(model_flops, model_bytes, peak, bw, launch_floor_ns)` at the GPU's datasheet
    peaks for `dtype`. Raises ValueError for impossible inputs.
    """
    d = normalize_dtype(dtype)
    if d not in ("bf16", "fp16", "fp8", "fp32", "tf32"):  # fp4/int8 weights are not modelled
        raise ValueError(f"unknown dtype {dtype!r} (use bf16, fp16, fp8 or fp32)")
    if attn not in ATTN_CHOICES:
        raise ValueError(f"unknown attention {attn!r} (use {' or '.join(ATTN_CHOICES)})")
    if batch < 1 or prompt_len < 1 or gen_len < 0:
        raise ValueError("batch and prompt length must be at least 1, gen length at least 0")
    peak_flops, peak_bw = gpu.peak_flops(d), gpu.peak_bw
    if not peak_flops:
        raise ValueError(f"{gpu.name} has no {d} peak in the spec table")
    eb, gemm = dtype_bytes(d), gemm_kernel_name(gpu)

    frames = [_step_frame(cfg, "prefill", 0, batch, prompt_len, prompt_len, eb, attn, gemm)]
    steps = [{"phase": "prefill", "index": 0, "batch": batch, "new_tokens": batch * prompt_len, "context": prompt_len}]
    for j in range(gen_len):
        ctx = prompt_len + j
        frames.append(_step_frame(cfg, "decode", j, batch, 1, ctx, eb, attn, gemm))
        steps.append({"phase": "decode", "index": j, "batch": batch, "new_tokens": batch, "context": ctx})
    rows = pd.concat(frames, ignore_index=True)

    dur = np.ceil(kernel_ideal_ns(rows["model_flops"].to_numpy(), rows["model_bytes"].to_numpy(),
                                  peak_flops, peak_bw, launch_floor_ns)).astype("int64")
    rows["dur_ns"] = dur
    rows["start_ns"] = np.cumsum(dur) - dur
    rows["kind"] = "kernel"
    rows["device"] = 0
    rows["stream"] = 7
    rows["counters"] = False
    rows["layer"] = pd.array(rows["layer"], dtype="Int32")
    for c in ("flops", "dram_read", "dram_write"):  # measurements: a model has none
        rows[c] = np.nan

    meta = {
        "format": 1,
        "modeled": True,
        "source": {"tool": "rooftop predict", "version": __version__, "model": "roofline",
                   "command": command or _command(cfg.name, gpu.key, batch, prompt_len, gen_len, d, attn),
                   "launch_floor_ns": launch_floor_ns, "score_bytes": SCORE_BYTES if attn == "materialized" else None},
        "device": {"name": gpu.name, "key": gpu.key, "cc": gpu.cc, "sms": gpu.sms,
                   "peaks": {"datasheet": {"flops": peak_flops, "bw": peak_bw, "dtype": d}}},
        "model": cfg.to_meta(d),
        "workload": {"batch": batch, "prompt_len": prompt_len, "gen_len": gen_len, "attn": attn,
                     "cuda_graphs": None, "dtype": d, "device": gpu.name},
        "steps": steps,
        "warnings": [],
        "incomplete": False,
    }
    return rows, meta


def _command(preset_name, gpu_key, batch, prompt_len, gen_len, dtype, attn) -> str:
    return (f"rooftop predict --preset {preset_name} --gpu {gpu_key} --batch {batch} --prompt-len {prompt_len} "
            f"--gen-len {gen_len} --dtype {dtype} --attn {attn}")


# --- command line -------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS), help="model shapes")
    parser.add_argument("--gpu", required=True, help="GPU key from the spec table (e.g. h100-sxm, h200)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--gen-len", type=int, default=16, help="decode steps")
    parser.add_argument("--dtype", default="bf16", help="bf16, fp16, fp8 or fp32")
    parser.add_argument("--attn", choices=ATTN_CHOICES, default="fused")
    parser.add_argument("--launch-floor-us", type=float, default=LAUNCH_FLOOR_NS / 1000,
                        help="shortest kernel time (us); 0 for the pure roofline")
    parser.add_argument("-o", "--output", default="ideal.parquet")


def run(args: argparse.Namespace) -> int:
    from rooftop.present.summary import write_summarized
    from rooftop.trace import check_writable

    gpu = by_key(args.gpu)
    if gpu is None:
        print(f"rooftop predict: unknown GPU {args.gpu!r} (choose from {', '.join(keys())})", file=sys.stderr)
        return 2
    cfg = preset(args.preset)
    dtype = normalize_dtype(args.dtype) or args.dtype
    try:
        rows, meta = predict(cfg, gpu, args.batch, args.prompt_len, args.gen_len, dtype, args.attn,
                             launch_floor_ns=max(0.0, args.launch_floor_us) * 1000)
    except ValueError as exc:
        print(f"rooftop predict: {exc}", file=sys.stderr)
        return 2
    check_writable(args.output)
    write_summarized(args.output, rows, meta)
    span = rows.groupby("phase")["dur_ns"].sum()
    decode = f", decode {span['decode'] / args.gen_len / 1e6:.2f} ms/step" if args.gen_len else ""
    print(f"wrote {args.output}: {len(rows):,} modeled kernels, prefill {span['prefill'] / 1e6:.2f} ms{decode}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rooftop predict", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
