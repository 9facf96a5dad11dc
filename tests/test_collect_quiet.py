"""Issue 40: the profiler's own output (libkineto's `USDT:` lines) goes to a log file named in one
line, not to the user's terminal."""
import os

import pytest

from collectors.capture.quiet import NativeLog

torch = pytest.importorskip("torch")


def test_native_writes_go_to_the_log_and_are_named_once(tmp_path, capfd):
    log = NativeLog(tmp_path / "p.log")
    with log.redirect():
        os.write(2, b"USDT: profiler_start\n")
        os.write(1, b"native stdout\n")
    print("ours")
    out, err = capfd.readouterr()
    assert out == "ours\n" and err == ""
    assert (tmp_path / "p.log").read_bytes() == b"USDT: profiler_start\nnative stdout\n"
    assert log.note() == f"rooftop: the profiler's own messages (2 lines) are in {tmp_path / 'p.log'}"


def test_nothing_written_means_nothing_said(tmp_path, capfd):
    log = NativeLog(tmp_path / "p.log")
    with log.redirect():
        pass
    assert log.note() is None and capfd.readouterr() == ("", "")


def test_collect_on_cpu_prints_no_profiler_lines(tmp_path, capfd, monkeypatch):
    from test_collect import _args

    from collectors.capture import collect
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rc = collect.run(_args("--device", "cpu", "--preset", "tiny", "--prompt-len", "8", "--gen-len", "1",
                           "--warmup", "0", "-o", str(tmp_path / "t.parquet")))
    assert rc == 0
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "profiler_start" not in out + err
    log = tmp_path / "cache" / "rooftop" / "profiler.log"
    if log.exists() and log.read_bytes().count(b"\n"):  # this torch build logs: the log is named once
        assert err.count(str(log)) == 1
