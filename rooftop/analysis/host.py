"""The host side of a timeline: what the CPU threads were doing, from the `runtime` rows (CUDA
runtime/driver calls with their thread and correlation). Pure functions, vectorised.

- a call's **category**: a launch (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch), a sync
  (cudaStreamSynchronize, cudaDeviceSynchronize, event waits), a copy (cudaMemcpy*, cudaMemset*),
  or another call;
- **launch-to-start** of a GPU row: its start minus the start of the runtime call with the same
  `correlation` (how long it was queued after the host asked for it);
- the **activity** of a thread in a window: the calls overlapping it, longest overlap first, and
  how much of the window was inside no CUDA call (Python / CPU ops).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rooftop.trace.schema import HOST_COLUMNS


HOST_CATEGORIES = ("launch", "sync", "copy", "call")


def int_column(col: pd.Series) -> np.ndarray:
    """A nullable int column as int64, -1 for null."""
    return col.to_numpy(dtype=np.int64, na_value=-1)


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


def runtime_rows(events: pd.DataFrame, t0: int, t1: int, within: np.ndarray | None = None) -> pd.DataFrame:
    """The runtime calls overlapping [t0, t1): from `Trace.host` (or any frame of rows with a
    `kind`, of which the `runtime` ones; `within`: a row mask, e.g. one rank), only the columns the
    timeline reads: a 1M-launch trace must not be copied whole."""
    if "kind" in events.columns:
        mask = (events["kind"] == "runtime").to_numpy(dtype=bool)
    else:
        mask = np.ones(len(events), dtype=bool)
    if within is not None:
        mask = mask & within  # (the first may be a read-only view of the column)
    pos = np.flatnonzero(mask)
    if not len(pos):
        return pd.DataFrame({c: [] for c in HOST_COLUMNS})
    s = events["start_ns"].to_numpy(dtype=np.int64)[pos]
    e = s + events["dur_ns"].to_numpy(dtype=np.int64)[pos]
    pos = pos[(e > t0) & (s < t1)]
    cols = [c for c in HOST_COLUMNS if c in events.columns]
    if len(pos) == len(events):  # every row (the whole run of a trace's own runtime rows): no copy
        return pd.DataFrame({c: events[c].reset_index(drop=True) for c in cols}, copy=False)
    return pd.DataFrame({c: events[c].iloc[pos].reset_index(drop=True) for c in cols})


def launching_threads(host: pd.DataFrame, gpu: pd.DataFrame) -> np.ndarray:
    """The host threads that launched any of the GPU rows (matched by correlation); when none
    matches, the thread with the most calls."""
    if host is None or host.empty or "thread" not in host.columns:
        return np.empty(0, dtype=np.int64)
    thread = int_column(host["thread"])
    corr = int_column(host["correlation"])
    gcorr = gpu["correlation"].astype("Int64").dropna().to_numpy(dtype=np.int64) if len(gpu) else np.empty(0, np.int64)
    threads = np.unique(thread[np.isin(corr, gcorr) & (corr >= 0)])
    if not len(threads):
        vals, counts = np.unique(thread, return_counts=True)
        threads = vals[np.argsort(-counts, kind="stable")[:1]]
    return threads


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


def host_during(lane, host: pd.DataFrame, t0: int, t1: int, top: int = 3) -> HostActivity:
    """What the host lane's thread was doing during [t0, t1)."""
    lo, hi = lane.visible(t0, t1)
    out = HostActivity(lane.thread, int(t0), int(t1))
    if hi <= lo:
        return out
    rows = np.arange(lo, hi) if lane.row is None else lane.row[lo:hi]
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
    hit = np.flatnonzero(int_column(host["correlation"]) == int(correlation))
    return int(hit[0]) if len(hit) else None


class LaunchIndex:
    """The runtime calls by correlation id, to find each GPU row's launch."""

    def __init__(self, host: pd.DataFrame):
        if host is None or host.empty:
            self.keys = np.empty(0, np.int64)
            return
        hc = int_column(host["correlation"])
        self.keys, first = np.unique(hc, return_index=True)
        self.start = host["start_ns"].to_numpy(dtype=np.int64)[first]

    def launch_start(self, correlation: np.ndarray) -> np.ndarray:
        """Start of the launching call of each correlation id, NaN where none."""
        out = np.full(len(correlation), np.nan)
        if not len(self.keys) or not len(correlation):
            return out
        pos = np.searchsorted(self.keys, correlation).clip(0, len(self.keys) - 1)
        hit = (self.keys[pos] == correlation) & (correlation >= 0)
        out[hit] = self.start[pos[hit]]
        return out


def launch_to_start(gpu: pd.DataFrame, host: pd.DataFrame, index: LaunchIndex | None = None) -> np.ndarray:
    """Per GPU row: start minus the start of its launching runtime call (ns), NaN where unknown."""
    index = index if index is not None else LaunchIndex(host)
    gc = gpu["correlation"].astype("Int64").fillna(-2).to_numpy(dtype=np.int64)
    return gpu["start_ns"].to_numpy(dtype=np.int64) - index.launch_start(gc)
