"""The Kineto reader on every core gives exactly the rows of the one-process reader."""
from __future__ import annotations

import gzip
import json
import re

import pytest

from collectors.readers import _jsonstream, _kineto_early, _kineto_parallel, kineto
from collectors.readers._kineto_events import Collector
from collectors.readers.kineto import read_kineto
from rooftop.trace import to_table

from test_kineto import PREFIX, FILES, _synthetic, _write


def _replicated(n: int, name_of=lambda i, name: name) -> dict:
    doc = _synthetic()
    evs = []
    for i in range(n):
        for e in doc["traceEvents"]:
            e = json.loads(json.dumps(e))
            e["ts"] = round(e["ts"] + i * 1000, 3)
            e["name"] = name_of(i, e["name"])
            for key in ("External id", "correlation"):
                if key in e.get("args", {}):
                    e["args"][key] += 1000 * i
            evs.append(e)
    doc["traceEvents"] = evs
    return doc


def _but_source(meta: dict) -> dict:
    """A read's metadata but its `source`, which names the file read (an inflated gzip's is a
    temporary file)."""
    return {k: v for k, v in meta.items() if k != "source"}


def _in_pieces(tmp_path, monkeypatch):
    """A ~440 KB trace, read in batches of 8 KB and cut into pieces of ~20 KB (about 20)."""
    p = _write(tmp_path / "t.json", _replicated(200))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    monkeypatch.setattr(_kineto_parallel, "PIECES_MIN", 20_000)
    return p


@pytest.mark.parametrize("gz", [False, True])
def test_two_workers_equal_one_process(tmp_path, monkeypatch, gz):
    p = _write(tmp_path / ("t.json.gz" if gz else "t.json"), _replicated(200), gz=gz)
    monkeypatch.setattr(kineto, "CHUNK", 8_000)  # dozens of batches, merged in order
    one, meta1 = read_kineto(p, workers=1)
    two, meta2 = read_kineto(p, workers=2)
    assert one.equals(two)
    assert to_table(one).equals(to_table(two))  # and so the stored tables
    assert _but_source(meta1) == _but_source(meta2)
    assert int((two["kind"] == "kernel").sum()) == 400


def test_pieces_read_as_bytes_or_as_text_equal_one_process(tmp_path, monkeypatch):
    """A piece goes to the compiled decoder as the bytes read where they are ASCII and its plain
    subset, and is read as text otherwise (a name beyond ASCII, an id given as text): either way
    as the stream reads it, and the whole read as one process reads it."""
    from collectors.readers import _kineto_events
    try:
        from collectors.readers import _kineto_fast
    except ImportError:
        pytest.skip("the compiled decoder is not built")
    monkeypatch.setattr(_kineto_events, "_kineto_fast", _kineto_fast)  # (on even with ROOFTOP_SPEEDUPS=0)
    doc = _replicated(200, lambda i, name: name + "\u00e9" if i % 37 == 5 else name)
    for e in doc["traceEvents"][len(doc["traceEvents"]) // 2::101]:  # some pieces not the plain subset
        if "External id" in e.get("args", {}):
            e["args"]["External id"] = str(e["args"]["External id"])
    p = _write(tmp_path / "t.json", doc)
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    monkeypatch.setattr(_kineto_parallel, "PIECES_MIN", 20_000)
    one, meta1 = read_kineto(p, workers=1)
    two, meta2 = read_kineto(p, workers=2)
    assert one.equals(two) and _but_source(meta1) == _but_source(meta2)
    raw = p.read_bytes()
    first, end = raw.index(b"{", raw.index(b'"traceEvents"')), raw.rindex(b"]")
    cuts = _kineto_parallel.boundaries(str(p), first, end, 20)
    taken = []
    for a, b in zip([first] + cuts[:-1], cuts):
        whole, streamed = Collector(), Collector()
        taken.append(_kineto_parallel._decode_whole(whole, str(p), a, b))
        _jsonstream.array(_jsonstream.Stream(p, None, 8_000, a, b), streamed)
        assert _resolved(whole) == (_resolved(streamed) if taken[-1] else _resolved(Collector()))  # (nothing added)
    assert True in taken and False in taken


def test_a_copy_and_a_kernel_starting_together_keep_their_order_whatever_the_batches(tmp_path, monkeypatch):
    """A batch's rows are collected a kind at a time: a memcpy and a kernel that start at the same
    time come out kernel first, whether the file put them in one batch or in two."""
    doc = _replicated(60)
    evs = doc["traceEvents"]
    copy = next(i for i, e in enumerate(evs) if e["cat"] == "gpu_memcpy")
    kernel = max(i for i, e in enumerate(evs) if e["cat"] == "kernel")
    evs[kernel]["ts"] = evs[copy]["ts"]  # the copy comes first in the file, the kernel far later
    p = _write(tmp_path / "t.json", doc)
    reads = []
    for chunk in (1 << 20, 2_000):  # one batch; many, the two in different ones
        monkeypatch.setattr(kineto, "CHUNK", chunk)
        reads.append(read_kineto(p, workers=1)[0])
    assert reads[0].equals(reads[1])
    tied = reads[0][reads[0]["start_ns"] == reads[0].loc[reads[0]["name"] == "Memcpy DtoD", "start_ns"].iloc[0]]
    assert tied["kind"].tolist()[:2] == ["kernel", "memcpy"]


def _resolved(c: Collector) -> dict:
    """A collector's rows of each kind, each name, thread and shape id replaced by what it stands
    for, as a sorted list: a batch appends its events a category at a time, so ids and the order
    of rows of different categories follow the batches' bounds (the rows read from them, sorted
    by time, do not)."""
    tables = {"name": c.names.values_list(), "thread": c.threads.values_list(), "shape": c.shape_inputs}
    out = {}
    for attr, cols in vars(c).items():
        if hasattr(cols, "fields"):
            columns = [[tables[f][i] if f in tables and i >= 0 else i for i in cols.np(f).tolist()] for f in cols.fields]
            out[attr] = sorted(zip(*columns), key=repr)
    return {**out, "events": c.events, "untimed": c.untimed, "origin": c.origin}


@pytest.mark.parametrize("gz", [False, True])
def test_a_parallel_read_names_the_wait_for_its_workers(tmp_path, monkeypatch, gz):
    """While this process waits for the workers' columns and reads them back (~1.4 s at 1M kernels,
    after its own range is read), a progress display with stages says so; one process never does."""
    from collectors.readers import progress as import_command

    class Seen:
        def __init__(self):
            self.heard = []

        def __call__(self, done, total, unit="bytes"):
            self.heard.append("bytes")

        def stage(self, name):
            self.heard.append(name)

    p = _write(tmp_path / ("t.json.gz" if gz else "t.json"), _replicated(200), gz=gz)
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    for workers, stages in ((2, [import_command.MERGING, import_command.JOINING]), (1, [import_command.JOINING])):
        progress = Seen()
        read_kineto(p, progress=progress, workers=workers)
        seen = progress.heard
        assert [s for s in seen if s != "bytes"] == stages and seen[0] == "bytes"
        assert seen.index(stages[0]) > len(seen) - 3  # after every byte


def test_a_stop_heard_at_the_wait_for_the_workers_stops_them(tmp_path, monkeypatch):
    """Esc in the TUI raises from the display's `stage`: heard while this process would wait for
    the workers, it stops them at once (none left decoding), as a stop heard during the read does."""
    import multiprocessing

    class Stop(Exception):
        pass

    class Display:
        def __call__(self, done, total, unit="bytes"):
            pass

        def stage(self, name):
            raise Stop(name)

    p = _write(tmp_path / "t.json", _replicated(200))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    from collectors.readers.progress import MERGING

    with pytest.raises(Stop, match=re.escape(MERGING)):
        read_kineto(p, progress=Display(), workers=3)
    assert not [c for c in multiprocessing.active_children() if c.is_alive()]


def test_workers_hand_their_columns_over_in_files(tmp_path, monkeypatch):
    """Each worker writes its columns to its range's file (not the pool's pipe); one that cannot
    write it sends them through the pipe. The rows are the one-process rows either way."""
    import os

    p = _write(tmp_path / "t.json", _replicated(200))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    one, _ = read_kineto(p, workers=1)
    seen = []
    real = _kineto_parallel._unspill
    monkeypatch.setattr(_kineto_parallel, "_unspill", lambda result, spill: seen.append(result) or real(result, spill))
    two, _ = read_kineto(p, workers=3)
    assert one.equals(two) and seen == [_kineto_parallel.SPILLED] * 2
    seen.clear()
    monkeypatch.setattr(_kineto_parallel, "_spill_file", lambda: open(os.devnull, "rb"))  # not writable
    three, _ = read_kineto(p, workers=3)
    assert one.equals(three) and len(seen) == 2 and not any(isinstance(r, str) for r in seen)


@pytest.mark.parametrize("plain", [False, True])
def test_real_fixture_on_two_workers(fixtures_dir, monkeypatch, tmp_path, plain):
    path = fixtures_dir / "traces" / (PREFIX + FILES[0])
    if plain:  # inflated: read in byte ranges, by processes that each open the file
        path = tmp_path / "trace.json"
        path.write_bytes(gzip.decompress((fixtures_dir / "traces" / (PREFIX + FILES[0])).read_bytes()))
    monkeypatch.setattr(kineto, "CHUNK", 50_000)
    one, m1 = read_kineto(path, workers=1)
    two, m2 = read_kineto(path, workers=3)
    assert one.equals(two) and len(one)
    assert _but_source(m1) == _but_source(m2)


@pytest.mark.parametrize("gz", [False, True])
def test_false_boundary_falls_back_to_one_process(tmp_path, monkeypatch, gz):
    """Names full of `},{` put a cut inside a string: the one-process reader re-cuts, the
    parallel one cannot, so it starts again in one process and still gives the same rows. (A
    plain file is split in byte ranges, where a newline between elements makes the guess safe:
    this one is written on one line, names included.)"""
    doc = _replicated(60, lambda i, name: f"{name}<{{lambda()#1}},{{x}},{i}>" + "},{x" * 40)
    p = tmp_path / ("odd.json.gz" if gz else "odd.json")
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    monkeypatch.setattr(kineto, "CHUNK", 3_001)
    fell_back = []
    real = kineto._read

    def spy(path, s, parallel):
        try:
            return real(path, s, parallel)
        except _kineto_parallel.FALL_BACK:
            fell_back.append(parallel is not None)
            raise

    monkeypatch.setattr(kineto, "_read", spy)
    two, _ = read_kineto(p, workers=2)
    one, _ = read_kineto(p, workers=1)
    assert fell_back == [True]
    assert one.equals(two)


def test_plain_file_is_split_at_a_newline_between_elements(tmp_path, monkeypatch):
    """The same names, one element per block of lines: the byte ranges start at true boundaries,
    so no read starts again, and the workers read their ranges themselves."""
    doc = _replicated(60, lambda i, name: f"{name}<{{lambda()#1}},{{x}},{i}>" + "},{x" * 40)
    p = _write(tmp_path / "odd.json", doc)
    monkeypatch.setattr(kineto, "CHUNK", 3_001)
    ranges = []
    real = _kineto_parallel.boundaries
    monkeypatch.setattr(_kineto_parallel, "boundaries", lambda *a: ranges.append(real(*a)) or ranges[-1])
    two, m2 = read_kineto(p, workers=3)
    one, m1 = read_kineto(p, workers=1)
    assert len(ranges) == 1 and len(ranges[0]) == 2
    text = p.read_bytes()
    assert all(text[c:c + 1] == b"{" and text[:c].rstrip().endswith(b",") for c in ranges[0])
    assert one.equals(two) and m1["warnings"] == m2["warnings"]


def test_truncated_file_keeps_the_same_prefix_in_parallel(tmp_path, monkeypatch):
    text = json.dumps(_replicated(100), indent=1)
    p = tmp_path / "cut.json"
    p.write_text(text[: int(len(text) * 0.7)])
    monkeypatch.setattr(kineto, "CHUNK", 5_000)
    one, m1 = read_kineto(p, workers=1)
    two, m2 = read_kineto(p, workers=2)
    assert one.equals(two) and len(two)
    assert m1["warnings"] == m2["warnings"] and any("truncated" in w for w in m2["warnings"])


def test_gzip_is_inflated_to_a_file_and_cut_in_ranges(tmp_path, monkeypatch):
    """A gzip file on several processes: inflated whole into a temporary file, which the workers
    read in byte ranges as a plain file's; where that cannot be done, batches streamed to the
    workers. The one-process rows either way, and a truncated gzip keeps the same prefix and says
    the same thing."""
    text = json.dumps(_replicated(150), indent=1).encode()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    one, m1 = read_kineto(p, workers=1)
    files, ranges = [], []
    real_inflated, real_boundaries = _kineto_parallel.inflated, _kineto_parallel.boundaries
    monkeypatch.setattr(kineto, "inflated", lambda *a: files.append(real_inflated(*a)) or files[-1])
    monkeypatch.setattr(_kineto_parallel, "boundaries", lambda *a: ranges.append(real_boundaries(*a)) or ranges[-1])
    two, m2 = read_kineto(p, workers=2)
    assert one.equals(two) and m1["warnings"] == m2["warnings"] == []
    assert len(files) == 1 and files[0].closed and len(ranges) == 1 and len(ranges[0]) == 1  # cut once
    monkeypatch.setattr(kineto, "inflated", lambda *a: None)  # no room for the file: batches instead
    three, m3 = read_kineto(p, workers=2)
    assert one.equals(three) and m3["warnings"] == []
    assert len(ranges) == 1
    # a gzip stream that ends early: not inflated to a file (the streaming reader says what was lost)
    cut = tmp_path / "cut.json.gz"
    whole = gzip.compress(text)
    cut.write_bytes(whole[: int(len(whole) * 0.6)])
    monkeypatch.setattr(kineto, "inflated", lambda *a: files.append(real_inflated(*a)) or files[-1])
    c1, w1 = read_kineto(cut, workers=1)
    c2, w2 = read_kineto(cut, workers=2)
    assert files[-1] is None and c1.equals(c2) and len(c2)
    assert w1["warnings"] == w2["warnings"] and any("truncated" in w for w in w2["warnings"])


def test_worker_count_of_a_gzip_file_by_its_inflated_size(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFTOP_WORKERS", raising=False)
    big = 200 << 20
    assert _kineto_parallel.workers_for(5 << 20, gz=True, inflated_size=big) == _kineto_parallel.workers_for(big, gz=False)
    assert _kineto_parallel.workers_for(5 << 20, gz=True, inflated_size=1 << 20) == 1
    p = tmp_path / "x.json.gz"
    p.write_bytes(gzip.compress(b"{}" * 5000))
    assert _kineto_parallel.inflated_size(p) == 10_000


def test_worker_count(monkeypatch):
    monkeypatch.delenv("ROOFTOP_WORKERS", raising=False)
    assert _kineto_parallel.workers_for(1 << 20, gz=False) == 1           # small: not worth a pool
    assert _kineto_parallel.workers_for(1 << 30, gz=False) >= 1
    monkeypatch.setenv("ROOFTOP_WORKERS", "3")
    assert _kineto_parallel.workers_for(1, gz=False) == 3


def test_malformed_element_reported_as_one_process_reports_it(tmp_path, monkeypatch):
    """A syntax error in any range: the whole read starts again in one process, which keeps the
    events before it and names the character where it is."""
    text = json.dumps(_replicated(80), indent=1)
    at = text.index('"ts"', len(text) * 3 // 4)
    p = tmp_path / "bad.json"
    p.write_text(text[:at] + '"ts" 12' + text[at + 5:])  # a missing colon, three quarters in
    monkeypatch.setattr(kineto, "CHUNK", 5_000)
    one, m1 = read_kineto(p, workers=1)
    two, m2 = read_kineto(p, workers=2)
    assert one.equals(two) and len(two)
    assert m1["warnings"] == m2["warnings"] and any("malformed JSON" in w for w in m2["warnings"])


def test_this_process_reads_a_short_last_piece(tmp_path, monkeypatch):
    """The last piece, this process's own (read after pandas loads), is cut short: the workers take
    the rest; the rows are the one-process rows."""
    p = _in_pieces(tmp_path, monkeypatch)
    monkeypatch.setattr(_kineto_parallel, "OWN_PIECE", 3_000)
    one, meta1 = read_kineto(p, workers=1)
    size = p.stat().st_size
    split = _kineto_parallel.RangeSplit(str(p), 2, 8_000)
    first = p.read_bytes().index(b"{", p.read_bytes().index(b'"traceEvents"'))
    split._fork(first, size)
    try:
        even = _kineto_parallel.boundaries(p, first, size, _kineto_parallel.pieces_for(size - first, 2))
        assert split.cuts[:-1] == even and size - split.cuts[-1] < 3 * 3_000
    finally:
        split.abort()
    two, meta2 = read_kineto(p, workers=2)
    assert one.equals(two) and _but_source(meta1) == _but_source(meta2)


def _forks(monkeypatch) -> list:
    calls = []
    fork = _kineto_parallel.RangeSplit._fork

    def counted(self, first, end):
        calls.append(first)
        return fork(self, first, end)
    monkeypatch.setattr(_kineto_parallel.RangeSplit, "_fork", counted)
    return calls


def test_workers_forked_before_the_libraries_load_are_adopted_by_the_read(tmp_path, monkeypatch):
    """`rooftop import` forks the range workers before it imports pandas (`start_early`): the read
    takes them over (no second fork, the same pieces) and gives the one-process rows."""
    p = _in_pieces(tmp_path, monkeypatch)
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    one, meta1 = read_kineto(p, workers=1)
    forks = _forks(monkeypatch)
    started = _kineto_early.start_early(str(p), 8_000)
    early = started.split
    assert early is not None and len(forks) == 1 and len(early.cuts) > 4
    size = p.stat().st_size
    assert early.cuts == _kineto_parallel.boundaries(p, early.first, size,
                                                     _kineto_parallel.pieces_for(size - early.first, 2))
    two, meta2 = read_kineto(p, early=started)
    assert len(forks) == 1 and not started.waiting()  # adopted, not forked again
    assert one.equals(two)
    assert _but_source(meta1) == _but_source(meta2)


@pytest.mark.parametrize("slow", ["worker", "reader"])
def test_pieces_go_to_whichever_process_is_free(tmp_path, monkeypatch, slow):
    """Workers take pieces from the front, this process from the back once its own piece is read:
    a slow worker leaves most pieces to this process, a slow reader (pandas still loading) leaves
    them all to the worker. The one-process rows either way."""
    import os
    import time

    p = _in_pieces(tmp_path, monkeypatch)
    one, meta1 = read_kineto(p, workers=1)
    reader, mine = os.getpid(), []
    decode = _kineto_parallel._decode_into

    def timed(c, path, start, end, chunk):  # (forked into the worker with the rest)
        if os.getpid() == reader:
            mine.append(start)
        elif slow == "worker":
            time.sleep(0.05)
        return decode(c, path, start, end, chunk)
    monkeypatch.setattr(_kineto_parallel, "_decode_into", timed)
    if slow == "reader":
        finish = _kineto_parallel.RangeSplit.finish

        def late(self, own):
            time.sleep(1.0)  # the worker has taken every piece by now
            return finish(self, own)
        monkeypatch.setattr(_kineto_parallel.RangeSplit, "finish", late)
    splits = []
    real = _kineto_parallel.pieces_for
    monkeypatch.setattr(_kineto_parallel, "pieces_for", lambda *a: splits.append(real(*a)) or splits[-1])
    two, meta2 = read_kineto(p, workers=2)
    assert one.equals(two)
    assert _but_source(meta1) == _but_source(meta2)
    shared = splits[0] - 1  # the last piece is this process's own, read with the keys after the array
    assert shared > 4
    if slow == "worker":
        assert len(mine) > shared // 2  # most pieces taken here, from the back
        assert mine == sorted(mine, reverse=True)
    else:
        assert mine == []


@pytest.mark.parametrize("early", [False, True])
def test_a_worker_that_starts_late_leaves_every_piece_to_this_process(tmp_path, monkeypatch, early):
    """A worker not yet started when this process has read its own piece: this process takes
    every piece, the first included, from the back (workers forked early or by the read alike)."""
    import time

    p = _in_pieces(tmp_path, monkeypatch)
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    one, meta1 = read_kineto(p, workers=1)
    start = _kineto_parallel._init_range_worker

    def late(ends):  # (forked into the worker)
        time.sleep(1.5)
        start(ends)
    monkeypatch.setattr(_kineto_parallel, "_init_range_worker", late)
    taken, splits = [], []
    decode = _kineto_parallel._decode_range
    monkeypatch.setattr(_kineto_parallel, "_decode_range", lambda *a: taken.append(a[1]) or decode(*a))
    real, cut = _kineto_parallel.pieces_for, _kineto_parallel.boundaries
    monkeypatch.setattr(_kineto_parallel, "pieces_for", lambda *a: splits.append(real(*a)) or splits[-1])
    monkeypatch.setattr(_kineto_parallel, "boundaries", lambda path, start, *a: splits.append(start) or cut(path, start, *a))
    started = None
    if early:
        started = _kineto_early.start_early(str(p), 8_000)
        assert started.waiting()
    two, meta2 = read_kineto(p, early=started)
    assert one.equals(two) and not (started and started.waiting())
    assert _but_source(meta1) == _but_source(meta2)
    pieces, first = splits  # (one split: the early workers adopted)
    assert len(taken) == pieces - 1 > 4  # every piece the workers share, from the back
    assert taken == sorted(taken, reverse=True) and taken[-1] == first  # the array's first piece last


def test_a_lock_given_up_on_reads_again_in_one_process(tmp_path, monkeypatch):
    """The pieces' lock held past `LOCK_WAIT_S` (a worker killed inside it) makes a taker give up:
    the pieces nobody took are missed, which the count of pieces sees, and the read starts again
    in one process (never a gap in the rows)."""
    import time

    p = _in_pieces(tmp_path, monkeypatch)
    monkeypatch.setattr(_kineto_parallel, "LOCK_WAIT_S", 0.2)  # (forked into the worker too)
    one, _ = read_kineto(p, workers=1)
    decode = _kineto_parallel._decode_into

    def slow(*a):
        time.sleep(0.05)
        return decode(*a)
    monkeypatch.setattr(_kineto_parallel, "_decode_into", slow)
    finish, seen = _kineto_parallel.RangeSplit.finish, []

    def held(self, own):
        self.ends.lock.acquire()  # neither this process nor the worker can take a piece now
        try:
            return finish(self, own)
        except BaseException as exc:
            seen.append(type(exc))
            raise
        finally:
            self.ends.lock.release()
    monkeypatch.setattr(_kineto_parallel.RangeSplit, "finish", held)
    two, _ = read_kineto(p, workers=2)
    assert seen == [_kineto_parallel.Recut] and one.equals(two)


def test_gzip_inflated_and_forked_before_the_libraries_load_is_taken_over(tmp_path, monkeypatch):
    """For a gzip file the early start inflates it into a temporary file and forks the workers on
    that: the read takes over both (no second inflation, no second fork) and gives the one-process
    rows. Another file's inflation is not taken: it is closed, and this file inflated afresh."""
    text = json.dumps(_replicated(200), indent=1).encode()
    p, other = tmp_path / "t.json.gz", tmp_path / "u.json.gz"
    p.write_bytes(gzip.compress(text))
    other.write_bytes(gzip.compress(text))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    one, meta1 = read_kineto(p, workers=1)
    forks, made = _forks(monkeypatch), []
    real = _kineto_parallel.inflated
    monkeypatch.setattr(_kineto_parallel, "inflated", lambda *a: made.append(real(*a)) or made[-1])
    monkeypatch.setattr(kineto, "inflated", _kineto_parallel.inflated)
    monkeypatch.setattr(_kineto_early, "inflated", _kineto_parallel.inflated)
    shown = []
    started = _kineto_early.start_early(str(p), 8_000, lambda done, total: shown.append((done, total)))
    assert len(made) == 1 and started.waiting() and len(forks) == 1
    assert shown and shown[-1] == (p.stat().st_size, p.stat().st_size)  # the inflation's progress
    two, meta2 = read_kineto(p, early=started)
    assert len(made) == 1 and len(forks) == 1 and made[0].closed  # taken over, then closed
    assert started.split is None and started.inflated is None
    assert one.equals(two)
    assert _but_source(meta1) == _but_source(meta2)
    started = _kineto_early.start_early(str(other), 8_000)
    three, _ = read_kineto(p, early=started)
    assert len(made) == 3 and made[1].closed and one.equals(three)  # the other file's dropped
    started.discard()


def _gone(pid: int, wait: float = 5) -> bool:
    """Whether a process has ended and been reaped (a zombie still answers signal 0). Not
    `Process.is_alive`: when the pool's own thread reaps a worker first, it says alive forever."""
    import os
    import time

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.01)
    return False


def test_early_workers_no_read_adopts_are_stopped(tmp_path, monkeypatch):
    """Another file read, the file changed, or no read at all: the early workers are killed, not
    left decoding (the program would wait for them at exit)."""
    a = _write(tmp_path / "a.json", _replicated(200))
    b = _write(tmp_path / "b.json", _replicated(150))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    forks = _forks(monkeypatch)
    started = _kineto_early.start_early(str(a), 8_000)
    procs = list(started.split.pool._processes.values())
    rows, _ = read_kineto(b, early=started)  # another file: its own workers
    assert len(forks) == 2 and not started.waiting()
    assert all(_gone(proc.pid) for proc in procs)
    started = _kineto_early.start_early(str(a), 8_000)
    procs = list(started.split.pool._processes.values())
    started.discard()
    assert all(_gone(proc.pid) for proc in procs)
    # a small file on one worker, a file that is no JSON object: no early start
    monkeypatch.setenv("ROOFTOP_WORKERS", "1")
    assert not _kineto_early.start_early(str(a), 8_000).waiting()
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    (tmp_path / "x.json").write_text("[1, 2, 3]")
    assert not _kineto_early.start_early(str(tmp_path / "x.json"), 8_000).waiting()
    assert len(forks) == 3
    # a gzip file no read takes over: its workers stopped and its inflated file closed
    gz = _write(tmp_path / "c.json.gz", _replicated(20), gz=True)
    started = _kineto_early.start_early(str(gz), 8_000)
    procs = list(started.split.pool._processes.values())
    inflated = started.inflated[1]
    started.discard()
    assert all(_gone(proc.pid) for proc in procs) and inflated.closed and len(forks) == 4


def test_import_command_forks_early_and_writes_what_one_process_writes(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from rooftop_cli import main

    p = _write(tmp_path / "t.json", _replicated(200))
    monkeypatch.setattr(kineto, "CHUNK", 8_000)
    monkeypatch.setattr("collectors.readers.import_command.CHUNK", 8_000)
    forks = _forks(monkeypatch)
    monkeypatch.setenv("ROOFTOP_WORKERS", "1")
    assert main(["import", str(p), "-o", str(tmp_path / "one.parquet")]) == 0
    assert forks == []
    monkeypatch.setenv("ROOFTOP_WORKERS", "2")
    assert main(["import", str(p), "-o", str(tmp_path / "two.parquet")]) == 0
    assert len(forks) == 1
    one, two = pq.read_table(tmp_path / "one.parquet"), pq.read_table(tmp_path / "two.parquet")
    assert one.equals(two)


def test_import_command_keeps_the_libraries_objects_out_of_the_collectors_sight(tmp_path, monkeypatch):
    """A fresh `rooftop import` loads pandas and pyarrow with the cyclic collector off, then freezes
    what they made (`gc.freeze`: ~65k objects no collection scans again) and turns it back on; a
    process that had the libraries already (this one) has nothing of its own frozen."""
    import gc
    import subprocess
    import sys

    from rooftop_cli import main

    p = _write(tmp_path / "t.json", _replicated(20))
    code = ("import gc, sys; from rooftop_cli import main; rc = main(['import', sys.argv[1], '-o', sys.argv[2]]); "
            "print(rc, gc.isenabled(), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code, str(p), str(tmp_path / "a.parquet")], capture_output=True,
                         text=True, timeout=120).stdout.split()[-3:]  # (after the written file's name)
    assert out[:2] == ["0", "True"] and int(out[2]) > 10_000
    frozen = gc.get_freeze_count()
    assert main(["import", str(p), "-o", str(tmp_path / "b.parquet")]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_gzip_not_inflated_to_a_file_without_room_for_it(tmp_path):
    from collectors.readers import _jsonstream

    p = tmp_path / "x.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    s = _jsonstream.Stream(p, None, 1 << 16)
    try:
        assert _kineto_parallel.inflated(s, size=1 << 62) is None  # more than any disk holds
    finally:
        s.close()
    s = _jsonstream.Stream(p, None, 1 << 16)
    with _kineto_parallel.inflated(s, size=20) as f:
        f.seek(0)
        assert f.read() == b'{"traceEvents": []}'
    s.close()


def test_a_workers_collector_crosses_by_pickle_without_a_copy_and_still_grows(tmp_path):
    """A worker's collector, unpickled here, keeps the arrays pickle made (no copy into new ones);
    appending to it afterwards (this process's own range, `merge`) grows them as its own would,
    and what it holds is what the worker held."""
    import pickle

    import numpy as np

    from collectors.readers._kineto_events import Collector
    from collectors.readers._kineto_values import Columns

    worker = Collector()
    worker.add_text(json.dumps(_replicated(3)["traceEvents"]))
    back = pickle.loads(pickle.dumps(worker, protocol=pickle.HIGHEST_PROTOCOL))
    for attr in ("gpu", "rt", "ops", "ann"):
        mine, theirs = getattr(back, attr), getattr(worker, attr)
        assert len(mine) == len(theirs) > 0
        for f in theirs.fields:
            assert np.array_equal(mine.np(f), theirs.np(f)) and mine.data[f].base is not None  # pickle's own
    own = Collector()
    own.add_text(json.dumps(_replicated(2)["traceEvents"]))
    back.merge(own)
    both = Collector()  # the same two batches, in one process
    both.add_text(json.dumps(_replicated(3)["traceEvents"]))
    both.add_text(json.dumps(_replicated(2)["traceEvents"]))
    for attr in ("gpu", "rt", "ops", "ann"):
        for f in getattr(both, attr).fields:
            assert np.array_equal(getattr(back, attr).np(f), getattr(both, attr).np(f)), (attr, f)
    cols = Columns("a", "b")
    cols.adopt({"a": np.arange(3), "b": np.arange(3)})
    cols.extend({"a": [7], "b": [8]})
    assert cols.np("a").tolist() == [0, 1, 2, 7] and cols.np("b").tolist() == [0, 1, 2, 8]
    with pytest.raises(AssertionError):
        cols.adopt({"a": np.arange(2), "b": np.arange(2)})
