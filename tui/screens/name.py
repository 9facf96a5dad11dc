"""The full name behind a row (`i` on any table row), and copying it (`y`), which works over SSH.

Tables cut long kernel names to keep their numbers on screen; this is where the whole name is.
`App.copy_to_clipboard` writes the terminal's clipboard sequence (OSC 52): the terminal on the
user's side sets its clipboard, so it works through SSH and tmux (with `set -g set-clipboard on`).
"""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.widgets.text import sanitize


class NameScreen(ModalScreen):
    """A popup with the full name(s); `y` copies the first, Esc closes."""

    BINDINGS = [
        Binding("y", "copy", "Copy", id="name.copy"),
        Binding("escape,i,q", "close", "Close", id="name.close"),
    ]

    def __init__(self, title: str, names: list[str]) -> None:
        super().__init__()
        self.title_text, self.names = title, names

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="name-body"):
            yield Static(Text(sanitize(self.title_text), style="bold"), id="name-title")
            yield Static(self._text(), id="name-full")
            yield Static("y: copy to the clipboard (works over SSH) · Esc: close", id="name-hint", classes="muted")

    def _text(self) -> Text:
        text = Text()
        for i, name in enumerate(self.names):
            if i:
                text.append("\n\n")
            text.append(sanitize(name))
        if len(self.names) > 1:
            text.append(f"\n\n({len(self.names)} distinct full names under this row; y copies the first)", "dim")
        return text

    def action_copy(self) -> None:
        copy_name(self.app, self.names[0])

    def action_close(self) -> None:
        self.dismiss()


def copy_name(app, name: str) -> None:
    """Put `name` on the user's clipboard through the terminal (OSC 52), and say so. What is copied is
    one line of literal text (rooftop.present.text.clipboard_text): a newline or a bracketed-paste terminator
    (`ESC[201~`) in a name would let a shell run the rest of it when pasted."""
    from rooftop.present.text import clipboard_text

    app.copy_to_clipboard(clipboard_text(name))
    short = sanitize(name)
    app.notify(f"copied: {short[:60]}{'…' if len(short) > 60 else ''}", title="clipboard", timeout=3, markup=False)
