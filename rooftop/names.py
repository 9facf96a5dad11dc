"""Readable kernel names, categories, and the phase/step/layer carried by an NVTX path.

Everything here is vectorised over pandas Series (the trace can hold a million rows): each DISTINCT
name is demangled, shortened and classified once. Scalar twins serve importers and tests.

- `demangle`: Itanium-mangled names (`_ZN7cutlass13device_kernel...`, what CUPTI reports for kernels
  launched through the driver API) become C++ names with LLVM's demangler (pycxxfilt).
  `rooftop.trace.to_table` applies it to every row, so every importer stores demangled names.
- `short_name`: a display name (`vectorized_elementwise_kernel<>`); `short_names` then makes the
  names of one trace unique: kernels that would share a display name get the template argument or
  text that tells them apart (`vectorized_elementwise_kernel<…CUDAFunctor_add<int>…>`).
- `category_of`: the category from the kernel's own name (its parameter list is never read: a
  GEMM's parameter types can name an attention struct, a copy kernel's a softmax functor).
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd

try:  # a missing or broken demangler must not take every command down: names then stay as stored
    from pycxxfilt import itanium_demangle as _itanium_demangle
except ImportError:  # pragma: no cover - exercised by tests/test_collect_ready.py in a subprocess
    _itanium_demangle = None

from .codes import categorical, first_rows

CATEGORIES = ("gemm", "attention", "norm", "elementwise", "reduction", "comm", "memory", "routing", "quantize",
              "other")

# --- demangling --------------------------------------------------------------------------------


def demangle(name: str | None) -> str | None:
    """The C++ name of an Itanium-mangled symbol; any other text (or a malformed symbol) unchanged."""
    if not isinstance(name, str) or not name.startswith(("_Z", "__Z")) or _itanium_demangle is None:
        return name
    try:
        return _itanium_demangle(name[1:] if name.startswith("__Z") else name) or name
    except ValueError:  # starts like a symbol but is not one (or was cut short): keep what the file says
        return name


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, distinct values); missing values get code -1. One hash pass over the rows."""
    codes, uniq = pd.factorize(values, use_na_sentinel=True)
    return codes, np.asarray(uniq, dtype=object)


def _take(labels: list, codes: np.ndarray, index) -> pd.Series:
    """Row values from per-distinct `labels` (code -1: missing)."""
    table = np.array(list(labels) + [None], dtype=object)
    return pd.Series(table[codes], index=index, dtype=object)


def demangle_all(names: pd.Series) -> pd.Series:
    """Vectorised `demangle`: only the distinct names that look mangled are demangled."""
    codes, uniq = _factorize(names)
    out = [demangle(n) if isinstance(n, str) else n for n in uniq]
    if all(o is n for o, n in zip(out, uniq)):
        return names
    return _take(out, codes, names.index)


# --- C++ name structure ------------------------------------------------------------------------

# Operator names whose symbols would otherwise read as brackets (`operator()`, `operator<`).
_OPERATORS = ("()", "[]", "<=>", "<<=", ">>=", "->*", "<<", ">>", "<=", ">=", "->", "==", "!=", "&&", "||", "++", "--",
              "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<", ">", "+", "-", "*", "/", "%", "^", "&", "|", "~",
              "!", "=", ",")
_OPEN, _CLOSE = "<({", ">)}"


def _no_structure(text: str) -> bool:
    """Whether `_scan` would see every character of `text` at depth 0: no brackets, no operator
    symbols or arrows (most names of ranges and runtime calls: `step=12`, `cudaLaunchKernel`)."""
    return not (_BRACKETS.search(text) or "operator" in text)


_BRACKETS = re.compile(r"[<>(){}]|->")


def _scan(text: str, brackets: str = "<({"):
    """Yield (index, char, depth) for each character of `text`; depth counts the enclosing pairs of
    `brackets` (<>, () and {} by default; a char's own opening bracket included). Operator symbols
    (`operator()`, `operator<`) and arrows (`->`) are text, not brackets: their depth is -1."""
    closers = "".join(_CLOSE[_OPEN.index(b)] for b in brackets)
    depth, i, n = 0, 0, len(text)
    while i < n:
        sym = None
        if text.startswith("operator", i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = i + len("operator")
            k += 1 if k < n and text[k] == " " else 0
            sym = next((s for s in _OPERATORS if text.startswith(s, k)), None)
            if sym is not None:
                sym = text[i:k + len(sym)]
        elif text.startswith("->", i):
            sym = "->"
        if sym:
            for c in sym:
                yield i, c, -1
                i += 1
            continue
        c = text[i]
        if c in brackets:
            depth += 1
        elif c in closers:
            depth = max(depth - 1, 0)
        yield i, c, depth
        i += 1


def _split_params(text: str) -> tuple[str, str]:
    """(callable, parameter list) of `ns::f<T>(int, X) const`; a name without one keeps it all.

    A parenthesised group counts as parameters only where it closes the name and follows the name
    directly: `Memcpy HtoD (Pinned -> Device)` has none."""
    t = text.rstrip()
    tail = ""
    for q in (" const", " volatile", " &&", " &"):
        if t.endswith(q):
            t, tail = t[: -len(q)].rstrip(), q + tail
    if not t.endswith(")"):
        return text.strip(), ""
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        c = t[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                if i == 0 or t[i - 1] == " " or t[i - 1] == "(":
                    return text.strip(), ""
                if t.endswith("operator()", 0, i + 2) and t[i:] == "()":
                    return text.strip(), ""  # the name itself is `...::operator()`
                return t[:i], t[i:] + tail
    return text.strip(), ""


def _strip_return(text: str) -> str:
    """The callable without its return type: `void f<T>` -> `f<T>`, and any other return type up
    to the last space outside brackets (`enable_if<!T7, void>::type kernel<...>` -> `kernel<...>`,
    as cuBLAS's GEMV kernels are named). `operator new` and conversion operators keep theirs."""
    if text.startswith("void "):
        return text[5:]
    # no brackets or operators: the last space is at the top level, no need to scan for it
    cut = text.rfind(" ") if _no_structure(text) else _last_top_level_space(text)
    if cut <= 0 or "operator" in text[max(0, cut - 9):cut + 10]:
        return text
    return text[cut + 1:]


def _last_top_level_space(text: str) -> int:
    cut = -1
    for i, c, depth in _scan(text):
        if c == " " and depth == 0:
            cut = i
    return cut


# GCC/LLVM and NVIDIA's (EDG) demanglers spell an anonymous namespace differently.
_ANONYMOUS = ("(anonymous namespace)", "<unnamed>")


def _components(text: str) -> list[str]:
    """`a::b<c::d>::e` -> ['a', 'b<c::d>', 'e'] (only the top-level `::`)."""
    parts = [text] if "::" not in text else _top_level_parts(text)  # (no `::`: nothing to scan for)
    return [p for p in parts if p and p not in _ANONYMOUS]


def _top_level_parts(text: str) -> list[str]:
    parts, start, prev = [], 0, -2
    for i, c, depth in _scan(text):
        if c == ":" and depth == 0 and prev == i - 1:
            parts.append(text[start:i - 1])
            start = i + 1
        if c == ":":
            prev = i
    parts.append(text[start:])
    return parts


def _strip_templates(text: str) -> str:
    """`kernel<4, F<int>>` -> `kernel<>`: template arguments go, parentheses and operators stay."""
    if "<" not in text and ">" not in text:
        return text
    out, angle = [], 0
    for _, c, depth in _scan(text, "<"):
        if depth < 0:
            if angle == 0:
                out.append(c)
        elif c == "<":
            if depth == 1:
                out.append("<>")
            angle = depth
        elif c == ">":
            angle = depth
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _template_args(text: str) -> list[str]:
    """Top-level template arguments of `name<a, b<c, d>>`: ['a', 'b<c, d>']."""
    args, cur, inside = [], [], False
    for _, c, depth in _scan(text):
        if depth < 0:
            if inside:
                cur.append(c)
            continue
        if not inside:
            if c == "<" and depth == 1:
                inside = True
            continue
        if depth == 0:
            break
        if c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if inside:
        args.append("".join(cur).strip())
    return [a for a in args if a]


# Lambdas of AT_DISPATCH macros: `f(...)::{lambda()#1}::operator()() const::{lambda(int)#1}` says
# `f()::{lambda(int)#1}`; namespaces say nothing that tells two kernels apart.
_DISPATCH_LAMBDA = re.compile(r"::\{lambda\([^{}]*?\)#\d+\}::operator\(\)\(\) const")
_NAMESPACE = re.compile(r"\(anonymous namespace\)::|<unnamed>::|(?<![\w>])[A-Za-z_]\w*::(?!\{|operator)")


def _plain(text: str) -> str:
    """A name without namespaces, dispatch lambdas and doubled spaces: `at::native::F<std::array<
    char*, 2ul> >` -> `F<array<char*, 2ul>>`."""
    prev = None
    while prev != text:
        prev, text = text, _DISPATCH_LAMBDA.sub("", text)
    prev = None
    while prev != text:
        prev, text = text, _NAMESPACE.sub("", text)
    return text.replace("> >", ">>").replace("> >", ">>")


def fit(text: str, width: int) -> str:
    """`text` cut to `width` characters in the middle (`head…tail`): the end of a kernel name often
    tells it apart (`..._quant_zeros_5`, `...Sm120<3>>`)."""
    if width < 2 or len(text) <= width:
        return text
    tail = (width - 1) * 2 // 5
    head = width - 1 - tail
    return text[:head] + "…" + text[len(text) - tail:]


# --- short names ------------------------------------------------------------------------------

_WRAPPERS = ("Kernel", "Kernel2", "device_kernel", "kernel", "generic_kernel")
# template arguments that name nothing: numbers, booleans, fundamental and CUDA vector/float types
_BUILTIN_ARG = re.compile(r"-?[\d.]+[a-zA-Z]*|true|false|(?:unsigned |signed |const )*(?:void|bool|char|short|int|long"
                          r"(?: long)?|float|double|half|size_t|u?int\d+_t|__nv_\w+|__half\w*|c10::\w+)[ *&]*")
SHORT_LIMIT = 80


def short_name(name: str | None, limit: int = SHORT_LIMIT) -> str | None:
    """A readable name for tables: return type, parameter list, template arguments and namespaces
    elided, so `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` becomes
    `vectorized_elementwise_kernel<>`. Wrapper kernels whose meaning is their template argument
    (cutlass `Kernel2<...gemm...>`, `device_kernel<flash::...>`) keep that argument's own name.
    A long name is cut at `limit` characters. Mangled names are demangled first.

    Not unique by itself: two instantiations of one template share it. `short_names` resolves that
    for the names of one trace.
    """
    if name is None:
        return None
    full = demangle(name.strip())
    text, params = _split_params(full)
    if params:  # only a function has a return type; `Memcpy HtoD (Pinned -> Device)` keeps its words
        text = _strip_return(text)
    comps = _components(text) or [text]
    last = len(comps) - 1
    # `F<...>::operator()` or `f()::{lambda(int)#1}`: the named part is the one before.
    while last > 0 and comps[last].startswith(("{lambda", "{unnamed", "operator")):
        last -= 1
    base = _strip_templates(comps[last])
    if last < len(comps) - 1:
        base += "::" + _strip_templates(comps[-1])
    stem = base[:-2] if base.endswith("<>") else None
    if stem in _WRAPPERS:
        args = _template_args(comps[last])
        # the first argument with a name of its own: `kernel<int, int, __nv_bfloat16, ..., 7,
        # cublasGemvParamsEx<...>>` says `kernel<cublasGemvParamsEx>`, not `kernel<int>`
        named = [a for a in args if not _BUILTIN_ARG.fullmatch(a)]
        if named:
            args = named
        if args:
            inner = _components(_split_params(args[0])[0])
            head = _strip_templates(inner[-1]).removesuffix("<>") if inner else ""
            if head:
                base = f"{stem}<{head}>"
    base = base.strip() or full.strip()
    # The head carries a cuBLAS/CUTLASS name's tile and dtype; where two names differ only past
    # the cut, `unique_short_names` shows the difference.
    return base if len(base) <= limit else base[: limit - 1] + "…"


def _detail(name: str, level: int) -> str:
    """The text that tells kernels apart, from terse to whole: 0 = the name without namespaces and
    parameters, 1 = without parameters, 2 = all of it."""
    full = demangle(name.strip())
    if level >= 2:
        return full
    text = _split_params(_strip_return(full))[0]
    return text if level == 1 else _plain(text)


def _region(texts: list[str]) -> tuple[list[str], bool, bool]:
    """Where distinct texts differ: each one's differing middle (cut at token boundaries), and
    whether something common was left out before / after it."""
    first, last = min(texts), max(texts)
    p = 0
    while p < len(first) and first[p] == last[p]:
        p += 1
    while p > 0 and first[p - 1] not in "<,( _:":
        p -= 1
    s = 0
    shortest = min(len(t) for t in texts)
    while s < shortest - p and len({t[len(t) - 1 - s] for t in texts}) == 1:
        s += 1
    while s > 0 and texts[0][len(texts[0]) - s] not in ">,)_:":
        s -= 1
    out = []
    for t in texts:
        end = len(t) - s
        while end < len(t) and t[end] in ">)]}" and t.count("<", p, end) + t.count("(", p, end) > \
                t.count(">", p, end) + t.count(")", p, end):
            end += 1  # close what the stretch opened: `add<int>`, not `add<int`
        out.append(t[p:end].strip())
    return out, p > 0, s > 0


_REGION_WIDTH = 48
# A function inside a template argument (a dispatch lambda's enclosing function): its parameters
# repeat the kernel's and tell nothing apart.
_INNER_PARAMS = re.compile(r"([\w>])\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)(?=::)")


def _arg_text(arg: str) -> str:
    return _INNER_PARAMS.sub(r"\1()", arg)


def _pick_args(arglists: list[list[str]]) -> list[int] | None:
    """The fewest template-argument positions (greedy) whose values tell every list apart."""
    width = max(len(a) for a in arglists)
    rows = [a + [""] * (width - len(a)) for a in arglists]
    chosen: list[int] = []
    best = 1
    while best < len(rows):
        scores = [(len({tuple(r[j] for j in chosen + [i]) for r in rows}), -i) for i in range(width) if i not in chosen]
        if not scores:
            return None
        score, neg = max(scores)
        if score <= best:
            return None
        chosen.append(-neg)
        best = score
    return sorted(chosen)


def _disambiguate(label: str, names: list[str], depth: int = 0) -> dict[str, str]:
    """Unique labels for distinct `names` that share the display name `label`: the template
    arguments that differ (`kernel<…CUDAFunctor_add<int>…>`), else the differing text."""
    for level in (0, 1, 2):
        texts = [_detail(n, level) for n in names]
        if len(set(texts)) == len(texts):
            break
    else:  # names that differ only in surrounding blanks: nothing to show, the hash tag tells them apart
        return {n: label for n in names}
    out: dict[str, str] = {}
    arglists = [_template_args(t) for t in texts]
    wrapped = not label.endswith("<>") and label.endswith(">")
    if wrapped and all(len(a) == 1 for a in arglists):  # `device_kernel<GemmUniversal<...>>`: the inner one's
        arglists = [_template_args(a[0]) for a in arglists]
    picked = _pick_args(arglists) if depth == 0 and all(arglists) and label.endswith(">") else None
    if picked is not None:
        width = max(len(a) for a in arglists)
        shown_arg: dict[tuple[int, str], str] = {}
        for j in picked:  # a long argument: the stretch where the values differ
            values = sorted({_arg_text(a[j]) if j < len(a) else "" for a in arglists})
            if max(len(v) for v in values) <= _REGION_WIDTH or len(values) < 2:
                shown_arg.update({(j, v): v for v in values})
                continue
            regions, before, after = _region(values)
            for v, r in zip(values, regions):
                shown_arg[(j, v)] = ("…" if before else "") + fit(r, _REGION_WIDTH) + ("…" if after else "")
        for n, args in zip(names, arglists):
            parts, prev = [], -1
            for j in picked:
                if j > prev + 1:
                    parts.append("…")
                parts.append(shown_arg[(j, _arg_text(args[j]) if j < len(args) else "")])
                prev = j
            if prev < width - 1:
                parts.append("…")
            shown = re.sub("…+", "…", ", ".join(parts).replace("…, ", "…").replace(", …", "…"))
            out[n] = f"{label[:-1]}{shown}>" if label.endswith("<>") else f"{label[:-1]}<{shown}>>"
    else:
        regions, before, after = _region(texts)
        for n, r in zip(names, regions):
            shown = ("…" if before else "") + fit(r, _REGION_WIDTH) + ("…" if after else "")
            out[n] = f"{label} [{shown}]"
    if depth < 3:  # a cut argument can hide the difference: tell those apart by what still differs
        by_label: dict[str, list[str]] = {}
        for n, lab in out.items():
            by_label.setdefault(lab, []).append(n)
        for lab, group in by_label.items():
            if len(group) > 1:
                out.update(_disambiguate(lab, group, depth + 1))
    return out


def _tag(name: str) -> str:
    return hashlib.sha1(name.encode("utf-8", "replace")).hexdigest()


def unique_short_names(names, given: dict | None = None) -> dict[str, str]:
    """Display names for distinct `names` (mapping name -> display), unique: no two names share one.

    `given` holds display names a producer already chose; they are kept where unique."""
    names = [n for n in dict.fromkeys(names) if isinstance(n, str)]
    given = given or {}
    out = {n: given.get(n) if isinstance(given.get(n), str) else short_name(n) for n in names}
    groups: dict[str, list[str]] = {}
    for n, lab in out.items():
        groups.setdefault(lab, []).append(n)
    for lab, group in groups.items():
        if len(group) > 1:
            out.update(_disambiguate(lab, sorted(group)))
    # Whatever still collides (a region equal to another kernel's name): a stable tag from the name.
    seen: dict[str, list[str]] = {}
    for n, lab in out.items():
        seen.setdefault(lab, []).append(n)
    for lab, group in seen.items():
        if len(group) > 1:
            width = 6
            while len({_tag(n)[:width] for n in group}) < len(group):
                width += 2
            for n in group:
                out[n] = f"{lab} #{_tag(n)[:width]}"
    return out


def short_names(names: pd.Series, given: pd.Series | None = None) -> pd.Series:
    """Vectorised `short_name` (a categorical column), unique within `names`: each distinct name is
    shortened once, and two different names never share a display name (see `unique_short_names`)."""
    codes, uniq = _factorize(names)
    known: dict = {}
    if given is not None:
        _, first = np.unique(codes, return_index=True)
        firsts = given.astype(object).to_numpy()[first]
        known = {uniq[c]: g for c, g in zip(codes[first], firsts) if c >= 0 and isinstance(g, str)}
    mapping = unique_short_names(uniq, known)
    return pd.Series(categorical([mapping.get(n) for n in uniq], codes), index=names.index)


def whole_names(names: pd.Series, shorts: pd.Series) -> dict[str, str]:
    """short name -> whole name, for the display names that stand for exactly one name (machine
    outputs such as a CSV export carry whole names, never a cut one)."""
    pairs = pd.DataFrame({"s": shorts.astype(object), "n": names.astype(object)}).dropna().drop_duplicates()
    counts = pairs["s"].value_counts()
    one = pairs[pairs["s"].map(counts) == 1]
    return dict(zip(one["s"], one["n"]))


def with_whole_names(frame: pd.DataFrame, mapping: dict[str, str]) -> pd.DataFrame:
    """`frame` with every column of display names (all its values in `mapping`) holding the whole
    names instead: what a CSV export writes. Other columns (categories, phases) are left alone."""
    if not mapping or frame is None or frame.empty:
        return frame
    out = frame
    for col in frame.columns:
        values = frame[col]
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        known = values.dropna().astype(object)
        if len(known) and known.map(lambda v: isinstance(v, str) and v in mapping).all():
            out = out.copy() if out is frame else out
            out[col] = values.astype(object).map(lambda v: mapping.get(v, v) if isinstance(v, str) else v)
    return out


# --- categories --------------------------------------------------------------------------------

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


# --- NVTX paths: moved to rooftop.steps (kept importable from here) ----------------------------

from .steps import parse_path, parse_paths  # noqa: E402,F401
