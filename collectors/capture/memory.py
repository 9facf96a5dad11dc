"""Will the workload fit on the GPU? The collector's memory estimate, checked before the model is built.

The built-in Llama workload holds, at its peak (prefill):
- the weights: parameters x element size (the model is built on the device in its dtype);
- the KV cache: 2 (K and V) x layers x batch x kv_heads x (prompt + generated) x head_dim x element;
- the attention scores, for the backends that materialize them: `math` computes softmax(Q K^T) in
  the compute dtype with an fp32 upcast for half types (at::_scaled_dot_product_attention_math),
  so batch x heads x prompt^2 x 4 bytes for the scores and as much again for the probabilities;
  `efficient`/`math` also expand K and V to every query head (repeat_interleave) when kv_heads < heads;
- activations of one layer: the hidden state, Q/K/V, and the MLP's gate/up/down intermediates for
  batch x prompt tokens (a handful of buffers live at once), plus the logits of the last token.
A 10% margin covers the allocator's fragmentation; the CUDA context's own memory is already
outside `torch.cuda.mem_get_info()`'s free figure. torch is not imported here.
"""
from __future__ import annotations

from dataclasses import dataclass

from rooftop.llm.shapes import ModelConfig

ELEM = {"bf16": 2, "fp16": 2, "fp32": 4}
MARGIN = 1.10


@dataclass
class MemoryPlan:
    weights: float
    kv_cache: float
    scores: float
    activations: float

    @property
    def total(self) -> float:
        return MARGIN * (self.weights + self.kv_cache + self.scores + self.activations)

    def parts(self) -> str:
        gb = 1e9
        out = f"weights {self.weights / gb:.1f}, KV cache {self.kv_cache / gb:.1f}"
        if self.scores:
            out += f", attention scores {self.scores / gb:.1f}"
        return out + f", activations {self.activations / gb:.1f} GB"


def plan(cfg: ModelConfig, batch: int, prompt: int, gen: int, dtype: str, attn: str) -> MemoryPlan:
    """The peak GPU memory of one collect run (prefill is the peak: the whole prompt at once)."""
    e = ELEM[dtype]
    length = prompt + gen
    weights = cfg.params() * e
    kv = 2 * cfg.layers * batch * cfg.kv_heads * length * cfg.d * e
    tokens = batch * prompt
    scores = 0.0
    if attn == "math":
        # scores and probabilities, fp32 for half types (compute dtype for fp32)
        scores = 2 * batch * cfg.heads * prompt * prompt * max(e, 4)
    expand = 0.0
    if attn in ("math", "efficient") and cfg.kv_heads < cfg.heads:
        expand = 2 * batch * cfg.heads * length * cfg.d * e
    qkv = tokens * (cfg.heads + 2 * cfg.kv_heads) * cfg.d * e
    mlp = tokens * 3 * cfg.ffn * e            # gate|up and their product
    hidden = 4 * tokens * cfg.hidden * e      # residual, normed input, attention output, fp32 norm temp
    logits = batch * cfg.vocab * 4
    return MemoryPlan(float(weights), float(kv), float(scores), float(qkv + mlp + hidden + logits + expand))


def fits(cfg: ModelConfig, batch: int, prompt: int, gen: int, dtype: str, attn: str, free: float) -> bool:
    return plan(cfg, batch, prompt, gen, dtype, attn).total <= free


def check(cfg: ModelConfig, batch: int, prompt: int, gen: int, dtype: str, attn: str, free: float,
          device_name: str = "the GPU") -> str | None:
    """None when the run fits in `free` bytes; else one line: the size needed, the parts, and a
    smaller batch (or prompt) that fits."""
    p = plan(cfg, batch, prompt, gen, dtype, attn)
    if p.total <= free:
        return None
    gb = 1e9
    msg = (f"batch {batch} x prompt {prompt} (+{gen}) with --attn {attn} needs about {p.total / gb:.1f} GB of GPU "
           f"memory ({p.parts()}), {free / gb:.1f} GB free on {device_name}")
    b = batch
    while b > 1 and not fits(cfg, b, prompt, gen, dtype, attn, free):
        b //= 2
    s = prompt
    while s > 16 and not fits(cfg, batch, s, gen, dtype, attn, free):
        s //= 2
    hints = []
    if b < batch and fits(cfg, b, prompt, gen, dtype, attn, free):
        hints.append(f"--batch {b}")
    if s < prompt and fits(cfg, batch, s, gen, dtype, attn, free):
        hints.append(f"--prompt-len {s}")
    if attn == "math" and fits(cfg, batch, prompt, gen, dtype, "flash", free):
        hints.append("--attn flash")
    if hints:
        return msg + ": try " + " or ".join(hints)
    return msg + ": even batch 1 does not fit; use a smaller --preset"
