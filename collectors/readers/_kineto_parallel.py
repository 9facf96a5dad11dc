"""Decoding a Kineto trace's events on every core.

A plain file (`RangeSplit`), or a gzip file inflated whole into a nameless temporary file first
(`inflated`): the event array is cut into pieces (byte ranges) at element boundaries. The worker
processes take pieces from the front and read and decode them from the file itself, as the
one-process reader would (`_jsonstream.array`); this process decodes the last piece and the keys
after the array, then takes the pieces no worker has begun from the back, so that neither waits
for the other (`PIECES_PER_PROCESS`). Nothing but the workers' columns crosses to this process,
and those through a file, not the pool's pipe (`SPILLED`). Where a gzip file cannot be inflated
to a file (no room, not Linux: the workers reopen it through /proc), this process inflates it as
it reads and cuts the array into batches of whole elements, which workers decode (`ParallelSink`:
every batch and its columns cross a pipe, which costs most of what the second core gains). Either
way the `Collector`s are merged in file order, so the columns come out exactly as a one-process
read would give them.

A cut is only a guess at an element boundary (a `},` inside a string or a nested object fools
it; a newline between the two elements, which no JSON string holds, makes it a safe guess); the
one-process reader tries an earlier cut when a batch does not parse, which a worker cannot do, so
a piece or batch that does not parse here makes the whole read start again in one process
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
import pickle
import re
import shutil
import signal
import sys
import tempfile
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from rooftop import speedups

from collectors.readers import _jsonstream
from collectors.readers._kineto_events import Collector, before_fork

# Below these sizes one process is faster than starting workers (a gzip inflates ~10x).
MIN_BYTES = {"plain": 48 << 20, "gzip": 6 << 20}


class Recut(Exception):
    """A batch cut at a false boundary: read the file again in one process."""


# What makes a parallel read start again in one process.
FALL_BACK = (Recut, BrokenProcessPool, OSError)


def workers_for(path_size: int, gz: bool, inflated_size: int | None = None) -> int:
    """How many decoding processes to use: every core this process may run on (`ROOFTOP_WORKERS`
    overrides, 1 = one process), and one for files too small to repay starting them (a gzip file
    by its `inflated_size` when known, else by its own size)."""
    env = os.environ.get("ROOFTOP_WORKERS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    if speedups.all_off():  # (rooftop/speedups.py: the umbrella means one process, unless set above)
        return 1
    if gz and inflated_size is not None:
        path_size, gz = max(path_size, inflated_size), False
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
    # `abort` ends a worker with SIGTERM: it must die of it, not raise the exception the command
    # line's handler (inherited through the fork) turns it into, and then wait for more work
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _abort(pool: ProcessPoolExecutor | None, futures) -> None:
    """Stop a pool at once: queued work cancelled, running workers killed, nothing waited for (an
    interrupted import must end now, not when the workers finish their ranges). Only for pools
    whose queued calls are small (`RangeSplit`'s offsets): see `ParallelSink.abort`."""
    for f in futures:
        f.cancel()
    if pool is None:
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public way before 3.14
    for proc in procs:
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:  # reaped here (they die of SIGTERM at once): the program may end without its
        try:            # exit handlers, and orphans left as zombies are not always reaped by init
            proc.join(1)
        except (OSError, AttributeError, AssertionError):
            pass


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
        before_fork()
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
        # Only the batches already handed to the workers are waited for (a few, quick):
        # killing them could leave a 4 MB batch half-written into a pipe no one reads, and the
        # queue's feeder thread blocked on it at exit.
        self.close()


# The end of one element and the start of the next: `},` and a newline first (no JSON string
# holds a raw newline), any `},` + `{` where the file has no newlines between elements.
_BOUNDARIES = (re.compile(rb"\}[ \t\r]*,[ \t\r]*\n\s*\{"), re.compile(rb"\}\s*,\s*\{"))
_WINDOW = 1 << 20  # bytes searched for a boundary after each even split point


def boundaries(path, start: int, end: int, parts: int) -> list[int]:
    """Offsets of element starts that cut the bytes [start, end) into `parts` even ranges; fewer
    where no boundary is found near a split point."""
    out: list[int] = []
    step = (end - start) / max(1, parts)
    with open(path, "rb") as f:
        for k in range(1, parts):
            at = max(start + int(step * k), out[-1] if out else start)
            f.seek(at)
            # (a boundary is usually a few hundred bytes on: 64 KB first, where a newline one found
            # is the one the whole window gives, the leftmost)
            near = f.read(_WINDOW >> 4)
            m = _BOUNDARIES[0].search(near)
            window = near if m else near + f.read(_WINDOW - len(near))
            for pattern in _BOUNDARIES:
                m = m or pattern.search(window)
                if m:
                    cut = at + m.end() - 1  # the next element's `{`
                    if cut < end and (not out or cut > out[-1]):
                        out.append(cut)
                    break
    return out


# The array is cut into pieces of about this many bytes (a few per process: at most `PIECES_MAX`
# bytes, at least `PIECES_MIN`). Workers take pieces from the front, this process from the back
# once its own work is done (its last piece, and before it the import of pandas and pyarrow, which
# takes longer as the machine is loaded): whoever is free decodes the
# next piece, so the two ends meet wherever the processes' speeds put them. (A fixed share cannot:
# with this process's range shortened by a fixed lead, it still finished well after its worker
# at 100k kernels.) A smaller piece balances finer; each costs a range read and a collector.
PIECES_PER_PROCESS = 8
PIECES_MIN, PIECES_MAX = 4 << 20, 24 << 20  # (under glibc's 32 MiB cap on the heap's mmap threshold:
# a piece's bytes, read whole, then come from the heap and reuse its pages, `rooftop.heap`)
# This process's own piece, the last, which it reads with the keys after the array once pandas and
# pyarrow are loaded, is about this long: the workers take the rest from the front (with the
# compiled decoder, one worker is through a 100k-kernel trace before that import is over: a full
# piece read here after it was all that stood between the import and the join).
OWN_PIECE = 256 << 10


def pieces_for(size: int, processes: int) -> int:
    """How many pieces to cut `size` bytes of events into, for `processes` processes."""
    piece = min(PIECES_MAX, max(PIECES_MIN, size // max(1, PIECES_PER_PROCESS * processes)))
    return max(processes, -(-size // piece))


class _Ends:
    """The pieces not yet taken, shared by the processes: workers take from the front, this
    process from the back (`take`). Two integers and a lock, made before the workers start."""

    def __init__(self, ctx, pieces: int):
        self.lock = ctx.Lock()
        self.at = ctx.RawArray("q", [0, pieces])  # [next from the front, one past the next from the back]

    def take(self, front: bool) -> int | None:
        """The next piece from the front or the back; None when none is left, or when the lock
        stays held (a worker killed inside it: the read then meets the broken pool)."""
        if not self.lock.acquire(timeout=LOCK_WAIT_S):
            return None
        try:
            lo, hi = self.at
            if lo >= hi:
                return None
            if front:
                self.at[0] = lo + 1
                return lo
            self.at[1] = hi - 1
            return hi - 1
        finally:
            self.lock.release()


LOCK_WAIT_S = 5.0  # the lock is held for two reads and a write: anything longer is a dead holder


_ends: _Ends | None = None  # a worker's (`_init_range_worker`)


def _init_range_worker(ends: _Ends) -> None:
    global _ends
    _init_worker()
    _ends = ends


def _decode_range(path, start: int, end: int, chunk: int) -> Collector:
    """The elements in the bytes [start, end) of the event array (none of its ends)."""
    c = Collector()
    _decode_into(c, path, start, end, chunk)
    return c


def _decode_into(c: Collector, path, start: int, end: int, chunk: int) -> None:
    if c.compiled and _decode_whole(c, path, start, end):
        return
    s = _jsonstream.Stream(path, None, chunk, start, end)
    try:
        _jsonstream.array(s, c)
        if s.skip_ws() is not None:  # the array ended inside the range: the cut was no boundary
            raise Recut()
        if s.raw.tell() < end:
            # the file ends before this piece does: it shrank while it was read. Never a silent
            # loss: one process reads it again, and warns of a cut as it always does
            raise Recut()
    except (ValueError, EOFError, RecursionError):
        raise Recut() from None
    finally:
        s.close()


_BETWEEN = b" \t\r\n,"  # what the stream skips between elements (`_jsonstream.Stream.skip_ws`)


def _decode_whole(c: Collector, path, start: int, end: int) -> bool:
    """The piece's bytes read at once and handed to the compiled decoder as they are, whole (no
    text decoded from them, no 4 MB batches cut from it); False, with
    nothing added, where it does not take them (text beyond ASCII, not its plain subset), and the
    stream then reads the piece as before."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    if len(data) != end - start:  # (the file changed under the read: the stream says what)
        return False
    lo, hi = 0, len(data)
    while lo < hi and data[lo] in _BETWEEN:
        lo += 1
    while hi > lo and data[hi - 1] in _BETWEEN:
        hi -= 1
    return c.add_bytes(data, lo, hi)


def _decode_pieces(path, pieces: list[tuple[int, int]], chunk: int, spill: int | None = None):
    """A worker's task: pieces taken from the front until none is left, each run of consecutive
    pieces decoded into one collector -> {first piece of the run: [pieces in it, collector]};
    `spill`: the descriptor of this worker's file, where they go instead (`SPILLED` is returned,
    see there)."""
    runs: dict[int, list] = {}
    first = last = None
    while (i := _ends.take(front=True)) is not None:
        if last is None or i != last + 1:
            first = i
            runs[first] = [0, Collector()]
        _decode_into(runs[first][1], path, *pieces[i], chunk)
        runs[first][0] += 1
        last = i
    if spill is not None:
        try:
            with open(spill, "wb", closefd=False) as f:
                f.seek(0)
                f.truncate()
                pickle.dump(runs, f, protocol=pickle.HIGHEST_PROTOCOL)
            return SPILLED
        except OSError:  # a full disk: through the pipe after all
            pass
    return runs


# A worker's columns go back through a file, not through the pool's pipe: multiprocessing reads a
# large result from its pipe several times slower than it is written to and read from a file.
# The files are nameless (`tempfile.TemporaryFile`), made before the fork and inherited by it, so
# nothing is left behind whatever happens to either process; a worker that cannot write its file
# sends its columns through the pipe instead.
SPILLED = "rooftop: columns in the range's file"


def _spill_file():
    try:
        return tempfile.TemporaryFile(prefix="rooftop-range-")
    except OSError:
        return None


def _unspill(result, spill):
    """A worker's result: the one it returned, or the one it wrote to its file."""
    if not isinstance(result, str):
        return result
    spill.seek(0)
    return pickle.load(spill)


def inflated_size(path) -> int | None:
    """What a single-member gzip file says it inflates to (its last 4 bytes: the size mod 2^32, so
    a hint: a file of several GB says less, but its own size is then large enough anyway)."""
    try:
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return int.from_bytes(f.read(4), "little")
    except OSError:
        return None


def inflated(s: _jsonstream.Stream, size: int | None = None):
    """The rest of the gzip stream `s` inflated into a nameless temporary file (the gzip budget
    applies: a bomb raises, as a read would), for `RangeSplit` to cut; None where it cannot be
    used: not Linux (the workers reopen it as /proc/self/fd/N), no room to write it (`size`: what
    it should inflate to, checked against the free space first), or a stream that ends early or is
    corrupt (then the reader that streams says what, as it always has)."""
    if sys.platform != "linux":
        return None
    try:
        if size is not None and shutil.disk_usage(tempfile.gettempdir()).free < size + (64 << 20):
            return None
    except OSError:
        return None
    tmp = _spill_file()
    if tmp is None:
        return None
    try:
        s.copy_to(tmp)
        tmp.flush()
    except OSError:
        tmp.close()
        return None
    except BaseException:
        tmp.close()
        raise
    if s.truncated:
        tmp.close()
        return None
    return tmp


def inflated_name(tmp) -> str:
    """The name a process forked after `tmp` was made opens it by."""
    return f"/proc/self/fd/{tmp.fileno()}"


class RangeSplit:
    """The event array of a plain file decoded in pieces by every process (module docstring).

    `start` (the `at_array` hook of `_jsonstream.document`) cuts the array into pieces, starts the
    workers on them, and moves this process's cursor to the last piece, which it reads itself with
    the keys after the array; `finish` then takes the pieces no worker has begun, from the back,
    and merges every piece's collector in file order."""

    def __init__(self, path, workers: int, chunk: int, early=None):
        self.path, self.workers, self.chunk = path, workers, chunk
        self.early = early  # workers forked before the read, to take over (`_kineto_early.EarlyStart`)
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list[Future] = []
        self.first: int | None = None
        self.cuts: list[int] = []  # where each piece after the first starts: the last is this process's
        self.ends: _Ends | None = None
        self.spills: list = []  # each worker's file for its columns (`_spill_file`), or None
        self.file_id: tuple | None = None  # (device, inode, size, mtime) of an early start's file
        self.read_id: tuple | None = None  # the same, of the file the pieces were cut from (`start`)

    def start(self, s: _jsonstream.Stream) -> None:
        first = s.cursor_byte()
        if first is None:
            return  # this process reads it all
        # the file as the pieces are cut from it (an early start's, from before its workers forked):
        # `finish` compares it with the file once every piece is read
        self.read_id = self.file_id or file_id(self.path)
        early = self.early.adopt(self, first) if self.early is not None else None
        self.first = first  # (the early workers' too: `EarlyStart.adopt` checks)
        if early is not None:
            self.__dict__.update({k: getattr(early, k) for k in ("pool", "futures", "cuts", "ends", "spills")})
            self.read_id = early.file_id or self.read_id
        else:
            self._fork(first, s.end)
        if not self.cuts:
            return
        own, total, report = self.cuts[-1], s.end, s.progress
        s.seek_byte(own)
        if report is not None:  # this piece's progress drawn over the whole file
            s.progress = lambda done, _t: report(min(total, (done - own) * total // max(1, total - own)), total)

    def _fork(self, first: int, end: int) -> None:
        """Cut the array's bytes [first, end) into pieces and start the workers on all but the last."""
        self.first = first
        self.cuts = boundaries(self.path, first, end, pieces_for(end - first, self.workers))
        if not self.cuts:
            return
        if end - 2 * OWN_PIECE > self.cuts[-1]:  # this process's own piece cut short (`OWN_PIECE`)
            self.cuts += [c for c in boundaries(self.path, end - 2 * OWN_PIECE, end, 2) if c > self.cuts[-1]]
        fork = sys.platform == "linux"
        ctx = get_context("fork" if fork else "spawn")
        n = min(self.workers - 1, len(self.cuts))
        try:
            self.ends = _Ends(ctx, len(self.cuts))  # (the last piece is this process's alone)
            # (made before the pool forks its workers, which inherit them; spawned ones would not)
            self.spills = [_spill_file() if fork else None for _ in range(n)]
            before_fork()
            self.pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=_init_range_worker, initargs=(self.ends,))
        except (ImportError, NotImplementedError) as exc:  # no working sem_open: one process reads
            self._drop_spills()
            raise OSError(str(exc)) from None
        pieces = self.pieces()
        for spill in self.spills:
            self.futures.append(self.pool.submit(_decode_pieces, self.path, pieces, self.chunk,
                                                 spill.fileno() if spill is not None else None))

    def pieces(self) -> list[tuple[int, int]]:
        """The byte ranges of the pieces the workers share (this process's last piece not among them)."""
        return list(zip([self.first] + self.cuts[:-1], self.cuts))

    def finish(self, own: Collector) -> Collector:
        """Every piece's collector merged, in file order; raises `Recut` when a piece did not parse."""
        try:
            if self.ends is None:
                return own
            runs: dict[int, list] = {}
            pieces = self.pieces()
            while (i := self.ends.take(front=False)) is not None:  # what no worker has begun
                runs[i] = [1, _decode_range(self.path, *pieces[i], self.chunk)]
            for f, spill in zip(self.futures, self.spills):
                runs.update(_unspill(f.result(), spill))
            if sum(n for n, _ in runs.values()) != len(pieces):  # (a lock given up on: never a gap)
                raise Recut()
            if file_id(self.path) != self.read_id:
                # changed, shrunk or replaced while the pieces were read (size, mtime, inode): the
                # pieces may not be one file's; one process reads it again, and says what it finds
                raise Recut()
        except BaseException:  # a piece that did not parse, or Ctrl-C: the rest is not waited for
            self.abort()
            raise
        self.close()
        merged: Collector | None = None
        for i in sorted(runs):
            c = runs.pop(i)[1]
            if merged is None:
                merged = c
            else:
                merged.merge(c)
        if merged is None:
            return own
        merged.merge(own)
        return merged

    def close(self) -> None:
        if self.pool is not None:
            for f in self.futures:
                f.cancel()
            # the results are in: the workers' exits (freeing their memory takes a while at 1M kernels)
            # are waited for by the pool's own thread, not by the import
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self._drop_spills()

    def abort(self) -> None:
        _abort(self.pool, self.futures)
        self.pool = None
        self._drop_spills()

    def _drop_spills(self) -> None:
        for spill in self.spills:
            if spill is not None:
                spill.close()
        self.spills = [None] * len(self.spills)


def file_id(path) -> tuple | None:
    """(device, inode, size, mtime): what tells a file from its changed or replaced self."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
