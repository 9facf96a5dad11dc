"""Open any trace a user has: detect the format from the content, convert, or load.

`rooftop import SRC [-o OUT]` writes the converted trace; `convert` converts in memory (what
`collectors.open` opens `rooftop FILE`, `report` and the TUI's traces with). Formats are recognised
by their bytes, not their extension, since traces get renamed (`trace.json` that is gzipped,
`profile.sqlite` that is a Parquet file...).
"""
from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop import limits
from rooftop.codes import by_identity
from rooftop.summary import write_summarized_handed_over
from rooftop.text import printable
from rooftop.trace.frame import give_back_memory
from rooftop.trace import (TraceError, check_input, check_run_directory, check_writable, json_safe, load_trace, parquet_files,
                           scrub_all, to_table, write_trace)

from .import_command import DERIVING, SUMMARIZING, WRITING, stage

# progress(done, total[, unit]): bytes read of the file, or (nsys, which reads SQLite tables) "stages";
# a display with a `stage` method also hears the stages after the read (`import_command.stage`)
Progress = Callable[..., None]
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


_INT32 = 2 ** 31
# Launch columns: non-negative and within the int32 column; an id column: within int32.
_LAUNCH_INTS = ("registers", "shared_mem")
_ID_INTS = ("device", "stream", "step", "layer")
_SHAPES = ("grid", "block")


def _out_of_range(rows: pd.DataFrame) -> np.ndarray:
    """Rows holding a value no GPU launch can have (a negative or > 2^31 grid, block, register or
    shared-memory size, a device id beyond int32): vectorised, one mask."""
    bad = np.zeros(len(rows), dtype=bool)
    for c in _LAUNCH_INTS + _ID_INTS:
        if c not in rows.columns:
            continue
        lo = 0 if c in _LAUNCH_INTS else -_INT32
        if isinstance(rows[c].array, pd.arrays.IntegerArray):  # (a Kineto join's): the integers as they are
            v = rows[c].array.to_numpy(dtype=np.int64, na_value=lo)  # a missing value is in range
            bad |= (v < lo) | (v >= _INT32)
        elif not rows[c].isna().all():
            v = pd.to_numeric(rows[c], errors="coerce").astype("float64")
            bad |= ((v < lo) | (v >= _INT32)).to_numpy(dtype=bool, na_value=False)
    for c in _SHAPES:
        if c not in rows.columns:
            continue
        if isinstance(rows[c].dtype, pd.ArrowDtype):  # Kineto's: fixed-size lists, checked as arrays
            bad |= _wild_shapes(pa.array(rows[c].array))
            continue
        # each distinct object once (importers share one list per launch shape): a million rows
        # hold a few hundred shapes, and checking them row by row was slow at 1M kernels
        vals = rows[c].to_numpy(dtype=object)
        present = np.flatnonzero(pd.notna(vals))  # rows without a shape hold None or NaN
        if not len(present):
            continue
        vals = vals[present]
        codes, first = by_identity(vals)
        objs = vals[first]
        is_shape = np.array([isinstance(v, (list, tuple, np.ndarray)) for v in objs], dtype=bool)
        if not is_shape.any():
            continue
        dims = pd.DataFrame(objs[is_shape].tolist()).apply(pd.to_numeric, errors="coerce")
        wrong = (dims.shape[1] != 3) | dims.isna().any(axis=1) | (dims < 0).any(axis=1) | (dims >= _INT32).any(axis=1)
        wrong_obj = np.zeros(len(objs), dtype=bool)
        wrong_obj[is_shape] = np.asarray(wrong, dtype=bool)
        bad[present] |= wrong_obj[codes]
    return bad


def _wild_shapes(shapes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Rows of an Arrow column of [x, y, z] lists with a part out of range (null lists: none)."""
    import pyarrow.compute as pc

    if isinstance(shapes, pa.ChunkedArray):
        parts = [_wild_shapes(c) for c in shapes.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    if pa.types.is_fixed_size_list(shapes.type) and shapes.type.list_size == 3:
        # (a Kineto join's): the parts as one (n, 3) array, no per-part extraction
        n = len(shapes)
        parts = shapes.values.slice(shapes.offset * 3, n * 3)
        if not parts.null_count and pa.types.is_integer(parts.type):
            # (as unsigned, a negative part is beyond 2^31 too: one comparison; then the three
            # columns or-ed, ~10x faster than `any` along rows of three)
            out = (parts.to_numpy().astype(np.int64, copy=False).view(np.uint64) >= _INT32).reshape(n, 3)
            bad = out[:, 0] | out[:, 1] | out[:, 2]
            return bad & shapes.is_valid().to_numpy(zero_copy_only=False) if shapes.null_count else bad
    bad = np.zeros(len(shapes), dtype=bool)
    for i in range(3):
        v = pc.list_element(shapes, i).to_numpy(zero_copy_only=False)  # float, NaN where null
        bad |= (v < 0) | (v >= _INT32)
    return bad


def _drop_impossible(rows: pd.DataFrame | pa.Table, meta: dict) -> tuple[pd.DataFrame | pa.Table, dict]:
    """Events that cannot be real (a negative duration, an out-of-range launch size) are dropped with
    a warning, so one bad event costs one row, not the whole import (and the written file passes
    `load_trace`)."""
    if not isinstance(rows, pd.DataFrame) or not len(rows):
        return rows, meta
    notes = []
    bad = np.zeros(len(rows), dtype=bool)
    if "dur_ns" in rows.columns:
        dur = pd.to_numeric(rows["dur_ns"], errors="coerce")
        neg = (dur < 0).to_numpy(dtype=bool, na_value=False)
        if neg.any():
            notes.append(f"{int(neg.sum())} event(s) with negative duration dropped")
        bad |= neg
    wild = _out_of_range(rows) & ~bad
    if wild.any():
        notes.append(f"{int(wild.sum())} event(s) with an out-of-range launch size or id dropped")
    bad |= wild
    if not bad.any():
        return rows, meta
    meta = {**meta, "warnings": list(meta.get("warnings") or []) + notes}
    return rows[~bad].reset_index(drop=True), meta


def _peek_text(path: Path, head: bytes) -> str:
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


# `"distributedInfo": {..., "rank": 3, ...}` near the top of a Kineto file (PyTorch writes it before
# the events). Bounded: no nesting inside the object, a 9-digit rank at most.
_HEADER_RANK = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]{0,4096}?"rank"\s*:\s*(\d{1,9})\b')


def header_rank(path: Path) -> int | None:
    """The rank a Kineto file's header names (its `distributedInfo`), from its first ~1 MB; None
    when it names none or is not a Kineto file (the caller falls back to the file's name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    text = _peek_text(path, head)
    if not _is_kineto_text(text):
        return None
    m = _HEADER_RANK.search(text)
    return int(m.group(1)) if m else None


def check_directory(path: str | os.PathLike) -> None:
    """`rooftop.trace.check_run_directory` with the readers' eyes: a Kineto file's own rank counts."""
    check_run_directory(path, header_rank)


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
    st = check_input(path)  # a FIFO, a device, /proc, permission denied: one line, before any open
    if stat.S_ISDIR(st.st_mode):
        if files := parquet_files(path):
            for f in files:  # an unreadable rank is named now, not after the screen has switched
                check_input(f, allow_dir=False)
            return "rooftop-dir"
        if _kineto_files(path):
            return "kineto-dir"
        return "unknown"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
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


def _kineto_files(path: Path) -> list[Path]:
    """The Kineto traces directly in a directory (regular files only: never a FIFO, never a walk)."""
    from .kineto import rank_files

    # A trace-named file that cannot be read (permission denied) is an error naming it, never a
    # rank silently left out of the run.
    return [p for p in rank_files(path) if detect(p) == "kineto"]


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
        from .nsys_rep import check_readable
        check_readable(path)  # an export cached, or an nsys to make one; else the export command
    if fmt == "unknown" and path.is_dir():
        raise UnknownFormatError(path, "is a directory that holds no trace files (.parquet, Kineto .json/.json.gz)",
                                 "give a trace file, or a directory of per-rank traces")
    if fmt == "unknown":
        raise UnknownFormatError(path, "unrecognised trace format",
                                 "rooftop reads rooftop Parquet, Kineto JSON, nsys SQLite, .ncu-rep and ncu CSV")


def import_any(src: str | os.PathLike, progress: Progress | None = None,
               fmt: str | None = None) -> tuple[pd.DataFrame | pa.Table, dict]:
    """Rows and metadata of any supported trace (rooftop files are loaded, not converted). `fmt`:
    the format `check_format` gave already (collectors/open.py sniffs once per open)."""
    src = Path(src)
    if fmt is None:
        fmt = detect(src)
        _reject(src, fmt)
    with _reading(src, fmt):
        rows, meta = _read(src, fmt, progress)
    return _drop_impossible(rows, meta)


# Text columns of few distinct values (names, paths: each shared by thousands of rows), handed on as
# categoricals: conforming them (rooftop.trace.to_table) then maps and encodes each distinct value
# once instead of hashing every row's string (a large part of conforming at 1M kernels).
TEXT_COLUMNS = ("kind", "name", "path", "phase", "op")


def _text_as_categories(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows to conform, their object text columns as categoricals (the same values)."""
    cols = {}
    for c in TEXT_COLUMNS:
        if c in rows.columns and rows[c].dtype == object:
            try:
                cols[c] = _as_category(rows[c].to_numpy(dtype=object))
            except TypeError:  # an unhashable value: no text column after all, conformed as it is
                pass
    return rows.assign(**cols) if cols else rows


def _as_category(values: np.ndarray) -> pd.Categorical:
    """Object array of texts (None/NaN: missing) -> Categorical with the same values. The rows
    share a few string objects, so they are grouped by identity first (an integer hash), and only
    the distinct objects' texts are hashed."""
    present = np.flatnonzero(pd.notna(values))
    codes = np.full(len(values), -1, dtype=np.int64)
    if not len(present):
        return pd.Categorical.from_codes(codes, categories=pd.Index([], dtype=object))
    vals = values[present]
    by_id, first = by_identity(vals)
    text_code, cats = pd.factorize(vals[first])
    codes[present] = text_code[by_id]
    return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))


def convert(src: str | os.PathLike, progress: Progress | None = None, fmt: str | None = None) -> tuple[pa.Table, dict]:
    """Any supported trace as one conformed table and its metadata, scrubbed of secrets (the path
    every import and every in-memory conversion takes); the metadata's `warnings` say what was
    dropped or cut. `fmt`: as for `import_any`."""
    src = Path(src)
    if fmt is None:
        fmt = detect(src)
        _reject(src, fmt)
    rows, meta = import_any(src, progress, fmt)
    with _reading(src, fmt):
        if isinstance(rows, pa.Table):
            table = rows
        else:
            stage(progress, DERIVING)
            rows = _text_as_categories(rows)  # the object text columns freed (the others are shared)
            table = to_table(rows, text_dictionaries=True)  # names stay codes until the write
        del rows
        cap = limits.max_rows()
        if table.num_rows > cap:
            raise TraceError(src, limits.over_budget(f"{table.num_rows:,} events", limits.MAX_ROWS_ENV, cap))
        table, meta, scrubbed = scrub_all(table, json_safe(meta, src))
    give_back_memory()  # the rows' conversion's temporaries, before the write and the summary peak
    if scrubbed:
        meta = {**meta, "warnings": list(meta.get("warnings") or []) + scrubbed}
    return table, meta


def _read(src: Path, fmt: str, progress: Progress | None) -> tuple[pd.DataFrame | pa.Table, dict]:
    if fmt in ("rooftop", "rooftop-dir"):
        t = load_trace(src)
        return t.events, t.meta
    if fmt == "kineto":
        from .kineto import read_kineto
        return read_kineto(src, progress)
    if fmt == "kineto-dir":
        from .kineto import read_kineto
        frames, metas, files = [], [], _kineto_files(src)
        for f in files:
            rows, meta = read_kineto(f, progress)
            frames.append(rows)
            metas.append(meta)
        ranks = _ranks(src, files, metas)
        for rows, r in zip(frames, ranks):
            rows["rank"] = r
        meta = dict(metas[0])
        meta["ranks"] = [{"rank": r, "file": f.name, "device": m.get("device")}
                         for r, m, f in zip(ranks, metas, files)]
        meta["warnings"] = [w for m in metas for w in m.get("warnings", [])]
        return pd.concat(frames, ignore_index=True), meta
    if fmt == "nsys-sqlite":
        from .nsys import read_nsys
        return read_nsys(src, progress)
    if fmt == "nsys-rep":
        from .nsys import read_nsys
        from .nsys_rep import sqlite_for
        return read_nsys(sqlite_for(src, progress), progress)
    if fmt == "ncu-rep":
        from .ncu import read_ncu_rep
        return read_ncu_rep(src)
    from .ncu import read_ncu_csv
    return read_ncu_csv(src)


def _ranks(src: Path, files: list[Path], metas: list[dict]) -> list[int]:
    """The rank of each per-rank file: its own `distributedInfo`, else its name; neither is an error.
    Two files claiming one rank is an error (two runs mixed in one directory)."""
    from .kineto import rank_of

    out = []
    for f, m in zip(files, metas):
        r = m.get("rank")
        if not (type(r) is int and 0 <= r < 2 ** 31):
            r = rank_of(f)
        if not (type(r) is int and 0 <= r < 2 ** 31):
            raise ImportFailed(src, f"{f.name} names no rank (no distributedInfo rank in it, no rank in its name): "
                               "the files are not one multi-rank run", "import one of them")
        out.append(r)
    seen: dict[int, Path] = {}
    for r, f in zip(out, files):
        if r in seen:
            raise ImportFailed(src, f"rank {r} appears twice ({seen[r].name} and {f.name})",
                               "keep one trace per rank in the directory")
        seen[r] = f
    return out


# --- `rooftop import` ----------------------------------------------------------------------------

_STEMS = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".ncu-rep", ".csv", ".parquet", ".nsys-rep", ".qdrep")


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


from .import_command import add_arguments  # noqa: E402,F401  (`rooftop import`'s, where it always was)
from .import_command import ProgressLine as _ProgressLine, file_size as _size  # noqa: E402


def check_output(src: Path, out: Path, directory: bool) -> None:
    """Refuse an output that would destroy the input or write through something that is not a
    plain file: the input itself (or a link to it), a device, a FIFO, a directory where a file
    goes, a directory that is not an earlier rooftop run (for per-rank output)."""
    try:
        same = out.exists() and os.path.samefile(out, src)
    except OSError:
        same = False
    if same or Path(os.path.realpath(out)) == Path(os.path.realpath(src)):
        raise TraceError(out, "the output is the input", "give another -o path")
    if directory:
        real_src, real_out = Path(os.path.realpath(src)), Path(os.path.realpath(out))
        if real_out in real_src.parents or real_src in real_out.parents:
            raise TraceError(out, "the output directory overlaps the input directory", "give another -o path")
    if not out.exists() and not out.is_symlink():
        return
    try:
        st = os.stat(out)
    except OSError as exc:
        raise TraceError(out, f"cannot write here: {exc.strerror or exc}", "give another -o path") from None
    if directory:
        if not stat.S_ISDIR(st.st_mode):
            raise TraceError(out, "exists and is not a directory", "per-rank output is a directory; give another -o")
        if not _earlier_run(out):
            raise TraceError(out, "directory exists and is not an earlier rooftop import",
                             "give a new or empty -o directory")
    elif not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise TraceError(out, f"the output exists and is {kind}", "give a file name ending in .parquet")


def _earlier_run(out: Path) -> bool:
    """True when `out` holds only what a per-rank import writes (`rank=N/trace.parquet`)."""
    try:
        for e in out.iterdir():
            if not (e.is_dir() and not e.is_symlink() and e.name.startswith("rank=")):
                return False
            if any(f.name != "trace.parquet" for f in e.iterdir()):
                return False
    except OSError:
        return False
    return True


def write_ranks(src: Path, out: Path, progress: Progress | None) -> tuple[list[Path], list[str]]:
    """A directory of per-rank Kineto files -> `OUT/rank=N/trace.parquet`, atomically: the ranks are
    written into a temporary directory beside OUT which then replaces it, so a failed or interrupted
    run leaves nothing, and ranks of an earlier run are never mixed with this one's."""
    import shutil
    import tempfile

    from .kineto import read_kineto

    files = _kineto_files(src)
    if not files:
        raise ImportFailed(src, "directory holds no Kineto .json/.json.gz files")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    old = None
    try:
        metas, tables = [], []
        for f in files:
            with _reading(f, "kineto"):
                rows, meta = read_kineto(f, progress)
                rows, meta = _drop_impossible(rows, meta)
                stage(progress, DERIVING)
                table, meta, scrubbed = scrub_all(to_table(rows, text_dictionaries=True), json_safe(meta, f))
            meta["warnings"] = list(meta.get("warnings") or []) + scrubbed
            metas.append(meta)
            stage(progress, WRITING)
            write_trace(tmp / f"rank={len(tables)}" / "trace.parquet", table, meta, conform=False)
            tables.append(f)
        ranks = _ranks(src, files, metas)
        for i, r in enumerate(ranks):  # the names the ranks turned out to have
            if r != i:
                os.rename(tmp / f"rank={i}", tmp / f".rank={r}")
        for i, r in enumerate(ranks):
            if r != i:
                os.rename(tmp / f".rank={r}", tmp / f"rank={r}")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.rename(out, old / "run")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "run").exists() and not out.exists():
            os.rename(old / "run", out)  # put the earlier run back
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    warnings = [f"{f.name}: {w}" for f, m in zip(files, metas) for w in m.get("warnings") or []]
    return sorted(out.glob("rank=*/trace.parquet")), warnings


def warn(message: str, stream=None) -> None:
    """One warning line on stderr, printable (it may quote a trace)."""
    stream = stream or sys.stderr
    stream.write(f"rooftop: warning: {printable(' '.join(str(message).split()))}\n")


def run(args: argparse.Namespace) -> int:
    src = Path(args.src)
    fmt = detect(src)
    _reject(src, fmt)
    out = Path(args.output) if getattr(args, "output", None) else default_output(src, fmt)
    check_output(src, out, directory=fmt == "kineto-dir")
    if fmt != "kineto-dir":
        check_writable(out)  # before a long import, not after
    bar = _ProgressLine(src.name, size=_size(src))
    try:
        if fmt == "kineto-dir":
            written, warnings = write_ranks(src, out, bar)
        else:
            table, meta = convert(src, bar)
            warnings = list(meta.get("warnings") or [])
            # with the summary of the report in its footer: `report` and the Overview answer at once;
            # the table handed over, so that it is freed before the analysis peaks
            held = [table]
            del table
            stage(bar, SUMMARIZING)
            written = [write_summarized_handed_over(out, held, meta, scrubbed=True)]
    finally:
        bar.done()
    for w in warnings:
        warn(w)
    for w in written:
        print(printable(str(w)))
    return 0
