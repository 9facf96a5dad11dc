"""Kineto's CUDA runtime/driver calls -> `runtime` rows: what the host thread was doing, and when.

Each `cuda_runtime`/`cuda_driver` event (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch,
cudaStreamSynchronize, cudaMemcpyAsync, ...) becomes one row of kind `runtime` with its thread and
its `correlation`, the id CUPTI gives both a launch and the kernel it launched: a kernel's
launch-to-start time is `kernel.start_ns - runtime.start_ns` of the row with the same correlation.
The calling CPU op (by `External id`) goes in `op`. Vectorised over the collected columns;
`_kineto_join.assemble` appends them after the GPU and range rows.
"""
from __future__ import annotations

import numpy as np

from collectors.readers._kineto_events import Collector
from collectors.readers._kineto_values import NULL, first_index as _lookup_first


def thread_ids(sink: Collector) -> np.ndarray:
    """OS thread id of each interned (pid, tid), NULL where the file's tid is not an integer."""
    keys = sink.threads.values_list()
    return np.array([k[1] if isinstance(k, tuple) and type(k[1]) is int and abs(k[1]) < 1 << 62 else NULL
                     for k in keys] + [NULL], dtype=np.int64)


def runtime_rows(sink: Collector) -> dict:
    """The runtime calls as columns (call before the collector's columns are released): `order`
    puts them in time order; `name` and `op` are name ids (-1: no op), `thread` NULL where unknown."""
    rt, ops = sink.rt, sink.ops
    if not len(rt):
        return {}
    oi = _lookup_first(ops.np("ext"), rt.np("ext"))
    op = np.where(oi >= 0, ops.np("name")[oi.clip(0)] if len(ops) else -1, -1)
    return {"order": np.argsort(rt.np("ts"), kind="stable"), "name": rt.np("name"), "ts": rt.np("ts"),
            "dur": rt.np("dur"), "corr": rt.np("corr"), "op": op, "thread": thread_ids(sink)[rt.np("thread")]}
