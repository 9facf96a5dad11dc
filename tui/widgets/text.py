"""Trace strings are data: show them literally, never as Rich markup or terminal control.

The cleaning itself is `rooftop.present.text.printable` (shared with the report, the diff and the CSV
export); this module only adapts it to Rich: a `Text` is never parsed for markup.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from rooftop.present.text import printable

if TYPE_CHECKING:
    import pandas as pd


def sanitize(s: object) -> str:
    """A one-line printable string: controls, bidi and invisible characters become visible escapes."""
    return printable(s)


def safe_text(s: object, style: str = "") -> Text:
    """`sanitize(s)` as a Rich Text, which is never parsed for markup."""
    return Text(sanitize(s), style=style, no_wrap=False)


def sanitize_series(values: pd.Series) -> pd.Series:
    """Vectorised `sanitize`: each distinct value is cleaned once (a million rows hold few names)."""
    import numpy as np  # (here, not with the module: the Overview's first paint imports no pandas)
    import pandas as pd
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    clean = np.array([sanitize(u) for u in uniques] + [None], dtype=object)
    return pd.Series(clean[codes], index=values.index, dtype=object)  # code -1 (null) -> None
