"""Run one input through a user-facing entry point and judge the outcome (shared by the tests)."""
from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 10


class Hang(BaseException):
    """Raised by the alarm: a BaseException so that no `except Exception` in the code under test eats it."""


@dataclass
class Outcome:
    rc: int
    out: str
    err: str


def _alarm(signum, frame):
    raise Hang(f"no answer within {TIMEOUT_S} s")


def run_in_process(argv: list[str]) -> Outcome:
    """`rooftop ARGV` through `rooftop_cli.main`, with stdout/stderr captured and a hang check."""
    from rooftop_cli import main

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(rc, out.getvalue(), err.getvalue())


def run_subprocess(argv: list[str], cwd: Path | None = None) -> Outcome:
    try:
        p = subprocess.run([sys.executable, "-m", "rooftop", *argv], capture_output=True, text=True,
                           timeout=TIMEOUT_S, cwd=cwd or ROOT, errors="replace")
    except subprocess.TimeoutExpired:
        raise AssertionError(f"rooftop {' '.join(argv)}: no answer within {TIMEOUT_S} s (hang)") from None
    return Outcome(p.returncode, p.stdout, p.stderr)


def control_chars(text: str) -> list[str]:
    """Characters a terminal would act on (C0/C1 controls but newline and tab, DEL)."""
    return sorted({repr(c) for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"})


def check(o: Outcome, path: Path, expect: str | None) -> None:
    """The contract of issue 7: exit 0 or 2; 2 is one line naming the file; never a traceback."""
    where = f"rc={o.rc}\nstderr: {o.err[-2000:]}"
    assert "Traceback" not in o.err and "Traceback" not in o.out, where
    assert o.rc in (0, 2), where
    assert not control_chars(o.out), f"control characters on stdout: {control_chars(o.out)}"
    assert not control_chars(o.err), f"control characters on stderr: {control_chars(o.err)}"
    # "internal error" is for rooftop's own bugs, never a bad input's problem (nor in a warning)
    assert "internal error" not in o.err + o.out, where
    if o.rc == 2:
        lines = o.err.strip().splitlines()
        assert len(lines) == 1, where
        assert lines[0].startswith("rooftop: error: "), where
        assert "internal error" not in lines[0], where  # a bug of ours, not a problem of the file
        assert path.name[:40] in lines[0], f"the error does not name {path.name}: {lines[0]}"
        assert expect in (None, "error"), f"expected {expect}, got: {lines[0]}"
    else:
        assert expect in (None, "ok", "warn"), f"expected an error, got exit 0\n{o.out[-1500:]}"
        if expect == "warn":
            assert "warning" in (o.out + o.err).lower(), f"partial load without a warning:\n{o.out[-1500:]}"


# `rooftop ARGV` in a child that reports its own peak memory (ru_maxrss, KiB on Linux) into a file.
# The peak is the process's VmHWM (in kB): it starts afresh at exec. ru_maxrss does not: the child is
# forked from pytest (preexec_fn rules out posix_spawn), and Linux carries its high-water mark,
# pytest's own size, across the exec.
_MEASURED = ("import sys\n"
             "from rooftop_cli import main\n"
             "def hwm():\n"
             "    for line in open('/proc/self/status'):\n"
             "        if line.startswith('VmHWM:'):\n"
             "            return line.split()[1]\n"
             "    import resource\n"
             "    return str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
             "try:\n"
             "    rc = main(sys.argv[2:])\n"
             "finally:\n"
             "    open(sys.argv[1], 'w').write(hwm())\n"
             "sys.exit(rc)\n")


@dataclass
class Limited(Outcome):
    seconds: float
    peak_mb: float | None


def run_limited(argv: list[str], tmp: Path, env: dict | None = None, timeout: float = 60,
                mem_gb: float = 3.0) -> Limited:
    """`rooftop ARGV` in a subprocess under an address-space limit and a wall-clock limit; its exit
    code, output, wall time and peak resident memory."""
    import os
    import resource
    import time

    def limit():
        cap = int(mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    rss = tmp / ".peak-rss"
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", _MEASURED, str(rss), *argv], capture_output=True, text=True,
                           errors="replace", timeout=timeout, cwd=ROOT, preexec_fn=limit,
                           env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"rooftop {' '.join(argv)}: no answer within {timeout} s") from None
    seconds = time.perf_counter() - t
    peak = int(rss.read_text()) / 1024 if rss.exists() and rss.read_text().strip() else None
    rss.unlink(missing_ok=True)
    return Limited(p.returncode, p.stdout, p.stderr, seconds, peak)
