"""Issue 38, item 2: a stored summary is a cache, never an authority. It is used only with this
user's seal over these exact bytes (rooftop/trace/seal.py); a forged or transplanted summary is not
printed: the rows are analysed, the report says so, and a summary whose numbers differ from the
rows' is named as discarded."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rooftop.analysis
from rooftop.trace import seal
from rooftop.present import summary
from rooftop_cli import main
from rooftop.trace.footer import read_footer
from rooftop.trace.write import write_parquet

from bad_inputs.corpus import _meta, _row


@pytest.fixture(autouse=True)
def summary_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    the stored summary."""
    monkeypatch.setenv("ROOFTOP_SUMMARY", "1")


def _write(path: Path, scale: float = 1.0) -> Path:
    rows = [_row(i, dur_ns=int(500 * scale), path=f"decode/step={i % 3}/layer=0/attn") for i in range(30)]
    summary.write_summarized(path, rows, _meta())
    return path


def _report(capsys, *argv) -> tuple[str, str]:
    assert main(list(argv)) == 0
    out = capsys.readouterr()
    return out.out, out.err


def _no_analysis(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the rows were analysed")
    monkeypatch.setattr(rooftop.analysis, "analyze", refuse)


def _entries(path: Path) -> dict:
    return {k: v for k, v in read_footer(path).metadata.items() if k.startswith(summary.SUMMARY_KEY)}


def _forge_head(path: Path, edit) -> None:
    """Rewrite the summary's head as an attacker would (every public check recomputed), keeping the
    seal that was there: the attacker has no key."""
    entries = _entries(path)
    doc = json.loads(entries[summary.SUMMARY_KEY])
    edit(doc)
    entries[summary.SUMMARY_KEY] = json.dumps(doc).encode()
    write_parquet(pq.read_table(path), path, entries)


def test_a_sealed_summary_answers_without_the_rows(tmp_path, capsys, monkeypatch):
    p = _write(tmp_path / "t.parquet")
    assert read_footer(p).metadata[seal.SEAL_KEY] != seal.PLACEHOLDER
    _no_analysis(monkeypatch)
    out, err = _report(capsys, "report", str(p))
    assert err == "" and "rooftop report:" in out


def test_a_forged_summary_is_never_printed(tmp_path, capsys):
    p = _write(tmp_path / "t.parquet")
    honest, _ = _report(capsys, "report", "--json", str(p))

    def edit(doc):
        doc["report"]["findings"][0]["title"] = "FORGED nothing to fix"
        for ph in doc["report"]["phases"]:
            ph["mbu"], ph["kernels"] = 0.93, 123456
    _forge_head(p, edit)
    assert summary.load_stored(p) is None
    out, err = _report(capsys, "report", str(p))
    assert "FORGED" not in out and "123,456" not in out and "123456" not in out
    assert "the stored summary disagrees with the rows (phases): discarded" in out
    assert "disagrees with the rows" in err and str(p) in err
    doc = json.loads(_report(capsys, "report", "--json", str(p))[0])
    assert doc["phases"] == json.loads(honest)["phases"]
    assert "disagrees" in doc["warnings"][-1]


def test_rows_changed_under_a_copied_footer_are_analysed(tmp_path, capsys):
    """Other rows of the same count and metadata, with the old file's summary and seal copied over."""
    a = _write(tmp_path / "a.parquet")
    b = _write(tmp_path / "b.parquet", scale=40.0)  # same rows, 40x longer kernels
    entries = _entries(a)
    assert json.loads(entries[summary.SUMMARY_KEY])["meta"] == json.loads(_entries(b)[summary.SUMMARY_KEY])["meta"]
    write_parquet(pq.read_table(b), b, entries)  # b's rows, a's whole summary and seal
    assert summary.load_stored(b) is None
    out, _ = _report(capsys, "report", "--json", str(b))
    spans = [ph["span_ns"] for ph in json.loads(out)["phases"]]
    assert spans and spans != [ph["span_ns"] for ph in json.loads(_report(capsys, "report", "--json", str(a))[0])["phases"]]


def test_one_flipped_byte_anywhere_unseals(tmp_path):
    p = _write(tmp_path / "t.parquet")
    footer = read_footer(p)
    data = bytearray(p.read_bytes())
    seal_at = footer.value_at[seal.SEAL_KEY]
    for at in (4, len(data) // 3, len(data) - 20, seal_at + 3):
        q = tmp_path / f"flip{at}.parquet"
        flipped = bytearray(data)
        flipped[at] ^= 0x01
        q.write_bytes(bytes(flipped))
        f = read_footer(q)
        assert f is None or not seal.verify(q, f), at
    assert seal.verify(p, footer)


def test_another_users_key_recomputes_and_says_so(tmp_path, capsys, monkeypatch):
    p = _write(tmp_path / "t.parquet")
    monkeypatch.setenv("ROOFTOP_CONFIG_DIR", str(tmp_path / "someone-else"))
    assert summary.load_stored(p) is None
    out, err = _report(capsys, "report", str(p))
    assert "not sealed for this user" in out and "they agree" in out and err == ""
    assert main(["summarize", str(p)]) == 0  # sealed for this user now
    capsys.readouterr()
    assert summary.load_stored(p) is not None


def test_a_key_others_can_read_or_replace_is_not_used(tmp_path, monkeypatch):
    d = tmp_path / "cfg"
    monkeypatch.setenv("ROOFTOP_CONFIG_DIR", str(d))
    p = _write(tmp_path / "t.parquet")
    key = d / "summary-key"
    assert key.stat().st_mode & 0o777 == 0o600 and d.stat().st_mode & 0o777 == 0o700
    assert summary.load_stored(p) is not None
    key.chmod(0o644)
    assert seal.user_key() is None and summary.load_stored(p) is None
    key.chmod(0o600)
    target = tmp_path / "elsewhere"
    target.write_text(key.read_text())
    target.chmod(0o600)
    key.unlink()
    key.symlink_to(target)  # a link is not the key
    assert seal.user_key() is None


def test_without_a_writable_config_dir_nothing_is_trusted(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ROOFTOP_CONFIG_DIR", str(blocker / "rooftop"))
    p = _write(tmp_path / "t.parquet")  # written, unsealed
    assert read_footer(p).metadata[seal.SEAL_KEY] == seal.PLACEHOLDER
    assert summary.load_stored(p) is None
    assert pq.read_table(p).num_rows == 30  # the file itself is whole


def test_the_tui_preview_ignores_a_forged_summary(tmp_path):
    from tui.loader import preview

    p = _write(tmp_path / "t.parquet")
    assert preview(str(p)).stored is not None
    _forge_head(p, lambda doc: doc["report"]["findings"][0].update(title="FORGED"))
    out = preview(str(p))
    assert out is None or getattr(out, "stored", None) is None


def test_the_tui_says_when_it_did_not_use_an_unsealed_summary(tmp_path, monkeypatch):
    from tui.loader import open_analysis

    p = _write(tmp_path / "t.parquet")
    assert not any(summary.NOT_USED == m for _, m in open_analysis(str(p)).trace_warnings)  # sealed: used
    monkeypatch.setenv("ROOFTOP_CONFIG_DIR", str(tmp_path / "someone-else"))
    warned = [m for w, m in open_analysis(str(p)).trace_warnings if w == "import"]
    assert summary.NOT_USED in warned


def test_concurrent_key_creation_agrees(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFTOP_CONFIG_DIR", str(tmp_path / "c"))
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: seal.user_key(create=True), range(16)))
    assert len(set(keys)) == 1 and keys[0] is not None and len(keys[0]) == 32
    assert not [f for f in os.listdir(tmp_path / "c") if f != "summary-key"]
