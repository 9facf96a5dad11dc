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
import re
from pathlib import Path
from typing import Any

import pandas as pd

from rooftop.redact import redact
from rooftop.trace import TraceError
from rooftop.trace.frame import give_back_memory

from . import _jsonstream, import_command, kineto_ranges
from ._jsonstream import Progress
from ._kineto_events import Collector
from ._kineto_parallel import (FALL_BACK, ParallelSink, RangeSplit, Recut, adopt_inflated, inflated, inflated_name,
                               inflated_size, workers_for)
from ._kineto_join import assemble, nest_intervals  # noqa: F401  (nest_intervals: used by nsys)

CHUNK = import_command.CHUNK  # bytes read at a time: big enough that per-batch overhead vanishes, small to bound memory


class KinetoError(TraceError):
    """A Kineto JSON trace could not be read."""


def read_kineto(path: str | os.PathLike, progress: Progress | None = None,
                workers: int | None = None) -> tuple[pd.DataFrame, dict]:
    """Read one Kineto trace -> (rows for `rooftop.trace.to_table`, metadata document).

    Large files are decoded on every core (`_kineto_parallel`); `workers` overrides how many
    processes (1: this one only). The rows are the same either way."""
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
                # inflated whole first (a small part of the decode), then cut in byte
                # ranges as a plain file is; or streamed to the workers in batches when that fails
                plain = adopt_inflated(path) or inflated(s, size)
                s.close()
                if plain is not None:
                    with plain:
                        name = inflated_name(plain)
                        return _read(path, _jsonstream.Stream(name, progress, CHUNK), RangeSplit(name, n, CHUNK))
                s = _jsonstream.Stream(path, progress, CHUNK)
            return _read(path, s, ParallelSink(n) if s.gz else RangeSplit(path, n, CHUNK))
        except FALL_BACK:  # a cut at a false boundary (one process re-cuts as it goes), or no pool
            s = _jsonstream.Stream(path, progress, CHUNK)
    return _read(path, s, None)


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
        import_command.stage(progress, import_command.JOINING)
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
        import_command.stage(progress, import_command.MERGING)
    except BaseException:
        parallel.abort()
        raise


def rank_of(path: Path, head_rank: Any = None) -> int | None:
    if isinstance(head_rank, int):
        return head_rank
    m = re.search(r"rank[=_\-]?(\d+)", path.name, re.IGNORECASE)
    return int(m.group(1)) if m else None


KINETO_SUFFIXES = (".json", ".json.gz")


def rank_files(src: Path) -> list[Path]:
    return sorted(p for p in src.iterdir() if p.is_file() and p.name.endswith(KINETO_SUFFIXES))


def import_dir(src: str | os.PathLike, out: str | os.PathLike, progress: Progress | None = None) -> list[Path]:
    """A directory of per-rank Kineto files -> `OUT/rank=N/trace.parquet`, one per rank, written
    atomically (see `importers.write_ranks`)."""
    from .importers import write_ranks

    return write_ranks(Path(src), Path(out), progress)[0]
