"""Open a trace for the TUI: import or read it, analyse what the first paint needs, nothing more.

Runs in a thread worker (blocking pyarrow/pandas work). Never imports torch: importers of existing
trace files don't, and this module imports nothing from the collectors but the importer entry.

The Overview paints the identity first; its own worker then computes the phase table and after it
the rest (findings, gap, ranks), and other screens compute theirs when they open. A small
trace is warmed whole here instead: it costs a fraction of a second and opens complete.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rooftop.trace import Trace, TraceError, check_run_directory, conform_meta, is_parquet, load_trace, parquet_files, read_meta

# Timed rows below which everything the Overview shows is computed before the first paint.
WARM_ALL_BELOW = 50_000
# `Analysis` cached properties the Overview reads after its first paint (its worker computes them).
OVERVIEW_REST = ("findings", "gap", "rank_phases", "rank_steps", "warnings")


# Rows from which a rooftop Parquet trace is previewed from its footer while its events load: below,
# the whole load and analysis take a fraction of a second and the screen opens complete instead.
PREVIEW_FROM = WARM_ALL_BELOW


class StoredOverview:
    """What the Overview shows, from the trace's stored summary (rooftop/summary.py), under the names
    an Analysis gives them: phases, steps, findings, gap, warnings, peaks, identity. Only a current
    summary of a single file gets here, so there are no ranks and no `--model`."""

    def __init__(self, stored: Any, preview: "Preview") -> None:
        from rooftop.analysis import Finding
        from rooftop.devices import peaks as device_peaks

        report = stored.report
        self.version = stored.version
        self.trace = preview.trace
        self.identity = {**preview.identity, "counters": bool(report["trace"].get("counters"))}
        self.peaks = device_peaks(self.trace.meta)  # the same table and metadata the summary was made from
        self.model = None
        self.phases = pd.DataFrame(report["phases"])
        self.steps = None  # 4 MB of JSON at 1M kernels: parsed after the first paint (`load_steps`)
        self._stored = stored
        self.gap = pd.DataFrame(report["gap"]) if report["gap"] else None
        self.findings = [Finding(**{k: f.get(k) for k in ("id", "severity", "title", "detail", "evidence", "coverage")})
                         for f in report["findings"]]
        self.warnings = list(stored.warnings)
        self.rank_phases = self.rank_steps = None

    def load_steps(self) -> pd.DataFrame:
        """The per-step table for the step curve (blocking: call from a worker)."""
        return pd.DataFrame(self._stored.bulk_values("steps"))


class Preview:
    """A rooftop Parquet trace before its events are read: the footer's metadata and row count, all
    the Overview's identity lines and breadcrumb need. Stands in for the Analysis until it comes.
    `stored`: the Overview's numbers from a current stored summary, else None."""

    stored: StoredOverview | None = None

    def __init__(self, path: str, meta: dict, rows: int) -> None:
        from rooftop.analysis import trace_identity
        from rooftop.redact import redact

        # The same metadata the full load gives (secrets out, sections conformed), less the steps
        # list: the identity does not read it, and scrubbing thousands of steps costs 40 ms.
        meta, _ = conform_meta(redact({k: v for k, v in meta.items() if k != "steps"}))
        self.trace = Trace(pd.DataFrame(), meta, path)
        self.rows = rows
        # Set by the Overview once it has painted this: the load waits for it, since reading the rows
        # holds the GIL for long stretches and would hold the paint back by a second at 1M rows.
        self.shown = threading.Event()
        self.identity = trace_identity(self.trace, counters=None)  # counters: unknown until the rows are read


def preview(path: str, use_summary: bool = True) -> Preview | None:
    """The footer-only Preview of a big rooftop Parquet file or run directory, else None (a small
    trace, another format, or a footer that cannot be read: the full load opens or reports it).
    With `use_summary` (the default options), a current stored summary comes with it."""
    p = Path(path)
    try:
        files = parquet_files(p) if p.is_dir() else [p] if is_parquet(p) else []
        if not files:
            return None
        footers = {f: _footer(f) for f in files}  # read once: rows, metadata, stored summary
        rows = sum(_num_rows(f, footers[f]) for f in files)
        if rows < PREVIEW_FROM:
            return None
        # (the steps list is not read: the identity does not need it)
        out = Preview(path, read_meta(p, without=("steps",), footer=None if p.is_dir() else footers[p]), rows)
    except (TraceError, OSError, pa.ArrowException):
        return None  # the load that follows reads the same bytes and says what is wrong
    if use_summary and not p.is_dir():
        out.stored = stored_overview(path, out, footers[p])
    return out


def _footer(path: Path) -> Any:
    from rooftop.footer import read_footer

    return read_footer(path)  # a few ms, where pyarrow copies the whole footer (a stored summary too)


def _num_rows(path: Path, footer: Any) -> int:
    return footer.num_rows if footer is not None else pq.read_metadata(path).num_rows


def stored_overview(path: str, preview: Preview, footer: Any = None) -> StoredOverview | None:
    """The Overview's numbers from the file's current summary; None when there is none, or it is
    stale or damaged (the Overview then computes them, as for any trace)."""
    from rooftop.summary import load_stored

    try:
        stored = load_stored(path, footer=footer)
        return StoredOverview(stored, preview) if stored is not None else None
    except Exception:  # a summary is a cache: whatever is wrong with it, the analysis answers instead
        return None


def _readers():
    """`collectors.readers.importers` (the readers of other formats) when installed, else None."""
    try:
        from collectors.readers import importers
    except ModuleNotFoundError as exc:
        if exc.name in ("collectors.readers.importers", "collectors.readers", "collectors"):
            return None
        raise
    return importers


class ImportCancelled(Exception):
    """Raised from the progress callback when the user cancelled the import (Esc): it unwinds the
    reader, which catches only its own format's errors."""


def load(path: str, progress=None) -> Trace:
    """A Trace from a rooftop Parquet file or directory, or anything the importers recognise.
    `progress(done_bytes, total_bytes)` is called as an import reads (Kineto, nsys)."""
    readers = _readers()
    if Path(path).is_dir():  # any other directory than one run: NotOneRun, and the app offers its files
        (readers.check_directory if readers is not None else check_run_directory)(path)
    elif is_parquet(path):
        # A rooftop trace: its runtime rows (one per kernel in a Kineto import) stay on disk until
        # the timeline asks for them (`Trace.runtime_rows`).
        return load_trace(path, lazy_host=True)
    return readers.load_any(path, progress) if readers is not None else load_trace(path)


def warm_overview_rest(a: Any) -> None:
    """Compute what the Overview shows below the phase table (blocking: call from a worker)."""
    for name in ("phases", *OVERVIEW_REST):
        getattr(a, name)


def phases_ready(a: Any) -> bool:
    return a.is_computed("phases")


def overview_ready(a: Any) -> bool:
    """Whether everything the Overview shows is computed already."""
    return all(a.is_computed(name) for name in OVERVIEW_REST)


def analyze_warm(trace: Trace, peaks_override: Any = None, **options: Any) -> Any:
    """The Analysis, with what the Overview's first paint reads already computed (off the UI thread):
    the identity line only for a big trace, everything for a small one. `options` go to `analyze`."""
    from rooftop.analysis import analyze

    from rooftop.devices import peaks as device_peaks

    # the user's --gpu/--peaks; an unknown --gpu was refused before the app started
    a = analyze(trace, device_peaks(trace.meta, override=peaks_override) if peaks_override else None,
                **options)
    a.identity
    if len(a.timed) < WARM_ALL_BELOW:
        warm_overview_rest(a)
        a.groups(by="short_name")
    return a


def open_analysis(path: str, peaks_override: Any = None, progress=None, **options: Any) -> Any:
    a = analyze_warm(load(path, progress), peaks_override, **options)
    # Reading Parquet into pandas goes through Arrow buffers that are freed by then, but pyarrow's
    # allocator (mimalloc) keeps their pages: ~330 MB of RSS at 1M kernels, given back here.
    pa.default_memory_pool().release_unused()
    return a
