"""Every use of a private Textual (or textual-plotext) API, in one place, each with why.

Pinned versions (pyproject.toml, which lists every private name): textual 8.2.x, textual-plotext
1.0.x, textual-fastdatatable 0.19.x (whose DataTable internals tui/widgets/plain_cells.py overrides).
A Textual upgrade that breaks the app breaks here first; each function says what it would fall back
to without the private name.
"""
from __future__ import annotations

from typing import Any


def has_active_app() -> bool:
    """Whether a Textual app is running in this context. A screen built outside one (a test that
    constructs it bare) has no `self.app`, and the public property raises instead of saying so."""
    from textual._context import active_app

    return active_app.get(None) is not None


def mark_styled(screen: Any, app: Any) -> None:
    """Tell a new screen the app's stylesheet has not changed since it was made. Without it, every
    first visit to a screen re-parses all CSS and restyles the app twice (Textual's
    `switch_mode`/`_init_mode`), a third of each screen switch on a slow machine. Fallback: none
    needed, only slower."""
    count = getattr(app, "_css_update_count", None)
    if count is not None:
        screen._css_update_count = count


def bindings_with_keymap(app: Any, node: Any):
    """A node's own bindings as the user remapped them (the help screen lists what is in force).
    Textual exposes the active bindings of the focused chain only, not one node's with the keymap
    applied."""
    bindings_map = node._bindings.copy()
    keymap = getattr(app, "_keymap", None)
    if keymap:
        bindings_map.apply_keymap(keymap)
    return bindings_map


def plotext_theme_name(plot: Any, theme: str) -> str:
    """textual-plotext's name for the plotext theme matching a Textual theme (it has no public one);
    set before drawing, since plotext gives text labels the canvas colour current at draw time."""
    return plot._get_plotext_theme_name(theme)


def update_scrollbars(widget: Any, virtual_size: Any) -> None:
    """What a layout pass does for a scrolling widget whose own size is unchanged and whose
    scrollable size is `virtual_size` (`ScrollView._size_updated` -> `Widget._scroll_update`):
    the scrollbars' visibility and sizes, the scroll offsets clamped. A sort of a million-row table
    changes only that, and a layout pass reflows and repaints the whole screen. Fallback
    without the private name: set `virtual_size` and let the layout pass run."""
    widget._scroll_update(virtual_size)


def line_crop(segments: list, start: int, end: int, total: int) -> list:
    """Textual's crop of a line of segments to cells [start, end) (`total`: the line's length), as
    the table library crops its lines with it; a body line built outside the library must be cut
    exactly as the library cuts its own. Fallback: `Strip(segments).crop(start, end)`."""
    from textual._segment_tools import line_crop as crop

    return crop(segments, start, end, total)
