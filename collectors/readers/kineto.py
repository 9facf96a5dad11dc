"""Import PyTorch profiler (Kineto) Chrome-trace JSON: `.json`, `.json.gz`, `.pt.trace.json`.

A 1M-kernel trace is ~6 GB of JSON (`json.load` of it needs > 20 GB), so the file is streamed
(`_jsonstream`): the `traceEvents` array is decoded a few MB at a time, by `msgspec` into typed
structs where it can, and only the fields rooftop needs are kept, as columns (`_kineto_events`).
The joins (kernel -> runtime call -> cpu_op, launch -> enclosing annotations) run afterwards on
those columns (`_kineto_join`). Timestamps are exact int ns: new Kineto writes `{us}.{ns:03}`
relative to `baseTimeNanoseconds`, old Kineto epoch µs; a decoded double is used only where it
provably holds the text's value to the ns, and the text is re-read exactly everywhere else.
"""
from __future__ import annotations

import gc
import os
from pathlib import Path

import pandas as pd

from rooftop.trace.redact import redact
from rooftop.trace import TraceError
from rooftop.trace.frame import give_back_memory

from collectors.readers import _jsonstream, kineto_ranges
from collectors.readers._jsonstream import Progress
from collectors.readers._kineto_early import EarlyStart  # (the type only: `rooftop import` makes one)
from collectors.readers._kineto_events import Collector
from collectors.readers._kineto_parallel import (FALL_BACK, ParallelSink, RangeSplit, Recut, inflated, inflated_name, inflated_size,
                               workers_for)
from collectors.readers._kineto_join import assemble
from collectors.readers.progress import JOINING, MERGING, stage

CHUNK = _jsonstream.CHUNK  # bytes read at a time: big enough that per-batch overhead vanishes, small to bound memory


class KinetoError(TraceError):
    """A Kineto JSON trace could not be read."""


def read_kineto(path: str | os.PathLike, progress: Progress | None = None, workers: int | None = None,
                early: EarlyStart | None = None) -> tuple[pd.DataFrame, dict]:
    """Read one Kineto trace -> (rows for `rooftop.trace.to_table`, metadata document).

    Large files are decoded on every core (`_kineto_parallel`); `workers` overrides how many
    processes (1: this one only); `early`: workers `rooftop import` forked before the libraries
    loaded, taken over when they read this very file. The rows are the same whichever of the
    strategies below reads them."""
    path = Path(path)
    try:
        s = _jsonstream.Stream(path, progress, CHUNK)
    except OSError as exc:
        raise KinetoError(path, f"cannot read: {exc.strerror or exc}") from None
    size = inflated_size(path) if s.gz else None
    n = workers if workers is not None else workers_for(s.total, s.gz, size)
    if n > 1:
        try:
            if s.gz:
                return read_inflated_split(path, s, n, size, early)
            return read_split(path, s, n, early)
        except FALL_BACK:  # a cut at a false boundary (one process re-cuts as it goes), or no pool
            s = _jsonstream.Stream(path, progress, CHUNK)
    return read_serial(path, s)


def read_serial(path: Path, s: _jsonstream.Stream) -> tuple[pd.DataFrame, dict]:
    """One process reads the whole stream (small files, one core, and every fall-back)."""
    return _read(path, s, None)


def read_split(path: Path, s: _jsonstream.Stream, workers: int, early: EarlyStart | None = None,
               name: str | os.PathLike | None = None) -> tuple[pd.DataFrame, dict]:
    """A plain file's event array cut into byte ranges, decoded by `workers` processes from the
    file itself (`RangeSplit`); `name`: the file the ranges are read from, when not `path` (an
    inflated gzip file)."""
    return _read(path, s, RangeSplit(name if name is not None else path, workers, CHUNK, early))


def read_inflated_split(path: Path, s: _jsonstream.Stream, workers: int, size: int | None,
                        early: EarlyStart | None = None) -> tuple[pd.DataFrame, dict]:
    """A gzip file inflated whole first (~0.3 s per 100 MB, ~10% of the decode; or taken over from
    the early start), then cut in byte ranges as a plain file is (`read_split`); streamed to the
    workers in batches (`read_stream`) where it cannot be inflated to a file."""
    progress = s.progress
    plain = (early.adopt_inflated(path) if early is not None else None) or inflated(s, size)
    s.close()
    if plain is None:
        return read_stream(path, _jsonstream.Stream(path, progress, CHUNK), workers)
    with plain:
        name = inflated_name(plain)
        return read_split(path, _jsonstream.Stream(name, progress, CHUNK), workers, early, name)


def read_stream(path: Path, s: _jsonstream.Stream, workers: int) -> tuple[pd.DataFrame, dict]:
    """This process inflates and cuts the array into batches of whole elements, which `workers`
    processes decode (`ParallelSink`: every batch crosses a pipe)."""
    return _read(path, s, ParallelSink(workers))


def _read(path: Path, s: _jsonstream.Stream, parallel: ParallelSink | RangeSplit | None) -> tuple[pd.DataFrame, dict]:
    split = parallel if isinstance(parallel, RangeSplit) else None
    sink = parallel if isinstance(parallel, ParallelSink) else Collector()
    progress = s.progress  # (a range split redraws the stream's own as the whole file's)
    warnings: list[str] = []
    head: dict = {}
    failure: BaseException | None = None
    # millions of short-lived decoded objects, none in a cycle: the cyclic GC would only rescan them
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            head = _jsonstream.document(s, "traceEvents", sink, split.start if split else None)
        except (ValueError, EOFError, RecursionError) as exc:
            failure = exc
        except BaseException:  # Ctrl-C, SIGTERM: stop the workers now, and wait for none of them
            if parallel is not None:
                parallel.abort()
            raise
        if split is not None:
            if isinstance(failure, _jsonstream.Malformed):
                # its offset counts from this process's range: one process reads it all again and
                # says where, so the workers' ranges are not waited for
                split.abort()
                raise Recut()
            if split.pool is not None:
                _merging(progress, split)
            sink = split.finish(sink)  # raises Recut when a range did not parse
        elif parallel is not None:
            _merging(progress, parallel)
            sink = parallel.finish()
        if failure is not None:
            malformed = isinstance(failure, _jsonstream.Malformed)
            if not sink.events:
                what = s.truncated or str(failure) or failure.__class__.__name__
                if malformed:
                    what = f"{failure} at character {failure.offset:,}"
                raise KinetoError(path, f"not a readable Kineto trace: {what}",
                                  "expected PyTorch profiler JSON with a traceEvents array") from None
            lost = s.left
            if malformed:
                warnings.append(f"{failure} at character {failure.offset:,}: kept the {sink.events} events before it; "
                                "the rest of the file is not read")
            else:
                warnings.append(
                    f"truncated trace ({s.truncated or failure}): kept {sink.events} complete events, dropped the "
                    f"last {lost} bytes (an incomplete event); anything written after the cut is lost")
        # from here on, column-sized arrays go back to the OS when freed (see `give_back_memory`;
        # not during the decode, whose 4 MB batches would each be mapped afresh: slower)
        give_back_memory()
        stage(progress, JOINING)
        rows, meta = assemble(sink, head, path)
        rows, meta = kineto_ranges.add_range_rows(rows, meta, path, sink.origin)  # (range-profiler mode)
    finally:
        s.close()
        if was_enabled:
            gc.enable()
    give_back_memory()  # the parse's freed heap (glibc keeps ~80 MB per 100k kernels otherwise)
    meta["warnings"] = warnings + meta.get("warnings", [])
    if "baseTimeNanoseconds" not in head and "deviceProperties" in head and warnings:
        meta["warnings"].append("trailer lost: baseTimeNanoseconds unknown, absolute times unknown")
    if sink.untimed:
        meta["warnings"].append(f"{sink.untimed} event(s) whose timestamp is not a usable number dropped")
    return rows, redact(meta)


def _merging(progress: Progress | None, parallel: ParallelSink | RangeSplit) -> None:
    """Say that the read now waits for its workers' columns; a stop heard here (Esc in the TUI
    raises from the display) stops the workers at once, as one heard during the read does."""
    try:
        stage(progress, MERGING)
    except BaseException:
        parallel.abort()
        raise
