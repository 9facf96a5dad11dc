"""Trace strings are data: show them literally, never as Rich markup or terminal control."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
from rich.text import Text

# C0 controls, DEL and C1 controls: a kernel name holding `\x1b[31m` must not recolour the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape_char(m: re.Match) -> str:
    return f"\\x{ord(m.group()):02x}"


def sanitize(s: object) -> str:
    """A one-line printable string: control characters become visible `\\xNN` escapes."""
    if s is None or (isinstance(s, float) and s != s):
        return "—"
    return _CONTROL.sub(_escape_char, str(s))


def safe_text(s: object, style: str = "") -> Text:
    """`sanitize(s)` as a Rich Text, which is never parsed for markup."""
    return Text(sanitize(s), style=style, no_wrap=False)


def sanitize_series(values: pd.Series) -> pd.Series:
    """Vectorised `sanitize`: each distinct value is cleaned once (a million rows hold few names)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    clean = np.array([sanitize(u) for u in uniques] + [None], dtype=object)
    return pd.Series(clean[codes], index=values.index, dtype=object)  # code -1 (null) -> None
