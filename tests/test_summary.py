"""The stored summary (rooftop/present/summary.py, docs/summary.md): `report` and the Overview answer from a
trace's footer when the summary is current, and analyse the rows otherwise, without a word.

A "forged" summary is a real one with one finding's title changed: where that title shows, the
numbers came from the footer; where the real title shows, from the rows."""
from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rooftop.analysis
from rooftop.present import summary
from rooftop.analysis import analyze
from rooftop_cli import main
from rooftop.trace.footer import read_footer
from rooftop.present.report import report_dict, report_text
from rooftop.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import synth_trace  # noqa: E402

SAMPLE = ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet"
MARK = "FROM-THE-STORED-SUMMARY"


@pytest.fixture(autouse=True)
def summary_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    the stored summary."""
    monkeypatch.setenv("ROOFTOP_SUMMARY", "1")
    monkeypatch.setenv("ROOFTOP_THREADS", "1")  # (the summary's second thread: tested here too)


def synthetic(tmp_path: Path, steps: int = 4) -> Path:
    """A decode loop of `steps` x 2 layers x 9 kernels, written with its summary."""
    return summary.write_summarized(tmp_path / "synth.parquet", synth_trace.decode_frame(steps, layers=2),
                                    synth_trace.meta(steps))


def sample(tmp_path: Path) -> Path:
    """A copy of a committed sample (written without a summary), then summarised in place."""
    path = tmp_path / SAMPLE.name
    shutil.copy(SAMPLE, path)
    assert summary.load_stored(path) is None  # none stored yet
    size = path.stat().st_size
    summary.refresh(path)
    assert path.stat().st_size < size + 200_000  # the summary is stored once, not again in the Arrow schema
    return path


def run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    out = capsys.readouterr()
    assert out.err == ""
    return out.out


def recomputed(path: Path, top: int = 10) -> tuple[str, str]:
    """`report --json` and `report` of the rows, analysed now."""
    a = analyze(load_trace(path))
    return json.dumps(report_dict(a, top), indent=1, default=str, allow_nan=False) + "\n", report_text(a, top) + "\n"


def no_analysis(monkeypatch):
    """Any analysis of the rows fails the test: what answers came from the footer."""
    def refuse(*args, **kwargs):
        raise AssertionError("the rows were analysed")
    monkeypatch.setattr(rooftop.analysis, "analyze", refuse)


def rewrite(path: Path, entries: dict[bytes, bytes], table=None) -> None:
    """The file with some summary entries of its footer replaced; its rows and metadata kept, or `table`;
    sealed again with this user's key (rooftop/trace/seal.py), as if rooftop had written it: what these tests
    check is the summary's own checks. tests/test_robust_summary.py forges without the key."""
    from rooftop.trace.seal import PLACEHOLDER, SEAL_KEY, seal
    from rooftop.trace.write import write_parquet

    table = table if table is not None else pq.read_table(path)
    stored = {k: v for k, v in read_footer(path).metadata.items() if k.startswith(summary.SUMMARY_KEY)}
    write_parquet(table, path, {**stored, **entries, SEAL_KEY: PLACEHOLDER})
    seal(path)


def head(path: Path) -> dict:
    return json.loads(read_footer(path).metadata[summary.SUMMARY_KEY])


def forge(path: Path) -> Path:
    doc = head(path)
    doc["report"]["findings"][0]["title"] = MARK
    rewrite(path, {summary.SUMMARY_KEY: json.dumps(doc).encode()})
    return path


@pytest.mark.parametrize("make", [synthetic, sample], ids=["synthetic", "sample"])
def test_report_from_the_summary_is_the_recomputed_report(tmp_path, capsys, monkeypatch, make):
    path = make(tmp_path)
    want_json, want_text = recomputed(path)
    no_analysis(monkeypatch)
    assert run(capsys, "report", "--json", str(path)) == want_json
    assert run(capsys, "report", str(path)) == want_text
    doc = json.loads(want_json)
    assert doc["steps"] and doc["phases"] and doc["findings"]  # the comparison covers real content
    three = json.loads(run(capsys, "report", "--json", "--top", "3", str(path)))  # fewer groups: still stored
    assert three["top_kernels"] == doc["top_kernels"][:3] and len(three["top_groups"]) == 3


def test_an_imports_summary_reads_no_launch_shapes_and_is_the_recomputed_report(tmp_path, capsys, monkeypatch):
    """The import's summary analyses the rows without converting the launch shapes and sizes (null
    in its trace: nothing the report says reads them), and is still the report of the file."""
    from collectors.readers.importers import convert
    from rooftop.trace.read import trace_from_handover

    from test_kineto import _write
    from test_kineto_parallel import _replicated

    src = _write(tmp_path / "k.json", _replicated(30))
    out = tmp_path / "k.parquet"
    main(["import", str(src), "-o", str(out)])
    capsys.readouterr()
    loaded = load_trace(out).events
    assert all(loaded[c].notna().any() for c in summary.LAUNCH_COLUMNS)  # (the file holds them)
    table, meta = convert(src)
    handed = trace_from_handover([table, meta], src, scrubbed=True, unread=summary.LAUNCH_COLUMNS).events
    assert list(handed.columns) == list(loaded.columns)
    assert all(handed[c].isna().all() for c in summary.LAUNCH_COLUMNS)
    others = [c for c in loaded.columns if c not in summary.LAUNCH_COLUMNS]
    assert handed[others].equals(loaded[others])
    want_json, want_text = recomputed(out)
    no_analysis(monkeypatch)
    assert run(capsys, "report", "--json", str(out)) == want_json
    assert run(capsys, "report", str(out)) == want_text


def test_summary_binds_to_this_analysis_and_the_default_options(tmp_path, capsys, monkeypatch):
    path = forge(synthetic(tmp_path))
    assert MARK in run(capsys, "report", str(path))  # current: answered from the footer
    real_title = json.loads(recomputed(path)[0])["findings"][0]["title"]
    for options in (["--gpu", "h100-sxm"], ["--peaks", "3.35,989"], ["--model", "llama3-8b"], ["--batch", "8"]):
        out = run(capsys, "report", *options, str(path))
        assert MARK not in out and real_title in out, options
    monkeypatch.setenv("ROOFTOP_MAX_TEXT", "1000")  # names would be read cut differently
    assert MARK not in run(capsys, "report", str(path))
    monkeypatch.delenv("ROOFTOP_MAX_TEXT")
    monkeypatch.setattr(summary, "ANALYSIS_VERSION", summary.ANALYSIS_VERSION + 1)  # another analysis
    out = run(capsys, "report", "--json", str(path))
    assert MARK not in out and out == recomputed(path)[0]


def test_a_changed_core_or_device_table_makes_the_summary_stale(tmp_path, monkeypatch):
    path = synthetic(tmp_path)
    assert summary.load_stored(path) is not None
    summary.code_digest.cache_clear()
    real = Path.read_bytes

    def edited(p: Path) -> bytes:
        data = real(p)
        return data + b" " if p.name == "gpus.json" else data
    monkeypatch.setattr(Path, "read_bytes", edited)
    try:
        assert summary.load_stored(path) is None
    finally:
        summary.code_digest.cache_clear()


def test_rewritten_rows_or_metadata_make_the_summary_stale(tmp_path):
    path = synthetic(tmp_path)
    table = pq.read_table(path)
    rewrite(path, {}, table)
    assert summary.load_stored(path) is not None  # rewritten as it was: still current
    rewrite(path, {}, table.slice(0, 50))  # fewer rows
    assert summary.load_stored(path) is None
    path = synthetic(tmp_path)
    table = pq.read_table(path)
    meta = table.schema.metadata[b"rooftop"].replace(b"llama3-8b", b"llama3-70b")
    rewrite(path, {}, table.replace_schema_metadata({b"rooftop": meta}))
    assert summary.load_stored(path) is None


def _damaged(path: Path) -> dict[str, dict[bytes, bytes]]:
    md = read_footer(path).metadata
    doc = json.loads(md[summary.SUMMARY_KEY])

    def variant(edit) -> bytes:
        d = json.loads(json.dumps(doc))
        edit(d)
        return json.dumps(d).encode()
    steps = md[summary.bulk_key("steps")]
    return {
        "not JSON": {summary.SUMMARY_KEY: b"{not json"},
        "a list": {summary.SUMMARY_KEY: b"[1, 2]"},
        "bare version": {summary.SUMMARY_KEY: b'{"analysis_version": 1}'},
        "not UTF-8": {summary.SUMMARY_KEY: b"\xff\xfe" + md[summary.SUMMARY_KEY]},
        "NaN": {summary.SUMMARY_KEY: variant(lambda d: d["report"]["phases"][0].update(mbu=float("nan")))},
        "findings not records": {summary.SUMMARY_KEY: variant(lambda d: d["report"].update(findings="x"))},
        "finding without text": {summary.SUMMARY_KEY: variant(lambda d: d["report"]["findings"][0].update(title=None))},
        "lone surrogate": {summary.SUMMARY_KEY: variant(lambda d: d["report"]["findings"][0].update(title="\udcff"))},
        "nested deep": {summary.SUMMARY_KEY: variant(lambda d: d["report"].update(model=json.loads("[" * 40 + "]" * 40)))},
        "no identity": {summary.SUMMARY_KEY: variant(lambda d: d["report"].pop("identity"))},
        "bad top": {summary.SUMMARY_KEY: variant(lambda d: d.update(top="10"))},
        "bad warnings": {summary.SUMMARY_KEY: variant(lambda d: d.update(overview_warnings=[["x"]]))},
        "steps edited": {summary.bulk_key("steps"): steps.replace(b'"decode"', b'"prefill"')},
        "steps missing": {summary.bulk_key("steps"): b""},
        "steps not JSON": {summary.bulk_key("steps"): b"[{]",
                           summary.SUMMARY_KEY: variant(lambda d: d["bulk"].update(
                               steps=hashlib.sha256(b"[{]").hexdigest()[:32]))},
    }


def test_a_damaged_summary_is_ignored_without_a_word(tmp_path, capsys):
    base = synthetic(tmp_path)
    want_json, want_text = recomputed(base)
    for name, entries in _damaged(base).items():
        path = tmp_path / f"{name}.parquet"
        shutil.copy(base, path)
        rewrite(path, entries)
        if name != "steps not JSON":  # its head is sound: only printing the steps finds the damage
            assert summary.load_stored(path) is None, name
        expected = want_json.replace(str(base), str(path)).replace('"synth.parquet"', json.dumps(path.name))
        assert run(capsys, "report", "--json", str(path)) == expected, name
        assert run(capsys, "report", str(path)) == want_text.replace(str(base), str(path)), name


def test_secret_shaped_text_in_the_stored_steps_is_scrubbed(tmp_path, capsys):
    path = synthetic(tmp_path)
    token = "hf_" + "A1b2C3d4" * 4
    md = read_footer(path).metadata
    steps = md[summary.bulk_key("steps")].replace(b'"model"', f'"model {token}"'.encode())
    doc = json.loads(md[summary.SUMMARY_KEY])
    doc["bulk"]["steps"] = hashlib.sha256(steps).hexdigest()[:32]
    rewrite(path, {summary.bulk_key("steps"): steps, summary.SUMMARY_KEY: json.dumps(doc).encode()})
    assert summary.load_stored(path) is not None  # consistent: it is used, but scrubbed
    out = run(capsys, "report", "--json", str(path))
    assert token not in out and "model [redacted]" in out
    assert json.loads(out)["steps"][0]["bytes_source"] == "model [redacted]"


def test_directories_and_other_formats_are_analysed(tmp_path, capsys):
    run_dir = tmp_path / "run"
    for r in (0, 1):
        summary.write_summarized(run_dir / f"rank={r}" / "trace.parquet", synth_trace.decode_frame(2, layers=2),
                                 synth_trace.meta(2))
    assert summary.load_stored(run_dir) is None
    assert '"ranks"' in run(capsys, "report", "--json", str(run_dir))
    assert summary.load_stored(tmp_path / "missing.parquet") is None
    (tmp_path / "x.json").write_text("{}")
    assert summary.load_stored(tmp_path / "x.json") is None


def test_footer_reader_agrees_with_pyarrow_and_never_raises_on_damage(tmp_path):
    files = sorted((ROOT / "sample_traces").glob("*.parquet")) + [synthetic(tmp_path)]
    for f in files:
        ours, theirs = read_footer(f), pq.read_metadata(f)
        assert (ours.num_rows, ours.metadata) == (theirs.num_rows, theirs.metadata)
    data = files[-1].read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer_start = len(data) - 8 - length
    damaged = tmp_path / "damaged.parquet"
    cuts = [data[:n] for n in (0, 4, 11, len(data) // 2, len(data) - 1)]
    flips = [data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:] for i in range(footer_start, len(data) - 8, 97)]
    for bad in cuts + flips + [data[:-8] + (2 ** 31).to_bytes(4, "little") + b"PAR1"]:
        damaged.write_bytes(bad)
        got = read_footer(damaged)  # None, or whatever a flipped byte still parses as: never an exception
        assert got is None or isinstance(got.num_rows, int)
    damaged.write_bytes(b"PAR0" + data[4:])  # a sound footer behind a wrong start: not Parquet (pyarrow refuses it)
    assert read_footer(damaged) is None


def test_summarize_keeps_rows_and_metadata_and_refuses_other_inputs(tmp_path, capsys):
    path = tmp_path / "t.parquet"
    shutil.copy(SAMPLE, path)
    before = pq.read_table(path)
    out = run(capsys, "summarize", str(path))
    assert out.strip() == str(path)
    after = pq.read_table(path)
    assert after.equals(before) and after.schema.metadata[b"rooftop"] == before.schema.metadata[b"rooftop"]
    assert summary.load_stored(path) is not None
    (tmp_path / "k.json").write_text('{"traceEvents": []}')
    for bad in (tmp_path / "k.json", tmp_path, tmp_path / "none.parquet"):
        assert main(["summarize", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("rooftop: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_import_writes_a_current_summary(tmp_path, capsys, monkeypatch):
    import make_kineto

    src = make_kineto.write_trace(make_kineto.synthetic_block(layers=2), 3, tmp_path / "k.json")
    out = tmp_path / "k.parquet"
    run(capsys, "import", str(src), "-o", str(out))
    assert summary.load_stored(out) is not None
    want_json, _ = recomputed(out)
    no_analysis(monkeypatch)
    assert run(capsys, "report", "--json", str(out)) == want_json


def test_the_overview_paints_the_summary_before_the_rows_are_analysed(tmp_path, monkeypatch):
    import tui.loader as loader
    from tui.app import RooftopApp
    from tui.screens.kernels import KernelsScreen
    from tui.screens.overview import OverviewScreen

    from tui_helpers import small_trace

    path = small_trace(tmp_path)
    summary.refresh(path)
    forge(path)
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)  # the small trace takes the big-trace path
    release, real = threading.Event(), loader.open_analysis

    def held(*args, **kwargs):
        assert release.wait(10), "the test never released the load"
        return real(*args, **kwargs)
    monkeypatch.setattr(loader, "open_analysis", held)

    def text_of(widget) -> str:
        content = widget.render()
        return getattr(content, "plain", None) or str(content)

    async def until(pilot, cond):
        for _ in range(1000):
            if cond():
                return
            await pilot.pause(0.01)
        raise AssertionError("condition never held")

    async def main_():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen) and app.screen.query("#findings"))
            s = app.screen
            before = {"loaded": bool(app.analyses), "findings": text_of(s.query_one("#findings")),
                      "phases": [str(c) for col in s.query_one("#phases").table.columns for c in col._cells],
                      "pending": text_of(s.query_one("#overview-pending")),
                      "warnings": text_of(s.query_one("#warnings-count"))}
            await until(pilot, lambda: bool(s.query("#step-curve")))  # the stored steps, parsed after the paint
            before["curve_while_loading"] = not app.analyses
            release.set()
            await until(pilot, lambda: bool(app.analyses) and not s.query("#overview-pending"))
            await pilot.press("3")
            await until(pilot, lambda: isinstance(app.screen, KernelsScreen))
            a = app.analyses[0]
            await pilot.press("1")
            await until(pilot, lambda: s.stored is None and bool(s.query("#step-curve")))  # the analysis caught up
            return before, a, text_of(s.query_one("#warnings-count"))

    before, a, warnings_after = asyncio.run(main_())
    assert not before["loaded"] and before["curve_while_loading"]  # painted while the rows were held back
    assert MARK in before["findings"]  # ... from the footer
    assert "stored summary (analysis v1)" in before["pending"] and "loading 85 events" in before["pending"]
    assert "prefill" in before["phases"] and "decode" in before["phases"] and "1.7%" in before["phases"]
    n = len(a.warnings)
    assert before["warnings"] == warnings_after == (f"▲ {n} warning{'s' if n > 1 else ''} (w: list)" if n
                                                    else "no warnings (w: list)")


def test_the_overview_ignores_the_summary_under_options(tmp_path, monkeypatch):
    import tui.loader as loader
    from rooftop.llm.config import load_spec

    from tui_helpers import small_trace

    path = small_trace(tmp_path)
    summary.refresh(path)
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)
    assert loader.preview(str(path)).stored is not None
    assert loader.preview(str(path), use_summary=False).stored is None
    from tui.app import RooftopApp
    assert RooftopApp([str(path)])._default_options()
    assert not RooftopApp([str(path)], model=load_spec("llama3-8b"))._default_options()
    forge(path)
    rewrite(path, {summary.SUMMARY_KEY: b"{broken"})
    assert loader.preview(str(path)).stored is None


def test_the_two_thread_summary_is_the_one_thread_document(tmp_path, monkeypatch):
    """A large trace's summary computes some sections on a second thread: the document must be the
    one `report_dict` makes on one thread, key order included, on every kind of trace at hand."""
    import rooftop.present.report as report

    monkeypatch.setattr(report, "TWO_THREADS_MIN_ROWS", 0)  # every trace takes the two-thread path here
    original, seen = report.report_dict, []

    def spy(a, top=10, keys=None, skip=(), ahead=True):
        seen.append((threading.current_thread().name, keys))
        return original(a, top, keys, skip, ahead)
    monkeypatch.setattr(report, "report_dict", spy)  # (`summary._report` imports it when it runs)
    for path in sorted((ROOT / "sample_traces").glob("*.parquet")) + [synthetic(tmp_path)]:
        trace = load_trace(path)
        seen.clear()
        got = json.dumps(summary._report(analyze(trace)), indent=1, default=str)
        assert got == json.dumps(original(analyze(trace), summary.DEFAULT_TOP), indent=1, default=str), path.name
        assert ("rooftop-summary_0", summary.SECOND_THREAD) in seen


def test_an_error_on_the_summary_thread_reaches_the_caller(tmp_path, monkeypatch):
    import rooftop.present.report as report

    monkeypatch.setattr(report, "TWO_THREADS_MIN_ROWS", 0)

    def broken(*args, **kwargs):
        raise RuntimeError("top kernels failed")
    monkeypatch.setattr(report, "top_kernels", broken)  # a section of the second thread
    with pytest.raises(RuntimeError, match="top kernels failed"):
        summary._report(analyze(load_trace(synthetic(tmp_path))))
