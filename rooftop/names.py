"""Readable kernel names, categories, and the phase/step/layer carried by an NVTX path.

Everything here is vectorised over pandas Series (the trace can hold a million rows) and has a
scalar twin for the places that handle one name at a time (importers, tests).
"""
from __future__ import annotations

import re

import pandas as pd

CATEGORIES = ("gemm", "attention", "norm", "elementwise", "reduction", "comm", "memory", "other")

# Order matters: the first pattern that matches wins. Attention before gemm, because
# flash/fmha kernel names also contain "gemm"-like tokens (cutlass, wgmma).
_CATEGORY_RULES: list[tuple[str, str]] = [
    ("comm", r"nccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv|broadcast"),
    ("attention", r"flash|fmha|attention|attn|sdpa|softmax|paged_attention|mha|xformers"),
    ("gemm", r"gemm|gemv|matmul|\bmm\b|aten::(?:mm|addmm|bmm|baddbmm|linear|matmul)|cublas|cutlass|"
             r"wgmma|sm\d\d_xmma|ampere_.*(?:h|s)\d+|splitk|nvjet|dot_?product|\blinear\b"),
    ("norm", r"norm"),
    ("memory", r"memcpy|memset|copy_?kernel|\bcopy_|aten::copy_|aten::cat|aten::index|cat_?array|"
               r"gather|scatter|embedding|aten::to\b|aten::contiguous|aten::clone|\bfill"),
    ("reduction", r"reduce|\bsum\b|\bmean\b|argmax|topk|sort|\bmax\b|\bmin\b|cumsum"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|silu|gelu|relu|\bmul\b|\badd\b|rope|"
                    r"rotary|act_and_mul|aten::(?:mul|add|sub|div|neg|exp|rsqrt|pow|sigmoid|tanh|where|"
                    r"silu|gelu|masked_fill|triu|tril)|triton_poi"),
]
_CATEGORY_RE = [(cat, re.compile(pat, re.IGNORECASE)) for cat, pat in _CATEGORY_RULES]


# Patterns only ever see this much of a name (some have a `.*`; an absurd name must stay cheap).
SCAN_CHARS = 4096


def category_of(name: str | None, op: str | None = None, kind: str | None = None) -> str:
    """Category of one event from its kernel name, falling back to the op that launched it."""
    if kind in ("memcpy", "memset"):
        return "memory"
    for text in (name, op):
        if not text:
            continue
        text = text[:SCAN_CHARS]
        for cat, rx in _CATEGORY_RE:
            if rx.search(text):
                return cat
    return "other"


def categorize(names: pd.Series, ops: pd.Series | None = None, kinds: pd.Series | None = None) -> pd.Series:
    """Vectorised `category_of`: classify each distinct (name, op, kind) once."""
    frame = pd.DataFrame({
        "n": names.astype(object),
        "o": (ops if ops is not None else pd.Series(None, index=names.index)).astype(object),
        "k": (kinds if kinds is not None else pd.Series(None, index=names.index)).astype(object),
    })
    keys = frame.drop_duplicates()
    cats = [category_of(n if isinstance(n, str) else None, o if isinstance(o, str) else None,
                        k if isinstance(k, str) else None) for n, o, k in keys.itertuples(index=False)]
    keys = keys.assign(c=cats)
    merged = frame.merge(keys, on=["n", "o", "k"], how="left")
    return pd.Series(merged["c"].to_numpy(), index=names.index)


def _strip_params(text: str) -> str:
    """`name(args) const` -> `name`: the balanced parenthesised tail, found by one scan from the
    end (a regex for it rescans the name from every `(`: quadratic on a hostile name)."""
    tail = text.rstrip()
    if tail.endswith("const"):
        tail = tail[:-5].rstrip()
    if not tail.endswith(")"):
        return text
    depth = 0
    for i in range(len(tail) - 1, -1, -1):
        c = tail[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return tail[:i]
    return text  # unbalanced: leave it


def _strip_templates(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<>")
            continue
        if ch == ">" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def short_name(name: str | None, limit: int = 80) -> str | None:
    """A readable name for tables: argument list, template arguments and namespaces elided.

    `void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)`
    becomes `Kernel2<>`, and `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` becomes
    `vectorized_elementwise_kernel<>`. Names that carry the useful part inside the template
    (cutlass `Kernel<...gemm...>`, `device_kernel<flash::...>`) keep the first template argument's
    own short name, so flash attention stays recognisable.
    """
    if name is None:
        return None
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _strip_params(text)
    base = _strip_templates(text)
    base = base.split("::")[-1] if "::" in base.replace("<>", "") else base
    # For wrapper kernels the interesting part is inside the template: keep its head.
    if base in ("Kernel<>", "Kernel2<>", "device_kernel<>", "kernel<>") and "<" in text:
        inner = text[text.index("<") + 1:]
        inner = re.split(r"[,<>(]", inner, maxsplit=1)[0].strip()
        inner = inner.split("::")[-1] if inner else inner
        if inner:
            base = f"{base[:-2]}<{inner}>"
    base = base.strip() or name.strip()
    if len(base) > limit:
        base = base[: limit - 1] + "…"
    return base


def short_names(names: pd.Series) -> pd.Series:
    """Vectorised `short_name` (each distinct name is shortened once)."""
    uniq = pd.unique(names.dropna())
    mapping = {n: short_name(n) for n in uniq}
    return names.map(mapping)


# --- NVTX paths -------------------------------------------------------------------------------

_STEP_RE = re.compile(r"(?:^|/)(?:step[=_# ]?|ProfilerStep#)(\d+)(?:/|$)")
_LAYER_RE = re.compile(r"(?:^|/)(?:layer|layers)[=_.# ]?(\d+)(?:/|$)")
_PHASE_RE = re.compile(r"(?:^|/)(prefill|decode)(?=/|$|[=_ ])", re.IGNORECASE)
# vLLM V1 names its model-runner step `execute_context_<n>(<tok>)_generation_<m>(<tok>)`.
_VLLM_RE = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
# SGLang's profiler labels forward passes with the forward mode.
_SGLANG_RE = re.compile(r"(?:forward_)?(extend|prefill|decode)(?:_batch)?\b", re.IGNORECASE)


def parse_path(path: str | None) -> tuple[str | None, int | None, int | None]:
    """(phase, step, layer) from a path like `decode/step=12/layer=3/attn`; None where absent."""
    if not path:
        return None, None, None
    if len(path) > SCAN_CHARS:  # cut at a separator, so a number is never cut short
        path = path[: path.rfind("/", 0, SCAN_CHARS) + 1 or SCAN_CHARS]
    phase = None
    m = _PHASE_RE.search(path)
    if m:
        phase = m.group(1).lower()
    else:
        v = _VLLM_RE.search(path)
        if v:
            n_ctx, n_gen = int(v.group(1)), int(v.group(3))
            phase = "prefill" if n_ctx > 0 else ("decode" if n_gen > 0 else None)
        else:
            s = _SGLANG_RE.search(path)
            if s:
                phase = "prefill" if s.group(1).lower() in ("extend", "prefill") else "decode"
    m = _STEP_RE.search(path)
    step = _int32(m.group(1)) if m else None
    m = _LAYER_RE.search(path)
    layer = _int32(m.group(1)) if m else None
    return phase, step, layer


def _int32(digits: str) -> int | None:
    """A step or layer number; one that does not fit the int32 column is not a number we can use."""
    v = int(digits[:12])
    return v if len(digits) <= 10 and v < 2**31 else None


def parse_paths(paths: pd.Series) -> pd.DataFrame:
    """Vectorised `parse_path` -> DataFrame(phase, step, layer) aligned with `paths`."""
    uniq = pd.unique(paths.dropna())
    parsed = {p: parse_path(p) for p in uniq}
    def col(i):
        return paths.map({p: v[i] for p, v in parsed.items()})
    return pd.DataFrame({
        "phase": col(0).astype(object),
        "step": pd.array(col(1), dtype="Int32"),
        "layer": pd.array(col(2), dtype="Int32"),
    }, index=paths.index)
