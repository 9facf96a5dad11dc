"""The profiler's own output kept off the user's terminal.

libkineto (the C++ side of torch.profiler) logs to the process's file descriptor 2 when a session
starts and stops (`USDT:... profiler_start`, `... profiler_stop` on torch 2.x CPU builds), and CUPTI
may add its own lines. They are not rooftop's output: while the profiler starts and stops, the
descriptors 1 and 2 point at a log file, and the run names that file in one line if anything was
written to it."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


def log_path() -> Path:
    """`$XDG_CACHE_HOME/rooftop/profiler.log` (each run appends; the user's cache, not the output's folder)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rooftop" / "profiler.log"


class NativeLog:
    """Collects what native code writes to stdout/stderr inside `with log.redirect():` blocks."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or log_path()
        self.lines = 0

    @contextlib.contextmanager
    def redirect(self):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.path, "ab")
        except OSError:  # no writable cache: the messages stay where they were
            yield
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        saved = []
        try:
            for fd in (1, 2):
                with contextlib.suppress(OSError):
                    saved.append((fd, os.dup(fd)))
                    os.dup2(log.fileno(), fd)
            start = log.tell()
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    stream.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            with contextlib.suppress(OSError):
                log.flush()
                self.lines += _lines_since(self.path, start)
            log.close()

    def note(self) -> str | None:
        """The one line that names the log, when something was written to it."""
        if not self.lines:
            return None
        return f"rooftop: the profiler's own messages ({self.lines} line{'s' if self.lines != 1 else ''}) are in {self.path}"


def _lines_since(path: Path, start: int) -> int:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read().count(b"\n")
