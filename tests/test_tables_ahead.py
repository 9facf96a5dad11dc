"""The report's wait tables built on a second thread (`rooftop.present.report.tables_ahead`): the
same document as one thread builds, and an error in a table reaches the caller as without it."""
from __future__ import annotations

import pandas as pd
import pytest

from collectors.open import open_analysis
from rooftop.analysis import idle
from rooftop.present import report

needs_pandas3 = pytest.mark.skipif(int(pd.__version__.split(".")[0]) < 3, reason="the thread runs under pandas 3")


@pytest.fixture
def exports(fixtures_dir):
    found = sorted((fixtures_dir / "traces").glob("*.sqlite"))
    assert found
    return found


@needs_pandas3
def test_same_document_with_the_wait_tables_ahead(exports, monkeypatch):
    monkeypatch.setattr(report, "TWO_THREADS_MIN_ROWS", 0)
    started = []
    real = report.threading.Thread.start
    monkeypatch.setattr(report.threading.Thread, "start", lambda self: (started.append(self.name), real(self)))
    for path in exports:
        monkeypatch.setenv("ROOFTOP_THREADS", "1")
        ahead = report.report_dict(open_analysis(path))
        monkeypatch.setenv("ROOFTOP_THREADS", "0")
        plain = report.report_dict(open_analysis(path))
        assert ahead == plain, path.name
    assert started.count("rooftop-ahead") == len(exports)  # (one thread per document, only when on)


@needs_pandas3
def test_an_error_in_a_table_built_ahead_reaches_the_caller(exports, monkeypatch):
    monkeypatch.setattr(report, "TWO_THREADS_MIN_ROWS", 0)
    monkeypatch.setenv("ROOFTOP_THREADS", "1")

    def broken(self, *a, **k):
        raise ValueError("idle causes broke")
    monkeypatch.setattr(idle.Causes, "__init__", broken)
    with pytest.raises(ValueError, match="idle causes broke"):
        report.report_dict(open_analysis(exports[0]))
