"""Kineto's CUDA runtime/driver calls -> `runtime` rows: what the host thread was doing, and when.

Each `cuda_runtime`/`cuda_driver` event (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch,
cudaStreamSynchronize, cudaMemcpyAsync, ...) becomes one row of kind `runtime` with its thread and
its `correlation`, the id CUPTI gives both a launch and the kernel it launched: a kernel's
launch-to-start time is `kernel.start_ns - runtime.start_ns` of the row with the same correlation.
The calling CPU op (by `External id`) goes in `op`. Vectorised over the collected columns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ._kineto_events import NULL, Collector, first_index as _lookup_first


def thread_ids(sink: Collector) -> np.ndarray:
    """OS thread id of each interned (pid, tid), NULL where the file's tid is not an integer."""
    keys = sink.threads.values_list()
    return np.array([k[1] if isinstance(k, tuple) and type(k[1]) is int and abs(k[1]) < 1 << 62 else NULL
                     for k in keys] + [NULL], dtype=np.int64)


def runtime_rows(sink: Collector, name_of: np.ndarray, origin: int) -> pd.DataFrame:
    """The runtime calls as rows (call before the collector's columns are released)."""
    rt, ops = sink.rt, sink.ops
    n = len(rt)
    if not n:
        return pd.DataFrame()
    oi = _lookup_first(ops.np("ext"), rt.np("ext"))
    op = np.where(oi >= 0, name_of[ops.np("name")[oi.clip(0)]] if len(ops) else None, None)
    tid = thread_ids(sink)[rt.np("thread")]
    order = np.argsort(rt.np("ts"), kind="stable")
    return pd.DataFrame({
        "kind": np.full(n, "runtime", dtype=object)[order],
        "name": name_of[rt.np("name")][order],
        "start_ns": (rt.np("ts") - origin)[order], "dur_ns": rt.np("dur")[order],
        "correlation": rt.np("corr")[order], "op": op[order],
        "thread": pd.arrays.IntegerArray(np.where(tid == NULL, 0, tid), tid == NULL)[order],
    })


def append_runtime(rows: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """The GPU and range rows, then the runtime rows (each part in time order), ids continuing."""
    if not len(runtime):
        return rows
    runtime = runtime.assign(id=np.arange(len(rows), len(rows) + len(runtime), dtype=np.int64))
    for c in rows.columns:  # missing text and launch shapes as None, not the NaN concat would fill in
        if c not in runtime.columns and rows[c].dtype == object:
            runtime[c] = np.full(len(runtime), None, dtype=object)
    for c in ("correlation", "thread"):
        runtime[c] = runtime[c].astype("Int64")
    return pd.concat([rows, runtime], ignore_index=True)
