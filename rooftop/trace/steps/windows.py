"""GPU work -> steps: each step's window on the GPU clock, and every kernel, copy and memset given to
the window it starts in (work outside every window is not a step: it says where it ran)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.trace.steps.find import Steps, locate_on_threads


# The phase of GPU work outside every step window (its step is null): where it ran.
BEFORE_FIRST_STEP = "before first step"
BETWEEN_STEPS = "between steps"
AFTER_LAST_STEP = "after last step"
OUTSIDE_STEPS = (BEFORE_FIRST_STEP, BETWEEN_STEPS, AFTER_LAST_STEP)


def gpu_windows(steps: Steps, gpu_start: np.ndarray, gpu_end: np.ndarray, launch_thread: np.ndarray,
                launch_time: np.ndarray, spans: tuple | None = None) -> tuple[np.ndarray, np.ndarray, list]:
    """Each step's window on the GPU clock: the hull of its GPU annotation spans (`spans`: (step
    position, start, end) arrays) and of the GPU work launched inside its CPU range on its thread;
    start > end for a step with neither, unless no step has either: then the CPU ranges.
    Returns (start, end, how)."""
    n = len(steps)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    how = [None] * n
    if spans is not None and len(spans[0]):
        k, s, e = (np.asarray(a, dtype=np.int64) for a in spans)
        ok = k >= 0
        np.minimum.at(lo, k[ok], s[ok])
        np.maximum.at(hi, k[ok], e[ok])
        for i in np.unique(k[ok]).tolist():
            how[i] = "gpu annotation"
    launched = locate_on_threads(steps.thread, steps.start, steps.end, launch_thread, launch_time)
    # launched from a thread without step markers (autograd's backward thread, a communication
    # thread): the step whose CPU range was open then, on whatever thread
    other = np.flatnonzero((launched < 0) & ~np.isin(launch_thread, steps.thread))
    if len(other) and n:
        order = np.argsort(steps.start, kind="stable")
        cut = steps.end[order].copy()
        cut[:-1] = np.minimum(cut[:-1], steps.start[order][1:])
        zeros = np.zeros(n, np.int64)
        hit = locate_on_threads(zeros, steps.start[order], cut, np.zeros(len(other), np.int64), launch_time[other])
        launched[other[hit >= 0]] = order[hit[hit >= 0]]
    ok = launched >= 0
    if ok.any():
        before_lo, before_hi = lo.copy(), hi.copy()
        np.minimum.at(lo, launched[ok], gpu_start[ok])
        np.maximum.at(hi, launched[ok], gpu_end[ok])
        grew = np.flatnonzero((lo != before_lo) | (hi != before_hi))
        for i in grew.tolist():
            how[i] = "launches" if how[i] is None else "gpu annotation + launches"
    # no GPU work tied to any step (no launch records, no GPU spans): the CPU ranges, the only clock
    # there is. Never for some steps only: a CPU range would overlap the GPU windows of earlier steps,
    # which run behind the CPU, and take their kernels.
    if n and (lo > hi).all():
        lo, hi = steps.start.copy(), steps.end.copy()
        how = ["cpu range"] * n
    return lo, hi, how


def assign(win_start: np.ndarray, win_end: np.ndarray, index: np.ndarray, phases: list,
           t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """(step, phase) of each time `t` (a kernel's start): the window holding it, else null step and
    the outside-steps phase. Windows with start > end (no work) are skipped; overlapping windows are
    cut at the next window's start."""
    step, codes, labels = assign_codes(win_start, win_end, index, phases, t)
    return step, _texts(codes, labels)


def assign_codes(win_start: np.ndarray, win_end: np.ndarray, index: np.ndarray, phases: list,
                 t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray, list]:
    """`assign` with the phase as codes into a list of labels (-1: none), not a text per row."""
    t = np.asarray(t, dtype=np.int64)
    has = np.flatnonzero(win_start <= win_end)
    step = np.zeros(len(t), dtype=np.int64)
    null = np.ones(len(t), dtype=bool)
    codes = np.full(len(t), -1, dtype=np.int64)
    labels = list(phases) + list(OUTSIDE_STEPS)
    if not len(has) or not len(t):
        return pd.arrays.IntegerArray(step, null), codes, labels
    has = has[np.argsort(win_start[has], kind="stable")]
    s, e = win_start[has], win_end[has].copy()
    e[:-1] = np.minimum(e[:-1], s[1:])
    pos = np.searchsorted(s, t, side="right") - 1
    inside = (pos >= 0) & (t <= e[pos.clip(0)])
    # a window ends with its last kernel's end: a kernel starting there is not in it, unless the
    # window is that one zero-length kernel
    inside &= (t < e[pos.clip(0)]) | (s[pos.clip(0)] == e[pos.clip(0)])
    slot = has[pos[inside]]
    step[inside] = index[slot]
    null[inside] = False
    codes[inside] = slot
    out = ~inside
    before, between, after = (len(phases) + OUTSIDE_STEPS.index(p) for p in (BEFORE_FIRST_STEP, BETWEEN_STEPS, AFTER_LAST_STEP))
    codes[out] = np.where(t[out] < s[0], before, np.where(t[out] >= e.max(), after, between))
    return pd.arrays.IntegerArray(step, null), codes, labels


def assign_cpu(steps: Steps, thread: np.ndarray, t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """(step, phase) of CPU rows (ops of a CPU-only run, ranges) from the step's CPU range on their
    thread; rows outside every step get null for both (their path still says what it can)."""
    step, codes, labels = assign_cpu_codes(steps, thread, t)
    return step, _texts(codes, labels)


def assign_cpu_codes(steps: Steps, thread: np.ndarray, t: np.ndarray) -> tuple[pd.arrays.IntegerArray, np.ndarray, list]:
    """`assign_cpu` with the phase as codes into `steps.phase` (-1: none), not a text per row."""
    slot = locate_on_threads(steps.thread, steps.start, steps.end, np.asarray(thread, np.int64), np.asarray(t, np.int64))
    ok = slot >= 0
    step = np.where(ok, steps.index[slot.clip(0)] if len(steps) else 0, 0).astype(np.int64)
    return pd.arrays.IntegerArray(step, ~ok), np.where(ok, slot, -1).astype(np.int64), list(steps.phase)


def _texts(codes: np.ndarray, labels: list) -> np.ndarray:
    """Codes into labels (-1: None) as an object array of the labels themselves."""
    return np.array(list(labels) + [None], dtype=object)[codes] if len(codes) else np.full(0, None, dtype=object)


def attach_windows(steps: Steps, lo: np.ndarray, hi: np.ndarray, how: list, origin: int) -> list:
    """The `meta["steps"]` entries with each step's GPU window (ns from the trace origin) and how it
    was found."""
    out = []
    for e, a, b, h in zip(steps.entries, lo.tolist(), hi.tolist(), how):
        entry = dict(e)
        if a <= b:
            entry.update(gpu_start_ns=a - origin, gpu_end_ns=b - origin, window=h)
        out.append(entry)
    return out
