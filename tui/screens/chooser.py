"""A directory that is not one run: choose which of its traces to open.

`rooftop DIR` opens a directory as one multi-rank run only when it is one (`rooftop.trace.run_files`);
any other directory of traces lands here, listing them. Enter opens one; Esc leaves.
"""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.widgets.text import sanitize


class ChooserScreen(ModalScreen[str | None]):
    """Dismisses with the chosen file's path, or None."""

    BINDINGS = [Binding("escape,q", "leave", "Leave", id="chooser.leave")]

    def __init__(self, directory: str, files: list[Path], why: str) -> None:
        super().__init__()
        self.directory, self.files, self.why = directory, files, why

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{sanitize(self.directory)} holds {len(self.files)} traces that are not one run "
                          f"({sanitize(self.why)}). Open which?"), id="chooser-title")
        options = [Option(Text(sanitize(f.relative_to(self.directory).as_posix())), id=str(i))
                   for i, f in enumerate(self.files)]
        yield OptionList(*options, id="chooser-list")
        yield Static("Enter: open · Esc: leave", classes="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(self.files[int(event.option.id)]))

    def action_leave(self) -> None:
        self.dismiss(None)
