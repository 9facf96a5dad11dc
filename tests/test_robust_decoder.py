"""Issue 38, item 6: the compiled Kineto decoder under sanitizers. A short UBSan round of
scripts/sanitize_kineto.py (the corpus, every cut of it, random mutations); the long ASan +
UBSan run is the script itself. An event without `pid`/`tid` once made the decoder add an
offset to a NULL pointer (`int64_of` of an absent field): UBSan's pointer-overflow check ends
the child on it."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("sanitize_kineto", ROOT / "scripts" / "sanitize_kineto.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_decoder_has_no_undefined_behaviour_on_the_corpus_and_mutations(capfd):
    mod = _script()
    assert any('"pid"' not in e and '"ph": "X"' in e for e in mod.CORPUS)  # absent pid/tid is in it
    assert mod.run(runs=1500, sanitize="undefined", seed=38, timeout=300) == 0, capfd.readouterr().err[-3000:]


def test_absent_pid_and_tid_read_like_the_python_path(tmp_path):
    from collectors.readers.kineto import read_kineto

    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,'
                 ' "args": {"correlation": 1}}, {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7,'
                 ' "ts": 5, "dur": 2, "args": {"correlation": 2, "device": 0, "stream": 7}}]}')
    rows, _ = read_kineto(p)
    kernels = rows[rows["kind"].astype(str) == "kernel"]
    assert sorted(kernels["name"].astype(str)) == ["k", "k2"]
