"""Model shapes and how their weights are stored: the presets the collector builds and the analytic
model predicts, and the description `--model` gives (a preset or a Hugging Face `config.json`).

Pure data and arithmetic (no torch), so the core can count the bytes a step must move (model MBU)
and `collectors/` can build the same dense model in torch. Reading a `config.json` lives in
`rooftop.llm.config`; the per-step accounting in `rooftop.analysis.step_cost`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp32": 4, "float32": 4,
               "float": 4, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "tf32": 4}  # tf32 is stored as fp32


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    if not dtype:
        return default
    return DTYPE_BYTES.get(str(dtype).lower().replace("torch.", ""), default)


@dataclass(frozen=True)
class Precision:
    """How a weight matrix is stored: bits per parameter, block scales included, plus fixed bytes per
    tensor (a per-tensor fp32 scale). MXFP4: 4-bit values and one 8-bit (E8M0) scale per 32 values =
    4.25 bits. NVFP4: 4-bit values and one fp8 (E4M3) scale per 16 = 4.5 bits, plus one fp32 scale
    per tensor. FP8 with 128x128 blocks: one fp32 scale per 16,384 values."""

    name: str
    bits: float
    tensor_bytes: float = 0.0

    @property
    def bytes_per_param(self) -> float:
        return self.bits / 8

    def nbytes(self, params: float, tensors: float = 0.0) -> float:
        return params * self.bits / 8 + tensors * self.tensor_bytes


FORMATS: dict[str, Precision] = {
    "fp32": Precision("fp32", 32.0),
    "bf16": Precision("bf16", 16.0),
    "fp16": Precision("fp16", 16.0),
    "fp8": Precision("fp8", 8.0, 4.0),                            # per-tensor fp32 scale
    "fp8-block128": Precision("fp8-block128", 8.0 + 32 / (128 * 128)),  # fp32 scale per 128x128 block
    "int8": Precision("int8", 8.0, 4.0),
    "mxfp4": Precision("mxfp4", 4.0 + 8 / 32),
    "nvfp4": Precision("nvfp4", 4.0 + 8 / 16, 4.0),
}
_FORMAT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                   "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "e4m3": "fp8", "fp4": "nvfp4"}


def weight_format(name: str | None) -> Precision | None:
    """'torch.bfloat16' -> bf16, 'MXFP4' -> mxfp4; None when unknown."""
    if not name:
        return None
    key = str(name).strip().lower().replace("torch.", "")
    return FORMATS.get(_FORMAT_ALIASES.get(key, key))


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer: dense (Llama/Qwen/Mistral families, GQA, tied or untied
    embeddings) or mixture-of-experts (routed experts, shared experts, some dense layers)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int  # intermediate size of a dense MLP layer
    vocab: int
    head_dim: int | None = None
    tied_embeddings: bool = False
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    # Mixture of experts: E routed experts of FFN size `expert_ffn`, k per token; `shared_ffn` is the
    # summed intermediate size of the always-active shared expert(s); `dense_layers` lists the layer
    # indices that keep a dense MLP (all others are MoE when experts > 0).
    experts: int = 0
    experts_per_tok: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0
    shared_gate: bool = False  # qwen2-moe: a 1-output gate in front of the shared expert
    dense_layers: tuple[int, ...] = ()
    # Small parameters that change counts slightly, by family.
    qkv_bias: bool = False  # qwen2; gpt-oss (attention_bias)
    o_bias: bool = False
    mlp_bias: bool = False  # gpt-oss experts
    router_bias: bool = False
    qk_norm: bool = False  # qwen3: RMSNorm over head_dim on q and k
    attn_sinks: bool = False  # gpt-oss: one learned sink logit per head
    # Sliding-window attention: the window and the layers that use it (the others see everything).
    sliding_window: int = 0
    sliding_layers: tuple[int, ...] = ()

    @property
    def d(self) -> int:
        return self.head_dim or self.hidden // self.heads

    # --- parameter inventory: (matrix params, matrix tensors, small params) per instance ----------
    def attn_matrix_params(self) -> int:
        """q, k, v and o projections of one layer."""
        return self.hidden * self.d * (2 * self.heads + 2 * self.kv_heads)

    def attn_small_params(self) -> int:
        """Biases, q/k norms, sinks and the layer's two RMSNorm weights: kept at base precision."""
        qkv = (self.heads + 2 * self.kv_heads) * self.d if self.qkv_bias else 0
        o = self.hidden if self.o_bias else 0
        qk = 2 * self.d if self.qk_norm else 0
        sinks = self.heads if self.attn_sinks else 0
        return qkv + o + qk + sinks + 2 * self.hidden

    def mlp_params(self, ffn: int) -> int:
        """A SwiGLU MLP of intermediate size `ffn`: gate, up and down."""
        return 3 * self.hidden * ffn

    def expert_small_params(self) -> int:
        return 2 * self.expert_ffn + self.hidden if self.mlp_bias else 0

    def router_params(self) -> int:
        return self.hidden * self.experts + (self.experts if self.router_bias else 0) if self.experts else 0

    def shared_small_params(self) -> int:
        return self.hidden if self.shared_gate else 0

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def moe_layer_count(self) -> int:
        return self.layers - len(self.dense_layers) if self.moe else 0

    @property
    def dense_layer_count(self) -> int:
        return self.layers - self.moe_layer_count

    def layer_params(self) -> int:
        """Parameters of a dense layer: QKV + O + gate/up/down + norms (+ biases where the family has them)."""
        return self.attn_matrix_params() + self.attn_small_params() + self.mlp_params(self.ffn)

    def moe_layer_params(self) -> int:
        """Parameters of one MoE layer, every expert counted."""
        return (self.attn_matrix_params() + self.attn_small_params() + self.router_params()
                + self.experts * (self.mlp_params(self.expert_ffn) + self.expert_small_params())
                + self.mlp_params(self.shared_ffn) + self.shared_small_params())

    def params(self) -> int:
        emb = self.vocab * self.hidden
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return (self.dense_layer_count * self.layer_params() + self.moe_layer_count * self.moe_layer_params()
                + emb + head + self.hidden)

    def active_params(self) -> int:
        """Parameters one token uses (no embedding, which is a gather): k experts of each MoE layer."""
        moe = (self.attn_matrix_params() + self.attn_small_params() + self.router_params()
               + self.experts_per_tok * (self.mlp_params(self.expert_ffn) + self.expert_small_params())
               + self.mlp_params(self.shared_ffn) + self.shared_small_params()) if self.moe else 0
        return (self.dense_layer_count * self.layer_params() + self.moe_layer_count * moe
                + self.hidden + self.vocab * self.hidden)

    def decode_weight_bytes(self, dtype: str = "bf16") -> int:
        """Weight bytes one dense decode step must read: every layer, the final norm and the LM head.

        The input embedding is a gather of B rows, not a full read, so it is excluded; a tied
        LM head reads the same matrix once (docs/definitions.md). (For MoE, quantized weights
        and parallel ranks, see `rooftop.analysis.step_cost`.)
        """
        b = dtype_bytes(dtype)
        return b * (self.dense_layer_count * self.layer_params() + self.moe_layer_count * self.moe_layer_params()
                    + self.hidden + self.vocab * self.hidden)

    def kv_bytes_per_token(self, dtype: str = "bf16") -> int:
        """K and V for one token across all layers: 2 · layers · kv_heads · head_dim · bytes."""
        return 2 * self.layers * self.kv_heads * self.d * dtype_bytes(dtype)

    def to_meta(self, dtype: str | None = None) -> dict:
        doc = asdict(self)
        doc["head_dim"] = self.d
        doc["parameters"] = self.params()
        for key in ("dense_layers", "sliding_layers"):
            doc[key] = list(doc[key])
        if dtype:
            doc["dtype"] = dtype
        return doc

    @classmethod
    def from_meta(cls, doc: dict | None) -> "ModelConfig | None":
        """Rebuild a config from a trace's `model` metadata; None if the shapes are not all there."""
        if not doc:
            return None
        try:
            extra = {}
            for key in ("experts", "experts_per_tok", "expert_ffn", "shared_ffn", "sliding_window"):
                if doc.get(key):
                    extra[key] = int(doc[key])
            for key in ("shared_gate", "qkv_bias", "o_bias", "mlp_bias", "router_bias", "qk_norm", "attn_sinks"):
                if doc.get(key):
                    extra[key] = bool(doc[key])
            for key in ("dense_layers", "sliding_layers"):
                if doc.get(key):
                    extra[key] = tuple(int(i) for i in doc[key])
            return cls(name=str(doc.get("name") or "model"), layers=int(doc["layers"]), hidden=int(doc["hidden"]),
                       heads=int(doc["heads"]), kv_heads=int(doc.get("kv_heads") or doc["heads"]),
                       ffn=int(doc["ffn"]), vocab=int(doc["vocab"]), head_dim=int(doc["head_dim"]) if doc.get("head_dim") else None,
                       tied_embeddings=bool(doc.get("tied_embeddings", False)), **extra)
        except (KeyError, TypeError, ValueError):
            return None


# The parts of a model whose storage precision can differ (quantization converts the layers' linear
# weights; embeddings, norms, biases and the router stay at the checkpoint's base dtype).
QUANTIZABLE = ("attn", "mlp", "experts", "shared", "lm_head")


@dataclass(frozen=True)
class ModelSpec:
    """A model as the accounting needs it: shapes, how each part is stored, the KV cache dtype and
    how it is split across ranks (`tp` tensor-parallel, `ep` expert-parallel)."""

    config: ModelConfig
    base: Precision  # torch_dtype: embeddings, norms, biases, router, and whatever is not quantized
    quantized: Precision | None = None  # the format of the quantized linear weights, if any
    unquantized: frozenset = field(default_factory=frozenset)  # parts of QUANTIZABLE kept at `base`
    kv_dtype: str = "bf16"
    tp: int = 1
    ep: int = 1
    source: str = "preset"
    notes: tuple[str, ...] = ()

    def precision(self, part: str) -> Precision:
        if self.quantized is None or part not in QUANTIZABLE or part in self.unquantized:
            return self.base
        return self.quantized

    @property
    def kv_bytes(self) -> int:
        return dtype_bytes(self.kv_dtype)


PRESETS: dict[str, ModelConfig] = {
    # Runs in seconds on a laptop CPU; shapes chosen so every op still launches (GQA 4:1).
    "tiny": ModelConfig("tiny", layers=2, hidden=256, heads=8, kv_heads=2, ffn=688, vocab=1000),
    "small": ModelConfig("small", layers=4, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000),
    "llama3-1b": ModelConfig("llama3-1b", layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256,
                             head_dim=64, tied_embeddings=True),
    "llama2-7b": ModelConfig("llama2-7b", layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000,
                             rope_theta=10000.0),
    "llama3-8b": ModelConfig("llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256),
    "llama3-70b": ModelConfig("llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256),
}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})") from None
