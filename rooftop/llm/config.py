"""`--model CONFIG`: a preset name or a Hugging Face `config.json`, read into a `ModelSpec`.

Families read: llama, mistral, qwen2, qwen3 (dense, GQA, tied or untied embeddings, qwen2's q/k/v
biases, qwen3's q/k norms) and mixtral, qwen2_moe, qwen3_moe, gpt_oss (mixture of experts). Weight
precision comes from `torch_dtype` and `quantization_config` (fp8, MXFP4, NVFP4 via modelopt or
compressed-tensors), with the modules the checkpoint keeps unquantized. A field that would change the
count and that this reader does not model (MLA attention, linear-attention layers, an unknown
quantization) stops it with a one-line error naming the file and the field: a wrong byte count is
worse than none.
"""
from __future__ import annotations

import fnmatch
import json
import math
import re
from pathlib import Path
from typing import Any

from rooftop.llm.shapes import FORMATS, PRESETS, ModelConfig, ModelSpec, Precision, weight_format
from rooftop.trace import TraceError

DENSE = {"llama", "mistral", "qwen2", "qwen3"}
MOE = {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"}

# Fields whose meaning this reader does not model; each changes the bytes a step moves.
UNMODELED = {
    "kv_lora_rank": "multi-head latent attention (MLA)",
    "q_lora_rank": "multi-head latent attention (MLA)",
    "linear_num_value_heads": "linear-attention (gated delta net) layers",
    "linear_key_head_dim": "linear-attention (gated delta net) layers",
    "full_attention_interval": "hybrid linear/full attention layers",
    "cross_attention_layers": "cross-attention layers",
    "num_experts_per_tok_dense": "per-layer expert counts",
}

# What a quantized checkpoint's module names look like, one per part we count.
_MODULE_NAMES = {
    "attn": "model.layers.0.self_attn.q_proj",
    "mlp": "model.layers.0.mlp.gate_proj",
    "experts": "model.layers.0.mlp.experts.0.gate_proj",
    "shared": "model.layers.0.mlp.shared_expert.gate_proj",
    "lm_head": "lm_head",
}


class ConfigError(TraceError):
    """A model description that cannot be used: one line naming the file and the field."""


def load_spec(model: str, *, weight_dtype: str | None = None, kv_dtype: str | None = None,
              tp: int = 1, ep: int = 1) -> ModelSpec:
    """`--model` and its companions: a preset name, or a path to a `config.json`."""
    if tp < 1 or ep < 1:
        raise ConfigError(None, f"--tp and --ep must be at least 1 (got tp {tp}, ep {ep})")
    path = Path(model)
    if path.is_file() or path.suffix == ".json" or "/" in model:
        doc = _read_json(path)
        spec = spec_from_hf(doc, str(path), weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    elif model in PRESETS:
        base = _format_or_error(weight_dtype or "bf16", None, "--weight-dtype")
        quantized = None
        if base.bits < 16:  # a quantized preset: the layers' weights, embeddings and norms in bf16
            base, quantized = FORMATS["bf16"], base
        spec = ModelSpec(PRESETS[model], base=base, quantized=quantized, unquantized=frozenset({"lm_head"}),
                         kv_dtype=_kv(kv_dtype, base), source=f"preset {model}")
    else:
        raise ConfigError(model, "no such file, and not a preset", f"presets: {', '.join(PRESETS)}")
    return _with_ranks(spec, tp, ep)


def _read_json(path: Path) -> dict:
    """A config.json, within bounds: a regular file (never a FIFO, which would block, nor a device
    such as /dev/zero behind a link, which never ends) of at most `ROOFTOP_MAX_CONFIG_BYTES`,
    nested at most `MAX_CONFIG_DEPTH` levels, each number at most `MAX_CONFIG_DIGITS` digits and
    finite. Anything else is one line naming the file."""
    import os
    import stat

    from rooftop import limits

    budget = limits.max_config_bytes()
    try:
        st = os.stat(path)  # (follows links: what would be read)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(path, "not a regular file (a FIFO, a device, a directory or a socket)")
        if st.st_size > budget:
            raise ConfigError(path, limits.over_budget(f"size ({st.st_size:,} bytes)", limits.MAX_CONFIG_BYTES_ENV,
                                                       budget))
        # O_NONBLOCK: should the file have become a FIFO since the stat, opening it does not block
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ConfigError(path, "not a regular file (a FIFO, a device, a directory or a socket)")
            data = fh.read(budget + 1)
        if len(data) > budget:
            raise ConfigError(path, limits.over_budget("size", limits.MAX_CONFIG_BYTES_ENV, budget))
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(path, "no such file") from None
    except PermissionError:
        raise ConfigError(path, "permission denied") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    depth = _max_depth(text)
    if depth > limits.MAX_CONFIG_DEPTH:
        raise ConfigError(path, f"nested {depth:,} levels deep (at most {limits.MAX_CONFIG_DEPTH})")
    try:
        doc = json.loads(text, parse_int=_config_int, parse_float=_config_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(path, str(exc) if not isinstance(exc, RecursionError) else "nested too deep") from None
    if not isinstance(doc, dict):
        raise ConfigError(path, "not a config.json (the top level is not an object)")
    return doc


_BRACKETS = re.compile(r'[\[\]{}]|"(?:[^"\\]|\\.)*+"')


def _max_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text` (strings skipped), in one linear scan."""
    depth = top = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > top:
                top = depth
                if top > 1024:  # (enough to say it is too deep)
                    return top
        elif c in "]}":
            depth -= 1
    return top


def _config_int(text: str) -> int:
    from rooftop import limits

    digits = len(text.lstrip("-"))
    if digits > limits.MAX_CONFIG_DIGITS:
        raise ValueError(f"a number of {digits:,} digits (at most {limits.MAX_CONFIG_DIGITS})")
    return int(text)


def _config_float(text: str) -> float:
    from rooftop import limits

    if len(text) > 4 * limits.MAX_CONFIG_DIGITS:
        raise ValueError(f"a number of {len(text):,} characters")
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"the number {text[:40]} is out of range")
    return v


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _with_ranks(spec: ModelSpec, tp: int, ep: int) -> ModelSpec:
    from dataclasses import replace

    cfg = spec.config
    if ep > 1 and not cfg.moe:
        raise ConfigError(spec.source, f"--ep {ep}: the model has no experts")
    if ep > 1 and cfg.experts % ep:
        raise ConfigError(spec.source, f"--ep {ep} does not divide {cfg.experts} experts")
    if cfg.heads % tp:
        raise ConfigError(spec.source, f"--tp {tp} does not divide {cfg.heads} attention heads")
    return replace(spec, tp=tp, ep=ep)


def _kv(kv_dtype: str | None, base: Precision) -> str:
    if kv_dtype is None:
        return base.name if base.bits >= 16 else "bf16"
    if kv_dtype.lower().replace("torch.", "") not in ("bf16", "bfloat16", "fp16", "float16", "half", "fp32",
                                                       "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn",
                                                       "float8_e5m2", "int8"):
        raise ConfigError(None, f"--kv-dtype {kv_dtype!r}: unknown", "use bf16, fp16, fp8 or fp32")
    return {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(kv_dtype.lower(), kv_dtype.lower())


def _format_or_error(name: Any, path: str | None, what: str) -> Precision:
    fmt = weight_format(name) if isinstance(name, str) else None
    if fmt is None:
        raise ConfigError(path, f"{what} {name!r}: unknown weight precision", f"use one of {', '.join(FORMATS)}")
    return fmt


def spec_from_hf(doc: dict, path: str, *, weight_dtype: str | None = None, kv_dtype: str | None = None) -> ModelSpec:
    """A `ModelSpec` from a Hugging Face `config.json` document (raises ConfigError)."""
    notes = []
    if isinstance(doc.get("text_config"), dict):  # a vision-language checkpoint: its language model
        notes.append("the language model of a multimodal checkpoint (text_config); the vision tower is not counted")
        outer_q = doc.get("quantization_config")
        doc = {**doc["text_config"]}
        if outer_q is not None and "quantization_config" not in doc:
            doc["quantization_config"] = outer_q
    cfg = config_from_hf(doc, path)
    base_name = doc.get("torch_dtype", doc.get("dtype"))
    q = doc.get("quantization_config")
    if weight_dtype is not None:
        fmt = _format_or_error(weight_dtype, None, "--weight-dtype")
        if fmt.bits >= 16:  # unquantized: every weight at that precision
            base, quantized, unq = fmt, None, frozenset()
            notes.append(f"weights: --weight-dtype {fmt.name}")
        else:  # the layers' linear weights quantized; embeddings, norms, router, LM head at torch_dtype
            base = _format_or_error(base_name, path, "field 'torch_dtype'") if base_name is not None else FORMATS["bf16"]
            quantized, unq = fmt, frozenset({"lm_head"})
            notes.append(f"weights: --weight-dtype {fmt.name} for the layers' linear weights; embeddings, norms,"
                         f" router and LM head {base.name}")
    else:
        if base_name is None:
            raise ConfigError(path, "field 'torch_dtype' missing: the weights' precision is unknown",
                              "pass --weight-dtype")
        base = _format_or_error(base_name, path, "field 'torch_dtype'")
        quantized, unq = (None, frozenset()) if q is None else _quantization(q, path)
        if quantized is not None:
            kept = ", ".join(sorted(unq)) or "nothing"
            notes.append(f"weights: {quantized.name} ({quantized.bits:g} bits/param with scales) from"
                         f" quantization_config; kept at {base.name}: {kept}, embeddings, norms, biases, router")
    return ModelSpec(cfg, base=base, quantized=quantized, unquantized=unq, kv_dtype=_kv(kv_dtype, base),
                     source=f"config {path}", notes=tuple(notes))


def _int(doc: dict, key: str, path: str, default: Any = ..., allow_zero: bool = False) -> int:
    if key not in doc or doc[key] is None:
        if default is ...:
            raise ConfigError(path, f"field {key!r} missing")
        return default
    v = doc[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if allow_zero else 1):
        raise ConfigError(path, f"field {key!r}: {str(v)[:60]!r} is not a {'non-negative' if allow_zero else 'positive'}"
                                " integer")
    from rooftop import limits

    if v > limits.MAX_CONFIG_INT:  # a size or count beyond any model: 10^200 would only overflow later
        raise ConfigError(path, f"field {key!r}: {v:.3g} is out of range (at most 2^40)")
    return v


def config_from_hf(doc: dict, path: str) -> ModelConfig:
    mtype = doc.get("model_type")
    if not isinstance(mtype, str) or mtype not in DENSE | MOE:
        raise ConfigError(path, f"field 'model_type': {mtype!r} is not modeled",
                          f"supported: {', '.join(sorted(DENSE | MOE))}")
    for key, what in UNMODELED.items():
        if doc.get(key):
            raise ConfigError(path, f"field {key!r}: {what} are not modeled")
    layers = _int(doc, "num_hidden_layers", path)
    if layers > 100_000:  # per-layer tables below are built in memory
        raise ConfigError(path, f"field 'num_hidden_layers': {layers} is not a plausible layer count")
    hidden = _int(doc, "hidden_size", path)
    heads = _int(doc, "num_attention_heads", path)
    kv_heads = _int(doc, "num_key_value_heads", path, heads)
    head_dim = _int(doc, "head_dim", path, None)
    vocab = _int(doc, "vocab_size", path)
    if heads % kv_heads:
        raise ConfigError(path, f"field 'num_key_value_heads': {kv_heads} does not divide {heads} heads")
    if head_dim is None and hidden % heads:
        raise ConfigError(path, f"field 'head_dim' missing and hidden_size {hidden} is not a multiple of {heads} heads")
    tied = doc.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise ConfigError(path, f"field 'tie_word_embeddings': {tied!r} is not true or false")
    # rope_theta and the norm eps change no byte or FLOP count: not read
    kw: dict[str, Any] = dict(name=_name(doc, path, mtype), layers=layers, hidden=hidden, heads=heads,
                              kv_heads=kv_heads, head_dim=head_dim, vocab=vocab, tied_embeddings=tied)
    attention_bias = bool(doc.get("attention_bias", False))
    kw["qkv_bias"] = mtype in ("qwen2", "qwen2_moe") or attention_bias
    kw["o_bias"] = attention_bias
    kw["qk_norm"] = mtype in ("qwen3", "qwen3_moe")
    kw["attn_sinks"] = mtype == "gpt_oss"
    if doc.get("mlp_bias"):
        raise ConfigError(path, "field 'mlp_bias': MLP biases are not modeled")
    kw.update(_window(doc, mtype, layers, path))
    if mtype in DENSE:
        kw["ffn"] = _int(doc, "intermediate_size", path)
        return ModelConfig(**kw)
    return ModelConfig(**kw, **_experts(doc, mtype, layers, path))


def _name(doc: dict, path: str, mtype: str) -> str:
    if isinstance(doc.get("_name_or_path"), str) and doc["_name_or_path"]:
        return doc["_name_or_path"]
    p = Path(path)
    if p.name == "config.json":
        return p.parent.name or mtype
    return p.name.removesuffix(".json").removesuffix(".config") or mtype


def _experts(doc: dict, mtype: str, layers: int, path: str) -> dict:
    e_key = "num_local_experts" if "num_local_experts" in doc else "num_experts"
    experts = _int(doc, e_key, path)
    k = _int(doc, "num_experts_per_tok", path)
    if k > experts:
        raise ConfigError(path, f"field 'num_experts_per_tok': {k} is more than {experts} experts")
    out: dict[str, Any] = {"experts": experts, "experts_per_tok": k}
    if mtype in ("mixtral", "gpt_oss"):  # every layer is MoE; intermediate_size is an expert's
        out["expert_ffn"] = _int(doc, "intermediate_size", path)
        out["ffn"] = out["expert_ffn"]
        out["mlp_bias"] = out["router_bias"] = mtype == "gpt_oss"
        return out
    out["expert_ffn"] = _int(doc, "moe_intermediate_size", path)
    out["ffn"] = _int(doc, "intermediate_size", path, out["expert_ffn"])  # the dense layers' MLP, if any
    out["shared_ffn"] = _int(doc, "shared_expert_intermediate_size", path, 0, allow_zero=True)
    out["shared_gate"] = out["shared_ffn"] > 0
    if _int(doc, "n_shared_experts", path, 0, allow_zero=True):
        out["shared_ffn"] += doc["n_shared_experts"] * out["expert_ffn"]
    step = _int(doc, "decoder_sparse_step", path, 1)
    only = doc.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and 0 <= i < layers for i in only):
        raise ConfigError(path, f"field 'mlp_only_layers': {only!r} is not a list of layer indices")
    first = _int(doc, "first_k_dense_replace", path, 0, allow_zero=True)
    out["dense_layers"] = tuple(i for i in range(layers) if i in only or (i + 1) % step or i < first)
    return out


def _window(doc: dict, mtype: str, layers: int, path: str) -> dict:
    """Sliding-window layers: `layer_types` where the config lists them; gpt-oss alternates (sliding
    first); qwen2-family configs carry a window that only applies with `use_sliding_window`."""
    window = doc.get("sliding_window")
    types = doc.get("layer_types")
    if not window and types is None:
        return {}
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise ConfigError(path, f"field 'layer_types': not a list of {layers} layer kinds")
        other = [t for t in types if t not in ("full_attention", "sliding_attention")]
        if other:
            raise ConfigError(path, f"field 'layer_types': {other[0]!r} layers are not modeled")
        sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif mtype == "gpt_oss":
        sliding = tuple(range(0, layers, 2))
    elif mtype.startswith("qwen"):
        if not doc.get("use_sliding_window"):
            return {}
        start = _int(doc, "max_window_layers", path, 0, allow_zero=True)
        sliding = tuple(range(start, layers))
    else:
        sliding = tuple(range(layers))
    if not window or not sliding:
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or window > 2**40:
        raise ConfigError(path, f"field 'sliding_window': {str(window)[:60]!r} is not a positive integer (at most 2^40)")
    return {"sliding_window": window, "sliding_layers": sliding}


def _quantization(q: Any, path: str) -> tuple[Precision, frozenset]:
    """(format of the quantized weights, parts kept unquantized) from `quantization_config`."""
    if not isinstance(q, dict):
        raise ConfigError(path, "field 'quantization_config': not an object")
    method = str(q.get("quant_method") or "").lower()
    skip = q.get("modules_to_not_convert") or q.get("exclude_modules") or q.get("ignore") or []
    if method == "mxfp4":
        fmt = FORMATS["mxfp4"]
    elif method == "fp8":
        block = _block(q.get("weight_block_size"), path, "quantization_config.weight_block_size")
        fmt = FORMATS["fp8"] if not block else Precision(f"fp8-block{block[0]}x{block[1]}", 8.0 + 32 / (block[0] * block[1]))
    elif method == "modelopt":
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo") or "").upper()
        if algo not in ("NVFP4", "FP8"):
            raise ConfigError(path, f"field 'quantization_config.quant_algo': {algo or None!r} is not modeled",
                              "modeled: NVFP4, FP8")
        fmt = FORMATS[algo.lower()]
    elif method == "compressed-tensors":
        fmt = _compressed_tensors(q, path)
    else:
        raise ConfigError(path, f"field 'quantization_config.quant_method': {method or None!r} is not modeled",
                          "modeled: fp8, mxfp4, modelopt (NVFP4/FP8), compressed-tensors; or pass --weight-dtype")
    if not isinstance(skip, list) or not all(isinstance(s, str) for s in skip):
        raise ConfigError(path, "field 'quantization_config.modules_to_not_convert': not a list of module names")
    kept = _kept_parts(skip, path)
    kept.add("lm_head")  # quantizers keep the output embedding unless told otherwise
    return fmt, frozenset(kept)


def _block(block: Any, path: str, field: str) -> tuple[int, int] | None:
    """A scale block shape: None (no blocks) or two positive integers."""
    if not block:
        return None
    if (not isinstance(block, list) or len(block) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise ConfigError(path, f"field {field!r}: {block!r} is not two positive integers")
    return block[0], block[1]


def _compressed_tensors(q: dict, path: str) -> Precision:
    groups = q.get("config_groups") or {}
    weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
    weights = [w for w in weights if isinstance(w, dict)]
    if not weights:
        raise ConfigError(path, "field 'quantization_config.config_groups': no weight scheme")
    w = weights[0]
    bits, kind, group = w.get("num_bits"), w.get("type"), w.get("group_size")
    if bits == 4 and kind == "float" and group == 16:
        return FORMATS["nvfp4"]
    if bits == 4 and kind == "float" and group == 32:
        return FORMATS["mxfp4"]
    if bits == 8 and kind == "float":
        block = _block(w.get("block_structure"), path, "quantization_config.config_groups.weights.block_structure")
        return FORMATS["fp8"] if not block else Precision("fp8-block", 8.0 + 32 / (block[0] * block[1]))
    if bits in (4, 8) and kind == "int" and isinstance(group, int) and group > 0:
        return Precision(f"int{bits}-g{group}", bits + 16 / group)  # a bf16 scale per group
    raise ConfigError(path, f"field 'quantization_config.config_groups': weights {bits}-bit {kind} group {group}"
                      " are not modeled")


def _kept_parts(patterns: list[str], path: str) -> set[str]:
    """The parts (`_MODULE_NAMES`) that a checkpoint's exclusion list keeps unquantized. `re:`
    patterns (compressed-tensors) are validated and run by RE2, a linear-time engine (Arrow's:
    no backtracking, so `re:^([a-z._0-9]+)+!` costs what any pattern costs); the others are globs
    and substrings (fnmatch has no catastrophic backtracking since Python 3.9). Bounded: at most
    `MAX_CONFIG_PATTERNS` patterns of `MAX_CONFIG_PATTERN` characters."""
    from rooftop import limits

    if len(patterns) > limits.MAX_CONFIG_PATTERNS:
        raise ConfigError(path, f"field 'quantization_config.ignore': {len(patterns):,} patterns"
                                f" (at most {limits.MAX_CONFIG_PATTERNS:,})")
    names = list(_MODULE_NAMES.values())
    kept = set()
    for pat in patterns:
        if len(pat) > limits.MAX_CONFIG_PATTERN:
            raise ConfigError(path, f"field 'quantization_config.ignore': a pattern of {len(pat):,} characters"
                                    f" (at most {limits.MAX_CONFIG_PATTERN:,})")
        if pat.startswith("re:"):
            hits = _regex_hits(names, pat[3:], path)
        else:
            hits = [_matches(name, pat) for name in names]
        kept |= {part for part, hit in zip(_MODULE_NAMES, hits) if hit}
    return kept


def _regex_hits(names: list[str], regex: str, path: str) -> list[bool]:
    """Whether `regex` matches somewhere in each name (Python's `re.search`), by RE2 (Arrow's
    `match_substring_regex`): linear in the text. A pattern RE2 refuses (invalid, or a
    backreference or look-around, which no linear-time engine runs) is one line."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.match_substring_regex(pa.array(names), regex).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else "invalid"
        raise ConfigError(path, f"field 'quantization_config.ignore': the pattern re:{regex[:80]!r} is not a"
                                f" regular expression the linear-time engine (RE2) runs ({msg[:160]})") from None


def _matches(module: str, pattern: str) -> bool:
    """A module name against a checkpoint's exclusion entry: a glob over a dotted prefix, a
    substring (as Hugging Face quantizers test them), or `re:` + regex (compressed-tensors: run by
    RE2, see `_regex_hits`)."""
    if pattern.startswith("re:"):
        return _regex_hits([module], pattern[3:], "--model")[0]
    parts = module.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pattern) for p in prefixes) or pattern in module
