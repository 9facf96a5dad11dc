"""Issue 38, item 4: no silent loss in parallel. A Kineto file that shrinks or changes while the
multi-worker import reads it is read again by one process, which keeps what is there and warns of
a cut exactly as the one-process import does; never fewer kernels without a word."""
from __future__ import annotations

import json
import os
import time

import pytest

from bad_inputs.corpus import _kernel_ev

N = 60_000


def _trace(path):
    evs = ",\n".join(json.dumps(_kernel_ev(i, 10 + 2 * i, 1)) for i in range(N))
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n' + evs + "\n]}")
    return path


def _kernels(rows) -> int:
    return int((rows["kind"].astype(str) == "kernel").sum())


@pytest.mark.parametrize("change", ["shrink", "rewrite"])
def test_a_file_changed_during_a_parallel_read_is_never_silently_short(tmp_path, monkeypatch, change):
    from collectors.readers import _kineto_parallel as par
    from collectors.readers.kineto import read_kineto

    path = _trace(tmp_path / "t.json")
    size = path.stat().st_size
    original = par._decode_into
    done = tmp_path / "changed"

    parent = os.getpid()

    def changing(c, p, start, end, chunk):
        # The worker waits; this process, its own last piece read, takes pieces from the back: the
        # first of them finds the file changed (cut where that piece starts, or rewritten in place)
        if os.getpid() != parent:
            if not done.exists():
                time.sleep(0.5)
        elif not done.exists():
            done.write_text("x")
            if change == "shrink":  # cut where this piece starts: an element boundary, every later piece gone
                os.truncate(p, start)
            else:  # same size, other bytes: only the mtime says
                with open(p, "r+b") as fh:
                    fh.seek(size // 2)
                    fh.write(b" " * 64)
                os.utime(p, ns=(1, 1))
        original(c, p, start, end, chunk)
    monkeypatch.setattr(par, "_decode_into", changing)
    try:
        rows, meta = read_kineto(path, workers=2)
    except Exception as exc:  # an error is allowed: one line, never a silent loss
        from rooftop.trace import TraceError
        assert isinstance(exc, TraceError), exc
        return
    assert done.exists()  # the change happened during the read
    monkeypatch.setattr(par, "_decode_into", original)
    one, one_meta = read_kineto(path, workers=1)  # the file as it is now, one process
    assert _kernels(rows) == _kernels(one)
    if _kernels(rows) < N:
        assert any("truncated" in w or "malformed" in w for w in meta["warnings"]), meta["warnings"]
    assert [w for w in meta["warnings"] if "truncated" in w] == [w for w in one_meta["warnings"] if "truncated" in w]


def test_an_unchanged_file_is_read_whole_in_parallel(tmp_path):
    from collectors.readers.kineto import read_kineto

    rows, meta = read_kineto(_trace(tmp_path / "t.json"), workers=2)
    assert _kernels(rows) == N and not any("truncated" in w for w in meta["warnings"])
