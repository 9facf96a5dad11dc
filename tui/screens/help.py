"""`?`: every key of the current screen and of the app, generated from the bindings (so remaps show)."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from tui.textual_private import bindings_with_keymap

# What the screens' words mean (not keys, but asked as often).
NOTES = [
    ("prefill (+decode)", "a kernel group that ran mostly in prefill, and also in decode"),
    ("MODELED", "times, FLOPs and bytes come from the analytic model, not a measurement"),
    ("—", "unknown (never shown as 0): the trace lacks what the number needs"),
]

NAVIGATION = [
    ("↑ ↓ PgUp PgDn Home End", "move in tables and trees"),
    ("Tab / Shift+Tab", "move between panes"),
    ("Enter", "open (drill down)"),
]


def binding_rows(app, screen: Screen) -> list[tuple[str, str, str]]:
    """(where, keys, description) for every described binding of `screen` and the app."""
    rows: list[tuple[str, str, str]] = []
    for where, node in (("screen", screen), ("app", app)):
        seen: dict[tuple[str, str], list[str]] = {}
        bindings_map = bindings_with_keymap(app, node)  # what the user remapped is what help must say
        for key, bindings in bindings_map.key_to_bindings.items():
            for b in bindings:
                if not b.description:
                    continue
                seen.setdefault((b.action, b.description), []).append(app.get_key_display(b) if key == b.key else key)
        for (_, description), keys in seen.items():
            rows.append((where, " ".join(dict.fromkeys(keys)), description))
    return rows


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close")]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        table = Table(box=None, pad_edge=False, show_header=False)
        table.add_column("keys", style="bold", no_wrap=True)
        table.add_column("what")
        title = getattr(self.under, "BREADCRUMB", "") or type(self.under).__name__
        last = None
        for where, keys, description in binding_rows(self.app, self.under):
            if where != last:
                table.add_row(Text(f"— {title if where == 'screen' else 'everywhere'} —", "italic"), "")
                last = where
            table.add_row(Text(keys), Text(description))
        table.add_row(Text("— navigation —", "italic"), "")
        for keys, what in NAVIGATION:
            table.add_row(Text(keys), Text(what))
        table.add_row(Text("— reading the screens —", "italic"), "")
        for word, what in NOTES:
            table.add_row(Text(word), Text(what))
        with VerticalScroll(id="help-body"):
            yield Static("rooftop keys (Esc closes)", classes="section-title")
            yield Static(table, id="help-keys")

    def action_dismiss(self) -> None:
        self.app.pop_screen()
