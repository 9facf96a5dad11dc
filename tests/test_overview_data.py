"""The Overview's one data shape (rooftop/present/overview.py): a trace's stored summary and the
analysis of its rows make the same `OverviewData`, field by field, so the screen never asks which
it has."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from rooftop.analysis import analyze
from rooftop.present import summary
from rooftop.present.overview import REST_TABLES, OverviewData
from rooftop.present.report import STEP_KEYS, records
from rooftop.trace import load_trace, write_trace
from tui.loader import warm_overview_rest
from tui_helpers import _events, _meta, calibrated_trace, comm_trace, small_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet"


@pytest.fixture(autouse=True)
def summary_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about the stored summary."""
    monkeypatch.setenv("ROOFTOP_SUMMARY", "1")


def _cases(tmp_path: Path) -> list[Path]:
    """Plain; counters, modeled and names that need escaping; calibrated (both ceilings); with the
    file's own warnings; with communication; a committed sample (a whole Llama decode)."""
    sample = tmp_path / SAMPLE.name
    shutil.copy(SAMPLE, sample)
    warned = write_trace(tmp_path / "warned.parquet", _events(counters=False, weird_names=False),
                         {**_meta(modeled=False), "warnings": ["the profiler dropped 3 events", "clock skew [b]x[/b]"]})
    return [small_trace(tmp_path, name="plain.parquet"),
            small_trace(tmp_path, counters=True, modeled=True, weird_names=True, name="odd.parquet"),
            calibrated_trace(tmp_path), warned, comm_trace(tmp_path), sample]


def _steps(view: OverviewData) -> list[dict]:
    return json.loads(json.dumps(records(view.load_steps(), STEP_KEYS)))


def test_the_stored_summary_and_the_analysis_make_the_same_view(tmp_path):
    for path in _cases(tmp_path):
        summary.refresh(path)
        stored = summary.load_stored(path)
        assert stored is not None, path
        from_summary = OverviewData.of_stored(stored)
        a = analyze(load_trace(path))
        warm_overview_rest(a)
        from_rows = OverviewData.of_analysis(a)
        assert from_summary.complete and from_rows.complete, path
        assert from_summary.version == summary.ANALYSIS_VERSION and from_rows.version is None
        for f in dataclasses.fields(OverviewData):
            if f.compare and f.name != "version":
                assert getattr(from_summary, f.name) == getattr(from_rows, f.name), (path.name, f.name)
        # the step curve's table: parsed from the stored list later, the Analysis' at hand
        assert from_summary.steps is None and from_summary.steps_to_load
        assert from_rows.steps is not None and not from_rows.steps_to_load
        assert _steps(from_summary) == _steps(from_rows), path
        # not vacuous: the phases, findings and warnings are there
        assert from_rows.phases and from_rows.findings is not None and from_rows.warnings is not None, path
        if path.name == "calibrated.parquet":
            assert from_rows.peaks.both_ceilings
        if path.name == "warned.parquet":
            assert len(from_rows.warnings) >= 2
        if path.name == "comm.parquet":
            assert from_rows.comm and from_rows.comm[0]["comm_ns"] > 0
        if path.name in ("odd.parquet", SAMPLE.name):  # modeled: the ideal itself, no gap
            assert from_rows.gap == []
        else:
            assert from_rows.gap


def test_the_analysis_view_says_what_is_computed(tmp_path):
    """Before the phase table, only the file's warnings; then the phase table with them; then all."""
    a = analyze(load_trace(small_trace(tmp_path)))
    first = OverviewData.of_analysis(a)
    assert first.phases is None and not first.complete
    assert first.warnings == [(str(w), str(m)) for w, m in a.trace_warnings]
    a.phases
    head = OverviewData.of_analysis(a)
    assert head.phases and head.peaks is not None and head.findings is None and not head.complete
    assert not any(a.is_computed(name) for name in REST_TABLES)  # building it computed none of the rest
    warm_overview_rest(a)
    whole = OverviewData.of_analysis(a)
    assert whole.complete and whole.phases == head.phases and whole.warnings == [tuple(w) for w in a.warnings]


def test_nothing_is_known_of_a_preview_without_a_summary():
    nothing = OverviewData()
    assert nothing.phases is None and nothing.warnings is None and not nothing.complete
    assert not nothing.steps_to_load
