"""Finding the steps of one trace: the outermost markers of the best source present, else hand-written
ranges, Python frames or a repeated outermost range; numbered, with their `meta["steps"]` entries."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from rooftop.trace.steps.markers import (_PY_HF_FORWARD, _PY_HF_GENERATE, _PY_SGLANG, _PY_VLLM, RULES, WORKLOAD_KEYS, Marker, _int,
                      looks_like_step_marker, parse_marker)
from rooftop.trace.steps.paths import parse_path


@dataclass
class Steps:
    """The step occurrences of a trace, in time order (arrays aligned)."""

    thread: np.ndarray   # int64: the CPU thread of the marker
    start: np.ndarray    # int64 ns: CPU range
    end: np.ndarray
    row: np.ndarray      # int64: index of the marker among the importer's ranges (-1: a Python frame)
    phase: list
    index: np.ndarray    # int64
    entries: list        # the `meta["steps"]` entry of each
    warnings: list = field(default_factory=list)  # step-like names no parser read
    rule: str | None = None  # how the steps were found (`RULES`), None: no steps

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> "Steps":
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, [], z, [])


def outermost(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the intervals no other interval of the same thread encloses (ranges nest per thread).

    Sorted by (thread, start, longest first), an interval is enclosed iff an earlier one on its thread
    ends after it starts: a running max of the ends per thread, without the interval itself."""
    n = len(start)
    if not n:
        return np.zeros(0, bool)
    order = np.lexsort((-(end - start), start, thread))
    th, s, e = thread[order], start[order], end[order]
    run = pd.Series(e).groupby(th).cummax().to_numpy()
    prev = np.empty(n, dtype=np.int64)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    prev[np.r_[True, th[1:] != th[:-1]]] = np.iinfo(np.int64).min
    out = np.empty(n, bool)
    out[order] = s >= prev
    return out


def find_steps(names: Sequence, paths: Sequence, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
               py: tuple | None = None, user: re.Pattern | None = None,
               name_ids: tuple[np.ndarray, Sequence] | None = None, launches: tuple | None = None) -> Steps:
    """The step occurrences among ranges (annotations, NVTX) and, failing those, Python frames.

    `names`/`paths`: each range's own label and its path (enclosing labels joined by "/");
    `py`: (thread, start, end, names) of the Python frames kept (`wanted_python_frame`);
    `name_ids`: the labels again as (each range's index into a table, the table), where the
    importer has them so (then each distinct label is looked at once, never a row of them);
    `launches`: (thread, time) of the GPU work's launches: with them, failing every marker, a repeated
    outermost range that launched GPU work is a step (`_repeated_steps`)."""
    thread, start, end = (np.asarray(a, dtype=np.int64) for a in (thread, start, end))
    ids, marks, tier = _marker_tiers(names, name_ids, user)
    warnings = _unknown_markers(ids, marks, names, name_ids) if user is None else []
    out = Steps.empty()
    if len(tier) and tier.min() < _NO_TIER:
        idx = np.flatnonzero(tier == tier.min())
        if marks[ids[idx[0]]].source == "generic":
            idx = _generic_roots(idx, ids, marks, thread, start, end)
        else:
            idx = idx[outermost(thread[idx], start[idx], end[idx])]
        order = np.argsort(start[idx], kind="stable")
        idx = idx[order]
        chosen = [marks[i] for i in ids[idx].tolist()]
        phases = []
        for i, mk in zip(idx.tolist(), chosen):
            ph = mk.phase
            if ph is None and mk.source in ("recorder", "user", "generic"):
                ph = parse_path(paths[i])[0]  # the Recorder's `decode/step=3`, a loop's `DECODE_LOOP/step 3`
            phases.append(ph)
        out = _numbered(thread[idx], start[idx], end[idx], idx, phases, chosen, [names[i] for i in idx.tolist()])
    elif py is not None and user is None and len(py[1]):
        out = _python_steps(*py)
    if not len(out) and user is None and launches is not None:
        out = _repeated_steps(ids, names, name_ids, thread, start, end, launches)
    out.warnings = warnings
    if len(out):
        out.rule = RULES[out.entries[0]["source"]]
    return out


def _generic_roots(idx: np.ndarray, ids: np.ndarray, marks: dict, thread, start, end) -> np.ndarray:
    """Of hand-written step ranges, the steps: numbered ones (`DECODE_STEP_3`, `step 3`) outermost among
    themselves, and unnumbered ones (`prefill`, `decode`, `forward`) that hold no numbered one (a
    `decode` range around the numbered decode steps is their loop, not one step)."""
    numbered = np.array([marks[i].index is not None for i in ids[idx].tolist()], dtype=bool)
    num, plain = idx[numbered], idx[~numbered]
    num = num[outermost(thread[num], start[num], end[num])]
    plain = plain[outermost(thread[plain], start[plain], end[plain])]
    if len(num) and len(plain):
        holder = locate_on_threads(thread[plain], start[plain], end[plain], thread[num], start[num])
        plain = np.delete(plain, np.unique(holder[holder >= 0]))
    return np.concatenate([num, plain])


def _unknown_markers(ids: np.ndarray, marks: dict, names: Sequence, name_ids) -> list[str]:
    """One warning naming the step-like labels (`looks_like_step_marker`) no parser read."""
    table = name_ids[1] if name_ids is not None else None
    seen = []
    for i in np.unique(ids[ids >= 0]).tolist():
        if i in marks:
            continue
        label = table[i] if table is not None else None
        if label is None:
            label = names[int(np.flatnonzero(ids == i)[0])]
        if isinstance(label, str) and looks_like_step_marker(label):
            seen.append(label)
    if not seen:
        return []
    shown = ", ".join(repr(x[:80]) for x in seen[:3]) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "")
    return [f"{len(seen)} range name(s) look like step markers but match no known format: {shown} "
            "(pass --steps REGEX to use them)"]


# Ranges that are operators or module frames, not a loop body: never steps by repetition
_NOT_A_LOOP = re.compile(r"^(?:aten::|nn\.Module:|cuda|cu[A-Z]|nccl|c10d::|ProfilerStep#)|, op_id = \d+$|^\w+::")


def _repeated_steps(ids: np.ndarray, names: Sequence, name_ids, thread, start, end, launches: tuple) -> Steps:
    """Steps when no marker exists: the outermost ranges of one thread that launched GPU work and whose
    name, digits aside, repeats at least `REPEAT_MIN` times (`decode 0`, `decode 1`, ...; or one name again and again). Of several such
    names, the one with the most occurrences (then the most time). Operator ranges (`aten::`, emit_nvtx's
    `op_id =`) are never steps."""
    n = len(start)
    if n < REPEAT_MIN:
        return Steps.empty()
    table = name_ids[1] if name_ids is not None else pd.unique(np.asarray(names, dtype=object))
    if name_ids is None:
        ids, table = pd.factorize(np.asarray(names, dtype=object))
    key_of = {}
    for i in np.unique(ids[ids >= 0]).tolist():
        label = table[i]
        if isinstance(label, str) and label and not _NOT_A_LOOP.search(label):
            key_of[i] = _DIGITS.sub("#", label)
    if not key_of:
        return Steps.empty()
    keys = sorted(set(key_of.values()))
    kid = {k: j for j, k in enumerate(keys)}
    code = np.full(len(table) + 1, -1, dtype=np.int64)
    for i, k in key_of.items():
        code[i] = kid[k]
    rk = code[ids]
    top = outermost(thread, start, end)
    cand = np.flatnonzero(top & (rk >= 0))
    if len(cand) < REPEAT_MIN:
        return Steps.empty()
    # a step does GPU work: a range that launched none (a host-side pass, a compiler's) is no step
    hit = locate_on_threads(thread[cand], start[cand], end[cand], np.asarray(launches[0], np.int64),
                            np.asarray(launches[1], np.int64))
    cand = cand[np.unique(hit[hit >= 0])]
    if len(cand) < REPEAT_MIN:
        return Steps.empty()
    df = pd.DataFrame({"t": thread[cand], "k": rk[cand], "d": end[cand] - start[cand]})
    g = df.groupby(["t", "k"]).agg(n=("d", "size"), d=("d", "sum")).reset_index()
    g = g[g["n"] >= REPEAT_MIN]
    if g.empty:
        return Steps.empty()
    best = g.sort_values(["n", "d"], ascending=False).iloc[0]
    idx = cand[(df["t"].to_numpy() == best["t"]) & (df["k"].to_numpy() == best["k"])]
    idx = idx[np.argsort(start[idx], kind="stable")]
    labels = [table[i] for i in ids[idx].tolist()]
    marks = []
    for label in labels:
        m = _DIGITS.search(label)
        marks.append(Marker("repeated", None, _int(m.group()) if m and len(_DIGITS.findall(label)) == 1 else None))
    phases = [parse_path(label)[0] for label in labels]
    return _numbered(thread[idx], start[idx], end[idx], idx, phases, marks, labels)


REPEAT_MIN = 3
_DIGITS = re.compile(r"\d+")


_NO_TIER = np.iinfo(np.int64).max  # a range that is no step marker


def _marker_tiers(names: Sequence, name_ids: tuple[np.ndarray, Sequence] | None,
                  user: re.Pattern | None) -> tuple[np.ndarray, dict, np.ndarray]:
    """(each range's label as an index into a table of labels; each distinct label's marker by that
    index, for those that are markers; each range's marker tier, `_NO_TIER` where it is none)."""
    if name_ids is None:
        ids, table = pd.factorize(np.asarray(names, dtype=object))  # (a missing label: -1)
    else:
        ids, table = np.asarray(name_ids[0], dtype=np.int64), name_ids[1]
    marks = {}
    for i in np.unique(ids[ids >= 0]).tolist():
        label = table[i]
        m = parse_marker(label, user) if isinstance(label, str) else None
        if m is not None:
            marks[i] = m
    tier_of = np.full(len(table) + 1, _NO_TIER, dtype=np.int64)  # (the last: a missing label's, -1)
    for i, m in marks.items():
        tier_of[i] = m.tier
    return ids, marks, tier_of[ids]


def _numbered(thread, start, end, row, phases, marks, labels) -> Steps:
    """Indices: what the name says, else the occurrence's order (0-based, in time order)."""
    named = [m.index for m in marks]
    if all(i is not None for i in named) and len(set(zip(phases, named))) == len(named):
        index = np.array(named, dtype=np.int64)
    else:
        index = np.arange(len(marks), dtype=np.int64)
    entries = []
    for ph, i, m, label in zip(phases, index.tolist(), marks, labels):
        entry = {"phase": ph, "index": i, "marker": label, "source": m.source}
        entry.update({k: m.workload[k] for k in WORKLOAD_KEYS if m.workload.get(k) is not None})
        entries.append(entry)
    return Steps(np.asarray(thread, np.int64), np.asarray(start, np.int64), np.asarray(end, np.int64),
                 np.asarray(row, np.int64), phases, index, entries)


def _python_steps(thread, start, end, names) -> Steps:
    thread, start, end = (np.asarray(a, dtype=np.int64) for a in (thread, start, end))
    names = list(names)
    kinds = {n: ("vllm" if _PY_VLLM.search(n) else "sglang" if _PY_SGLANG.search(n) else
                 "generate" if _PY_HF_GENERATE.search(n) else "forward" if _PY_HF_FORWARD.search(n) else None)
             for n in set(names) if isinstance(n, str)}
    kind = np.array([kinds.get(n) for n in names], dtype=object)
    for engine in ("vllm", "sglang"):
        idx = np.flatnonzero(kind == engine)
        if len(idx):
            idx = idx[outermost(thread[idx], start[idx], end[idx])]
            idx = idx[np.argsort(start[idx], kind="stable")]
            marks, phases = [], []
            for i in idx.tolist():
                m = _PY_SGLANG.search(names[i]) if engine == "sglang" else None
                ph = None if m is None else ("prefill" if m.group(1) == "extend" else "decode")
                phases.append(ph)
                marks.append(Marker("python", ph))
            return _numbered(thread[idx], start[idx], end[idx], np.full(len(idx), -1), phases, marks,
                             [names[i] for i in idx.tolist()])
    gen, fwd = np.flatnonzero(kind == "generate"), np.flatnonzero(kind == "forward")
    if not len(gen) or not len(fwd):
        return Steps.empty()
    # Hugging Face: each outermost model forward inside a generate call is one step
    gen = gen[outermost(thread[gen], start[gen], end[gen])]
    fwd = fwd[outermost(thread[fwd], start[fwd], end[fwd])]
    owner = locate_on_threads(thread[gen], start[gen], end[gen], thread[fwd], start[fwd])
    fwd, owner = fwd[owner >= 0], owner[owner >= 0]
    order = np.lexsort((start[fwd], owner))
    fwd, owner = fwd[order], owner[order]
    first = np.r_[True, owner[1:] != owner[:-1]] if len(owner) else np.zeros(0, bool)
    phases = ["prefill" if f else "decode" for f in first.tolist()]
    order = np.argsort(start[fwd], kind="stable")
    fwd = fwd[order]
    phases = [phases[i] for i in order.tolist()]
    marks = [Marker("python", p) for p in phases]
    return _numbered(thread[fwd], start[fwd], end[fwd], np.full(len(fwd), -1), phases, marks,
                     [names[i] for i in fwd.tolist()])


def locate_on_threads(wthread: np.ndarray, wstart: np.ndarray, wend: np.ndarray,
                      qthread: np.ndarray, qtime: np.ndarray) -> np.ndarray:
    """For each query (thread, time): the window of that thread holding it, or -1. The windows of
    one thread must not overlap (outermost markers). A loop over distinct threads only."""
    out = np.full(len(qtime), -1, dtype=np.int64)
    if not len(wstart) or not len(qtime):
        return out
    for th in np.unique(wthread):
        w = np.flatnonzero(wthread == th)
        w = w[np.argsort(wstart[w], kind="stable")]
        q = np.flatnonzero(qthread == th)
        if not len(q):
            continue
        pos = np.searchsorted(wstart[w], qtime[q], side="right") - 1
        ok = (pos >= 0) & (qtime[q] < wend[w][pos.clip(0)])
        out[q[ok]] = w[pos[ok]]
    return out
