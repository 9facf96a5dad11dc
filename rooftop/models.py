"""Llama-style model shapes: the presets the collector builds and the analytic model predicts.

Pure data and arithmetic (no torch), so the core can compute parameter and KV-cache bytes for
Databricks' model MBU, and `collectors/` can build the same model in torch.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp32": 4, "float32": 4,
               "float": 4, "fp8": 1, "float8_e4m3fn": 1, "int8": 1, "tf32": 4}  # tf32 is stored as fp32


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    if not dtype:
        return default
    return DTYPE_BYTES.get(str(dtype).lower().replace("torch.", ""), default)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    head_dim: int | None = None
    tied_embeddings: bool = False
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5

    @property
    def d(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def layer_params(self) -> int:
        """QKV + O + gate/up/down + two RMSNorm weights."""
        h, d = self.hidden, self.d
        return h * d * (2 * self.heads + 2 * self.kv_heads) + 3 * h * self.ffn + 2 * h

    def params(self) -> int:
        emb = self.vocab * self.hidden
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.layers * self.layer_params() + emb + head + self.hidden

    def decode_weight_bytes(self, dtype: str = "bf16") -> int:
        """Weight bytes one decode step must read: every layer, the final norm and the LM head.

        The input embedding is a gather of B rows, not a full read, so it is excluded; a tied
        LM head reads the same matrix once (reference/roofline.md, 1.3).
        """
        b = dtype_bytes(dtype)
        return b * (self.layers * self.layer_params() + self.hidden + self.vocab * self.hidden)

    def kv_bytes_per_token(self, dtype: str = "bf16") -> int:
        """K and V for one token across all layers: 2 · layers · kv_heads · head_dim · bytes."""
        return 2 * self.layers * self.kv_heads * self.d * dtype_bytes(dtype)

    def to_meta(self, dtype: str | None = None) -> dict:
        doc = asdict(self)
        doc["head_dim"] = self.d
        doc["parameters"] = self.params()
        if dtype:
            doc["dtype"] = dtype
        return doc

    @classmethod
    def from_meta(cls, doc: dict | None) -> "ModelConfig | None":
        """Rebuild a config from a trace's `model` metadata; None if the shapes are not all there."""
        if not doc:
            return None
        try:
            return cls(name=str(doc.get("name") or "model"), layers=int(doc["layers"]), hidden=int(doc["hidden"]),
                       heads=int(doc["heads"]), kv_heads=int(doc.get("kv_heads") or doc["heads"]),
                       ffn=int(doc["ffn"]), vocab=int(doc["vocab"]), head_dim=int(doc["head_dim"]) if doc.get("head_dim") else None,
                       tied_embeddings=bool(doc.get("tied_embeddings", False)))
        except (KeyError, TypeError, ValueError):
            return None


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
