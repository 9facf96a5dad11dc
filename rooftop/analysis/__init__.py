"""The analysis core: pure functions over a trace's rows, and `Analysis`, which caches them per trace.

Every number here is a function of the trace and the peaks; nothing does I/O. Screens and the
headless report both read from an `Analysis` (`facade.py`), which this package hands out.
"""
from rooftop.analysis.facade import Analysis, analyze, compare
from rooftop.analysis.findings import Finding
from rooftop.analysis.identity import scope_name, trace_identity

__all__ = ["Analysis", "analyze", "compare", "Finding", "scope_name", "trace_identity"]
