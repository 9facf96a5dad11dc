"""Open any trace a user has: detect the format from the content, convert, or load.

`rooftop import SRC [-o OUT]` writes the converted trace; `convert` converts in memory (what
`collectors.open` opens `rooftop FILE`, `report` and the TUI's traces with). Formats are recognised by their bytes, not their extension, since
traces get renamed (`trace.json` that is gzipped, `profile.sqlite` that is a Parquet file...): each
is a reader in the registry (`formats.READERS`), which says what a file is and reads it; this
module only turns what a reader read into a conformed table, and writes it.
"""
from __future__ import annotations

import argparse
import os
import stat
import sys
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop import limits
from rooftop.trace.codes import by_identity
from rooftop.present.summary import write_summarized_handed_over
from rooftop.present.text import printable
from rooftop.trace.frame import give_back_memory
from rooftop.trace import (TraceError, check_run_directory, check_writable, json_safe,
                           scrub_all, to_table, write_trace)

from collectors.readers.formats import BY_NAME, READERS, ImportFailed, detect, kineto_dir
from collectors.readers.progress import DERIVING, SUMMARIZING, WRITING, Progress, ProgressLine as _ProgressLine, stage
from collectors.readers.progress import file_size as _size

if TYPE_CHECKING:
    from collectors.readers._kineto_early import EarlyStart


class UnknownFormatError(TraceError):
    """A file rooftop does not know how to read."""


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


def check_directory(path: str | os.PathLike) -> None:
    """`rooftop.trace.check_run_directory` with the readers' eyes: a Kineto file's own rank counts."""
    check_run_directory(path, kineto_dir.header_rank)


def check_format(path: str | os.PathLike) -> str:
    """The detected format, or the one-line error for an empty, unknown or unsupported file."""
    path = Path(path)
    fmt = detect(path)
    _reject(path, fmt)
    return fmt


def _reject(path: Path, fmt: str) -> None:
    if fmt == "unknown" and path.is_file() and path.stat().st_size == 0:
        raise UnknownFormatError(path, "empty file", "the program that wrote it may have been killed before writing")
    if fmt in BY_NAME:
        BY_NAME[fmt].check(path)
    if fmt == "unknown" and path.is_dir():
        raise UnknownFormatError(path, "is a directory that holds no trace files (.parquet, Kineto .json/.json.gz)",
                                 "give a trace file, or a directory of per-rank traces")
    if fmt == "unknown":
        raise UnknownFormatError(path, "unrecognised trace format",
                                 "rooftop reads rooftop Parquet, Kineto JSON, nsys SQLite, .ncu-rep and ncu CSV")


def import_any(src: str | os.PathLike, progress: Progress | None = None, fmt: str | None = None,
               early: EarlyStart | None = None) -> tuple[pd.DataFrame | pa.Table, dict]:
    """Rows and metadata of any supported trace (rooftop files are loaded, not converted), read
    by the format's reader (`formats.READERS`). `fmt`: the format `check_format` gave already
    (collectors/open.py sniffs once per open); `early`: what `rooftop import` started before the
    libraries loaded, for the reader to take over."""
    src = Path(src)
    if fmt is None:
        fmt = check_format(src)
    with _reading(src, fmt):
        rows, meta = BY_NAME[fmt].read(src, progress, early)
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


def convert(src: str | os.PathLike, progress: Progress | None = None, fmt: str | None = None,
            early: EarlyStart | None = None) -> tuple[pa.Table, dict]:
    """Any supported trace as one conformed table and its metadata, scrubbed of secrets (the path
    every import and every in-memory conversion takes); the metadata's `warnings` say what was
    dropped or cut. `fmt`, `early`: as for `import_any`."""
    src = Path(src)
    if fmt is None:
        fmt = check_format(src)
    rows, meta = import_any(src, progress, fmt, early)
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



# --- `rooftop import` ----------------------------------------------------------------------------

# (no reader's stem is the end of another reader's, so the order between readers does not matter)
_STEMS = tuple(stem for reader in READERS for stem in reader.stems)


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

    from collectors.readers.kineto import read_kineto

    files = kineto_dir.kineto_files(src)
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
        ranks = kineto_dir.ranks_of(src, files, metas)
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


def run(args: argparse.Namespace, early: EarlyStart | None = None) -> int:
    """`rooftop import` once its arguments are parsed (`import_command.run`, which may have started
    a large Kineto file's workers: `early`)."""
    src = Path(args.src)
    fmt = check_format(src)
    out = Path(args.output) if getattr(args, "output", None) else default_output(src, fmt)
    check_output(src, out, directory=fmt == "kineto-dir")
    if fmt != "kineto-dir":
        check_writable(out)  # before a long import, not after
    bar = _ProgressLine(src.name, size=_size(src))
    try:
        if fmt == "kineto-dir":
            written, warnings = write_ranks(src, out, bar)
        else:
            table, meta = convert(src, bar, early=early)
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
