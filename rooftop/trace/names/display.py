"""Display names: `short_name` (`vectorized_elementwise_kernel<>`), made unique within one trace by
`short_names` (kernels that would share a display name get the template argument or text that tells
them apart: `vectorized_elementwise_kernel<…CUDAFunctor_add<int>…>`), the whole names back where the
screen has room, and `fit` (a name cut in the middle to a width)."""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd

from rooftop.trace.codes import categorical
from rooftop.trace.names.cxx import _components, _split_params, _strip_return, _strip_templates, _template_args
from rooftop.trace.names.demangling import demangle, _factorize


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
