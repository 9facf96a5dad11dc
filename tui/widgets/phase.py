"""Readable phase labels: the analysis writes a kernel group that ran mostly in prefill but also in
another phase as `prefill+`; users read `prefill (+decode)`."""
from __future__ import annotations

import pandas as pd



def phase_label(value: object, phases: list[str] | tuple[str, ...] = ("prefill", "decode")) -> object:
    """`decode+` -> `decode (+prefill)` (or `(+other)` when it cannot be told which); others unchanged."""
    if not isinstance(value, str) or not value.endswith("+"):
        return value
    main = value[:-1]
    rest = [p for p in phases if p != main]
    return f"{main} (+{rest[0] if len(rest) == 1 else 'other'})"


def phase_labels(values: pd.Series, phases: list[str] | tuple[str, ...] = ("prefill", "decode")) -> pd.Series:
    """Vectorised `phase_label` (a handful of distinct values, however many rows)."""
    if values.empty:
        return values
    mapping = {v: phase_label(v, phases) for v in values.dropna().unique()}
    return values.map(mapping).where(values.notna(), values)


def trace_phases(analysis) -> list[str]:
    """The phases the trace has, in order of appearance (prefill, decode, ...)."""
    steps = analysis.steps
    if steps is None or "phase" not in getattr(steps, "columns", ()):
        return ["prefill", "decode"]
    return [str(p) for p in pd.unique(steps["phase"].dropna())]
