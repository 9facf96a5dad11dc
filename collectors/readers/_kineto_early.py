"""Forking a Kineto file's decoding workers before the analysis libraries load.

`rooftop import` of a large Kineto file finds the event array and forks the range workers
(`_kineto_parallel.RangeSplit`) before this process imports pandas and pyarrow (~0.6 s), which it
then does while they decode (the pieces it would have decoded meanwhile are theirs); a gzip file is
inflated into its temporary file first. What was started is an `EarlyStart`, handed by the command
to the read (`read_kineto(..., early=)`), which takes it over when it is the same file; the
command discards what no read took. Nothing here is kept in module globals: a read that was not
handed an `EarlyStart` never meets another's workers.
"""
from __future__ import annotations

import os

from collectors.readers import _jsonstream
from collectors.readers._kineto_parallel import RangeSplit, file_id, inflated, inflated_name, inflated_size, workers_for


class _AtArray(Exception):
    """The event array is found: the early start has what it needs from the document."""


class _NoSink:
    def add_text(self, text: str) -> None:
        pass

    def add_objects(self, objs: list) -> None:
        pass


class EarlyStart:
    """What `start_early` started: range workers (`split`) and a gzip file's inflated temporary
    file (`inflated`: the gzip file's id and the file), each waiting for a read to take it over."""

    def __init__(self) -> None:
        self.split: RangeSplit | None = None
        self.inflated: tuple | None = None

    def waiting(self) -> bool:
        """Whether workers wait for a read to adopt them."""
        return self.split is not None

    def adopt(self, split: RangeSplit, first: int) -> RangeSplit | None:
        """The early workers, if they decode this very read's pieces (same file, same array offset,
        as many processes); any others are stopped."""
        early, self.split = self.split, None
        if early is None:
            return None
        same = early.first == first and early.workers == split.workers and early.file_id == file_id(split.path)
        if same:
            return early
        early.abort()
        return None

    def adopt_inflated(self, path):
        """The gzip file `path` inflated early, if it is that very file (the read takes it over and
        closes it); None otherwise (any other is closed)."""
        early, self.inflated = self.inflated, None
        if early is None:
            return None
        if early[0] == file_id(os.fspath(path)):
            return early[1]
        early[1].close()
        return None

    def discard(self) -> None:
        """Stop early workers no read adopted (an error before the read, another format), and drop
        an inflated file no read took over."""
        early, self.split = self.split, None
        if early is not None:
            early.abort()
        inflated_early, self.inflated = self.inflated, None
        if inflated_early is not None:
            inflated_early[1].close()


def start_early(path, chunk: int, progress: _jsonstream.Progress | None = None) -> EarlyStart:
    """Find a large Kineto file's event array and fork the range workers now (module docstring); a
    gzip file is inflated into its temporary file first (`progress` drawn). `RangeSplit.start`
    adopts the workers when the read finds the array at the same offset of the same file;
    `EarlyStart.discard` stops them when nothing did. Anything unexpected here only means an
    `EarlyStart` holding nothing."""
    early = EarlyStart()
    name = os.fspath(path)
    if name.lower().endswith(".json.gz"):
        name = _inflate_early(early, name, chunk, progress)
        if name is None:
            return early
    elif not name.lower().endswith(".json"):
        return early
    fid = file_id(name)
    n = workers_for(fid[2], False) if fid is not None else 1
    if n < 2:
        return early
    split = None
    try:
        s = _jsonstream.Stream(name, None, chunk)
        try:
            if s.gz:
                return early
            split = RangeSplit(name, n, chunk)

            def at_array(st: _jsonstream.Stream) -> None:
                first = st.cursor_byte()
                if first is not None:
                    split._fork(first, st.end)
                raise _AtArray
            _jsonstream.document(s, "traceEvents", _NoSink(), at_array)
        finally:
            s.close()
    except _AtArray:
        pass
    except BaseException as exc:  # workers forked already are stopped, whatever happened
        if split is not None:
            split.abort()
        if isinstance(exc, Exception):  # not a Kineto document after all, damaged: the import says what
            return early
        early.discard()
        raise  # Ctrl-C, SIGTERM
    if split is not None and split.pool is not None:
        split.file_id = fid
        early.split = split
    return early


def _inflate_early(early: EarlyStart, name: str, chunk: int, progress: _jsonstream.Progress | None) -> str | None:
    """A large gzip file inflated into its temporary file, kept in `early` for the read: the name
    the workers and the read open it by; None when it is small, or cannot be inflated."""
    fid = file_id(name)
    size = inflated_size(name)
    if fid is None or workers_for(fid[2], True, size) < 2:
        return None
    try:
        s = _jsonstream.Stream(name, progress, chunk)
    except OSError:
        return None
    try:
        tmp = inflated(s, size) if s.gz else None
    except Exception:  # a gzip bomb, a damaged file: the read says what
        return None
    finally:
        s.close()
    if tmp is None:
        return None
    early.inflated = (fid, tmp)
    return inflated_name(tmp)
