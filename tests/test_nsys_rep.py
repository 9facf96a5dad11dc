"""`.nsys-rep` reports: exported once through `nsys export --type sqlite`, cached, reused everywhere.

A stub `nsys` (a script) stands in for Nsight Systems: it copies a real nsys SQLite export (a
fixture) to the `--output` the exporter's usage defines (`nsys export -t sqlite -o OUT -f true
REPORT`), or fails, hangs, or writes garbage, as each test asks.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from collectors.readers import nsys_rep
from collectors.open import open_trace
from collectors.readers.importers import detect
from rooftop_cli import main
from rooftop.trace import TraceError, load_trace

NSYS = "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite"

STUB = r'''#!{python}
import os, shutil, subprocess, sys, time
argv = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(" ".join(argv) + "\n")
mode = os.environ.get("STUB_MODE", "ok")
out = None
for i, a in enumerate(argv):
    if a in ("-o", "--output"):
        out = argv[i + 1]
    elif a.startswith("--output="):
        out = a.split("=", 1)[1]
assert argv[:3] == ["export", "--type", "sqlite"] or "--type=sqlite" in argv, argv
if mode == "fail":
    print("Processing events... error: the report is damaged (stub)")
    sys.exit(3)
if mode == "hang":
    # a helper in nsys's process group, as the real exporter starts; both must die on the timeout
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["STUB_CHILD"], "w") as fh:
        fh.write(str(child.pid))
    with open(out, "wb") as fh:
        fh.write(b"SQLite format 3\x00" + b"\x00" * 100)  # a partial export on disk when killed
    time.sleep(600)
if mode == "garbage":
    with open(out, "wb") as fh:
        fh.write(b"SQLite format 3\x00" + b"\x00" * 100)
    sys.exit(0)
shutil.copyfile(os.environ["STUB_SRC"], out)
'''


@pytest.fixture
def stub(tmp_path, fixtures_dir, monkeypatch):
    """A stub nsys on PATH (and nothing else there), a report, and the stub's call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nsys"
    exe.write_text(STUB.replace("{python}", sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("STUB_LOG", str(log))
    monkeypatch.setenv("STUB_SRC", str(fixtures_dir / "traces" / NSYS))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    rep = work / "run.nsys-rep"
    rep.write_bytes(b"\x00\x01not really a report, the stub does not read it")

    class Stub:
        path, report, source = exe, rep, fixtures_dir / "traces" / NSYS

        @staticmethod
        def calls() -> list[str]:
            return log.read_text().splitlines()
    return Stub


def _kernels(trace) -> int:
    return int((trace.events["kind"] == "kernel").sum())


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.is_file() and ".tmp-" in p.name)


def test_report_opens_through_nsys_with_the_sqlite_counts(stub):
    assert detect(stub.report) == "nsys-rep"
    trace = open_trace(stub.report)
    same = open_trace(stub.source)
    assert _kernels(trace) == _kernels(same) == 12
    for kind in ("memcpy", "memset", "range"):
        assert int((trace.events["kind"] == kind).sum()) == int((same.events["kind"] == kind).sum())
    assert trace.path == str(stub.report)  # named as the user named it, not by its cache
    calls = stub.calls()
    assert len(calls) == 1
    argv = shlex.split(calls[0])
    out = argv[argv.index("--output") + 1]
    assert argv[-1] == str(stub.report) and "--force-overwrite" in argv
    # the cache is beside the report, keyed by its size and mtime; the temporary name is gone
    st = stub.report.stat()
    cache = stub.report.parent / f".run.nsys-rep.{st.st_size}-{st.st_mtime_ns}.sqlite"
    assert cache.is_file() and not Path(out).exists() and ".tmp-" in out
    assert _leftovers(stub.report.parent) == []


def test_second_open_is_the_cache_in_every_command(stub, tmp_path, capsys):
    open_trace(stub.report)
    assert len(stub.calls()) == 1
    started = time.monotonic()
    assert _kernels(open_trace(stub.report)) == 12
    assert time.monotonic() - started < 5
    assert main(["report", str(stub.report), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["report", str(stub.source), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["phases"] == doc["phases"]
    assert main(["diff", str(stub.report), str(stub.source), "--json"]) == 0
    capsys.readouterr()
    assert main(["import", str(stub.report)]) == 0
    written = Path(capsys.readouterr().out.strip())
    assert written == stub.report.parent / "run.rooftop.parquet"  # <stem>.rooftop.parquet, as for a .sqlite
    assert _kernels(load_trace(written)) == 12
    assert len(stub.calls()) == 1  # nsys ran once for all of them


def test_opening_exports_with_progress_and_reuses_the_cache(stub):
    from collectors.open import open_trace

    stages = []

    class Progress:
        def __call__(self, done, total, unit="bytes"):
            pass

        def stage(self, name):
            stages.append(name)

    assert _kernels(open_trace(str(stub.report), Progress())) == 12
    assert stages and stages[0] == nsys_rep.EXPORTING
    stages.clear()
    open_trace(str(stub.report), Progress())
    assert nsys_rep.EXPORTING not in stages and len(stub.calls()) == 1


def test_a_changed_report_is_exported_again_and_the_old_export_dropped(stub):
    open_trace(stub.report)
    old = nsys_rep.cached(stub.report)
    os.utime(stub.report, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert nsys_rep.cached(stub.report) is None
    open_trace(stub.report)
    assert len(stub.calls()) == 2
    assert not old.exists() and nsys_rep.cached(stub.report).exists()


def test_unwritable_directory_uses_the_user_cache(stub, tmp_path, monkeypatch):
    beside = stub.report.parent
    monkeypatch.setattr(nsys_rep, "_writable", lambda d: Path(d) != beside)
    assert _kernels(open_trace(stub.report)) == 12
    hit = nsys_rep.cached(stub.report)
    assert hit.parent == tmp_path / "cache" / "rooftop" / "nsys-rep"
    assert not any(p.suffix == ".sqlite" for p in beside.iterdir())


def test_failing_nsys_is_one_clear_error_and_leaves_no_cache(stub, monkeypatch):
    monkeypatch.setenv("STUB_MODE", "fail")
    with pytest.raises(TraceError) as info:
        open_trace(stub.report)
    msg = str(info.value)
    assert "exit status 3" in msg and "report is damaged (stub)" in msg and str(stub.report) in msg
    assert nsys_rep.cached(stub.report) is None and _leftovers(stub.report.parent) == []


def test_export_that_is_not_a_database_is_never_cached(stub, monkeypatch):
    monkeypatch.setenv("STUB_MODE", "garbage")
    with pytest.raises(TraceError, match="wrote no SQLite database"):
        open_trace(stub.report)
    assert nsys_rep.cached(stub.report) is None
    assert [p.name for p in stub.report.parent.iterdir()] == ["run.nsys-rep"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by its parent, which was killed too) is dead for this purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_hanging_nsys_times_out_kills_its_group_and_leaves_nothing(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_MODE", "hang")
    monkeypatch.setenv("STUB_CHILD", str(tmp_path / "child.pid"))
    monkeypatch.setenv(nsys_rep.TIMEOUT_ENV, "1.5")
    started = time.monotonic()
    with pytest.raises(TraceError, match=r"did not finish in 1.5 s and was stopped"):
        open_trace(stub.report)
    assert time.monotonic() - started < 20
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # nsys's helper went with it
    assert nsys_rep.cached(stub.report) is None
    assert [p.name for p in stub.report.parent.iterdir()] == ["run.nsys-rep"]


def test_cancelling_the_export_kills_nsys(stub, tmp_path, monkeypatch):
    """Esc in the TUI: the progress display raises from `stage`; nsys is killed, nothing is left."""
    monkeypatch.setenv("STUB_MODE", "hang")
    monkeypatch.setenv("STUB_CHILD", str(tmp_path / "child.pid"))

    class Cancelled(Exception):
        pass

    class Progress:
        def __call__(self, *a):
            pass

        def stage(self, name):
            if name != nsys_rep.EXPORTING:  # the second report, a second in
                raise Cancelled()

    with pytest.raises(Cancelled):
        nsys_rep.sqlite_for(stub.report, Progress())
    deadline = time.monotonic() + 5
    child = int((tmp_path / "child.pid").read_text())
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert [p.name for p in stub.report.parent.iterdir()] == ["run.nsys-rep"]


def test_nsys_flag_and_env_name_the_executable(stub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys on PATH
    assert main(["report", str(stub.report), "--nsys", str(stub.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["phases"]
    assert nsys_rep._given is None  # --nsys lasted one command
    os.utime(stub.report, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new version: export again
    monkeypatch.setenv("NSYS", str(stub.path))
    assert _kernels(open_trace(stub.report)) == 12
    assert len(stub.calls()) == 2
    monkeypatch.setenv("NSYS", str(tmp_path / "no-such-nsys"))
    os.utime(stub.report, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    with pytest.raises(TraceError, match=r"\$NSYS names no executable"):
        open_trace(stub.report)


@pytest.mark.parametrize("columns", [80, 40, 200])
def test_no_nsys_message_is_whole_and_wrapped(tmp_path, monkeypatch, capsys, columns):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("COLUMNS", str(columns))
    name = "llama-70b_tp8_decode-batch64_" + "x" * 140 + " final run.nsys-rep"
    rep = tmp_path / "a directory" / name
    rep.parent.mkdir()
    rep.write_bytes(b"\x00\x01report")
    # to a script or a log (stderr not a terminal): the one line of every error, whole
    assert main(["report", str(rep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "…" not in err and str(rep) in err and "nsys export --type sqlite" in err
    # to a person at a terminal: wrapped, the command on a line of its own
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["report", str(rep)]) == 2
    err = capsys.readouterr().err
    assert "…" not in err and err.count("rooftop: error:") == 1
    lines = err.rstrip("\n").split("\n")
    # every line fits but where a word is longer than the line (the path, kept whole, never cut)
    for ln in lines[:-1]:
        assert len(ln) <= columns or len(ln.split()) == 1 or len(ln.split()[0]) > columns - 2, ln
    # the command, on a line of its own and copied as shown, is the exact export of this file
    command = next(ln for ln in lines if ln.lstrip().startswith("nsys export"))
    assert shlex.split(command) == ["nsys", "export", "--type", "sqlite", "--output",
                                    str(rep)[: -len(".nsys-rep")] + ".sqlite", str(rep)]
    assert lines[-1] == command and len(lines) >= 3
    # and the same on one line for the TUI and callers
    with pytest.raises(nsys_rep.NsysMissing) as info:
        open_trace(rep)
    assert "\n" not in str(info.value) and shlex.join(shlex.split(command)) in str(info.value)


def test_open_refuses_before_the_screen_without_nsys(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSYS", raising=False)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00\x01report")
    assert main([str(rep)]) == 2
    assert "nsys export --type sqlite" in capsys.readouterr().err


def test_export_and_open_take_a_report_too(stub, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["export", str(stub.report), "--perfetto", str(out)]) == 0
    doc = json.loads(out.read_text())
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == 12 and len(stub.calls()) == 1
    from collectors.open import sniff
    assert sniff(stub.report) == "nsys-rep"  # `rooftop FILE` goes on to the TUI (its opening: above)


def test_tui_opens_a_report_and_names_it(stub):
    """`rooftop run.nsys-rep`: the app exports it in its load worker and shows the report's name."""
    import asyncio

    from tui.app import RooftopApp
    from tui.screens.overview import OverviewScreen

    async def run():
        app = RooftopApp([str(stub.report)])
        async with app.run_test(size=(100, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen)
            assert len(app.analyses) == 1 and app.analyses[0].trace.label == "run.nsys-rep"
            assert int((app.analyses[0].trace.events["kind"] == "kernel").sum()) == 12
    asyncio.run(run())
    assert len(stub.calls()) == 1 and nsys_rep.cached(stub.report) is not None


def test_import_takes_nsys_too(stub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys on PATH: only --nsys names it
    out = tmp_path / "x.parquet"
    assert main(["import", str(stub.report), "-o", str(out), "--nsys", str(stub.path)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and _kernels(load_trace(out)) == 12
