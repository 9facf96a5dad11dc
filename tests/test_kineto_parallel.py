"""The Kineto reader on every core gives exactly the rows of the one-process reader."""
from __future__ import annotations

import json

import pytest

from collectors.readers import _kineto_parallel, kineto
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


@pytest.mark.parametrize("gz", [False, True])
def test_two_workers_equal_one_process(tmp_path, monkeypatch, gz):
    p = _write(tmp_path / ("t.json.gz" if gz else "t.json"), _replicated(200), gz=gz)
    monkeypatch.setattr(kineto, "CHUNK", 8_000)  # dozens of batches, merged in order
    one, meta1 = read_kineto(p, workers=1)
    two, meta2 = read_kineto(p, workers=2)
    assert one.equals(two)
    assert to_table(one).equals(to_table(two))  # and so the stored tables
    assert {k: v for k, v in meta1.items() if k != "source"} == {k: v for k, v in meta2.items() if k != "source"}
    assert int((two["kind"] == "kernel").sum()) == 400


def test_real_fixture_on_two_workers(fixtures_dir, monkeypatch):
    path = fixtures_dir / "traces" / (PREFIX + FILES[0])
    monkeypatch.setattr(kineto, "CHUNK", 50_000)
    one, _ = read_kineto(path, workers=1)
    two, _ = read_kineto(path, workers=2)
    assert one.equals(two)


def test_false_boundary_falls_back_to_one_process(tmp_path, monkeypatch):
    """Names full of `},` put the cut inside a string: the one-process reader re-cuts, the
    parallel one cannot, so it starts again in one process and still gives the same rows."""
    doc = _replicated(60, lambda i, name: f"{name}<{{lambda()#1}},{{x}},{i}>" + "},x" * 40)
    p = _write(tmp_path / "odd.json", doc)
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


def test_truncated_file_keeps_the_same_prefix_in_parallel(tmp_path, monkeypatch):
    text = json.dumps(_replicated(100), indent=1)
    p = tmp_path / "cut.json"
    p.write_text(text[: int(len(text) * 0.7)])
    monkeypatch.setattr(kineto, "CHUNK", 5_000)
    one, m1 = read_kineto(p, workers=1)
    two, m2 = read_kineto(p, workers=2)
    assert one.equals(two) and len(two)
    assert m1["warnings"] == m2["warnings"] and any("truncated" in w for w in m2["warnings"])


def test_worker_count(monkeypatch):
    monkeypatch.delenv("ROOFTOP_WORKERS", raising=False)
    assert _kineto_parallel.workers_for(1 << 20, gz=False) == 1           # small: not worth a pool
    assert _kineto_parallel.workers_for(1 << 30, gz=False) >= 1
    monkeypatch.setenv("ROOFTOP_WORKERS", "3")
    assert _kineto_parallel.workers_for(1, gz=False) == 3
