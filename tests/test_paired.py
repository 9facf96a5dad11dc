"""`rooftop.trace.paired.built`: the builds' results in the builders' order, on two threads, errors raised."""
from __future__ import annotations

import threading
import time

import pytest

from rooftop.trace.paired import built


@pytest.fixture(autouse=True)
def threads_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    column builds on two threads."""
    monkeypatch.setenv("ROOFTOP_THREADS", "1")


def test_results_come_in_the_builders_order_from_two_threads():
    seen: dict[str, str] = {}

    def make(k: str, delay: float):
        def build():
            time.sleep(delay)  # the first builder finishes last
            seen[k] = threading.current_thread().name
            return k * 2
        return build
    out = built({k: make(k, d) for k, d in (("a", 0.05), ("b", 0.0), ("c", 0.0))})
    assert list(out.items()) == [("a", "aa"), ("b", "bb"), ("c", "cc")]
    assert len(set(seen.values())) == 2 and all(n.startswith("rooftop-build") for n in seen.values())


def test_one_builder_runs_on_the_calling_thread_and_errors_are_raised():
    assert built({"x": lambda: threading.current_thread().name}) == {"x": threading.current_thread().name}
    assert built({}) == {}

    def boom():
        raise ValueError("column 7")
    with pytest.raises(ValueError, match="column 7"):
        built({"a": lambda: 1, "b": boom, "c": lambda: 3})
