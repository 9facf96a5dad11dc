"""What every format's reader is (`Reader`), and what it sniffs (`Peek`).

A reader says whether a path holds its format, from the content (`sniff`: traces get renamed, so
the extension only breaks ties), and reads it into rows and a metadata document (`read`). Each
format's reader is a small class in its own module of this package, which imports the heavy
reading code only inside `read`; the registry (`formats.READERS`) lists them in the order they
are tried.
"""
from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rooftop.trace import TraceError, check_input

from collectors.readers.progress import Progress

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from collectors.readers._kineto_early import EarlyStart

_PEEK = 1 << 20  # Kineto puts deviceProperties (one block per GPU) before traceEvents


class ImportFailed(TraceError):
    """A reader met content it did not expect (a damaged or unusual file): one line, naming the file."""


class Peek:
    """What sniffing sees of a path: whether it is a directory, a file's first 64 bytes (`head`),
    and, read on first use, its first ~1 MB as text (`text`: inflated if gzipped, "" for an empty
    file). Made once per `detect`, so that no reader reads the file again."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        st = check_input(self.path)  # a FIFO, a device, /proc, permission denied: one line, before any open
        self.is_dir = stat.S_ISDIR(st.st_mode)
        self.head = b"" if self.is_dir else _head(self.path)
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = peek_text(self.path, self.head) if self.head else ""
        return self._text


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(64)
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None


def peek_text(path: Path, head: bytes) -> str:
    """The first ~1 MB of the file as text (inflated if gzipped; a truncated gzip gives what it has)."""
    try:
        with open(path, "rb") as fh:
            if head[:2] != b"\x1f\x8b":
                data = fh.read(_PEEK)
            else:
                z, parts, size = zlib.decompressobj(16 + zlib.MAX_WBITS), [], 0
                while size < _PEEK and not z.eof:
                    raw = fh.read(1 << 16)
                    if not raw:
                        break
                    out = z.decompress(raw, _PEEK - size)  # bounded: a bomb inflates no further
                    parts.append(out)
                    size += len(out)
                data = b"".join(parts)
    except (OSError, EOFError, zlib.error):
        return ""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (PowerShell's `>`), e.g. an ncu CSV
        return data.decode("utf-16", errors="replace").lstrip("\ufeff \t\r\n")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")


class Reader(Protocol):
    """One format. Subclass it (a Protocol subclassed explicitly keeps the defaults below) and add
    one line to `formats.READERS`."""

    name: str  # what `detect` returns ("kineto"), stable: tests and the CLI compare it
    label: str  # how a message names the format ("Kineto JSON")
    stems: tuple[str, ...] = ()  # name endings `rooftop import` drops for its default output name
    native: bool = False  # a rooftop trace: loaded as it is, never converted

    def sniff(self, peek: Peek) -> bool:
        """Whether the path holds this format (cheap: `peek` has read what there is to see)."""
        ...

    def read(self, path: Path, progress: Progress | None,
             early: EarlyStart | None = None) -> tuple[pd.DataFrame | pa.Table, dict]:
        """The rows (for `rooftop.trace.to_table`, or a conformed table) and the metadata document;
        raises a `TraceError` subclass naming the format. `early`: what `rooftop import` started
        before the libraries loaded (only the Kineto reader takes it)."""
        ...

    def check(self, path: Path) -> None:
        """Raise the one-line error for a file of this format that cannot be read here at all,
        before a long import starts (nsys-rep without an `nsys` to export it)."""
