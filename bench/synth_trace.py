"""A synthetic rooftop trace of a decode loop, built column by column (1M kernels in seconds).

Per step: `layers` x 9 kernels (norm, QKV GEMM, RoPE, flash decode, O GEMM, norm, gate/up GEMM,
SiLU, down GEMM) under `decode/step=i/layer=l/attn|mlp`, with model FLOPs and bytes, and a
1.5 µs launch gap after every kernel.

    python bench/synth_trace.py OUT.parquet --kernels 1000000
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

KERNELS = [  # (block, name, dur ns, model FLOPs, model bytes) at batch 8, Llama-3-8B shapes, bf16
    ("attn", "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)", 3000, None, None),
    ("attn", "nvjet_tst_64x8_64x16_4x1_v_bz_coopB_TNT", 20000, 2 * 8 * 4096 * 6144, 2 * 4096 * 6144),
    ("attn", "void at::native::vectorized_elementwise_kernel<4, rotary>(int)", 2100, None, None),
    ("attn", "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(Flash_fwd_params)",
     30000, 4 * 8 * 32 * 2048 * 128, 2 * 8 * 2048 * 8 * 128 * 2),
    ("attn", "nvjet_tst_64x8_64x16_4x1_v_bz_coopB_TNT", 14000, 2 * 8 * 4096 * 4096, 2 * 4096 * 4096),
    ("mlp", "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)", 3000, None, None),
    ("mlp", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_cublas", 90000,
     2 * 8 * 4096 * 28672, 2 * 4096 * 28672),
    ("mlp", "void at::native::vectorized_elementwise_kernel<4, silu_and_mul>(int)", 2600, None, None),
    ("mlp", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_cublas", 48000,
     2 * 8 * 14336 * 4096, 2 * 14336 * 4096),
]
GAP_NS = 1500
STEP_GAP_NS = 200_000


def decode_frame(steps: int, layers: int = 32, first_step: int = 0, t0: int = 0) -> pd.DataFrame:
    """Kernel rows of `steps` decode steps (columns of format v1; the rest is filled by to_table)."""
    k = len(KERNELS)
    per_step = layers * k
    n = steps * per_step
    kidx = np.tile(np.arange(k), steps * layers)
    layer = np.tile(np.repeat(np.arange(layers), k), steps)
    step = np.repeat(np.arange(first_step, first_step + steps), per_step)
    dur = np.array([d for _, _, d, _, _ in KERNELS], dtype=np.int64)[kidx]
    # start: kernels back to back with a gap inside a step; a longer gap between steps
    starts_in_step = np.concatenate([[0], np.cumsum(dur[:per_step] + GAP_NS)[:per_step - 1]])
    step_len = int(starts_in_step[-1] + dur[per_step - 1]) + STEP_GAP_NS
    start = t0 + step * step_len + np.tile(starts_in_step, steps)  # absolute by step: pieces line up
    blocks = np.array([b for b, *_ in KERNELS], dtype=object)
    names = np.array([nm for _, nm, *_ in KERNELS], dtype=object)
    flops = np.array([np.nan if f is None else f for *_, f, _ in KERNELS], dtype=np.float64)
    bytes_ = np.array([np.nan if b is None else b for *_, b in KERNELS], dtype=np.float64)
    path = pd.Series(["decode/step="] * n, dtype=object) + pd.Series(step).astype(str) + "/layer=" + \
        pd.Series(layer).astype(str) + "/" + pd.Series(blocks[kidx])
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64) + first_step * per_step,
        "kind": "kernel", "name": names[kidx], "start_ns": start, "dur_ns": dur,
        "device": 0, "stream": 7, "correlation": np.arange(n, dtype=np.int64) + first_step * per_step,
        "path": path.to_numpy(), "phase": "decode", "step": step.astype(np.int32), "layer": layer.astype(np.int32),
        "model_flops": flops[kidx], "model_bytes": bytes_[kidx],
    })


def meta(steps: int, first_step: int = 0) -> dict:
    return {
        "source": {"tool": "bench/synth_trace.py"},
        "device": {"name": "NVIDIA H100 80GB HBM3"},
        "model": {"name": "llama3-8b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                  "vocab": 128256, "head_dim": 128, "dtype": "bf16"},
        "workload": {"batch": 8, "prompt_len": 2048, "gen_len": steps, "dtype": "bf16"},
        "steps": [{"phase": "decode", "index": i, "batch": 8, "new_tokens": 8, "context": 2048 + i}
                  for i in range(first_step, first_step + steps)],
        "modeled": False,
    }


def write(out: Path, kernels: int, layers: int = 32, summary: bool = False) -> Path:
    """The trace, with the stored summary in its footer (as `rooftop import` writes) or without it."""
    from rooftop.present.summary import write_summarized
    from rooftop.trace import write_trace

    steps = max(1, round(kernels / (layers * len(KERNELS))))
    return (write_summarized if summary else write_trace)(out, decode_frame(steps, layers), meta(steps))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--summary", action="store_true", help="store the report's summary in the footer")
    args = p.parse_args(argv)
    path = write(args.out, args.kernels, summary=args.summary)
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
