"""Loading a trace: a file or a multi-rank directory read, checked, scrubbed and converted to a `Trace`;
its runtime rows read later, on demand; the metadata alone, from the footer."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rooftop.trace.schema import FORMAT_VERSION, HOST_COLUMNS, REQUIRED, Trace, TraceError, one_line
from rooftop.trace.conform import conform_types, _drop_untimed, _validate
from rooftop.trace.frame import give_back_memory, _to_frame
from rooftop.trace.inputs import is_parquet
from rooftop.trace.meta import conform_meta, json_safe, _parse_meta
from rooftop.trace.parquet import _read_file, _read_filtered
from rooftop.trace.runs import run_files, _small_int
from rooftop.trace.runtime import split_runtime
from rooftop.trace.scrubbing import scrub_all


def load_trace(path: str | os.PathLike, lazy_host: bool = False) -> Trace:
    """Load a trace file, or a directory of per-rank files as one multi-rank run. `lazy_host` (a
    file): the runtime rows stay on disk until `Trace.runtime_rows()` asks for them."""
    path = Path(path)
    if not path.exists():
        raise TraceError(path, "no such file or directory")
    if path.is_dir():
        return _load_dir(path)
    # handed over in a list that `_trace_from` empties: no frame here keeps the table as read
    # alive once its runtime rows are split off (it is the biggest thing a load allocates)
    trace = _trace_from(list(_read_file(path, skip_runtime=lazy_host)), path)
    if lazy_host and trace.host is None:
        trace.load_host = lambda: _read_host(path, trace.warnings)
    return trace


def _read_host(path: Path, warnings: list[str]) -> pd.DataFrame | None:
    """The runtime rows of a file, as `split_runtime` makes them, read alone (six columns, filtered
    row group by row group), their text scrubbed like every other. Rows without a start, or with a
    negative duration, are left out; a file that can no longer be read gives None, and a warning."""
    import pyarrow.compute as pc

    try:
        names = pq.ParquetFile(path).schema_arrow.names
        if "kind" not in names:
            return None
        columns = [c for c in dict.fromkeys([*REQUIRED, *HOST_COLUMNS]) if c in names]  # (kind is required)
        text = [c for c in ("name", "op") if c in columns]
        table = _read_filtered(pq.ParquetFile(path, read_dictionary=text), columns, "runtime", keep=True)
        if not table.num_rows:
            return None
        table, _ = conform_types(table, path)
        table, _, _ = scrub_all(table, {})
        ok = pc.and_(pc.and_(pc.is_valid(table.column("start_ns")), pc.is_valid(table.column("dur_ns"))),
                     pc.greater_equal(table.column("dur_ns"), 0))
        ok = pc.fill_null(ok, False)
        if not pc.all(ok).as_py():  # (a copy of every column only when some row goes)
            table = table.filter(ok)
        _, host = split_runtime(table)
        give_back_memory()
        return host
    except (TraceError, pa.ArrowException, OSError, ValueError, KeyError) as exc:
        warnings.append(f"runtime calls could not be read: {one_line(exc, 160)}")
        return None


def trace_from_table(table: pa.Table, meta: dict[str, Any], path: str | os.PathLike | None = None,
                     scrubbed: bool = False) -> Trace:
    """A `Trace` from an in-memory table (a file just read, or an import converted on the fly):
    validated, untimed rows dropped with a warning, optional columns added as nulls. `scrubbed`:
    the table and metadata already went through `scrub_all` (an import about to be written),
    which would change nothing a second time."""
    held = [table, meta]
    del table
    return _trace_from(held, path, scrubbed)


def trace_from_handover(held: list, path: str | os.PathLike | None = None, scrubbed: bool = False,
                        unread: tuple[str, ...] = ()) -> Trace:
    """`trace_from_table` of `held` = [table, meta], which it empties (the caller keeps no other
    reference to the table, which is then freed once converted). `unread`: columns the caller
    will not look at, null in the trace rather than converted."""
    return _trace_from(held, path, scrubbed, unread)


def _trace_from(held: list, path: str | os.PathLike | None, scrubbed: bool = False, unread: tuple[str, ...] = ()) -> Trace:
    """`trace_from_table` of `held` = [table, meta], which it empties, so that each step can drop
    the table it replaced (the caller keeps no reference)."""
    table, meta = held
    held.clear()
    table, warnings = _validate(table, path)
    if scrubbed:
        meta = json_safe(meta, path)
    else:
        table, meta, found = scrub_all(table, json_safe(meta, path))
        warnings += found
        give_back_memory()  # (the pages of the dictionaries it unified)
    meta, meta_warnings = conform_meta(meta)
    warnings += meta_warnings
    table, dropped = _drop_untimed(table, path)
    table, host = split_runtime(table)
    rank = table.column("rank") if "rank" in table.column_names else None
    held.append(table.drop_columns([c for c in unread if c in table.column_names]) if unread else table)
    del table
    events = _to_frame(held)  # (it adds the schema columns the file left out)
    if rank is not None:
        events["rank"] = rank.to_pandas().astype("Int32")
    give_back_memory()
    meta = {**meta, "format": meta.get("format", FORMAT_VERSION)}
    return Trace(events, meta, str(path) if path is not None else None,
                 warnings + dropped + list(meta.get("warnings") or []), host)


def _load_dir(path: Path) -> Trace:
    files = run_files(path)
    if not files:
        raise TraceError(path, "directory holds no .parquet trace files")
    frames, metas, warnings, hosts = [], [], [], []
    for i, (rank, f) in enumerate(files):
        table, meta = _read_file(f)
        table, checked = _validate(table, f)
        table, meta, scrubbed = scrub_all(table, meta)
        warnings += checked + scrubbed
        table, dropped = _drop_untimed(table, f)
        warnings += dropped
        table, host = split_runtime(table)
        held = [table]
        del table
        frame = _to_frame(held)  # (it adds the schema columns the file left out, from one row)
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


def read_meta(path: str | os.PathLike, without: tuple[str, ...] = (), footer: Any = None) -> dict[str, Any]:
    """Only the metadata document (cheap: reads the footer), less the top-level keys `without`.
    `footer`: the file's `rooftop.trace.footer.read_footer`, when the caller has it already."""
    path = Path(path)
    if path.is_dir():
        files = run_files(path)
        if not files:
            raise TraceError(path, "directory holds no .parquet trace files")
        path = files[0][1]
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file")
    from rooftop.trace.footer import read_footer

    if footer is None:
        footer = read_footer(path)  # pure Python, a few ms; pyarrow copies the whole footer (the summary too)
    if footer is not None:
        return _parse_meta(path, footer.metadata, without)
    try:
        return _parse_meta(path, pq.read_schema(path).metadata, without)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(path, f"truncated or corrupt Parquet: {one_line(exc, 160)}") from None
