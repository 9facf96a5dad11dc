"""The same contract at the other doors: a sample in real subprocesses (hang check), the TUI headless,
output hygiene and secrets on screen and in reports, the CLI's own arguments, `collect -o`."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from .corpus import CASES, ESC_NAME, HF_TOKEN
from .harness import ROOT, check, control_chars, run_in_process, run_subprocess

BY_NAME = {c.name: c for c in CASES}
SUBPROCESS_SAMPLE = ["raw-empty.parquet", "raw-random.bin", "kineto-deep-nesting", "kineto-huge-name",
                     "parquet-escape-names", "parquet-meta-deep", "nsys-junk-values", "raw-csv-huge-name.csv",
                     "tiny-trunc0.5", "nccl-trunc0.5", "nsys-trunc0.3", "dir-one-rank-bad"]
TUI_SAMPLE = ["raw-empty.json", "parquet-future-version", "kineto-no-kernels", "parquet-zero-rows",
              "parquet-escape-names", "parquet-meta-wrong-types2", "nsys-tables-empty", "raw-csv-escape.csv",
              "parquet-secret-meta", "rank0-trunc0.5"]


def _make(name, tmp_path, request):
    case = BY_NAME[name]
    fixtures = request.getfixturevalue("fixtures_dir") if case.fixtures else None
    return case, case.make(tmp_path, fixtures)


@pytest.mark.parametrize("name", SUBPROCESS_SAMPLE)
def test_subprocess_report(name, tmp_path, request):
    case, path = _make(name, tmp_path, request)
    check(run_subprocess(["report", str(path)]), path, case.expect)


def test_subprocess_import(tmp_path, request):
    case, path = _make("kineto-ts-nan", tmp_path, request)
    check(run_subprocess(["import", str(path), "-o", str(tmp_path / "o.parquet")]), path, None)


# --- the TUI ---------------------------------------------------------------------------------------

def _screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def _open(paths, keys=()):
    """Open the app headless; (screen texts after each key, notifications, errors, exit code)."""
    from textual.worker import WorkerCancelled

    from tui.app import RooftopApp

    async def main():
        app = RooftopApp([str(p) for p in paths])
        texts = []
        async with app.run_test(size=(120, 40)) as pilot:
            try:
                await app.workers.wait_for_complete()
            except WorkerCancelled:
                pass  # the only file was bad: the app exited and cancelled what was left
            await pilot.pause()
            texts.append(_screen_text(app))
            for k in keys:
                await pilot.press(k)
                await app.workers.wait_for_complete()
                await pilot.pause()
                texts.append(_screen_text(app))
            notes = [n.message for n in app._notifications]
        return texts, notes, app.errors, app.return_value
    return asyncio.run(main())


@pytest.mark.parametrize("name", TUI_SAMPLE)
def test_tui_beside_a_good_trace(name, tmp_path, request):
    """A bad file next to a good one: a notification naming it, and the good one stays usable."""
    case, path = _make(name, tmp_path, request)
    good = ROOT / "sample_traces" / "llama3-8b_h200_b1_fused.modeled.parquet"
    texts, notes, errors, _ = _open([good, path], keys=("3", "2", "1"))
    if errors:
        assert case.expect in (None, "error"), errors
        assert any(path.name[:30] in n for n in notes), notes
    else:
        assert case.expect != "error", "the bad file opened without complaint"
    assert "Overview" in texts[-1]
    for t in texts:
        assert not control_chars(t), control_chars(t)
        assert HF_TOKEN not in t


def test_tui_screens_show_trace_text_escaped(tmp_path, request):
    _, path = _make("parquet-escape-names", tmp_path, request)
    texts, notes, errors, _ = _open([path], keys=("3", "2", "5", "4", "1"))
    assert not errors
    everything = "\n".join(texts + notes)
    assert not control_chars(everything), control_chars(everything)
    assert "\\x1b" in everything  # shown, escaped, not dropped
    assert "[bold red]markup[/]" in everything  # markup shown literally


def test_tui_only_bad_file_exits_2(tmp_path, request):
    _, path = _make("raw-random.bin", tmp_path, request)
    _, notes, errors, code = _open([path])
    assert code == 2 and len(errors) == 1 and path.name in errors[0]


# --- reports: hygiene and secrets --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["parquet-escape-names", "nsys-escape-and-secret", "kineto-escape-name",
                                  "raw-csv-escape.csv", "parquet-secret-meta", "kineto-secret-meta"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_report_is_clean_and_redacted(name, fmt, tmp_path, request):
    _, path = _make(name, tmp_path, request)
    o = run_in_process(["report", str(path)] + (["--json"] if fmt == "json" else []))
    check(o, path, None)
    assert o.rc == 0
    assert HF_TOKEN not in o.out + o.err
    if fmt == "json":
        json.loads(o.out)  # escapes in JSON strings are JSON escapes, never raw
    if "escape" in name and fmt == "text":
        assert "\\x1b" in o.out


@pytest.mark.parametrize("name", ["parquet-secret-meta", "kineto-secret-meta", "nsys-escape-and-secret"])
def test_import_writes_no_secret(name, tmp_path, request):
    _, path = _make(name, tmp_path, request)
    out = tmp_path / "o.parquet"
    assert run_in_process(["import", str(path), "-o", str(out)]).rc == 0
    assert HF_TOKEN.encode() not in out.read_bytes()


def test_diff_is_clean(tmp_path, request):
    (tmp_path / "a").mkdir()
    _, a = _make("parquet-escape-names", tmp_path / "a", request)
    _, b = _make("parquet-secret-meta", tmp_path, request)
    o = run_in_process(["diff", str(a), str(b)])
    check(o, a, None)
    assert o.rc == 0 and HF_TOKEN not in o.out


# --- the CLI's own arguments ---------------------------------------------------------------------------

SAMPLE = str(ROOT / "sample_traces" / "tiny-cpu.parquet")


@pytest.mark.parametrize("argv", [
    ["report"], ["report", "--top", "abc", SAMPLE], ["report", "--peaks", "nope", SAMPLE], ["diff", SAMPLE],
    ["report", "/nonexistent/x.parquet"], ["report", "/"], ["report", "/dev/null"], ["report", SAMPLE, "extra"],
    ["--no-such-flag"], ["import"], ["import", "/nonexistent.json"], ["report", "--peaks", "measured", SAMPLE],
    ["nonexistent-trace.parquet"], ["report", "x" * 5000], ["report", "bad\x1b[2Jname.parquet"],
    ["report", "--top", "-3", SAMPLE], ["report", "--top", str(10 ** 30), SAMPLE],
])
def test_cli_arguments(argv):
    o = run_in_process(argv)
    assert "Traceback" not in o.err and o.rc in (0, 2), o.err
    assert not control_chars(o.out + o.err), control_chars(o.out + o.err)
    if o.rc == 2:
        lines = o.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rooftop: error: ") and "internal error" not in lines[0]


def test_import_output_is_a_directory(tmp_path, request):
    _, src = _make("kineto-out-of-order", tmp_path, request)
    o = run_in_process(["import", str(src), "-o", str(tmp_path)])
    assert o.rc == 2 and "directory" in o.err and len(o.err.strip().splitlines()) == 1


# --- collect -o: unwritable outputs fail before the run ---------------------------------------------------

@pytest.mark.parametrize("where", ["missing", "readonly"])
def test_collect_unwritable_output_fails_fast(where, tmp_path):
    if where == "missing":
        blocker = tmp_path / "file"
        blocker.write_text("x")
        out = blocker / "cannot-be-made" / "x.parquet"  # a directory under a file can never be made
    elif os.geteuid() == 0:  # root writes into a mode-555 directory; procfs refuses everyone
        out = Path("/proc/rooftop-x.parquet")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out = ro / "x.parquet"
    o = run_subprocess(["collect", "--preset", "tiny", "-o", str(out)])
    assert o.rc == 2, o.err
    lines = o.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rooftop: error: ") and "x.parquet" in lines[0], o.err
    assert "cannot write" in lines[0]
    assert not out.exists()


def test_collect_nonexistent_dir_fails_fast():
    if os.geteuid() == 0:
        pytest.skip("root can make /nonexistent-dir-that-cannot-be-made (covered by the file-blocked case)")
    out = "/nonexistent-dir-that-cannot-be-made/x.parquet"
    o = run_subprocess(["collect", "--preset", "tiny", "-o", out])
    assert o.rc == 2 and len(o.err.strip().splitlines()) == 1 and out in o.err, o.err
