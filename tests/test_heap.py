"""glibc's mmap threshold (rooftop.heap): 1 MiB for viewing, 32 MiB for an import, set once a change."""
from __future__ import annotations

import ctypes

import pytest

from rooftop import heap

from test_kineto import _synthetic, _write


@pytest.fixture(autouse=True)
def heap_tuning_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    glibc's heap tuning."""
    monkeypatch.setenv("ROOFTOP_HEAP_TUNING", "1")


class _Libc:
    def __init__(self):
        self.calls = []

    def mallopt(self, option, value):
        self.calls.append(("mallopt", option, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


class _Recorded:
    """Stands for the import's first progress line (made right before the workers' early start):
    records what libc had been told by then."""

    def __init__(self, seen: list, libc: _Libc):
        from collectors.readers.progress import ProgressLine

        self.seen, self.libc, self.line = seen, libc, ProgressLine

    def __call__(self, *args, **kwargs):
        self.seen.append(list(self.libc.calls))
        return self.line(*args, **kwargs)


def test_trim_sets_the_viewers_threshold_once_and_map_from_another(monkeypatch):
    libc = _Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(heap, "_applied", False)
    heap.trim()
    heap.trim()
    assert libc.calls == [("mallopt", -3, 1 << 20), ("malloc_trim", 0), ("malloc_trim", 0)]
    libc.calls.clear()
    heap.map_from(heap.IMPORT_MAP_FROM)
    heap.trim()
    assert libc.calls == [("mallopt", -3, 32 << 20), ("mallopt", -1, 64 << 20), ("malloc_trim", 0)]


def test_trim_without_glibc_does_nothing(monkeypatch):
    def missing(name):
        raise OSError("no libc")
    monkeypatch.setattr(ctypes, "CDLL", missing)
    heap.trim()  # (no error)


def test_an_import_takes_large_arrays_from_the_heap(tmp_path, monkeypatch):
    """`rooftop import` sets the import's threshold before it reads (a load keeps the viewer's)."""
    from collectors.readers import import_command
    from rooftop.trace import load_trace

    libc = _Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setattr(heap, "_applied", False)
    src = _write(tmp_path / "step.json", _synthetic())
    args = type("Args", (), {"src": str(src), "output": str(tmp_path / "out.parquet")})()
    forked = []
    monkeypatch.setattr(import_command, "ProgressLine", _Recorded(forked, libc))
    assert import_command.run(args) == 0
    assert ("mallopt", -3, heap.IMPORT_MAP_FROM) in libc.calls and ("mallopt", -1, 2 * heap.IMPORT_MAP_FROM) in libc.calls
    assert ("mallopt", -3, heap.VIEW_MAP_FROM) not in libc.calls
    assert forked[0][:2] == [("mallopt", -3, heap.IMPORT_MAP_FROM), ("mallopt", -1, 2 * heap.IMPORT_MAP_FROM)]  # (before the fork)
    libc.calls.clear()
    monkeypatch.setattr(heap, "_applied", False)
    load_trace(tmp_path / "out.parquet")
    assert libc.calls[0] == ("mallopt", -3, heap.VIEW_MAP_FROM)
