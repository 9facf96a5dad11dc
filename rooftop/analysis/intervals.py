"""Interval arithmetic over GPU rows, per group (a (rank, device) pair, a step of one): the union
of a set of rows, how much of a query interval it covers, and the stretches it leaves free.

Groups are laid end to end on one time axis (group g's times shifted by g x `stride`) so that every
operation is one sort and a few prefix sums over all groups at once, never a loop over rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def stride_for(start: np.ndarray, end: np.ndarray) -> int:
    """A shift larger than any time in the rows: group g lives in [g * stride, (g + 1) * stride)."""
    if not len(start):
        return 1
    lo = int(min(start.min(), 0))
    return int(end.max()) - lo + 1


@dataclass
class Union:
    """The union of intervals as disjoint sorted pieces [start, end) on the shifted axis, with
    `before[i]`: the covered time of pieces 0..i-1 (prefix sums for `covered`)."""

    start: np.ndarray
    end: np.ndarray
    before: np.ndarray

    @property
    def total(self) -> int:
        return int(self.before[-1] + (self.end[-1] - self.start[-1])) if len(self.start) else 0

    def covered_until(self, t: np.ndarray) -> np.ndarray:
        """Covered time of the union before each t."""
        t = np.asarray(t, dtype=np.int64)
        if not len(self.start):
            return np.zeros(len(t), dtype=np.int64)
        i = np.searchsorted(self.start, t, side="right") - 1
        k = i.clip(0)
        inside = np.minimum(t, self.end[k]) - self.start[k]
        return np.where(i >= 0, self.before[k] + np.maximum(inside, 0), 0)

    def covered(self, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """Covered time of the union inside each [t0, t1)."""
        return self.covered_until(t1) - self.covered_until(t0)

    def per_group(self, stride: int, n: int) -> np.ndarray:
        """Union length of each group 0..n-1."""
        g = self.start // stride
        return np.bincount(g, weights=(self.end - self.start).astype("float64"), minlength=n)[:n]


def union(start: np.ndarray, end: np.ndarray) -> Union:
    """The union of [start, end) (shifted times, any order)."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if not len(start):
        z = np.empty(0, np.int64)
        return Union(z, z, z)
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    # a new piece begins where a row starts after everything before it has ended
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    ps, pe = s[first], e[last]
    before = np.zeros(len(ps), dtype=np.int64)
    np.cumsum((pe - ps)[:-1], out=before[1:])
    return Union(ps, pe, before)


def free(u: Union, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stretches of each window [lo[w], hi[w]) that `u` leaves free: (start, end, window)."""
    # the candidate stretches: before the first piece, between pieces, after the last
    gs = np.concatenate([[np.iinfo(np.int64).min], u.end])
    ge = np.concatenate([u.start, [np.iinfo(np.int64).max]])
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    # stretches overlapping window w: those k with ge[k] > lo and gs[k] < hi (sorted: a range)
    a = np.searchsorted(ge, lo, side="right")
    b = np.searchsorted(gs, hi, side="left")
    count = np.maximum(b - a, 0)
    if not count.sum():
        z = np.empty(0, np.int64)
        return z, z, z
    w = np.repeat(np.arange(len(lo)), count)
    k = np.repeat(a, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    s = np.maximum(gs[k], lo[w])
    e = np.minimum(ge[k], hi[w])
    keep = e > s
    return s[keep], e[keep], w[keep]


KEYS = ("rank", "device", "phase", "step")  # a window: one step of one device of one rank


def windows(rows) -> tuple[np.ndarray, "object"]:
    """(window number per row, the windows' keys as a frame with `rank`, `device`, `phase`, `step`;
    -1 for a missing rank, device or step, the phase label "run" where none): the groups the
    interval sums are taken over. Every figure is per device (DESIGN: device is a dimension like
    rank), so a sum over devices or ranks is the caller's, and says so. Rows outside any step form
    one window per stretch between steps (a window spanning the steps would count their work as
    its idle)."""
    import pandas as pd
    n = len(rows)
    cols = {}
    for k in ("rank", "device", "step"):
        cols[k] = (rows[k].to_numpy(dtype="float64", na_value=np.nan) if k in rows.columns
                   else np.full(n, np.nan))
        cols[k] = np.where(np.isnan(cols[k]), -1, cols[k]).astype(np.int64)
    if "phase" in rows.columns:  # (through the column's codes: a categorical's are free)
        from rooftop.analysis.work import distinct_codes
        pcode, puniq = distinct_codes(rows["phase"])
        puniq = list(puniq)
        if "run" not in puniq:
            puniq.append("run")
        pcode = np.where(pcode >= 0, pcode, puniq.index("run")).astype(np.int64)
    else:
        pcode, puniq = np.zeros(n, np.int64), ["run"]
    # the stretch of each row outside steps: rows of a (rank, device) in time order, numbered by
    # how many times the step changed before them
    seg = np.zeros(n, np.int64)
    outside = cols["step"] < 0
    if outside.any() and (~outside).any():
        start = rows["start_ns"].to_numpy(dtype=np.int64)
        order = np.lexsort((start, cols["device"], cols["rank"]))
        st, rk, dv = cols["step"][order], cols["rank"][order], cols["device"][order]
        change = np.ones(n, bool)
        change[1:] = (st[1:] != st[:-1]) | (rk[1:] != rk[:-1]) | (dv[1:] != dv[:-1])
        seg[order] = np.cumsum(change)
        seg[~outside] = 0
    r, d = cols["rank"] + 1, cols["device"] + 1
    # the step field: step + 1 in a step, 2**35 + the stretch outside steps (after every step)
    field = np.where(outside, (1 << 35) + seg, cols["step"] + 1)
    if n and (r.max() >= 1 << 11 or d.max() >= 1 << 8 or len(puniq) >= 1 << 8 or field.max() >= 1 << 36
              or min(r.min(), d.min(), field.min()) < 0):  # (numbers too wide to pack: grouped by pandas)
        frame = pd.DataFrame({"rank": cols["rank"], "device": cols["device"], "p": pcode, "f": field})
        g = frame.groupby(["rank", "device", "p", "f"], sort=True)
        gid = g.ngroup().to_numpy(dtype=np.int64)
        first = frame.iloc[np.unique(gid, return_index=True)[1]]
        uniq = np.stack([first["rank"], first["device"], first["p"], first["f"]], axis=1).astype(np.int64)
    else:
        # one int64 per row, ordered as (rank, device, phase, step): a 1-D unique, not a group-by
        key = (r << 52) | (d << 44) | (pcode.astype(np.int64) << 36) | field
        ukey, gid = np.unique(key, return_inverse=True)
        uniq = np.stack([(ukey >> 52) - 1, ((ukey >> 44) & 0xFF) - 1, (ukey >> 36) & 0xFF,
                         ukey & ((1 << 36) - 1)], axis=1)
    gid = np.asarray(gid, dtype=np.int64).reshape(-1)
    f = uniq[:, 3] if len(uniq) else np.empty(0, np.int64)
    keys = pd.DataFrame({"rank": uniq[:, 0], "device": uniq[:, 1],
                         "phase": np.asarray(puniq, dtype=object)[uniq[:, 2]] if len(uniq) else np.empty(0, object),
                         "step": np.where(f >= 1 << 35, -1, f - 1)})
    return gid, keys


def group_range(gid: np.ndarray, n: int, start: np.ndarray, end: np.ndarray,
                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per group 0..n-1: the first start and last end of its rows (under `mask`); a group without
    such rows gets (int64 max, int64 min)."""
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    if mask is not None:
        gid, start, end = gid[mask], start[mask], end[mask]
    if not len(gid):
        return lo, hi
    order = np.argsort(gid, kind="stable")
    g = gid[order]
    at = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    lo[g[at]] = np.minimum.reduceat(start[order], at)
    hi[g[at]] = np.maximum.reduceat(end[order], at)
    return lo, hi
