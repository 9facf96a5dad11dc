"""Open a trace for the TUI: import or read it, analyse it, warm the tables the screens show.

Runs in a thread worker (blocking pyarrow/pandas work). Never imports torch: importers of existing
trace files don't, and this module imports nothing from the collectors but the importer entry.
"""
from __future__ import annotations

from typing import Any

from rooftop.trace import Trace, load_trace


def _importer():
    """`collectors.importers.load_any` when a colleague's importers are installed, else None."""
    try:
        from collectors.importers import load_any
    except ModuleNotFoundError as exc:
        if exc.name in ("collectors.importers", "collectors"):
            return None
        raise
    return load_any


def load(path: str) -> Trace:
    """A Trace from a rooftop Parquet file or directory, or anything the importers recognise."""
    load_any = _importer()
    return load_any(path) if load_any is not None else load_trace(path)


def analyze_warm(trace: Trace) -> Any:
    """The Analysis, with the tables the first screens read already computed (off the UI thread)."""
    from rooftop.analysis import analyze

    a = analyze(trace)
    for name in ("identity", "peaks", "phases", "steps", "findings", "gap"):
        getattr(a, name)
    a.groups(by="short_name")
    return a


def open_analysis(path: str) -> Any:
    return analyze_warm(load(path))
