"""Where you are (`llama3-8b ▸ Steps ▸ decode step 12 ▸ layer=3/attn`), and the screen base that shows it.

Every rooftop screen is a `RooftopScreen`: constructed with the Analysis (or two), a breadcrumb on
top, the footer with its keys below, `Esc`/`Backspace` to go back up a drill-down.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from tui.textual_private import has_active_app, mark_styled
from tui.widgets.keybar import KeyBar
from tui.widgets.text import sanitize

if TYPE_CHECKING:
    import pandas as pd

SEPARATOR = " ▸ "
MODELED = "MODELED (analytic, not measured)"


class Breadcrumb(Static):
    COMPONENT_CLASSES = {"breadcrumb--modeled", "breadcrumb--here"}

    def __init__(self, crumbs: list[str], modeled: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crumbs = crumbs
        self.modeled = modeled

    @property
    def plain(self) -> str:
        return SEPARATOR.join(sanitize(c) for c in self.crumbs)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.modeled:
            text.append(f" {MODELED} ", self.get_component_rich_style("breadcrumb--modeled"))
            text.append(" ")
        for i, crumb in enumerate(self.crumbs):
            if i:
                text.append(SEPARATOR)
            last = i == len(self.crumbs) - 1
            text.append(sanitize(crumb), self.get_component_rich_style("breadcrumb--here") if last else "")
        return text


class RooftopScreen(Screen):
    """Base of every screen: breadcrumb + body + footer; `BREADCRUMB` names a top-level screen."""

    BREADCRUMB = ""
    EXPORT_NAME = "table"
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="nav.back"),
        # Any row's full name, and a copy of it: tables cut long names to keep the numbers in sight.
        Binding("i", "show_name", "Full name", id="nav.name", show=False),
        Binding("y", "copy_name", "Copy name", id="nav.copy", show=False),
    ]

    def __init__(self, analysis: Any, crumbs: list[str] | None = None) -> None:
        super().__init__()
        self.analysis = analysis
        self.crumbs = crumbs or [trace_title(analysis), self.BREADCRUMB]
        # A new screen is styled with the current stylesheet when it mounts, so it is not stale:
        # without this, every first visit to a screen re-parses all CSS and restyles the app twice
        # (Textual's switch_mode/_init_mode), a third of each screen switch on a slow machine.
        if has_active_app():
            mark_styled(self, self.app)

    def compose(self) -> ComposeResult:
        yield Breadcrumb(self.crumbs, modeled=bool(getattr(self.analysis.trace, "modeled", False)), id="breadcrumb")
        yield from self.compose_body()
        yield KeyBar(id="keybar")

    def compose_body(self) -> ComposeResult:
        yield from ()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # A mode's base screen has nothing to go back to: keep `Back` out of its key line.
        if action == "back":
            return self.app.screen_stack.index(self) > 0 if self in self.app.screen_stack else True
        return True

    def action_back(self) -> None:
        # The base screen of a mode has nothing under it to go back to.
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def drill(self, screen: "RooftopScreen") -> None:
        self.app.push_screen(screen)

    def name_target(self) -> tuple[str, list[str]] | None:
        """(what the cursor is on, its full names): the focused table's row, else the first table's."""
        row = self._current_row()
        return None if row is None else names_of_row(self.analysis, row)

    def _current_row(self):
        from tui.widgets.table import FrameTable

        tables = list(self.query(FrameTable))
        chosen = next((t for t in tables if self.focused is not None and self.focused in t.walk_children()),
                      tables[0] if tables else None)
        return chosen.current() if chosen is not None else None

    def action_show_name(self) -> None:
        from tui.screens.name import NameScreen

        target = self.name_target()
        if target is None:
            self.notify("No name here: move to a row with a kernel name.", timeout=3)
            return
        self.app.push_screen(NameScreen(*target))

    def action_copy_name(self) -> None:
        from tui.screens.name import copy_name

        target = self.name_target()
        if target is None:
            self.notify("No name here: move to a row with a kernel name.", timeout=3)
            return
        copy_name(self.app, target[1][0])

    def export_frame(self) -> "pd.DataFrame | None":
        """What `e` writes to CSV: the focused table as shown (filtered, sorted), else the first."""
        from tui.widgets.table import FrameTable

        tables = list(self.query(FrameTable))
        chosen = next((t for t in tables if self.focused is not None and self.focused in t.walk_children()),
                      tables[0] if tables else None)
        return chosen.shown_frame() if chosen is not None else None


def trace_title(analysis: Any) -> str:
    ident = getattr(analysis, "identity", None) or {}
    return str(ident.get("model") or ident.get("label") or analysis.trace.label)


def names_of_row(analysis: Any, row: Any) -> tuple[str, list[str]] | None:
    """A table row's label and full names: a launch's own name; a group's distinct names."""
    def text(v):
        return v if isinstance(v, str) and v else None

    if text(row.get("name")):
        return (text(row.get("short_name")) or row["name"], [row["name"]])
    key = text(row.get("key")) or text(row.get("short_name"))
    if key is None:
        return None
    full = analysis.full_names(key) if hasattr(analysis, "full_names") else []
    return key, full or [key]
