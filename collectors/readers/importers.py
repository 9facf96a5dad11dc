"""Open any trace a user has: detect the format from the content, convert, or load.

`rooftop import SRC [-o OUT]` writes the converted trace; `load_any` converts in memory (what
`rooftop FILE` and the TUI use). Formats are recognised by their bytes, not their extension, since
traces get renamed (`trace.json` that is gzipped, `profile.sqlite` that is a Parquet file...).
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pandas as pd
import pyarrow as pa

from rooftop.trace import Trace, TraceError, check_writable, parquet_files, load_trace, to_table, trace_from_table, write_trace

Progress = Callable[[int, int], None]
FORMATS = ("rooftop", "kineto", "nsys-sqlite", "ncu-rep", "ncu-csv", "nsys-rep", "kineto-dir", "rooftop-dir",
           "unknown")
NCU_REP_MAGIC = b"NVR\x00"  # first bytes of every .ncu-rep seen (Nsight Compute 2021-2025)
SQLITE_MAGIC = b"SQLite format 3\x00"
_PEEK = 1 << 20  # Kineto puts deviceProperties (one block per GPU) before traceEvents


class UnknownFormatError(TraceError):
    """A file rooftop does not know how to read."""


class ImportFailed(TraceError):
    """A reader met content it did not expect (a damaged or unusual file): one line, naming the file."""


# What a parser of untrusted bytes raises when the content is not what it expected. Anything else
# (MemoryError, KeyboardInterrupt, a TraceError already naming the file) passes through.
_CONTENT_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
                   UnicodeError, RecursionError, AssertionError, pa.ArrowException, EOFError, zlib.error)


@contextmanager
def _reading(path: Path, fmt: str):
    try:
        yield
    except TraceError:
        raise
    except _CONTENT_ERRORS as exc:
        raise ImportFailed(path, f"cannot read this {fmt} file: {exc.__class__.__name__}: {_short(exc)}",
                           "the file may be damaged; if it opens in its own tool, please report it") from None


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _drop_impossible(rows: pd.DataFrame | pa.Table, meta: dict) -> tuple[pd.DataFrame | pa.Table, dict]:
    """Events with a negative duration cannot be placed on a timeline: drop them and say so, so one bad
    event costs one row, not the whole import (and the written file passes `load_trace`)."""
    if not isinstance(rows, pd.DataFrame) or "dur_ns" not in rows.columns or not len(rows):
        return rows, meta
    dur = pd.to_numeric(rows["dur_ns"], errors="coerce")
    bad = (dur < 0).to_numpy(dtype=bool, na_value=False)
    if not bad.any():
        return rows, meta
    meta = {**meta, "warnings": list(meta.get("warnings") or []) +
            [f"{int(bad.sum())} event(s) with negative duration dropped"]}
    return rows[~bad].reset_index(drop=True), meta


def _peek_text(path: Path, head: bytes) -> str:
    """The first ~1 MB of the file as text (decompressed if gzipped)."""
    try:
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as fh:
                data = fh.read(_PEEK)
        else:
            with open(path, "rb") as fh:
                data = fh.read(_PEEK)
    except (OSError, EOFError, zlib.error):
        return ""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (PowerShell's `>`), e.g. an ncu CSV
        return data.decode("utf-16", errors="replace").lstrip("\ufeff \t\r\n")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")


def _is_kineto_text(text: str) -> bool:
    return text.startswith("{") and any(k in text for k in ('"traceEvents"', '"deviceProperties"',
                                                            '"schemaVersion"'))


def _is_ncu_csv(text: str) -> bool:
    lines = [ln.strip() for ln in text.splitlines()[:50] if ln.strip()]
    return any(ln.startswith("==PROF==") for ln in lines) or \
        any(ln.startswith('"ID","Process ID"') for ln in lines)


def detect(path: str | os.PathLike) -> str:
    """The format of a file or directory, from its content (the extension only breaks ties)."""
    path = Path(path)
    if path.is_dir():
        if parquet_files(path):
            return "rooftop-dir"
        if any(detect(p) == "kineto" for p in path.iterdir() if p.is_file()):
            return "kineto-dir"
        return "unknown"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return "unknown"
    if head[:4] == b"PAR1":
        return "rooftop"
    if head[:16] == SQLITE_MAGIC:
        return "nsys-sqlite"
    if head[:4] == NCU_REP_MAGIC:
        return "ncu-rep"
    text = _peek_text(path, head) if head else ""
    if _is_kineto_text(text):
        return "kineto"
    if _is_ncu_csv(text):
        return "ncu-csv"
    name = path.name.lower()
    if name.endswith((".nsys-rep", ".qdrep")):
        return "nsys-rep"
    return "unknown"


def check_format(path: str | os.PathLike) -> str:
    """The detected format, or the one-line error for an empty, unknown or unsupported file."""
    path = Path(path)
    fmt = detect(path)
    _reject(path, fmt)
    return fmt


def _reject(path: Path, fmt: str) -> None:
    if fmt == "unknown" and path.is_file() and path.stat().st_size == 0:
        raise UnknownFormatError(path, "empty file", "the program that wrote it may have been killed before writing")
    if fmt == "nsys-rep":
        raise UnknownFormatError(path, "Nsight Systems reports (.nsys-rep) are not read directly",
                                 f"run `nsys export --type sqlite -o {path.with_suffix('.sqlite').name} "
                                 f"{path.name}` and open the .sqlite")
    if fmt == "unknown":
        raise UnknownFormatError(path, "unrecognised trace format",
                                 "rooftop reads rooftop Parquet, Kineto JSON, nsys SQLite, .ncu-rep and ncu CSV")


def import_any(src: str | os.PathLike, progress: Progress | None = None) -> tuple[pd.DataFrame | pa.Table, dict]:
    """Rows and metadata of any supported trace (rooftop files are loaded, not converted)."""
    src = Path(src)
    if not src.exists():
        raise TraceError(src, "no such file or directory")
    fmt = detect(src)
    _reject(src, fmt)
    with _reading(src, fmt):
        rows, meta = _read(src, fmt, progress)
    return _drop_impossible(rows, meta)


def _read(src: Path, fmt: str, progress: Progress | None) -> tuple[pd.DataFrame | pa.Table, dict]:
    if fmt in ("rooftop", "rooftop-dir"):
        t = load_trace(src)
        return t.events, t.meta
    if fmt == "kineto":
        from .kineto import read_kineto
        return read_kineto(src, progress)
    if fmt == "kineto-dir":
        from .kineto import rank_files, read_kineto
        frames, metas = [], []
        for i, f in enumerate(rank_files(src)):
            rows, meta = read_kineto(f, progress)
            rows["rank"] = meta.get("rank") if meta.get("rank") is not None else i
            frames.append(rows)
            metas.append(meta)
        meta = dict(metas[0])
        meta["ranks"] = [{"rank": int(fr["rank"].iloc[0]) if len(fr) else None, "file": f.name, "device": m["device"]}
                         for fr, m, f in zip(frames, metas, rank_files(src))]
        meta["warnings"] = [w for m in metas for w in m.get("warnings", [])]
        return pd.concat(frames, ignore_index=True), meta
    if fmt == "nsys-sqlite":
        from .nsys import read_nsys
        return read_nsys(src, progress)
    if fmt == "ncu-rep":
        from .ncu import read_ncu_rep
        return read_ncu_rep(src)
    from .ncu import read_ncu_csv
    return read_ncu_csv(src)


def load_any(path: str | os.PathLike, progress: Progress | None = None) -> Trace:
    """A `Trace` from any supported file: rooftop files via `load_trace`, others converted in memory."""
    path = Path(path)
    if path.exists() and detect(path) in ("rooftop", "rooftop-dir"):
        return load_trace(path)
    rows, meta = import_any(path, progress)
    with _reading(path, detect(path)):
        table = rows if isinstance(rows, pa.Table) else to_table(rows)
    return trace_from_table(table, meta, path)


# --- `rooftop import` ----------------------------------------------------------------------------

_STEMS = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".ncu-rep", ".csv", ".parquet")


def default_output(src: Path, fmt: str) -> Path:
    """`<stem>.rooftop.parquet` next to the source; a directory for a multi-rank run."""
    if fmt == "kineto-dir":
        return src.parent / f"{src.name}.rooftop"
    name = src.name
    for suffix in _STEMS:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return src.parent / f"{name}.rooftop.parquet"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="Kineto .json[.gz], nsys .sqlite, .ncu-rep, ncu CSV, or a "
                                              "directory of per-rank Kineto files")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output .parquet (default: <stem>.rooftop.parquet next to SRC; a directory for ranks)")


class _ProgressLine:
    """`importing trace.json.gz: 42%` on stderr, at most ~5 times a second, only for large inputs."""

    def __init__(self, label: str, stream=sys.stderr, min_bytes: int = 32 << 20):
        self.label, self.stream, self.min_bytes = label, stream, min_bytes
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if total < self.min_bytes or now - self.last < 0.2:
            return
        self.last, self.shown = now, True
        self.stream.write(f"\rimporting {self.label}: {100 * done // max(total, 1):3d}% "
                          f"({done >> 20}/{total >> 20} MB)")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")


def run(args: argparse.Namespace) -> int:
    src = Path(args.src)
    if not src.exists():
        raise TraceError(src, "no such file or directory")
    fmt = detect(src)
    _reject(src, fmt)
    out = Path(args.output) if getattr(args, "output", None) else default_output(src, fmt)
    if fmt != "kineto-dir":
        check_writable(out)  # before a long import, not after
    bar = _ProgressLine(src.name)
    try:
        if fmt == "kineto-dir":
            from .kineto import import_dir
            with _reading(src, fmt):
                written = import_dir(src, out, bar)
        else:
            rows, meta = import_any(src, bar)
            with _reading(src, fmt):
                table = rows if isinstance(rows, pa.Table) else to_table(rows)
            written = [write_trace(out, table, meta, conform=False)]
    finally:
        bar.done()
    for w in written:
        print(w)
    return 0
