"""Columns of the core's analysis tables (`rooftop.present.columns`) as the TUI's table columns.

Screens never spell a column's label or unit: they name the keys they show, and the header and
the format come from the registry, as they do for `rooftop report`.
"""
from __future__ import annotations

from rooftop.present.columns import Column, Table

from tui.widgets.table_values import Col

# The registry's format kinds the grid shows as they are; the rest are plain numbers in the unit
# the header names.
_GRID_KINDS = {"text", "int", "ns", "pct"}


def grid_col(column: Column) -> Col:
    """One registry column as a FrameTable column: its header with the display unit (`span µs`)."""
    return Col(column.key, column.header, column.kind if column.kind in _GRID_KINDS else "num", column.digits)


def grid_cols(table: Table, *keys: str) -> list[Col]:
    """The named columns of an analysis table, in that order, as FrameTable columns."""
    return [grid_col(c) for c in table.pick(*keys)]
