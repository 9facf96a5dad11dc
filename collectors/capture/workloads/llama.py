"""A pure-torch Llama-style decoder with a static KV cache, built from a rooftop ModelConfig.

RMSNorm, RoPE, grouped-query attention through `F.scaled_dot_product_attention`, SwiGLU MLP.
Weights are random (seeded): nothing is downloaded, and the shapes are what the profile is about.
The KV cache is preallocated for prompt + generated tokens and written in place, so a decode
step has fixed shapes and can be captured in a CUDA graph (`static=True`: attention then runs
over the whole cache with a mask, as graph-captured engines do).
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from rooftop.llm.shapes import ModelConfig

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ATTN_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")


def attention_backend(attn: str):
    """Context manager restricting SDPA to one backend (`auto`: torch chooses)."""
    if attn == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[attn]
    return sdpa_kernel(backend)


def _scope(rec, name):
    return rec.range(name) if rec is not None else contextlib.nullcontext()


def _layer_scope(rec, i):
    return rec.layer(i) if rec is not None else contextlib.nullcontext()


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, **factory):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, **factory))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.to(x.dtype) * self.weight


def _rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, repeat_kv: bool, **factory):
        super().__init__()
        d = cfg.d
        self.heads, self.kv_heads, self.d = cfg.heads, cfg.kv_heads, d
        self.repeat_kv = repeat_kv
        self.attn_norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        self.wqkv = nn.Linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * d, bias=False, **factory)
        self.wo = nn.Linear(cfg.heads * d, cfg.hidden, bias=False, **factory)
        self.mlp_norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        self.w_gate_up = nn.Linear(cfg.hidden, 2 * cfg.ffn, bias=False, **factory)
        self.w_down = nn.Linear(cfg.ffn, cfg.hidden, bias=False, **factory)

    def attention(self, x, cos, sin, k_cache, v_cache, pos, length, mask):
        b, t, _ = x.shape
        qkv = self.wqkv(self.attn_norm(x))
        q, k, v = qkv.split([self.heads * self.d, self.kv_heads * self.d, self.kv_heads * self.d], dim=-1)
        q = q.view(b, t, self.heads, self.d).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        keys, values = k_cache[:, :, :length], v_cache[:, :, :length]
        causal = mask is None and t > 1
        if self.repeat_kv and self.heads != self.kv_heads:
            g = self.heads // self.kv_heads
            keys, values = keys.repeat_interleave(g, dim=1), values.repeat_interleave(g, dim=1)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal)
        else:
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal,
                                               enable_gqa=self.heads != self.kv_heads)
        return self.wo(o.transpose(1, 2).reshape(b, t, self.heads * self.d))

    def mlp(self, x):
        gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return self.w_down(F.silu(gate) * up)


class Llama(nn.Module):
    """Decoder with a static KV cache for `batch` sequences of up to `max_len` tokens."""

    def __init__(self, cfg: ModelConfig, *, batch: int, max_len: int, dtype: str = "fp32",
                 device: str = "cpu", attn: str = "auto", seed: int = 0):
        super().__init__()
        self.cfg, self.batch, self.max_len, self.attn = cfg, batch, max_len, attn
        torch.manual_seed(seed)
        if str(device).startswith("cuda"):
            torch.cuda.manual_seed_all(seed)
        # EFFICIENT and MATH refuse enable_gqa for dense inputs: expand K/V for them (and count it).
        repeat = attn in ("efficient", "math")
        # Built on the device in its dtype: an 8B model built on the CPU in fp32 first took four bytes
        # a parameter of host memory and a long wait per run.
        factory = {"device": device, "dtype": DTYPES[dtype]}
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden, **factory)
        self.blocks = nn.ModuleList(Block(cfg, repeat, **factory) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False, **factory)
        with torch.no_grad():
            for p in self.parameters():  # small weights keep bf16 activations finite over many layers
                if p.dim() > 1:
                    p.normal_(0.0, 0.02)
        # Graph-captured decode attends over the whole static cache. Flash attention takes no mask
        # (SDPA's flash backend refuses one: "No available kernel"), so under `flash` the graphed
        # step attends, unmasked, over all `max_len` cached positions: the work of a full cache,
        # recorded as such (the graphed steps' context is `max_len`). The other backends take the
        # causal mask.
        self.static_mask = attn != "flash"
        kv = (batch, cfg.kv_heads, max_len, cfg.d)
        self.k_cache = [torch.zeros(kv, device=device, dtype=DTYPES[dtype]) for _ in range(cfg.layers)]
        self.v_cache = [torch.zeros(kv, device=device, dtype=DTYPES[dtype]) for _ in range(cfg.layers)]
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.d, 2, device=device, dtype=torch.float32) / cfg.d))
        ang = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.cos, self.sin = ang.cos().to(DTYPES[dtype]), ang.sin().to(DTYPES[dtype])

    @torch.no_grad()
    def forward(self, tokens, pos, length: int | None = None, rec=None, static: bool = False):
        """Logits of the last position. `pos`: int64 tensor of the positions of `tokens`.

        `length` is the number of cached keys to attend over (prefill: the prompt; decode: the
        context so far). `static=True` attends over the whole cache with a mask instead, so the
        shapes do not change between steps (for CUDA graphs).
        """
        cos, sin = self.cos[pos], self.sin[pos]
        mask = None
        if static:
            length = self.max_len
            if self.static_mask:
                keys = torch.arange(self.max_len, device=pos.device)
                mask = (keys[None, :] <= pos[:, None])[None, None]  # [1, 1, T, max_len]
        with _scope(rec, "embed"):
            x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            with _layer_scope(rec, i):
                with _scope(rec, "attn"):
                    x = x + block.attention(x, cos, sin, self.k_cache[i], self.v_cache[i], pos, length, mask)
                with _scope(rec, "mlp"):
                    x = x + block.mlp(x)
        with _scope(rec, "head"):
            return self.head(self.norm(x[:, -1:]))

    def prefill(self, tokens, rec=None):
        t = tokens.shape[1]
        return self.forward(tokens, torch.arange(t, device=tokens.device), t, rec)

    def decode(self, tokens, position: int, rec=None):
        pos = torch.tensor([position], device=tokens.device)
        return self.forward(tokens, pos, position + 1, rec)


class GraphedDecode:
    """One decode step captured in a CUDA graph; `step` copies inputs in and replays it."""

    def __init__(self, model: Llama, warmup: int = 2):
        dev = model.cos.device
        self.model = model
        self.tokens = torch.zeros((model.batch, 1), dtype=torch.long, device=dev)
        self.pos = torch.zeros((1,), dtype=torch.long, device=dev)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                model.forward(self.tokens, self.pos, static=True)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = model.forward(self.tokens, self.pos, static=True)

    def step(self, tokens, position: int):
        self.tokens.copy_(tokens)
        self.pos.fill_(position)
        self.graph.replay()
        return self.logits
