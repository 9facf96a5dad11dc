"""How an import tells what it is doing: the progress line on stderr (`ProgressLine`), the names
of the stages after the file is read, and `stage`, which tells a display that shows stages. Light
on purpose (no pandas, no pyarrow): `rooftop import` draws it before the libraries load, and every
reader reports through it without knowing who draws."""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

# progress(done, total[, unit]): bytes read of the file, or (nsys, which reads SQLite tables) "stages";
# a display with a `stage` method also hears the stages after the read (`stage`)
Progress = Callable[..., None]


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ProgressLine:
    """`importing trace.json.gz: 42% (435/1036 MB)` on stderr, at most ~5 times a second, only for
    large inputs (`verb`: what is being done, "inflating" for the early start's gzip inflation);
    then, once the file is read, the stage the import is in (`stage`): the join, deriving names and
    steps, the summary and the write are about half of a large import,
    during which the bytes alone would sit at their last reading."""

    MIN_BYTES = 32 << 20  # smaller inputs are read in about a second: no line

    def __init__(self, label: str, stream=None, min_bytes: int | None = None, size: int = 0,
                 verb: str = "importing"):
        from rooftop.present.text import printable

        self.label, self.size, self.verb = printable(label), size, verb
        self.stream = stream if stream is not None else sys.stderr  # (the one at the time: a test's capture)
        self.min_bytes = self.MIN_BYTES if min_bytes is None else min_bytes
        # stderr redirected (a script, CI, `report --json 2> log`): no line, which would only be noise there
        self.quiet = stream is None and not _is_terminal(self.stream)
        # a terminal's width: a longer line would wrap, and `\r` goes back to the start of its last row only
        self.columns = _columns(self.stream) if stream is None else None
        self.last = 0.0
        self.shown = False
        self.read = ""  # what the last reading said was read, drawn or not (the throttle skips most)
        self.width = 0  # the longest line drawn: a shorter one is padded over it

    def __call__(self, done: int, total: int, unit: str = "bytes") -> None:
        self.read = f"{done >> 20} MB read" if unit == "bytes" else ""  # (a reader's own stages: their names follow)
        now = time.monotonic()
        if (total if unit == "bytes" else self.size) < self.min_bytes or now - self.last < 0.2:
            return
        self.last = now
        what = f"({done >> 20}/{total >> 20} MB)" if unit == "bytes" else f"(stage {done} of {total})"
        self._draw(f"{100 * done // max(total, 1):3d}% {what}")

    def stage(self, name: str) -> None:
        """The file is read; `name` runs now (drawn at once: an import has a few stages)."""
        if self.shown or self.size >= self.min_bytes:
            self._draw(f"{self.read} · {name}" if self.read else name)

    def _draw(self, text: str) -> None:
        if self.quiet:
            return
        line = f"{self.verb} {self.label}: {text}"
        if self.columns is not None and len(line) > self.columns:
            line = line[:self.columns - 1] + "…"
        self.stream.write("\r" + line.ljust(self.width))
        self.width, self.shown = max(self.width, len(line)), True
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or closed
        return False


def _columns(stream) -> int:
    """The last column a line on `stream`'s terminal may fill (80 columns where it says none)."""
    try:
        return max(20, os.get_terminal_size(stream.fileno()).columns - 1)
    except (AttributeError, ValueError, OSError):
        return 79


# The stages of an import after its file is read, as a progress display names them.
MERGING = "collecting the workers' events"  # a parallel read: the other processes' columns
JOINING = "joining launches and ranges"
DERIVING = "deriving names, steps and layers"
SUMMARIZING = "analysing and writing"  # `rooftop import`: the stored summary, beside the rows
WRITING = "writing"  # a rank of a multi-rank import (no summary: a run is analysed whole)
LOADING = "loading the rows"  # in memory (`collectors.open.open_trace`), the table to pandas for the analysis
ANALYSING = "analysing"  # `report` and `diff` of a file converted in memory


def stage(progress, name: str) -> None:
    """Tell an import's progress display that `name` runs now, when it shows stages (a `stage`
    method: `ProgressLine`, the TUI's loading screen, where it is also a point at which Esc stops
    the import); a plain callable of (done, total) hears only bytes."""
    tell = getattr(progress, "stage", None)
    if tell is not None:
        tell(name)
