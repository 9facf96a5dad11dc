"""Open a trace for the TUI: import or read it, analyse what the first paint needs, nothing more.

Runs in a thread worker (blocking pyarrow/pandas work). Opening itself (any format, a run directory,
the stored summary and when it answers) is `collectors.open`'s, as for `rooftop report`; this module
adds what the screens need of it: the footer's preview, the Overview's data of what is at hand (a
stored summary or an Analysis, one shape: rooftop/present/overview.py), and which tables are
computed before the first paint. Never imports torch (the readers don't).

The Overview paints the identity first; its own worker then computes the phase table and after it
the rest (findings, gap, ranks), and other screens compute theirs when they open. A small
trace is warmed whole here instead: it costs a fraction of a second and opens complete. A big
trace with a current stored summary shows every number of the Overview from its footer (`preview`)
before pandas and pyarrow are imported; the load imports them after that paint.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

# pandas, pyarrow and rooftop.trace (which imports both) are imported in the functions that use
# them, never with this module: a trace with a current stored summary paints the Overview's
# numbers from the footer before either is imported (imports longer than that paint, holding
# the GIL it needs), and the rows load after that paint.
from rooftop.present.overview import REST_TABLES, OverviewData

if TYPE_CHECKING:
    from rooftop.trace import Trace

# Timed rows below which everything the Overview shows is computed before the first paint.
WARM_ALL_BELOW = 50_000
# `Analysis` cached properties the Overview reads after its first paint (its worker computes them).
OVERVIEW_REST = REST_TABLES


# Rows from which a rooftop Parquet trace is previewed from its footer while its events load: below,
# the whole load and analysis take a fraction of a second and the screen opens complete instead.
PREVIEW_FROM = WARM_ALL_BELOW


@dataclass(frozen=True)
class TraceHead:
    """What the screens read of a Trace before its rows are read, from a stored summary: where
    it is, whether it is modeled, its ranks (a summarised trace is one file: none)."""

    path: str
    modeled: bool
    ranks: tuple = ()

    @property
    def label(self) -> str:
        return Path(self.path).name  # as `Trace.label` names a file


def stored_identity(report: dict) -> dict:
    """`Analysis.identity`'s keys the screens read, from a report document: its identity lines
    (made by `rooftop.analysis.trace_identity` when the summary was) and the trace's flags."""
    t = report["trace"]
    return {**{k: report["identity"].get(k) for k in ("label", "model", "workload", "device", "source")},
            "modeled": bool(t.get("modeled")), "counters": bool(t.get("counters")),
            "incomplete": bool(t.get("incomplete")), "ranks": []}


class Preview:
    """A rooftop Parquet trace before its events are read: the footer's metadata and row count, all
    the Overview's identity lines and breadcrumb need. Stands in for the Analysis until it comes.
    `stored`: the Overview's numbers from a current stored summary, else None."""

    stored: OverviewData | None = None

    def __init__(self, trace: "Trace | TraceHead", identity: dict, rows: int) -> None:
        self.trace = trace
        self.identity = identity
        self.rows = rows
        # Set by the Overview once it has painted this: the load waits for it, since reading the rows
        # holds the GIL for long stretches and would hold the paint back by a second at 1M rows.
        self.shown = threading.Event()


def _preview_of_meta(path: str, meta: dict, rows: int) -> Preview:
    """The Preview from the footer's metadata (no current summary: the numbers are computed)."""
    import pandas as pd

    from rooftop.analysis import trace_identity
    from rooftop.trace.redact import redact
    from rooftop.trace import Trace, conform_meta

    # The same metadata the full load gives (secrets out, sections conformed), less the steps
    # list: the identity does not read it, and scrubbing thousands of steps costs time.
    meta, _ = conform_meta(redact({k: v for k, v in meta.items() if k != "steps"}))
    trace = Trace(pd.DataFrame(), meta, path)
    return Preview(trace, trace_identity(trace, counters=None), rows)  # counters: unknown until the rows are read


def _preview_of_summary(path: str, footer: Any) -> Preview | None:
    """The Preview of a trace file with a current stored summary, the Overview's numbers with it,
    from the footer alone (no pandas, no pyarrow); None when there is no current summary."""
    from collectors.open import stored_summary

    try:
        stored = stored_summary(path, footer=footer)
        if stored is None:
            return None
        report = stored.report
        identity = {**stored_identity(report), "counters": None}  # as before the rows are read
        out = Preview(TraceHead(path, identity["modeled"]), identity, footer.num_rows)
        out.stored = OverviewData.of_stored(stored)
        return out
    except Exception:  # a summary is a cache: whatever is wrong with it, the analysis answers instead
        return None


def preview(path: str, use_summary: bool = True,
            summary_seen: Callable[[Preview | None], None] | None = None) -> Preview | None:
    """The footer-only Preview of a big rooftop Parquet file or run directory, or of any with a
    current stored summary, else None (a small trace without one, another format, or a footer that
    cannot be read: the full load opens or reports it).
    With `use_summary` (the default options), a current stored summary comes with it: then
    neither pandas nor pyarrow is imported. `summary_seen(found)` is called once the stored
    summary was looked at (a few ms), before the slower preview of a trace without one: with the
    Preview it gave, or None."""
    from rooftop.trace.footer import read_footer

    seen = summary_seen or (lambda found: None)
    p = Path(path)
    footer = None
    try:
        if p.is_file():  # (never a FIFO or a device: opening one to read its footer could block)
            footer = read_footer(p)  # pure Python, a few ms: rows, metadata, stored summary
    except OSError:
        pass
    out = _preview_of_summary(path, footer) if footer is not None and use_summary else None
    seen(out)
    # A small trace without a current summary opens complete from its rows. With one, even a small
    # trace opens from it: the full load imports pandas and pyarrow and analyses everything before
    # its first paint (at a thousand kernels, longer than a million kernels' summary takes).
    if out is not None or (footer is not None and footer.num_rows < PREVIEW_FROM):
        return out
    return _preview_of_rows(path, footer)


def _preview_of_rows(path: str, footer: Any) -> Preview | None:
    """`preview` without a current summary: the identity from the metadata, numbers to compute."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rooftop.trace.footer import read_footer
    from rooftop.trace import TraceError, is_parquet, parquet_files, read_meta

    p = Path(path)
    try:
        files = parquet_files(p) if p.is_dir() else [p] if is_parquet(p) else []
        if not files:
            return None
        footers = {f: footer if f == p and footer is not None else read_footer(f) for f in files}  # read once
        rows = sum(footers[f].num_rows if footers[f] is not None else pq.read_metadata(f).num_rows for f in files)
        if rows < PREVIEW_FROM:
            return None
        # (the steps list is not read: the identity does not need it)
        meta = read_meta(p, without=("steps",), footer=None if p.is_dir() else footers[p])
        return _preview_of_meta(path, meta, rows)
    except (TraceError, OSError, pa.ArrowException):
        return None  # the load that follows reads the same bytes and says what is wrong


class ImportCancelled(Exception):
    """Raised from the progress callback when the user cancelled the import (Esc): it unwinds the
    reader, which catches only its own format's errors."""


def overview_data(a: Any) -> OverviewData:
    """What the Overview can show of `a` now: a Preview's stored summary (or nothing but the
    identity, until the rows are in), or what an Analysis has computed."""
    if isinstance(a, Preview):
        return a.stored if a.stored is not None else OverviewData()
    return OverviewData.of_analysis(a)


def warm_overview_rest(a: Any) -> None:
    """Compute what the Overview shows below the phase table (blocking: call from a worker)."""
    for name in ("phases", *OVERVIEW_REST):
        getattr(a, name)


def phases_ready(a: Any) -> bool:
    return a.is_computed("phases")


def overview_ready(a: Any) -> bool:
    """Whether everything the Overview shows is computed already."""
    return all(a.is_computed(name) for name in OVERVIEW_REST)


def analyze_warm(trace: "Trace", peaks_override: Any = None, **options: Any) -> Any:
    """The Analysis, with what the Overview's first paint reads already computed (off the UI thread):
    the identity line only for a big trace, everything for a small one. `options` go to `analyze`."""
    from collectors.open import analysis_of

    # the user's --gpu/--peaks; an unknown --gpu was refused before the app started
    return _warm(analysis_of(trace, peaks_override, **options))


def _warm(a: Any) -> Any:
    a.identity
    if len(a.timed) < WARM_ALL_BELOW:
        warm_overview_rest(a)
        a.groups(by="short_name")
    return a


def open_analysis(path: str, peaks_override: Any = None, progress=None, fmt: str | None = None,
                  **options: Any) -> Any:
    """The trace opened (collectors.open: a rooftop file without its runtime rows, which stay on
    disk until the timeline asks) and analysed as far as the first paint needs. `fmt`: the format
    the front door sniffed, if it did."""
    import pyarrow as pa

    from collectors.open import open_analysis as open_and_analyse

    a = _warm(open_and_analyse(path, progress, fmt=fmt, lazy_host=True, override=peaks_override,
                               note_unsealed=True, **options))
    # Reading Parquet into pandas goes through Arrow buffers that are freed by then, but pyarrow's
    # allocator (mimalloc) keeps their pages (hundreds of MB at 1M kernels): given back here.
    pa.default_memory_pool().release_unused()
    return a
