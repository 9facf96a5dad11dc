"""The timeline: lanes (one per CUDA stream, one per launching host thread), idle gaps, and what
the host was doing during a gap. Pure functions of the rows, vectorised; the screen only asks.

Definitions (the same words as the Timeline screen):
- a **lane** is the rows of one (device, stream) for the GPU, or the CUDA runtime calls of one host
  thread, sorted by start;
- a **gap** is a stretch where no GPU row (kernel, memcpy, memset) of the given rows is running on
  any stream: from the end of the last row running before it to the start of the next row;
- **launch-to-start** of a kernel is its start minus the start of the runtime call with the same
  `correlation` (cudaLaunchKernel, cudaGraphLaunch, ...): how long it was queued after the host
  asked for it. A kernel launched after the GPU went idle was waiting on the host.

Drawing asks one question per screen line: how busy each column's time slice was, and with what
(`Lane.raster`). It costs O(columns x log rows) whatever the zoom, through the lane's busy time
prefix sums, so a 1M-kernel lane draws as fast as a 100-kernel one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rooftop.trace.names import CATEGORIES
from rooftop.trace.schema import HOST_COLUMNS
# The host side lives in .host; the screen reads it through this module (one place to ask).
from rooftop.analysis.host import (HOST_CATEGORIES, HostActivity, HostCall, LaunchIndex, host_category,
                   host_during, int_column, launch_of, launch_to_start, launching_threads, runtime_rows)

__all__ = ["CODES", "GPU_KINDS", "Gaps", "HostActivity", "HostCall", "Lane", "LaunchIndex", "Timeline", "build",
           "build_lane", "by_size", "find_gaps", "gaps", "gpu_lanes", "host_category", "host_during", "host_lanes",
           "launch_of", "launch_to_start", "runtime_rows", "union_lane"]

GPU_KINDS = ("kernel", "memcpy", "memset")
# Category codes: GPU categories first, then the host ones; -1 is nothing.
CODES = CATEGORIES + HOST_CATEGORIES
_CODE = {c: i for i, c in enumerate(CODES)}


def _codes(values: pd.Series, classify) -> np.ndarray:
    """Category code of each row, classifying each distinct value once (names and categories are
    categoricals when loaded: their codes are used as they are, no million-string detour)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes, uniques = values.cat.codes.to_numpy(), list(values.cat.categories)
    else:
        codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)
    table = np.array([_CODE.get(classify(u), _CODE["other"]) for u in uniques] + [_CODE["other"]], dtype=np.int8)
    return table[codes]


@dataclass
class Lane:
    """One row of the timeline. `start` is sorted; `reach[i]` is the latest end among rows 0..i;
    `busy[i]` the time covered by the union of rows 0..i (prefix sums for `raster`); `row[i]` the
    position of the row in the frame the lane was built from (None: the frame's rows, in order,
    and `start` is the frame's own column: a 1M-kernel single-stream trace is not copied)."""

    label: str
    host: bool
    start: np.ndarray
    reach: np.ndarray
    busy: np.ndarray
    code: np.ndarray
    row: np.ndarray | None
    dur: np.ndarray  # the frame's dur_ns (positions by `row`), not copied
    thread: int | None = None

    def __len__(self) -> int:
        return len(self.start)

    def pos(self, i):
        """Position in the source frame of lane row(s) `i`."""
        return i if self.row is None else self.row[i]

    def index_of(self, position: int) -> int:
        """Lane index of the frame row at `position`, -1 if not on this lane."""
        if self.row is None:
            return position if 0 <= position < len(self) else -1
        hit = np.flatnonzero(self.row == position)
        return int(hit[0]) if len(hit) else -1

    def end_of(self, i: int) -> int:
        return int(self.start[i] + self.dur[self.pos(i)])

    def visible(self, t0: int, t1: int) -> tuple[int, int]:
        """Index range [lo, hi) of the rows overlapping [t0, t1)."""
        lo = int(np.searchsorted(self.reach, t0, side="right"))
        hi = int(np.searchsorted(self.start, t1, side="left"))
        return lo, max(lo, hi)

    def busy_until(self, t: np.ndarray) -> np.ndarray:
        """Time covered by the lane's rows before each `t` (the union: overlaps count once)."""
        t = np.asarray(t, dtype=np.int64)
        idx = np.searchsorted(self.start, t, side="right") - 1
        ok = idx >= 0
        k = idx.clip(0)
        # rows 0..idx all start at or before t; the one reaching furthest covers [t, reach) entirely
        out = self.busy[k] - np.maximum(self.reach[k] - t, 0)
        return np.where(ok, out, 0)

    def at(self, t: int) -> int:
        """Index of the row running at time t (the latest started), or -1."""
        i = int(np.searchsorted(self.start, t, side="right")) - 1
        while i >= 0 and self.reach[i] > t:
            if self.end_of(i) > t:
                return i
            i -= 1
        return -1

    def raster(self, t0: float, t1: float, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Per column of [t0, t1) cut into `width` slices: the busy fraction (0..1) and the code
        of the row drawn there (the row running at the slice's middle, else the first starting in
        it; -1 where none)."""
        if width <= 0 or not len(self):
            return np.zeros(max(width, 0)), np.full(max(width, 0), -1, dtype=np.int8)
        edges = np.rint(np.linspace(t0, t1, width + 1)).astype(np.int64)
        cover = np.diff(self.busy_until(edges))
        span = np.maximum(np.diff(edges), 1)
        frac = np.clip(cover / span, 0.0, 1.0)
        mid = (edges[:-1] + edges[1:]) // 2
        i = np.searchsorted(self.start, mid, side="right") - 1
        ic = i.clip(0)
        running = (i >= 0) & (self.start[ic] + self.dur[self.pos(ic)] > mid)
        j = np.searchsorted(self.start, edges[:-1], side="left").clip(0, len(self) - 1)
        starts_in = self.start[j] < edges[1:]
        code = np.where(running, self.code[ic], np.where(starts_in, self.code[j], -1)).astype(np.int8)
        code[frac <= 0] = -1
        return frac, code


def build_lane(label: str, rows: pd.DataFrame, positions: np.ndarray, codes: np.ndarray, host: bool,
               thread: int | None = None) -> Lane:
    """A lane of the rows at `positions` of `rows` (any order)."""
    start_all = rows["start_ns"].to_numpy(dtype=np.int64)
    dur_all = rows["dur_ns"].to_numpy(dtype=np.int64)
    if len(positions) == len(rows) and (positions is None or _is_sorted(start_all)):
        # every row, already in time order (one stream, as loaded): use the frame's columns
        order, start, end, code = None, start_all, start_all + dur_all, codes
    else:
        order = positions[np.argsort(start_all[positions], kind="stable")].astype(np.int32)
        start = start_all[order]
        end = start + dur_all[order]
        code = codes[order]
    reach = np.maximum.accumulate(end, out=end) if len(end) else end
    # the union of the rows as disjoint pieces [max(start, previous reach), reach): their lengths
    piece = np.maximum(start[1:], reach[:-1])
    np.subtract(reach[1:], piece, out=piece)
    np.maximum(piece, 0, out=piece)
    busy = np.empty(len(start), dtype=np.int64)
    if len(start):
        busy[0] = reach[0] - start[0]
        np.cumsum(piece, out=busy[1:])
        busy[1:] += busy[0]
    del piece
    return Lane(label, host, start, reach, busy, code, order, dur_all, thread)


def _is_sorted(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def gpu_lanes(gpu: pd.DataFrame) -> list[Lane]:
    """One lane per (device, stream) of the GPU rows, in (device, stream) order."""
    if gpu.empty:
        return []
    codes = _codes(gpu["category"] if "category" in gpu.columns else pd.Series(None, index=gpu.index), str)
    dev, stream = int_column(gpu["device"]), int_column(gpu["stream"])
    key = (dev << 32) + (stream & 0xFFFFFFFF)
    if (key == key[0]).all():  # one stream (most traces): no grouping, no positions array
        groups = [(int(dev[0]), int(stream[0]), None)]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
        groups = []
        for i in range(len(keys)):  # a loop over streams, not rows
            members = np.flatnonzero(inverse == i)
            groups.append((int(dev[members[0]]), int(stream[members[0]]), members))
    multi_dev = len({d for d, _, _ in groups}) > 1
    lanes = []
    for d, s, members in groups:
        label = ("stream ?" if s < 0 else f"stream {s}") if not multi_dev else f"gpu{d} s{s}"
        positions = np.arange(len(gpu)) if members is None else members
        lanes.append(build_lane(label, gpu, positions, codes, host=False))
    return lanes


def host_lanes(host: pd.DataFrame, threads: np.ndarray) -> list[Lane]:
    """One lane per host thread in `threads`, of its runtime calls in `host`."""
    if host is None or host.empty or not len(threads):
        return []
    codes = _codes(host["name"], host_category)
    thread = int_column(host["thread"])
    out = []
    for t in threads.tolist():  # a loop over threads, not rows
        label = "host ?" if t < 0 else f"host {t}"
        out.append(build_lane(label, host, np.flatnonzero(thread == t), codes, host=True,
                              thread=None if t < 0 else int(t)))
    return out


@dataclass
class Gaps:
    """Idle stretches of the GPU rows (no row running on any stream), in time order. `union` is
    all the GPU rows as one lane; gap k ends where union row `after[k]` starts and begins at the
    latest end of the rows before it. `order`: gap numbers, largest first (ties: earlier first).
    Two int32 per gap: a million gaps cost 8 MB."""

    union: Lane | None
    after: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.after)

    def start(self, k):
        return self.union.reach[self.after[k] - 1]

    def end(self, k):
        return self.union.start[self.after[k]]

    def dur(self, k):
        return self.end(k) - self.start(k)

    def next_row(self, k):
        """Position in the GPU frame of the row that ends gap(s) k."""
        return self.union.pos(self.after[k])

    def frame(self, ks: np.ndarray | None = None) -> pd.DataFrame:
        """`start_ns`, `end_ns`, `dur_ns` and `after` (the GPU frame position of the row that
        ends it) of gaps `ks` (default: all, in time order)."""
        if self.union is None:
            return pd.DataFrame({c: np.empty(0, np.int64) for c in ("start_ns", "end_ns", "dur_ns", "after")})
        ks = np.arange(len(self)) if ks is None else np.asarray(ks)
        start, end = self.start(ks), self.end(ks)
        return pd.DataFrame({"start_ns": start, "end_ns": end, "dur_ns": end - start,
                             "after": np.asarray(self.next_row(ks), dtype=np.int64)})


def find_gaps(union: Lane | None, min_ns: int = 1) -> Gaps:
    """The gaps of `union` (all GPU rows as one lane) at least `min_ns` long."""
    if union is None or len(union) < 2:
        return Gaps(union, np.empty(0, np.int32), np.empty(0, np.int32))
    idle = union.start[1:] - union.reach[:-1]
    k = np.flatnonzero(idle >= min_ns)
    dur = idle[k]
    del idle
    return Gaps(union, (k + 1).astype(np.int32), np.argsort(-dur, kind="stable").astype(np.int32))


def union_lane(gpu: pd.DataFrame, lanes: list[Lane]) -> Lane | None:
    """All GPU rows as one lane: the lane itself when there is only one."""
    if not len(gpu):
        return None
    if len(lanes) == 1 and len(lanes[0]) == len(gpu):
        return lanes[0]
    return build_lane("all", gpu, np.arange(len(gpu)), np.zeros(len(gpu), dtype=np.int8), host=False)


def gaps(gpu: pd.DataFrame, min_ns: int = 1) -> pd.DataFrame:
    """The idle stretches of the GPU rows as a frame, in time order (see `Gaps.frame`)."""
    return find_gaps(union_lane(gpu, []), min_ns).frame()


def by_size(gap_frame: pd.DataFrame) -> np.ndarray:
    """Gap positions of a gap frame, largest first (ties: earlier first)."""
    return np.argsort(-gap_frame["dur_ns"].to_numpy(), kind="stable")


@dataclass
class Timeline:
    """The lanes of some GPU rows and their host threads, the gaps between the GPU rows."""

    gpu: pd.DataFrame
    host: pd.DataFrame
    lanes: list[Lane]
    gaps: Gaps
    t0: int
    t1: int
    launches: LaunchIndex
    _causes: object = None  # idle.Causes of these rows, made on first ask (`gap_causes`)

    def gap_causes(self, ks) -> tuple[np.ndarray, np.ndarray]:
        """(cause, what) of gaps `ks` (`idle.label`): edge, launch (under the floor), sync, host
        (`what`: the op that launched the next kernel), other. The first call classifies every
        gap of the rows (a thread worker's call for a large trace)."""
        from rooftop.analysis import idle
        if self._causes is None:
            rows = self.gpu
            if "kind" not in rows.columns:  # (a frame of GPU rows that does not say: kernels)
                rows = rows.assign(kind="kernel")
            self._causes = idle.Causes(rows, self.host if len(self.host) else None)
        ks = np.asarray(ks)
        if self.gaps.union is None or not len(ks):
            return np.full(len(ks), None, dtype=object), np.full(len(ks), None, dtype=object)
        return idle.label(self._causes, self.gaps.start(ks), self.gaps.end(ks))

    _comm: object = None  # (comm_ns, overlapped_ns, exposed_ns) of these rows, made on first ask

    def comm_summary(self) -> tuple[float, float, float] | None:
        """Communication kernel time of these rows, the part compute on other streams hid, and the
        exposed rest (`comm.Overlap`, summed over the rows' steps); None without communication."""
        if self._comm is None:
            from rooftop.analysis import comm
            rows = self.gpu if "kind" in self.gpu.columns else self.gpu.assign(kind="kernel")
            t = comm.overlap_table(rows) if len(rows) and "category" in rows.columns else None
            self._comm = (() if t is None or t.empty else
                          (float(t["comm_ns"].sum()), float(t["overlapped_ns"].sum()), float(t["exposed_ns"].sum())))
        return self._comm or None

    @property
    def host_lanes(self) -> list[Lane]:
        return [ln for ln in self.lanes if ln.host]

    def launch_to_start(self, positions) -> np.ndarray:
        """Launch-to-start (ns, NaN unknown) of the GPU rows at `positions`."""
        pos = np.atleast_1d(positions)
        if not len(self.launches.keys):
            return np.full(len(pos), np.nan)
        if len(pos) <= 8:  # the selected block (every `.`/`]` press): scalars, not two small frames
            corr_col, start_col = self.gpu["correlation"], self.gpu["start_ns"]
            corr = [corr_col.iloc[int(p)] for p in pos]
            corr = np.array([-2 if c is None or c is pd.NA or c != c else int(c) for c in corr], dtype=np.int64)
            start = np.array([int(start_col.iloc[int(p)]) for p in pos], dtype=np.int64)
            return start - self.launches.launch_start(corr)
        # two columns at the positions only: selecting columns of a 1M-row frame would copy them
        rows = pd.DataFrame({c: self.gpu[c].iloc[pos].reset_index(drop=True) for c in ("start_ns", "correlation")})
        return launch_to_start(rows, self.host, self.launches)

    def describe_row(self, host: bool, position: int) -> dict:
        """name (short where known), start_ns, dur_ns of one row, reading only those columns (a
        whole-row lookup in a 1M-row, 60-column frame costs more than a repaint)."""
        frame = self.host if host else self.gpu
        name = frame["name"].iloc[position]
        if not host and "short_name" in frame.columns and isinstance(frame["short_name"].iloc[position], str):
            name = frame["short_name"].iloc[position]
        return {"name": name, "start_ns": int(frame["start_ns"].iloc[position]),
                "dur_ns": int(frame["dur_ns"].iloc[position])}


def build(gpu: pd.DataFrame, calls: pd.DataFrame | None = None, within: np.ndarray | None = None) -> Timeline:
    """The timeline of `gpu` (kernels/memcpy/memset of one rank), with the host threads that
    launched them, taken from the runtime calls around them (`Trace.host`, or rows with a `kind`;
    `within`: a mask of the calls to consider, e.g. that rank's)."""
    if "kind" in gpu.columns:
        is_gpu = gpu["kind"].isin(GPU_KINDS).to_numpy(dtype=bool)
        if not is_gpu.all():  # the timed rows of a GPU trace are all GPU rows: no copy then
            gpu = gpu[is_gpu]
    empty = pd.DataFrame({c: [] for c in HOST_COLUMNS})
    if gpu.empty:
        return Timeline(gpu, empty, [], find_gaps(None), 0, 1, LaunchIndex(empty))
    start = gpu["start_ns"].to_numpy(dtype=np.int64)
    t0, t1 = int(start.min()), int((start + gpu["dur_ns"].to_numpy(dtype=np.int64)).max())
    host, threads = empty, np.empty(0, np.int64)
    if calls is not None and "thread" in calls.columns and len(calls):
        # launches come before their kernels: look back as far as the rows last (at most 1 s)
        back = min(t1 - t0, 1_000_000_000)
        host = runtime_rows(calls, t0 - back, t1, within)
        threads = launching_threads(host, gpu)
        if len(threads):
            keep = np.isin(int_column(host["thread"]), threads)
            launched = start - launch_to_start(gpu, host)
            first = int(np.nanmin(launched)) if np.isfinite(launched).any() else t0
            s = host["start_ns"].to_numpy(dtype=np.int64)
            keep &= s + host["dur_ns"].to_numpy(dtype=np.int64) > min(t0, first)
            if not keep.all():  # (a 1M-call host frame is copied only when some call goes)
                host = host[keep].reset_index(drop=True)
    lanes = gpu_lanes(gpu)
    union = union_lane(gpu, lanes)
    lanes += host_lanes(host, threads)
    if len(host):
        t0 = min(t0, int(host["start_ns"].min()))
    return Timeline(gpu, host, lanes, find_gaps(union), t0, max(t1, t0 + 1), LaunchIndex(host))
