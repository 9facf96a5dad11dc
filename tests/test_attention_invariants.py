"""Invariant over every report the suite can make of real files (../shared/fixtures) and the
samples: an attention verdict is `confirmed` only with evidence that backs it (bytes or op shapes),
never on kernel names alone, and its calls are a count, never 0 (unknown is null)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rooftop.analysis import analyze
from rooftop.analysis.attention import CONFIRMING
from rooftop.trace import load_trace, write_trace

ROOT = Path(__file__).resolve().parent.parent


def _check(verdicts):
    for v in verdicts:
        if v.confirmed:
            assert v.evidence_kind in CONFIRMING, v
            if v.evidence_kind == "bytes":
                assert v.bytes_source == "measured" or "measured softmax" in v.evidence, v
            if v.evidence_kind == "shapes":
                assert v.materialized_calls > 0, v
        else:
            assert v.evidence_kind not in CONFIRMING, v
            assert "by name" in v.evidence or v.evidence_kind == "model", v
        assert v.calls is None or v.calls > 0, v
        assert v.kv_cache_kernels >= 0 and v.combine_kernels >= 0


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "sample_traces").glob("*.parquet")))
def test_samples_confirm_only_with_evidence(name):
    _check(analyze(load_trace(ROOT / "sample_traces" / name)).attention)


def test_fixtures_confirm_only_with_evidence(fixtures_dir, tmp_path):
    from collectors.readers.importers import convert

    files = sorted(p for sub in ("traces", "ncu") for p in (fixtures_dir / sub).iterdir() if p.is_file())
    assert files
    seen = 0
    for i, src in enumerate(files):
        try:
            table, meta = convert(src)
        except Exception as exc:  # a file this build cannot read is another test's business
            pytest.fail(f"{src.name}: {exc}")
        a = analyze(load_trace(write_trace(tmp_path / f"{i}.parquet", table, meta)))
        _check(a.attention)
        seen += len(a.attention)
    assert seen > 0  # at least one real file has attention (the nvllm decode trace)
