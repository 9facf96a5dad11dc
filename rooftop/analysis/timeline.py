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

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..names import CATEGORIES

GPU_KINDS = ("kernel", "memcpy", "memset")
HOST_CATEGORIES = ("launch", "sync", "copy", "call")
# Category codes: GPU categories first, then the host ones; -1 is nothing.
CODES = CATEGORIES + HOST_CATEGORIES
_CODE = {c: i for i, c in enumerate(CODES)}

# nsys names carry the API version (`cudaLaunchKernel_v7000`); Kineto's do not.
_HOST_RULES = [
    ("launch", re.compile(r"launch", re.IGNORECASE)),
    ("sync", re.compile(r"synchronize|waitevent|eventquery|streamquery", re.IGNORECASE)),
    ("copy", re.compile(r"memcpy|memset", re.IGNORECASE)),
]


def host_category(name: str | None) -> str:
    """What a runtime call is, for the host lane: a launch, a sync, a copy, or another call."""
    for cat, rx in _HOST_RULES:
        if name and rx.search(name):
            return cat
    return "call"


def _codes(values: pd.Series, classify) -> np.ndarray:
    """Category code of each row, classifying each distinct value once."""
    codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)
    table = np.array([_CODE.get(classify(u), _CODE["other"]) for u in uniques] + [_CODE["other"]], dtype=np.int8)
    return table[codes]


@dataclass
class Lane:
    """One row of the timeline. `start` is sorted; `reach[i]` is the latest end among rows 0..i;
    `busy[i]` the time covered by the union of rows 0..i (prefix sums for `raster`); `row[i]` the
    position of the row in the frame the lane was built from."""

    label: str
    host: bool
    start: np.ndarray
    reach: np.ndarray
    busy: np.ndarray
    code: np.ndarray
    row: np.ndarray
    dur: np.ndarray  # the frame's dur_ns (positions by `row`), not copied
    thread: int | None = None

    def __len__(self) -> int:
        return len(self.start)

    def end_of(self, i: int) -> int:
        return int(self.start[i] + self.dur[self.row[i]])

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
        running = (i >= 0) & (self.start[ic] + self.dur[self.row[ic]] > mid)
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
    order = positions[np.argsort(start_all[positions], kind="stable")]
    start = start_all[order]
    end = start + dur_all[order]
    reach = np.maximum.accumulate(end) if len(end) else end
    prev = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    # the union of the rows as disjoint pieces [max(start, previous reach), reach): their lengths
    piece = reach - np.maximum(start, prev)
    busy = np.cumsum(np.maximum(piece, 0))
    return Lane(label, host, start, reach, busy, codes[order], order.astype(np.int64), dur_all, thread)


def gpu_lanes(gpu: pd.DataFrame) -> list[Lane]:
    """One lane per (device, stream) of the GPU rows, busiest device first, streams in order."""
    if gpu.empty:
        return []
    codes = _codes(gpu["category"] if "category" in gpu.columns else pd.Series(None, index=gpu.index), str)
    dev = gpu["device"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    stream = gpu["stream"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    keys, inverse = np.unique((dev << 32) + (stream & 0xFFFFFFFF), return_inverse=True)
    pairs = [(int(k) >> 32, stream[np.argmax(inverse == i)]) for i, k in enumerate(keys.tolist())]
    multi_dev = len({d for d, _ in pairs}) > 1
    lanes = []
    for k, (d, s) in enumerate(pairs):  # a loop over streams, not rows
        label = ("stream ?" if s < 0 else f"stream {s}") if not multi_dev else f"gpu{d} s{s}"
        lanes.append(build_lane(label, gpu, np.flatnonzero(inverse == k), codes, host=False))
    return lanes


def host_lanes(host: pd.DataFrame, gpu: pd.DataFrame) -> list[Lane]:
    """One lane per host thread that launched any of the GPU rows (matched by correlation); when
    none matches, the thread with the most calls."""
    if host is None or host.empty:
        return []
    codes = _codes(host["name"], host_category)
    thread = host["thread"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64) \
        if "thread" in host.columns else np.full(len(host), -1, dtype=np.int64)
    corr = host["correlation"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    gcorr = gpu["correlation"].astype("Int64").dropna().to_numpy(dtype=np.int64) if len(gpu) else np.empty(0, np.int64)
    launched = np.isin(corr, gcorr) & (corr >= 0)
    threads = np.unique(thread[launched])
    if not len(threads):
        vals, counts = np.unique(thread, return_counts=True)
        threads = vals[np.argsort(-counts, kind="stable")[:1]]
    out = []
    for t in threads.tolist():
        label = "host ?" if t < 0 else f"host {t}"
        out.append(build_lane(label, host, np.flatnonzero(thread == t), codes, host=True,
                              thread=None if t < 0 else int(t)))
    return out


def gaps(gpu: pd.DataFrame, min_ns: int = 1) -> pd.DataFrame:
    """Idle stretches of the GPU rows (no row running on any stream), in time order: `start_ns`,
    `end_ns`, `dur_ns`, and the positions in `gpu` of the row that ended last before the gap
    (`before`) and of the row that ends it (`after`)."""
    cols = {"start_ns": np.int64, "end_ns": np.int64, "dur_ns": np.int64, "before": np.int64, "after": np.int64}
    if len(gpu) < 2:
        return pd.DataFrame({c: np.empty(0, t) for c, t in cols.items()})
    start = gpu["start_ns"].to_numpy(dtype=np.int64)
    end = start + gpu["dur_ns"].to_numpy(dtype=np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # which row set the running end (the last that reached it)
    setter = np.maximum.accumulate(np.where(e >= reach, np.arange(len(e)), 0))
    idle = s[1:] - reach[:-1]
    k = np.flatnonzero(idle >= min_ns)
    return pd.DataFrame({"start_ns": reach[k], "end_ns": s[k + 1], "dur_ns": idle[k],
                         "before": order[setter[k]], "after": order[k + 1]})


def by_size(gap_frame: pd.DataFrame) -> np.ndarray:
    """Gap positions, largest first (ties: earlier first)."""
    return np.argsort(-gap_frame["dur_ns"].to_numpy(), kind="stable")


@dataclass
class HostCall:
    name: str
    category: str
    start_ns: int
    dur_ns: int
    overlap_ns: int
    op: str | None


@dataclass
class HostActivity:
    """The runtime calls on a host thread during [start_ns, end_ns), longest overlap first."""

    thread: int | None
    start_ns: int
    end_ns: int
    calls: list[HostCall] = field(default_factory=list)
    in_calls_ns: int = 0  # time of the window inside some runtime call
    total_calls: int = 0  # how many calls overlap (calls holds the longest few)

    @property
    def outside_calls_ns(self) -> int:
        """Time of the window in no CUDA call: the thread ran Python / CPU ops (or slept)."""
        return (self.end_ns - self.start_ns) - self.in_calls_ns


def host_during(lane: Lane, host: pd.DataFrame, t0: int, t1: int, top: int = 3) -> HostActivity:
    """What the host lane's thread was doing during [t0, t1)."""
    lo, hi = lane.visible(t0, t1)
    out = HostActivity(lane.thread, int(t0), int(t1))
    if hi <= lo:
        return out
    rows = lane.row[lo:hi]
    s = lane.start[lo:hi]
    e = s + lane.dur[rows]
    ov = np.minimum(e, t1) - np.maximum(s, t0)
    keep = ov > 0
    rows, s, e, ov = rows[keep], s[keep], e[keep], ov[keep]
    out.total_calls = len(rows)
    out.in_calls_ns = int((lane.busy_until(np.array([t1])) - lane.busy_until(np.array([t0])))[0])
    best = np.argsort(-ov, kind="stable")[:top]
    names = host["name"].iloc[rows[best]].astype(object).tolist()
    ops = host["op"].iloc[rows[best]].astype(object).tolist() if "op" in host.columns else [None] * len(best)
    for j, k in enumerate(best.tolist()):
        name, op = names[j], ops[j]
        out.calls.append(HostCall(str(name), host_category(name), int(s[k]), int(e[k] - s[k]), int(ov[k]),
                                  op if isinstance(op, str) else None))
    return out


def launch_of(host: pd.DataFrame, correlation) -> int | None:
    """Position in `host` of the runtime call with this correlation id, or None."""
    if host is None or host.empty or correlation is None or pd.isna(correlation):
        return None
    hit = np.flatnonzero(host["correlation"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64) == int(correlation))
    return int(hit[0]) if len(hit) else None


def launch_to_start(gpu: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """Per GPU row: start minus the start of its launching runtime call (ns), NaN where unknown."""
    out = np.full(len(gpu), np.nan)
    if host is None or host.empty or gpu.empty:
        return out
    hc = host["correlation"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    hs = host["start_ns"].to_numpy(dtype=np.int64)
    uniq, first = np.unique(hc, return_index=True)
    gc = gpu["correlation"].astype("Int64").fillna(-2).to_numpy(dtype=np.int64)
    pos = np.searchsorted(uniq, gc).clip(0, len(uniq) - 1)
    hit = (uniq[pos] == gc) & (gc >= 0)
    out[hit] = gpu["start_ns"].to_numpy(dtype=np.int64)[hit] - hs[first[pos[hit]]]
    return out


@dataclass
class Timeline:
    """The lanes of some GPU rows and their host threads, the gaps between the GPU rows."""

    gpu: pd.DataFrame
    host: pd.DataFrame
    lanes: list[Lane]
    gaps: pd.DataFrame
    gap_order: np.ndarray  # gap positions, largest first
    t0: int
    t1: int

    @property
    def host_lanes(self) -> list[Lane]:
        return [ln for ln in self.lanes if ln.host]


HOST_COLUMNS = ("start_ns", "dur_ns", "name", "correlation", "thread", "op")


def runtime_rows(events: pd.DataFrame, t0: int, t1: int, within: np.ndarray | None = None) -> pd.DataFrame:
    """The runtime calls overlapping [t0, t1) (from a trace's events; `within`: a row mask, e.g.
    one rank), only the columns the timeline reads: a 1M-launch trace must not be copied whole."""
    mask = (events["kind"] == "runtime").to_numpy(dtype=bool)
    if within is not None:
        mask &= within
    pos = np.flatnonzero(mask)
    if not len(pos):
        return pd.DataFrame({c: [] for c in HOST_COLUMNS})
    s = events["start_ns"].to_numpy(dtype=np.int64)[pos]
    e = s + events["dur_ns"].to_numpy(dtype=np.int64)[pos]
    pos = pos[(e > t0) & (s < t1)]
    cols = [c for c in HOST_COLUMNS if c in events.columns]
    return pd.DataFrame({c: events[c].iloc[pos].reset_index(drop=True) for c in cols})


def build(gpu: pd.DataFrame, events: pd.DataFrame | None = None, within: np.ndarray | None = None) -> Timeline:
    """The timeline of `gpu` (kernels/memcpy/memset of one rank), with the host threads that
    launched them, taken from the runtime rows of `events` around them (`within`: a mask of the
    events to consider, e.g. that rank's)."""
    if "kind" in gpu.columns:
        is_gpu = gpu["kind"].isin(GPU_KINDS).to_numpy(dtype=bool)
        if not is_gpu.all():  # the timed rows of a GPU trace are all GPU rows: no copy then
            gpu = gpu[is_gpu]
    if gpu.empty:
        return Timeline(gpu, pd.DataFrame(), [], gaps(gpu), np.empty(0, np.int64), 0, 1)
    start = gpu["start_ns"].to_numpy(dtype=np.int64)
    t0, t1 = int(start.min()), int((start + gpu["dur_ns"].to_numpy(dtype=np.int64)).max())
    host = pd.DataFrame()
    if events is not None and "thread" in events.columns:
        # launches come before their kernels: look back as far as the step lasts (at most 1 s)
        back = min(t1 - t0, 1_000_000_000)
        host = runtime_rows(events, t0 - back, t1, within)
        hosts = host_lanes(host, gpu)
        if hosts:
            keep = np.isin(host["thread"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64),
                           [ln.thread if ln.thread is not None else -1 for ln in hosts])
            delay = launch_to_start(gpu, host)
            first_launch = np.nanmin(start - delay) if np.isfinite(delay).any() else t0
            s = host["start_ns"].to_numpy(dtype=np.int64)
            host = host[keep & (s >= min(t0, first_launch))].reset_index(drop=True)
    lanes = gpu_lanes(gpu) + host_lanes(host, gpu)
    if len(host):
        t0 = min(t0, int(host["start_ns"].min()))
    g = gaps(gpu)
    return Timeline(gpu, host, lanes, g, by_size(g), t0, max(t1, t0 + 1))
