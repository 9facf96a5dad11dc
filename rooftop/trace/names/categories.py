"""Kernel categories (`category_of`, vectorised as `categorize`): the first rule that matches the kernel's
own name (its parameter list is never read: a GEMM's parameter types can name an attention struct, a
copy kernel's a softmax functor), else the op that launched it."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rooftop.trace.codes import categorical, first_rows
from rooftop.trace.names.cxx import _split_params, _strip_return
from rooftop.trace.names.demangling import demangle, _factorize


CATEGORIES = ("gemm", "attention", "norm", "elementwise", "reduction", "comm", "memory", "routing", "quantize",
              "other")

# Order matters: the first rule that matches wins. Each rule reads the kernel's own name (template
# arguments included, parameter list never).
_CATEGORY_RULES: list[tuple[str, str]] = [
    # NCCL, vLLM's custom all-reduce, NVLS multimem, TensorRT-LLM/FlashInfer fused all-reduce, DeepEP.
    ("comm", r"nccl|cross_device_reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv|"
             r"multimem|lamport|userbuffers|nvshmem|deep_?ep::|(?:^|::)(?:intranode|internode(?:_ll)?)::"),
    # MoE expert routing: top-k gating, token/expert alignment and sorting, permutation, finalize.
    ("routing", r"topk_?gating|topk_?softmax|topk_?sigmoid|grouped_?topk|fused_?topk|moe_?topk|group_idx_and_topk|"
                r"moe_?align|align_block_size|count_and_sort_expert|sort_and_count_expert|expert_?(?:count|offset|map|"
                r"histogram|index)|moe_?(?:histogram|sum|permute|unpermute|gate|routing|fused_gate)|routing(?:indices|main|"
                r"kernel)|(?:^|::)routing::|finalize_?moe|finalizemoerouting|moe::dev::finalize|expand_?input_?rows|"
                r"compute_?(?:expert|problem_sizes|arg_sorts)|shuffle_?(?:input_?)?rows|(?:^|::|_)(?:un)?permute_?(?:tokens|rows)|moe_?softmax"),
    # KV-cache writes read like attention (`reshape_and_cache_flash`) but only copy (vLLM
    # csrc/cache_kernels.cu, FlashInfer page.cuh `AppendPagedKVCacheKernel`, Triton `store_kvcache_kernel`).
    ("memory", r"reshape_and_cache|concat_and_cache|copy_blocks|swap_blocks|kv_?cache_?(?:write|store|copy)|"
               r"set_kv_buffer|store_kv_?cache|append_?paged_?kv_?cache"),
    # Attention kernels only: flash (not FlashInfer's norm/sampling/rope), fmha, FlashInfer prefill/
    # decode, paged attention, xformers, cuDNN SDPA, TensorRT-LLM XQA/MMHA, MLA.
    ("attention", r"flash(?!infer)|fmha|attention|attn|sdpa|(?:batch|single)_?(?:prefill|decode)_?with|"
                  r"merge_?states?|mla_?(?:decode|prefill|attn)|flash_?mla|xformers|xqa|\bmmha|kernel_mha|"
                  r"(?:^|[^a-z])mha(?:[^a-z]|$)"),
    # Dense, grouped and block-scaled GEMMs in every precision: cuBLAS/cuBLASLt (sm90_xmma, ampere_*,
    # gemv), nvjet, CUTLASS (sm90/sm100/sm120, `Kernel2<...gemm...>`), TensorRT-LLM `bmm_*`, DeepGEMM,
    # Marlin/Machete, Triton `fused_moe_kernel` and Inductor `mm` templates.
    ("gemm", r"(?<!fb)gemm|gemv|matmul|scudnn|hcudnn|fprop|dgrad|wgrad|nvjet|cublas|cutlass|xmma|splitk|marlin|machete|fused_moe|moe_?(?:mm|gemm|wna16)|"
             r"(?:^|[^a-z])b?mm_|scaled_?mm|grouped_?mm|(?:^|[^a-z])(?:mm|addmm|bmm|baddbmm)(?:[^a-z]|$)|"
             r"ampere_.*(?:h|s)\d+|turing_|volta_|wvsplitk|dot_?product|\blinear\b"),
    # Quantize / convert: FP8/FP4/INT8 scaling and packing (vLLM `cvt_fp16_to_fp4`, `scaled_fp8_quant`).
    ("quantize", r"quant|cvt_|_to_fp[48]|to_nvfp4|to_mxfp|fp[48]_?(?:cast|convert|pack)|convert_?(?:fp|to_f|sf)|"
                 r"scale_?interleave"),
    # Random numbers (sampling) are elementwise work, not a norm (`normal_kernel`).
    ("elementwise", r"philox|curand|distribution_elementwise|\brandperm|random_|_random|exponential_kernel|"
                    r"uniform_kernel|normal_kernel|normal_and_transform|bernoulli"),
    # Norms, and Inductor's RMSNorm (`..._mean_mul_pow_rsqrt_...`).
    ("norm", r"norm|rsqrt.*mean|mean.*rsqrt"),
    ("memory", r"memcpy|memset|copy_?kernel|\bcopy_|catarray|cat_?array|gather|scatter|embedding|index_?select|"
               r"index_elementwise|\bfill|(?:^|_)copy(?:_|$)|page_indices|slot_mapping"),
    # A softmax outside attention (a sampler's, a classifier's) is a row reduction.
    ("reduction", r"reduce|reduction|\bsum\b|\bmean\b|argmax|argmin|topk|sort|\bmax\b|\bmin\b|cumsum|scan|softmax|"
                  r"triton_red_|triton_per_"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|activation|silu|gelu|relu|\bmul\b|\badd\b|rope|"
                    r"rotary|act_and_mul|aten::(?:mul|add|sub|div|neg|exp|rsqrt|pow|sigmoid|tanh|where|"
                    r"silu|gelu|masked_fill|triu|tril)|triton_poi"),
]
_CATEGORY_RE = [(cat, re.compile(pat, re.IGNORECASE)) for cat, pat in _CATEGORY_RULES]
# The same rules for ASCII text lowered first: the same matches (the patterns are lower case), and
# 2-3x faster than case-insensitive matching (a million-kernel trace holds ~7k distinct names)
assert all(pat == pat.lower() for _, pat in _CATEGORY_RULES)
_CATEGORY_RE_LOWER = [(cat, re.compile(pat)) for cat, pat in _CATEGORY_RULES]


def _own_name(name: str) -> str:
    """What a category is read from: the demangled name without return type and parameter list."""
    return _split_params(_strip_return(demangle(name.strip())))[0]
# Patterns only ever see this much of a name (some have a `.*`; an absurd name must stay cheap).
SCAN_CHARS = 4096


def category_of(name: str | None, op: str | None = None, kind: str | None = None) -> str:
    """Category of one event from its kernel name, falling back to the op that launched it.

    The op never makes a kernel `attention`: it names the layer, not what each of its kernels does
    (vLLM's `gdn_attention_core` launches a causal conv1d; an attention op launches KV-cache copies)."""
    return _category(name, op, kind, _first_rule)


def _category(name: str | None, op: str | None, kind: str | None, rule) -> str:
    """`category_of`, with `rule(text)` the first rule a text matches (None: none)."""
    if kind in ("memcpy", "memset"):
        return "memory"
    if name:
        cat = rule(name)
        if cat is not None:
            return cat
    if op:
        cat = rule(op)
        if cat is not None and not (cat == "attention" and name):
            return cat
    return "other"


def _first_rule(text: str) -> str | None:
    """The category of the first rule `text` (a kernel name or an op) matches, None if none does."""
    own = _own_name(text[:SCAN_CHARS])
    rules = _CATEGORY_RE
    if own.isascii():
        own, rules = own.lower(), _CATEGORY_RE_LOWER
    for cat, rx in rules:
        if rx.search(own):
            return cat
    return None


def categorize(names: pd.Series, ops: pd.Series | None = None, kinds: pd.Series | None = None) -> pd.Series:
    """Vectorised `category_of` (a categorical column): classify each distinct (name, op, kind) once."""
    parts = [_factorize(x) if x is not None else (np.full(len(names), -1), np.array([], dtype=object))
             for x in (names, ops, kinds)]
    key = np.zeros(len(names), dtype=np.int64)
    for codes, uniq in parts:  # one integer per (name, op, kind) combination
        key = key * (len(uniq) + 1) + (codes + 1)
    inverse, _ = pd.factorize(key)  # numbered by first appearance
    first = first_rows(inverse)

    def value(i: int, j: int):
        codes, uniq = parts[j]
        c = codes[i]
        return uniq[c] if c >= 0 and isinstance(uniq[c], str) else None

    rules: dict = {}  # each distinct name and op matched once, whatever it is paired with

    def rule(text: str) -> str | None:
        if text not in rules:
            rules[text] = _first_rule(text)
        return rules[text]
    cats = [_category(value(i, 0), value(i, 1), value(i, 2), rule) for i in first.tolist()]
    return pd.Series(categorical(cats, inverse), index=names.index)


def gpu_work_counts(events: pd.DataFrame) -> dict[str, int]:
    """How many kernels, memcpys and memsets a trace holds: a kernel count never includes copies."""
    if "kind" not in events.columns or events.empty:
        return {"kernel": 0, "memcpy": 0, "memset": 0}
    counts = events["kind"].value_counts()  # (a categorical's counted on its codes: no million strings)
    return {k: int(counts.get(k, 0)) for k in ("kernel", "memcpy", "memset")}
