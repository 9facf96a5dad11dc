"""Names cut to a width without cutting what tells them apart.

A table column at 80 columns holds ~30 characters of names that run to 100 or more. Cutting every
name at its end (`head…`) hides the tile size of two cuBLAS kernels
(`sm90_xmma_gemm_bf16bf16_..._tilesize128x64x64_...` and `..._tilesize64x64x64_...`) and shows two
rows alike; cutting at fixed places splits a token (`…8x64` beside `…28x64`). Here each long name
keeps its first token and the whole tokens in which it differs from the names most like it (its
neighbours in sorted order, forwards and backwards), elides the shared stretches with `…`, and
fills the rest of the width with the head and the context around the differences."""
from __future__ import annotations

import difflib
import re

ELLIPSIS = "…"
MAX_NAMES = 1000  # distinct long names cut word-wise; a table of more is cut at the head
# Words as a reader splits them: `tilesize`, `128`, `x`, `Sm`, `100`, `a`, `Kernel`, `E4m3` stays
# `E`, `4`, `m`, `3`; punctuation one character at a time.
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^A-Za-z0-9]")


def _tokens(name: str) -> list[str]:
    return _TOKEN.findall(name)


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _rivals(names: list[str], width: int) -> dict[str, set[str]]:
    """For each name, the names it could be taken for once cut: its neighbours in sorted order
    (forwards, and by reversed text for names that share an end) with which it shares a start or
    an end of half the width or more. A name whose start differs within the width is told apart
    by its head."""
    out: dict[str, set[str]] = {n: set() for n in names}
    for order, flip in ((sorted(names), False), (sorted(names, key=lambda n: n[::-1]), True)):
        for a, b in zip(order, order[1:]):
            shared = _common(a[::-1], b[::-1]) if flip else _common(a, b)
            if shared >= width // 2:
                out[a].add(b)
                out[b].add(a)
    return out


def _differing(tokens: list[str], other: list[str]) -> set[int]:
    """Indices of `tokens` that differ from `other` (an insertion marks the token before it)."""
    marked: set[int] = set()
    # the shared start and end first (most of two similar names), then a diff of the middle
    p, n = 0, min(len(tokens), len(other))
    while p < n and tokens[p] == other[p]:
        p += 1
    s = 0
    while s < n - p and tokens[-1 - s] == other[-1 - s]:
        s += 1
    mid, omid = tokens[p:len(tokens) - s], other[p:len(other) - s]
    ops = difflib.SequenceMatcher(None, mid, omid, autojunk=False).get_opcodes() if mid and omid else \
        [("replace" if mid else "insert", 0, len(mid), 0, len(omid))]
    for tag, i1, i2, _j1, _j2 in ops:
        if tag == "equal":
            continue
        if i2 > i1:
            marked.update(range(p + i1, p + i2))
        else:  # `other` has tokens here that this name lacks: show where
            marked.add(max(0, p + i1 - 1))
    return marked


def _compose(tokens: list[str], shown: list[bool]) -> str:
    parts, gap = [], False
    for tok, on in zip(tokens, shown):
        if on:
            if gap:
                parts.append(ELLIPSIS)
            parts.append(tok)
            gap = False
        else:
            gap = True
    if gap:
        parts.append(ELLIPSIS)
    return "".join(parts)


class _Cut:
    """Which tokens of a name are shown, and the length of the text that makes: the shown tokens
    plus one `…` per run of hidden ones (token 0 is always shown, so no run leads)."""

    def __init__(self, tokens: list[str], width: int) -> None:
        self.tokens, self.width = tokens, width
        self.shown = [False] * len(tokens)
        self.shown[0] = True
        self.length = len(tokens[0]) + (1 if len(tokens) > 1 else 0)

    def add(self, i: int) -> bool:
        """Show token `i` if the text stays within the width."""
        if self.shown[i]:
            return False
        left_hidden = not self.shown[i - 1]
        right_hidden = i + 1 < len(self.tokens) and not self.shown[i + 1]
        runs = 1 if left_hidden and right_hidden else -1 if not left_hidden and not right_hidden else 0
        grown = self.length + len(self.tokens[i]) + runs
        if grown > self.width:
            return False
        self.shown[i], self.length = True, grown
        return True


def _fit_one(name: str, keep: set[int], width: int) -> str:
    tokens = _tokens(name)
    if len(tokens[0]) + 1 > width:  # the first word alone is too long: cut it
        return name[: width - 1] + ELLIPSIS
    cut = _Cut(tokens, width)
    for i in sorted(keep):  # the differences, earliest first, while they fit
        cut.add(i)
    for i in sorted(keep):  # a word of context before each
        if i > 0 and cut.shown[i]:
            cut.add(i - 1)
    i = 1
    while i < len(tokens) and (cut.shown[i] or cut.add(i)):  # the head, as far as it goes
        i += 1
    for i in range(1, len(tokens)):  # then words next to shown ones, left to right
        if not cut.shown[i] and (cut.shown[i - 1] or (i + 1 < len(tokens) and cut.shown[i + 1])):
            cut.add(i)
    return _compose(tokens, cut.shown)


def fit_apart(names: list[str], width: int) -> dict[str, str]:
    """Each name longer than `width` (characters) cut to at most `width`, keeping its first token
    and the whole tokens that tell it from the names most like it; `…` marks what was left out.
    Names that fit are not in the result."""
    names = list(dict.fromkeys(names))
    long = [n for n in names if len(n) > width]
    if not long or width < 5:
        return {}
    if len(long) > MAX_NAMES:  # (each name costs a search): past this, the plain head cut (the caller keeps rows apart)
        return {n: n[: width - 1] + ELLIPSIS for n in long}
    rivals = _rivals(names, width)
    out = {}
    for n in long:
        toks = _tokens(n)
        keep: set[int] = set()
        for r in rivals[n]:
            keep |= _differing(toks, _tokens(r))
        out[n] = _fit_one(n, keep, width)
    return out
