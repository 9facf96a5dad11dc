"""Reading a trace: the footer's metadata, validation, conforming, scrubbing, multi-rank directories."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schema import (FORMAT_VERSION, HOST_COLUMNS, META_KEY, NUMERIC_CHECKED, REQUIRED, SCHEMA, TEXT_COLUMNS,
                     Trace, TraceError, one_line)


_RANK_RE = re.compile(r"rank[=_\-]?(\d+)", re.IGNORECASE)


def _parse_meta(path: Path, raw: dict[bytes, bytes] | None) -> dict[str, Any]:
    if not raw or META_KEY not in raw:
        raise TraceError(path, "Parquet file without rooftop metadata",
                         "not a rooftop trace; try `rooftop import` on the original file")
    try:
        meta = json.loads(raw[META_KEY].decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        raise TraceError(path, f"rooftop metadata is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(meta, dict):
        raise TraceError(path, "rooftop metadata is not a JSON object")
    version = meta.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(path, f"rooftop metadata has no valid format version ({version!r})")
    if version > FORMAT_VERSION:
        raise TraceError(path, f"format version {version} is newer than this rooftop reads ({FORMAT_VERSION})",
                         "upgrade rooftop")
    if version < 1:
        raise TraceError(path, f"unknown format version {version}")
    return meta


# The shape every reader of the metadata relies on: sections are objects, lists are lists, names
# are text. A file written by another tool (or by hand) may hold anything under these keys.
_META_DICTS = ("source", "device", "model", "workload")
_META_SUBDICTS = {"device": ("peaks", "clocks")}
_META_TEXT = {"source": ("tool", "version"), "device": ("name", "cc"), "model": ("name", "dtype"),
              "workload": ("dtype", "kv_dtype", "attn", "device")}


_STEP_NUMBERS = ("index", "step", "batch", "new_tokens", "tokens", "context")


def _conform_step(step: dict) -> dict:
    out = dict(step)
    if out.get("phase") is not None and not isinstance(out["phase"], str):
        out["phase"] = None
    for k in _STEP_NUMBERS:
        v = out.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            out[k] = None
    return out


def conform_meta(meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `meta` in the shape the analysis reads, and a warning per field that was ignored."""
    meta = dict(meta)
    bad: list[str] = []

    def want_dict(doc: dict, key: str, where: str) -> None:
        if key in doc and doc[key] is not None and not isinstance(doc[key], dict):
            bad.append(where)
            doc[key] = None

    for key in _META_DICTS:
        want_dict(meta, key, key)
        if isinstance(meta.get(key), dict):
            section = meta[key] = dict(meta[key])
            for sub in _META_SUBDICTS.get(key, ()):
                want_dict(section, sub, f"{key}.{sub}")
            for leaf in _META_TEXT.get(key, ()):
                v = section.get(leaf)
                if v is not None and not isinstance(v, str):
                    section[leaf] = str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    peaks = (meta.get("device") or {}).get("peaks")
    if isinstance(peaks, dict):
        peaks = meta["device"]["peaks"] = dict(peaks)
        for sub in ("datasheet", "measured"):
            want_dict(peaks, sub, f"device.peaks.{sub}")
    if meta.get("steps") is not None and not isinstance(meta["steps"], list):
        bad.append("steps")
        meta["steps"] = []
    elif isinstance(meta.get("steps"), list):
        meta["steps"] = [_conform_step(s) for s in meta["steps"] if isinstance(s, dict)]
    w = meta.get("warnings")
    if w is not None:
        meta["warnings"] = [str(x) for x in w] if isinstance(w, list) else [str(w)]
    warnings = [f"metadata field(s) of the wrong type ignored: {', '.join(bad)}"] if bad else []
    return meta, warnings


def is_parquet(path: str | os.PathLike) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _read_file(path: Path) -> tuple[pa.Table, dict[str, Any]]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise TraceError(path, "empty file")
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file", "import other formats with `rooftop import`")
    try:
        # Names and paths repeat (a decode step launches the same kernels in every layer): read them
        # dictionary-encoded, as pandas categoricals: ~6x faster to load and smaller than strings.
        schema = pq.read_schema(path)
        meta = _parse_meta(path, schema.metadata)
        text = [c for c in TEXT_COLUMNS if c in schema.names and pa.types.is_string(schema.field(c).type)]
        table = pq.ParquetFile(path, read_dictionary=text).read()
        table.validate(full=True)  # a flipped byte can leave dictionary indices out of range
    except TraceError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        reason = "truncated or corrupt Parquet"
        with open(path, "rb") as fh:
            fh.seek(max(0, size - 4))
            if fh.read(4) != b"PAR1":
                reason = "truncated Parquet file (no footer)"
        raise TraceError(path, f"{reason}: {one_line(exc, 160)}") from None
    return table, meta


def validate(table: pa.Table, path: Path | str | None) -> list[str]:
    """Check required columns and impossible values; return warnings for what can be tolerated."""
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise TraceError(path, f"missing required column(s): {', '.join(missing)}")
    warnings: list[str] = []
    import pyarrow.compute as pc

    dur = table.column("dur_ns")
    if not pa.types.is_integer(dur.type):
        raise TraceError(path, f"column dur_ns has type {dur.type}, expected int64")
    neg = pc.sum(pc.less(dur, 0)).as_py() or 0
    if neg:
        raise TraceError(path, f"{neg} event(s) with negative duration")
    if not pa.types.is_integer(table.column("start_ns").type):
        raise TraceError(path, f"column start_ns has type {table.column('start_ns').type}, expected int64")
    for c in NUMERIC_CHECKED:
        if c in table.column_names and pa.types.is_floating(table.column(c).type):
            col = table.column(c)
            bad = pc.sum(pc.or_(pc.is_nan(col), pc.less(col, 0))).as_py() or 0
            if bad:
                warnings.append(f"{bad} negative or NaN value(s) in {c} treated as unknown")
    return warnings


def _conform_loaded(table: pa.Table) -> pa.Table:
    """Add the optional v1 columns a producer left out, as nulls (unknown)."""
    n = table.num_rows
    for f in SCHEMA:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(n, type=f.type))
    return table


def _to_frame(table: pa.Table) -> pd.DataFrame:
    """pandas rows: text columns as categoricals (the dictionary columns of the file, and names
    and paths, which repeat), nullable ints, plain int64 time columns."""
    for c in TEXT_COLUMNS:
        if c in table.column_names and not pa.types.is_dictionary(table.column(c).type):
            i = table.column_names.index(c)
            table = table.set_column(i, c, table.column(c).cast(pa.string()).dictionary_encode())
    frame = table.to_pandas(types_mapper={
        pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(), pa.bool_(): pd.BooleanDtype(),
    }.get)
    for c in NUMERIC_CHECKED:
        if c in frame.columns:
            col = frame[c].astype("float64")
            frame[c] = col.where(col >= 0)
    # Time columns are never null after validation: plain int64 keeps arithmetic NA-free and fast.
    for c in ("id", "start_ns", "dur_ns"):
        frame[c] = frame[c].astype("int64")
    return frame


def _drop_untimed(table: pa.Table, path) -> tuple[pa.Table, list[str]]:
    """Rows without a start or a duration cannot be placed on a timeline: drop them, say so."""
    import pyarrow.compute as pc

    bad = pc.or_(pc.is_null(table.column("start_ns")), pc.is_null(table.column("dur_ns")))
    if table.column("id").null_count:
        bad = pc.or_(bad, pc.is_null(table.column("id")))
    n = pc.sum(bad).as_py() or 0
    if not n:
        return table, []
    return table.filter(pc.invert(bad)), [f"{n} event(s) without id, start or duration dropped"]


def split_runtime(table: pa.Table) -> tuple[pa.Table, pd.DataFrame | None]:
    """The `runtime` rows out of the table, as a frame of HOST_COLUMNS (names as categoricals,
    nullable ints); None when there are none. Everything else stays an event row."""
    import pyarrow.compute as pc

    kind = table.column("kind")
    runtime = pc.fill_null(pc.equal(pc.cast(kind, pa.string()), "runtime"), False)
    if not pc.any(runtime).as_py():
        return table, None
    rows = table.filter(runtime)
    host = {}
    for c in HOST_COLUMNS:
        col = rows.column(c) if c in rows.column_names else pa.nulls(rows.num_rows, pa.string() if c in ("name", "op")
                                                                       else pa.int64())
        if c in ("name", "op"):
            col = col.cast(pa.string()).dictionary_encode()
        host[c] = col.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    host["start_ns"], host["dur_ns"] = host["start_ns"].astype("int64"), host["dur_ns"].astype("int64")
    return table.filter(pc.invert(runtime)), pd.DataFrame(host)


_PARTITION_DIR = re.compile(r"^[^=/]+=[^/]*$|rank", re.IGNORECASE)


def parquet_files(path: Path) -> list[Path]:
    """The .parquet files of a run directory: directly in it, or one level down in partition
    directories (`rank=0/`, `rank_1/`, hive-style `key=value/`). Never a walk of the whole tree:
    `rooftop report /` must not read the file system, nor unreadable corners of it like /proc."""
    def listing(d: Path) -> list[Path]:
        try:
            return sorted(e for e in d.iterdir() if not e.name.startswith("."))
        except OSError:
            return []

    found = []
    for e in listing(path):
        try:
            if e.suffix == ".parquet" and e.is_file():
                found.append(e)
            elif _PARTITION_DIR.search(e.name) and e.is_dir():
                found += [f for f in listing(e) if f.suffix == ".parquet" and f.is_file()]
        except OSError:
            continue
    return sorted(found)


def _rank_files(path: Path) -> list[tuple[int | None, Path]]:
    files = parquet_files(path)
    out = []
    for f in files:
        rel = f.relative_to(path).as_posix()
        m = _RANK_RE.search(rel)
        out.append((int(m.group(1)) if m else None, f))
    return out


class NotOneRun(TraceError):
    """A directory whose traces are not the ranks of one run: open one of `files` instead."""

    def __init__(self, path: Path, files: list[Path], why: str):
        self.files, self.why = files, why
        names = [f.relative_to(path).as_posix() for f in files]
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        super().__init__(path, f"holds {len(files)} traces that are not one multi-rank run ({why}): {shown}",
                         "open or report one of them")


def _run_identity(meta: Mapping[str, Any]) -> str:
    """What names the run a rank file belongs to: the model and the workload (not the device or the
    time, which differ between ranks of one run)."""
    import json

    model = meta.get("model") if isinstance(meta.get("model"), dict) else {}
    return json.dumps({"model": model.get("name"), "workload": meta.get("workload")}, sort_keys=True, default=str)


def run_files(path: Path) -> list[tuple[int | None, Path]]:
    """The (rank, file) pairs of a directory that is one run: a single trace; rank folders
    (`rank=0/`, `rank_1/`); or files whose metadata name the same run (model, workload) and distinct
    ranks (from the name or the metadata). Any other directory raises `NotOneRun`, naming its files."""
    files = _rank_files(path)
    if len(files) <= 1:
        return files
    ranks = [r for r, _ in files]
    in_folders = all(r is not None and "/" in f.relative_to(path).as_posix() for r, f in files)
    if in_folders and len(set(ranks)) == len(ranks):
        return files
    metas = []
    for _, f in files:
        try:
            metas.append(_parse_meta(f, pq.read_schema(f).metadata))
        except (TraceError, pa.ArrowException, OSError):
            raise NotOneRun(path, [f for _, f in files], f"{f.name} cannot be read") from None
    ranks = [r if r is not None else _small_int(m.get("rank"), default=-1) if "rank" in m else None
             for (r, _), m in zip(files, metas)]
    if len({_run_identity(m) for m in metas}) > 1:
        raise NotOneRun(path, [f for _, f in files], "their metadata name different runs")
    if any(r is None for r in ranks) or len(set(ranks)) < len(ranks):
        raise NotOneRun(path, [f for _, f in files], "no distinct rank for each")
    return [(r, f) for r, (_, f) in zip(ranks, files)]


# Names of trace files any reader takes (the importers decide by content; this only lists them).
TRACE_SUFFIXES = (".parquet", ".json", ".json.gz", ".sqlite", ".ncu-rep", ".csv", ".nsys-rep")


def check_run_directory(path: str | os.PathLike) -> None:
    """Raise `NotOneRun` unless the directory is one run: its Parquet files pass `run_files`, or,
    holding other traces (Kineto JSON, ...), each of them names a distinct rank (`rank0`, `rank-1`)."""
    path = Path(path)
    if parquet_files(path):
        run_files(path)
        return
    try:
        files = sorted(f for f in path.iterdir()
                       if not f.name.startswith(".") and f.name.lower().endswith(TRACE_SUFFIXES) and f.is_file())
    except OSError:
        return  # the reader that follows says what is wrong with the directory
    if len(files) <= 1:
        return
    ranks = [m.group(1) if (m := _RANK_RE.search(f.name)) else None for f in files]
    if None in ranks or len(set(ranks)) < len(ranks):
        raise NotOneRun(path, files, "no distinct rank in each file's name")


def load_trace(path: str | os.PathLike) -> Trace:
    """Load a trace file, or a directory of per-rank files as one multi-rank run."""
    path = Path(path)
    if not path.exists():
        raise TraceError(path, "no such file or directory")
    if path.is_dir():
        return _load_dir(path)
    table, meta = _read_file(path)
    return trace_from_table(table, meta, path)


def scrub(table: pa.Table, meta: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """Secrets out of what is shown: token-shaped strings in names and paths, and secret-named or
    token-shaped values in the metadata (a file written by another tool may carry an env dump)."""
    import pyarrow.compute as pc

    from ..redact import _PREFIX, redact, redact_names

    for c in TEXT_COLUMNS:
        if c not in table.column_names or not pa.types.is_string(table.column(c).type):
            continue
        col = table.column(c)
        # vectorised gate first: only the rare strings holding a token prefix go through Python
        if not pc.any(pc.match_substring_regex(col, _PREFIX.pattern)).as_py():
            continue
        table = table.set_column(table.column_names.index(c), c,
                                 pa.array(redact_names(col.to_pylist()), type=col.type))
    return table, redact(dict(meta))


def trace_from_table(table: pa.Table, meta: dict[str, Any], path: str | os.PathLike | None = None) -> Trace:
    """A `Trace` from an in-memory table (a file just read, or an import converted on the fly):
    validated, untimed rows dropped with a warning, optional columns added as nulls."""
    warnings = validate(table, path)
    table, meta = scrub(table, meta)
    meta, meta_warnings = conform_meta(meta)
    warnings += meta_warnings
    table, dropped = _drop_untimed(table, path)
    table, host = split_runtime(table)
    rank = table.column("rank") if "rank" in table.column_names else None
    events = _to_frame(_conform_loaded(table))
    if rank is not None:
        events["rank"] = rank.to_pandas().astype("Int32")
    meta = {**meta, "format": meta.get("format", FORMAT_VERSION)}
    return Trace(events, meta, str(path) if path is not None else None,
                 warnings + dropped + list(meta.get("warnings") or []), host)


def _small_int(v: Any, default: int) -> int:
    ok = isinstance(v, int) and not isinstance(v, bool) and -(2 ** 31) <= v < 2 ** 31
    return v if ok else default


def _load_dir(path: Path) -> Trace:
    files = run_files(path)
    if not files:
        raise TraceError(path, "directory holds no .parquet trace files")
    frames, metas, warnings, hosts = [], [], [], []
    for i, (rank, f) in enumerate(files):
        table, meta = _read_file(f)
        warnings += validate(table, f)
        table, meta = scrub(table, meta)
        table, dropped = _drop_untimed(table, f)
        warnings += dropped
        table, host = split_runtime(table)
        frame = _to_frame(_conform_loaded(table))
        r = rank if rank is not None else _small_int(meta.get("rank"), default=i)
        frame["rank"] = pd.array([r] * len(frame), dtype="Int32")
        frames.append(frame)
        if host is not None:
            hosts.append(host.assign(rank=pd.array([r] * len(host), dtype="Int32")))
        metas.append(meta)
    events = pd.concat(frames, ignore_index=True)
    meta, meta_warnings = conform_meta(metas[0])
    warnings += meta_warnings
    meta["ranks"] = [{"rank": int(fr["rank"].iloc[0]) if len(fr) else None, "file": str(f.relative_to(path)),
                      "device": m.get("device")} for fr, m, (_, f) in zip(frames, metas, files)]
    host = pd.concat(hosts, ignore_index=True) if hosts else None
    return Trace(events, meta, str(path), warnings, host)


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Only the metadata document (cheap: reads the footer)."""
    path = Path(path)
    if path.is_dir():
        files = run_files(path)
        if not files:
            raise TraceError(path, "directory holds no .parquet trace files")
        path = files[0][1]
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file")
    try:
        return _parse_meta(path, pq.read_schema(path).metadata)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(path, f"truncated or corrupt Parquet: {one_line(exc, 160)}") from None
