"""Horizontal bars of warp stall shares: reason, bar, share %, and what the reason means.

Built as Rich `Text` (not a plotext chart): exact percentages and meanings fit beside each bar, and
a plotext legend would overlap the bars at small heights (a plotext 5 quirk, measured here).
"""
from __future__ import annotations

import math

import pandas as pd
from rich.text import Text
from textual.widget import Widget

from rooftop.analysis.stalls import STALL_MEANING

_EIGHTHS = " ▏▎▍▌▋▊▉█"
NAME_W, PCT_W = 18, 7


def bar(share: float, width: int) -> str:
    """A bar of `share` (0..1) of `width` cells, in eighths of a cell."""
    if not math.isfinite(share) or share <= 0 or width <= 0:
        return ""
    units = round(min(share, 1.0) * width * 8)
    full, rest = divmod(units, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def top_shares(shares: pd.Series, top: int = 8) -> pd.Series:
    """The largest `top` reasons with a known, positive share, largest first."""
    s = pd.to_numeric(shares, errors="coerce").dropna()
    s = s[s > 0]
    return s.sort_values(ascending=False, kind="stable").head(top)


def stall_lines(shares: pd.Series, width: int, top: int = 8, meanings: bool = True) -> Text:
    """The bars as one Text, one line per reason, fitted to `width` cells."""
    s = top_shares(shares, top)
    rest = max(width - NAME_W - PCT_W - 2, 10)
    bar_w = min(40, rest // 2) if meanings else min(60, rest)
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for i, (reason, share) in enumerate(s.items()):
        if i:
            out.append("\n")
        out.append(f"{str(reason)[:NAME_W - 1]:<{NAME_W}}", style="stall-bars--name")
        out.append(f"{bar(share, bar_w):<{bar_w}}", style="stall-bars--top" if i == 0 else "stall-bars--bar")
        out.append(f"{100 * share:>{PCT_W - 1}.1f}%")
        if meanings:
            meaning = STALL_MEANING.get(str(reason), "")
            room = width - NAME_W - bar_w - PCT_W - 2
            if room > 3 and meaning:
                if len(meaning) > room:
                    meaning = meaning[: room - 1] + "…"
                out.append("  " + meaning, style="stall-bars--meaning")
    return out


class StallBars(Widget):
    """Bars for one group's stall shares (a Series: reason -> share 0..1), top reasons first."""

    COMPONENT_CLASSES = {"stall-bars--name", "stall-bars--bar", "stall-bars--top", "stall-bars--meaning"}

    def __init__(self, shares: pd.Series, top: int = 8, meanings: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shares = shares
        self.top = top
        self.meanings = meanings

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(top_shares(self.shares, self.top)))

    def render(self) -> Text:
        text = stall_lines(self.shares, self.size.width or 80, self.top, self.meanings)
        # Styles are component classes (the stylesheet owns colours); resolve them for this render.
        for span_style in ("stall-bars--name", "stall-bars--bar", "stall-bars--top", "stall-bars--meaning"):
            style = self.get_component_rich_style(span_style, partial=True)
            text.spans = [s._replace(style=style) if s.style == span_style else s for s in text.spans]
        return text
