"""Warnings (`w` from any screen): what was dropped, cut short or not known, before trusting a number.

The importer's and reader's warnings (rows dropped, values ignored), a truncated capture, an unknown
device, and phases whose bytes are known for too little of their time (`Analysis.warnings`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from rooftop.present.format import fmt_count

from tui.widgets.breadcrumb import RooftopScreen, trace_title
from tui.widgets.text import sanitize
from tui.workers import post_if_current


def warnings_text(items: list[tuple[str, str]]) -> Text:
    text = Text()
    if not items:
        text.append("No warnings: nothing was dropped, cut short or left unknown.")
    for i, (where, message) in enumerate(items):
        if i:
            text.append("\n")
        text.append(f"! {where:<9}", "bold")
        text.append(sanitize(message))
    return text


class WarningsScreen(RooftopScreen):
    BREADCRUMB = "Warnings"
    EXPORT_NAME = "warnings"

    @dataclass
    class Ready(Message):
        items: list[tuple[str, str]]

    def __init__(self, analysis, crumbs: list[str] | None = None) -> None:
        super().__init__(analysis, [*(crumbs or [trace_title(analysis)]), self.BREADCRUMB])
        self.items: list[tuple[str, str]] | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="warnings-body"):
            yield Static(warnings_text(self.analysis.trace_warnings), id="warnings-list")
            yield Static("checking the analysis (bytes coverage) …", id="warnings-pending", classes="muted")

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, exit_on_error=False, group="warnings")
    def _compute(self) -> None:
        post_if_current(self, self.Ready(self.analysis.warnings))

    @on(Ready)
    def _ready(self, message: Ready) -> None:
        self.items = message.items
        self.query_one("#warnings-list", Static).update(warnings_text(message.items))
        self.query_one("#warnings-pending", Static).update(f"{fmt_count(len(message.items), 'warning')} · Esc: back")

    def export_frame(self) -> pd.DataFrame | None:
        return None if self.items is None else pd.DataFrame(self.items, columns=["where", "message"])
