"""Intervals nested per thread: which range encloses each launch, and the path of enclosing range
names ("outer/inner"), with the bounds that keep hostile nesting linear. Shared by the Kineto join
(annotations around launches) and the nsys reader (NVTX ranges), which is why it is its own module.
"""
from __future__ import annotations

import re

import numpy as np

from rooftop import limits, speedups


# A path is built by appending a label to its parent's: bounded so that hostile nesting (100k
# ranges inside each other, or a megabyte label above many children) stays linear in the number
# of ranges. Past either bound a range shares its parent's path with a "/…" mark, built once.
MAX_PATH_CHARS = 1024
MAX_PATH_DEPTH = 64


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(v) -> str:
    """A name as storable text: None -> "", lone surrogates -> U+FFFD, cut at the text budget."""
    if v is None:
        return ""
    cap = limits.max_text()
    if len(v) > cap:  # cut first: a 512 MiB name is scanned for its first 64 Ki characters only
        v = v[: cap - 1] + "…"
    if _SURROGATE.search(v):
        v = _SURROGATE.sub("\ufffd", v)
    return v


def _child_path(parent: int, up: str | None, depth: int, label: str | None,
                shared: dict) -> tuple[str | None, int, bool]:
    """The path and depth of an interval whose parent (-1: none) has path `up` at `depth`, and
    whether the bounds cut it: past `MAX_PATH_DEPTH` levels or `MAX_PATH_CHARS` characters a child
    shares its parent's `…/` path, built once (kept in `shared` under the parent)."""
    if parent < 0 or label is None:
        return (label if label is None or len(label) <= MAX_PATH_CHARS else label[:MAX_PATH_CHARS - 1] + "…"), 1, False
    if depth >= MAX_PATH_DEPTH or len(up) + 1 + len(label) > MAX_PATH_CHARS:
        path = shared.get(parent)
        if path is None:
            path = shared[parent] = up if up.endswith("/…") else f"{up}/…"
        return path, depth + 1, True  # shared: no per-child copy of a long parent path
    return f"{up}/{label}", depth + 1, False


def nest_intervals(ithr, ist, ien, ilabel, qthr, qt, stats: dict | None = None, query_paths: bool = True,
                   parents: list | None = None):
    """Nesting of intervals per thread, half-open [start, end).

    Returns (innermost interval index for each query or -1, path of each query, path of each
    interval), a path being the labels of the enclosing intervals, outermost first, joined by "/";
    the queries' paths only when `query_paths` (else None: a list per query, 1M at 1M kernels).
    Paths deeper than MAX_PATH_DEPTH or longer than MAX_PATH_CHARS end in "…" (counted in
    `stats["cut"]` when a dict is given). `parents`: a list that receives each interval's parent
    (index, -1: none), for a caller that builds the paths itself (nsys: once per distinct path).

    Each interval's parent is found for all at once (`_pass_parents`), and a Python pass over the
    intervals builds their paths (none without labels); a query (a launch: usually many more than
    ranges) takes the last interval that starts at or before it on its thread (a binary search) and
    climbs its parents to the first one still open, all queries at once. Same answers as one pass
    over both (`_nest_by_loop`), which is used when the climb is deep (hostile nesting)."""
    ni, nq = len(ist), len(qt)
    ithr, ist, ien = (np.asarray(a, dtype=np.int64) for a in (ithr, ist, ien))
    qthr, qt = np.asarray(qthr, dtype=np.int64), np.asarray(qt, dtype=np.int64)
    order = np.lexsort((-(ien - ist), ist, ithr))  # per thread, by start, the longer first
    # each interval's parent, as a stack pass in this order finds it (`_pass_parents`)
    at = _pass_parents(ithr[order], ist[order], ien[order])
    parent = np.full(ni, -1, dtype=np.int64)
    parent[order] = np.where(at >= 0, order[at.clip(0)], -1)
    if parents is not None:
        parents.append(parent)
    # paths in pass order, each from its parent's (`_child_path`, its common case inline); without
    # labels every path is None
    ipath: list = [None] * ni
    cut = 0
    by_level = _paths_by_level(parent, ilabel) if ilabel is not None else None
    if by_level is not None:
        ipath = by_level
    elif ilabel is not None:
        depth_l = [0] * ni
        shared: dict = {}
        for k, p in zip(order.tolist(), parent[order].tolist()):
            label = ilabel[k]
            if p >= 0 and label is not None:
                up, d = ipath[p], depth_l[p]
                if d < MAX_PATH_DEPTH and len(up) + 1 + len(label) <= MAX_PATH_CHARS:
                    ipath[k], depth_l[k] = f"{up}/{label}", d + 1
                    continue
            ipath[k], depth_l[k], was_cut = _child_path(p, ipath[p] if p >= 0 else None, depth_l[p] if p >= 0 else 0,
                                                        label, shared)
            cut += was_cut
    inner = np.full(nq, -1, dtype=np.int64)
    if ni and nq:
        # the last interval (in pass order) starting at or before each query on the query's thread
        s_thr, s_st = ithr[order], ist[order]
        qo = np.argsort(qthr, kind="stable")
        qs = qthr[qo]
        firsts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
        pos = np.full(nq, -1, dtype=np.int64)
        for qa, qb in zip(firsts.tolist(), np.r_[firsts[1:], nq].tolist()):  # per distinct thread
            h = qs[qa]
            a, b = np.searchsorted(s_thr, h, side="left"), np.searchsorted(s_thr, h, side="right")
            if a == b:
                continue
            sel = qo[qa:qb]
            p = np.searchsorted(s_st[a:b], qt[sel], side="right") - 1
            pos[sel] = np.where(p >= 0, a + p, -1)
        cand = np.where(pos >= 0, order[pos.clip(0)], -1)
        for _ in range(MAX_CLIMB):  # climb to the innermost interval still open at the query
            live = np.flatnonzero(cand >= 0)
            done = ien[cand[live]] > qt[live]
            if done.all():
                break
            up = live[~done]
            cand[up] = parent[cand[up]]
        else:
            return _nest_by_loop(ithr, ist, ien, ilabel, qthr, qt, stats)
        inner = cand
    if stats is not None:
        stats["cut"] = stats.get("cut", 0) + cut
    if not query_paths:
        return inner, None, ipath
    paths = np.array(ipath + [None], dtype=object)
    return inner, paths[inner].tolist(), ipath


MAX_CLIMB = 256  # vectorised steps up the parents before the one-pass fallback (hostile nesting)


def _paths_by_level(parent: np.ndarray, labels: list) -> list | None:
    """Each interval's path (its parent's, "/", its label), built a nesting level at a time, NumPy
    joining the texts of a whole level at once: what `nest_intervals`' pass builds one interval at
    a time (343k ranges in a 1M-kernel trace). None where any label is
    no text or the bounds would cut a path (deeper than MAX_PATH_DEPTH, longer than
    MAX_PATH_CHARS): the pass then handles the cuts."""
    n = len(parent)
    if not all(type(x) is str for x in labels):
        return None
    length = np.fromiter(map(len, labels), dtype=np.int64, count=n)
    level = np.where(parent < 0, 0, -1)
    todo = np.flatnonzero(level < 0)
    for depth in range(1, MAX_PATH_DEPTH):  # (a path of MAX_PATH_DEPTH levels would be cut)
        if not len(todo):
            break
        up = parent[todo]
        ready = level[up] >= 0
        level[todo[ready]] = depth
        length[todo[ready]] += length[up[ready]] + 1  # (parents are done: they are one level up)
        todo = todo[~ready]
    if len(todo) or (n and int(length.max()) > MAX_PATH_CHARS):
        return None
    paths = np.array(labels + [None], dtype=object)[:-1]  # (the None keeps it one-dimensional)
    by_level = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[by_level], np.arange(int(level.max(initial=0)) + 2))
    for lv in range(1, len(bounds) - 1):
        ks = by_level[bounds[lv]:bounds[lv + 1]]
        paths[ks] = paths[parent[ks]] + "/" + paths[ks]
    return paths.tolist()


def _pass_parents(thr: np.ndarray, st: np.ndarray, en: np.ndarray) -> np.ndarray:
    """For intervals in pass order (per thread, by start, the longer first): the position of each
    one's parent as a stack pass finds it (-1: none): the pass itself in C where it is built
    (`_nesting_fast`, O(n) with one stack), else `_parents_by_jumps`."""
    fast = _compiled()
    if fast is not None and len(st):
        arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (thr, st, en)]
        return np.frombuffer(fast.pass_parents(*arrays), dtype=np.int64)
    return _parents_by_jumps(thr, st, en)


def _compiled():
    """The compiled pass, or None where it is not built or `ROOFTOP_COMPILED=0` (read when used)."""
    if not speedups.on("COMPILED"):
        return None
    try:
        from collectors.readers import _nesting_fast
    except ImportError:  # not built (no C compiler at install): NumPy's jumps
        return None
    return _nesting_fast


def _parents_by_jumps(thr: np.ndarray, st: np.ndarray, en: np.ndarray) -> np.ndarray:
    """`_pass_parents` without the pass, in NumPy. The pass pops the top of
    its stack while it ends at or before the new start; the stack is always the previous
    interval's chain of parents, and an interval leaves it only once something starting later
    finds it ended, so every earlier interval still open at a start is on the stack, and the pass
    stops at the latest of them. The parent is therefore the last earlier interval of the same
    thread that ends after the start, nested properly or not: found for all at once by halving
    jumps over a table of running maxima of the ends (~20 vectorised steps for 344k ranges,
    instead of a stack push and pop per range)."""
    n = len(st)
    if n < 2:
        return np.full(n, -1, dtype=np.int64)
    lo = np.searchsorted(thr, thr, side="left")  # where each one's thread starts
    pos = np.arange(n, dtype=np.int64) - 1
    # table[L][i]: the latest end among positions i .. i + 2^L - 1
    table = [en]
    while (1 << len(table)) <= n:
        prev, half = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-half], prev[half:]))
    for level in range(len(table) - 1, -1, -1):
        width = 1 << level
        first = pos - width + 1
        ok = first >= lo
        block = table[level][np.where(ok, first, 0).clip(0, len(table[level]) - 1)]
        pos = np.where(ok & (block <= st), pos - width, pos)
    found = (pos >= lo) & (en[pos.clip(0)] > st)
    return np.where(found, pos, -1)


def _nest_by_loop(ithr, ist, ien, ilabel, qthr, qt, stats: dict | None = None):
    """`nest_intervals` as one pass over intervals and queries sorted together (ties: intervals
    first, longer first): what the vectorised query lookup must agree with, and its fallback."""
    ni, nq = len(ist), len(qt)
    thr = np.concatenate([ithr, qthr])
    t = np.concatenate([ist, qt])
    flag = np.concatenate([np.zeros(ni, np.int8), np.ones(nq, np.int8)])
    neg = np.concatenate([-(ien - ist), np.zeros(nq, np.int64)])
    order = np.lexsort((neg, flag, t, thr))
    inner = np.full(nq, -1, dtype=np.int64)
    qpath: list = [None] * nq
    ipath: list = [None] * ni
    stack: list = []  # [end, index, path, depth]
    shared: dict = {}
    cur = None
    cut = 0
    thr_l, t_l, ien_l = thr.tolist(), t.tolist(), ien.tolist()
    for k in order.tolist():
        if thr_l[k] != cur:
            cur, stack = thr_l[k], []
        now = t_l[k]
        while stack and stack[-1][0] <= now:
            stack.pop()
        if k < ni:
            top = stack[-1] if stack else (0, -1, None, 0)
            path, depth, was_cut = _child_path(top[1], top[2], top[3], ilabel[k] if ilabel is not None else None, shared)
            cut += was_cut
            ipath[k] = path
            stack.append([ien_l[k], k, path, depth])
        elif stack:
            q = k - ni
            inner[q] = stack[-1][1]
            qpath[q] = stack[-1][2]
    if stats is not None:
        stats["cut"] = stats.get("cut", 0) + cut
    return inner, qpath, ipath
