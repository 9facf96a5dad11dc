"""Decoding a Kineto trace's events on every core.

A plain file (`RangeSplit`): the event array is cut into byte ranges at element boundaries; a
worker process reads and decodes each range but the last from the file itself, as the
one-process reader would (`_jsonstream.array`), while this process decodes the last range and the
keys after the array. Nothing but the workers' columns crosses a pipe. A gzip file cannot be read
from the middle (`ParallelSink`): this process inflates it and cuts the array into batches of
whole elements, which workers decode. Either way the workers' `Collector`s are merged in file
order, so the columns come out exactly as a one-process read would give them.

A cut is only a guess at an element boundary (a `},` inside a string or a nested object fools
it; a newline between the two elements, which no JSON string holds, makes it a safe guess); the
one-process reader tries an earlier cut when a batch does not parse, which a worker cannot do, so
a range or batch that does not parse here makes the whole read start again in one process
(`Recut`), and so does any error, so that the one-process reader reports it. Real Kineto files
never need it.

msgspec holds the GIL while it decodes, so threads would not help: these are processes, and only
for files large enough to repay starting them. On Linux they are forked (no interpreter start-up,
no re-import of the caller's main module; the child runs only the decoder, which takes no lock
another thread of the parent could hold); elsewhere they are spawned. A pool that cannot start
or dies (`BrokenProcessPool`, `OSError`) makes the read fall back to one process as well.
"""
from __future__ import annotations

import gc
import os
import re
import signal
import sys
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from . import _jsonstream
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
    # Ctrl-C in a terminal reaches the whole process group: the main process alone answers it (and
    # stops the workers, `abort`); a worker dying of it would look like a broken pool, which means
    # "read again in one process"
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _abort(pool: ProcessPoolExecutor | None, futures) -> None:
    """Stop a pool at once: queued work cancelled, running workers killed, nothing waited for (an
    interrupted import must end now, not when the workers finish their ranges). Only for pools
    whose queued calls are small (`RangeSplit`'s offsets): see `ParallelSink.abort`."""
    for f in futures:
        f.cancel()
    if pool is None:
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):  # no public way before 3.14
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)


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
        except BaseException:  # a batch that did not parse, or Ctrl-C: the rest is not waited for
            self.abort()
            raise
        self.close()
        return self.merged

    def close(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def abort(self) -> None:
        # Only the batches already handed to the workers are waited for (a few, ~0.1 s each):
        # killing them could leave a 4 MB batch half-written into a pipe no one reads, and the
        # queue's feeder thread blocked on it at exit.
        self.close()


# The end of one element and the start of the next: `},` and a newline first (no JSON string
# holds a raw newline), any `},` + `{` where the file has no newlines between elements.
_BOUNDARIES = (re.compile(rb"\}[ \t\r]*,[ \t\r]*\n\s*\{"), re.compile(rb"\}\s*,\s*\{"))
_WINDOW = 1 << 20  # bytes searched for a boundary after each even split point


# This process's range is a little shorter than a worker's: it also takes in and merges the
# workers' columns (unpickled and appended: ~0.2-1 s at 1M kernels) before it can go on.
OWN_SHARE = 0.94


def boundaries(path, start: int, end: int, parts: int) -> list[int]:
    """Offsets of element starts that cut the bytes [start, end) into `parts` ranges, even but
    for the last (`OWN_SHARE`); fewer where no boundary is found near a split point."""
    out: list[int] = []
    step = (end - start) * (1 - OWN_SHARE / parts) / max(1, parts - 1)
    with open(path, "rb") as f:
        for k in range(1, parts):
            at = max(start + int(step * k), out[-1] if out else start)
            f.seek(at)
            window = f.read(_WINDOW)
            for pattern in _BOUNDARIES:
                m = pattern.search(window)
                if m:
                    cut = at + m.end() - 1  # the next element's `{`
                    if cut < end and (not out or cut > out[-1]):
                        out.append(cut)
                    break
    return out


def _decode_range(path, start: int, end: int, chunk: int) -> Collector:
    """The elements in the bytes [start, end) of the event array (none of its ends)."""
    s = _jsonstream.Stream(path, None, chunk, start, end)
    c = Collector()
    try:
        _jsonstream.array(s, c)
        if s.skip_ws() is not None:  # the array ended inside the range: the cut was no boundary
            raise Recut()
    except (ValueError, EOFError, RecursionError):
        raise Recut() from None
    finally:
        s.close()
    return c


class RangeSplit:
    """The event array of a plain file decoded in byte ranges, one per process (module docstring).

    `start` (the `at_array` hook of `_jsonstream.document`) sends every range but the last to the
    workers and moves this process's cursor to the last; `finish` merges the workers' collectors
    and this process's in file order."""

    def __init__(self, path, workers: int, chunk: int):
        self.path, self.workers, self.chunk = path, workers, chunk
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list[Future] = []

    def start(self, s: _jsonstream.Stream) -> None:
        first = s.cursor_byte()
        if first is None:
            return  # this process reads it all
        cuts = boundaries(self.path, first, s.end, self.workers)
        if not cuts:
            return
        ctx = get_context("fork" if sys.platform == "linux" else "spawn")
        self.pool = ProcessPoolExecutor(len(cuts), mp_context=ctx, initializer=_init_worker)
        for a, b in zip([first] + cuts[:-1], cuts):
            self.futures.append(self.pool.submit(_decode_range, self.path, a, b, self.chunk))
        own, total, report = cuts[-1], s.end, s.progress
        s.seek_byte(own)
        if report is not None:  # this range's progress drawn over the whole file
            s.progress = lambda done, _t: report(min(total, (done - own) * total // max(1, total - own)), total)

    def finish(self, own: Collector) -> Collector:
        """Every range's collector merged, in file order; raises `Recut` when a range did not parse."""
        try:
            merged: Collector | None = None
            for f in self.futures:
                c = f.result()
                if merged is None:
                    merged = c
                else:
                    merged.merge(c)
        except BaseException:  # a range that did not parse, or Ctrl-C: the rest is not waited for
            self.abort()
            raise
        self.close()
        if merged is None:
            return own
        merged.merge(own)
        return merged

    def close(self) -> None:
        if self.pool is not None:
            for f in self.futures:
                f.cancel()
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def abort(self) -> None:
        _abort(self.pool, self.futures)
        self.pool = None
