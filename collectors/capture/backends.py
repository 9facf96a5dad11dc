"""Which SDPA backend actually ran, read from the recorded kernels (or ops, on a CPU run).

`--attn auto` lets torch choose, and under CUDA graphs a masked decode cannot use flash: the
backend asked for and the one that ran can differ. The trace records the one that ran, per phase,
from the names the backends' kernels carry (PyTorch aten/src/ATen/native/transformers/cuda):
flash `pytorch_flash::flash_fwd_kernel` / `flash_fwd_splitkv_kernel`; memory-efficient
`fmha_cutlassF_*` (`PyTorchMemEffAttention::AttentionKernel`); cuDNN
`cudnn_generated_fort_native_sdpa_*`; math: no fused kernel, a softmax between batched GEMMs. On a
CPU run the ops say it: `aten::_scaled_dot_product_flash_attention_for_cpu`,
`aten::_scaled_dot_product_attention_math`.
"""
from __future__ import annotations

import re

import pandas as pd

_RULES = (
    ("cudnn", re.compile(r"cudnn.*(?:sdpa|fprop|flash)|_scaled_dot_product_cudnn", re.IGNORECASE)),
    ("flash", re.compile(r"flash_fwd|pytorch_flash|_flash_attention_forward|_scaled_dot_product_flash_attention",
                         re.IGNORECASE)),
    ("efficient", re.compile(r"fmha_cutlass|MemEffAttention|efficient_attention", re.IGNORECASE)),
    ("math", re.compile(r"softmax|_scaled_dot_product_attention_math", re.IGNORECASE)),
)


def backend_of(name: str) -> str | None:
    for backend, rx in _RULES:
        if rx.search(name):
            return backend
    return None


def attention_backends(rows: pd.DataFrame) -> dict[str, str]:
    """Per phase, the backend(s) whose kernels ran inside the `attn` ranges ("flash", "efficient+math"
    where a phase used two); a fused backend wins over a softmax seen beside it. Kernels when the
    run has any, else ops (a CPU run)."""
    if rows is None or rows.empty or not {"kind", "name", "path"} <= set(rows.columns):
        return {}
    kind = rows["kind"].astype(object)
    pick = rows[kind == "kernel"] if (kind == "kernel").any() else rows[kind == "op"]
    path = pick["path"].astype(object)
    pick = pick[path.map(lambda p: isinstance(p, str) and "attn" in p.split("/")).to_numpy(dtype=bool)]
    if pick.empty:
        return {}
    names = pick["name"].astype(object)
    uniques = {n: backend_of(n) if isinstance(n, str) else None for n in pd.unique(names)}
    found = names.map(uniques)
    phase = pick["phase"].astype(object) if "phase" in pick.columns else path.map(lambda p: p.split("/")[0])
    out: dict[str, str] = {}
    for ph, seen in found.groupby(phase.to_numpy(), sort=False):
        kinds = [b for b, _ in _RULES if b in set(seen.dropna())]
        fused = [b for b in kinds if b != "math"]
        out[str(ph)] = "+".join(fused or kinds) if kinds else "unknown"
    return out
