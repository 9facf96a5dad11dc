"""Decoding a Kineto trace's events on every core.

The main process streams the file and cuts the event array into batches of whole elements, as
the one-process reader does (`_jsonstream.array`); worker processes decode each batch into a
`Collector` of its own, and the main process merges them in file order, so the columns come out
exactly as a one-process read would give them. A cut is only a guess at an element boundary (a
`},` inside a string or a nested object fools it); the one-process reader tries an earlier cut
when a batch does not parse, which a worker cannot do, so a batch that does not parse here makes
the whole read start again in one process (`Recut`). Real Kineto files never need it.

msgspec holds the GIL while it decodes, so threads would not help: these are processes, and only
for files large enough to repay starting them. On Linux they are forked (no interpreter start-up,
no re-import of the caller's main module; the child runs only the decoder, which takes no lock
another thread of the parent could hold); elsewhere they are spawned. A pool that cannot start
or dies (`BrokenProcessPool`, `OSError`) makes the read fall back to one process as well.
"""
from __future__ import annotations

import gc
import os
import sys
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from ._kineto_events import Collector

# Below these sizes one process is faster than starting workers (a gzip inflates ~10x).
MIN_BYTES = {"plain": 48 << 20, "gzip": 6 << 20}


class Recut(Exception):
    """A batch cut at a false boundary: read the file again in one process."""


# What makes a parallel read start again in one process.
FALL_BACK = (Recut, BrokenProcessPool, OSError)


def workers_for(path_size: int, gz: bool) -> int:
    """How many decoding processes to use: every core this process may run on (`ROOFTOP_WORKERS`
    overrides, 1 = one process), and one for files too small to repay starting them."""
    env = os.environ.get("ROOFTOP_WORKERS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    if path_size < MIN_BYTES["gzip" if gz else "plain"]:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _init_worker() -> None:
    gc.disable()  # the same reason as in the main reader: millions of acyclic short-lived objects


def _decode(kind: str, payload) -> Collector:
    c = Collector()
    try:
        if kind == "text":
            c.add_text(payload)
        else:
            c.add_objects(payload)
    except ValueError:
        raise Recut() from None
    return c


class ParallelSink:
    """The sink protocol of `_jsonstream`, decoding batches in a process pool, merged in order.

    At most `inflight` batches wait at once, so memory stays bounded whatever the file's size."""

    def __init__(self, workers: int):
        ctx = get_context("fork" if sys.platform == "linux" else "spawn")
        self.pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker)
        self.inflight = 2 * workers + 1
        self.pending: deque[Future] = deque()
        self.merged = Collector()

    def add_text(self, text: str) -> None:
        self._submit("text", text)

    def add_objects(self, objs: list) -> None:
        self._submit("objects", objs)

    def _submit(self, kind: str, payload) -> None:
        self.pending.append(self.pool.submit(_decode, kind, payload))
        while len(self.pending) > self.inflight:
            self._merge_next()

    def _merge_next(self) -> None:
        self.merged.merge(self.pending.popleft().result())

    def finish(self) -> Collector:
        """Every batch merged, in file order; raises `Recut` when a batch did not parse."""
        try:
            while self.pending:
                self._merge_next()
            return self.merged
        finally:
            self.close()

    def close(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)
