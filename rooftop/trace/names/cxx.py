"""C++ name structure: brackets, the parameter list, the return type, templates and their arguments, the
scope's components, read from a demangled name without a parser."""
from __future__ import annotations

import re


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
