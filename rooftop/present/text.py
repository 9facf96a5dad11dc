"""Text from a trace is data: one way to make it printable, everywhere it is shown or exported.

A kernel name, an NVTX range, a device name or a metadata string was written by whoever produced
the file. Shown raw, it could move the cursor or retitle the terminal (CSI/OSC escapes), hide or
reorder what follows (bidi overrides, zero-width characters), or, in a spreadsheet, run a formula.
`printable` is the one function the report, the diff, the CSV exports and the TUI use: every
character a terminal or a reader would not show as itself becomes a visible escape (`\\x1b`,
`\\u202e`). Rich markup is a separate concern: the TUI never parses trace text as markup (it
builds `rich.text.Text` from `printable(...)`), and the plain-text report has no markup to parse.
"""
from __future__ import annotations

import math
import re
from typing import Any

# Unicode categories Cc (C0, DEL, C1), Cf (format: bidi embeddings/overrides/isolates, zero-width
# space/joiners, soft hyphen, word joiner, BOM, tags), Cs (lone surrogates), Zl/Zp (line and
# paragraph separators, which break a line), plus the invisible Hangul fillers and the two
# noncharacters U+FFFE/U+FFFF. Generated from unicodedata (Unicode 14/15), kept as a literal class
# so the check is one C-level scan.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\uffa0\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")

MISSING = "—"


def _escape(m: re.Match) -> str:
    c = m.group()
    n = ord(c)
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(s: Any, missing: str = MISSING) -> str:
    """`s` as one line of text a terminal shows as itself: controls, bidi and invisible characters
    become visible escapes; None and NaN become `missing`."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return missing
    text = s if isinstance(s, str) else str(s)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def printable_lines(text: Any) -> str:
    """Multi-line output (a whole report, a diff) as a terminal must get it: every line `printable`,
    the line breaks kept. The last step before stdout or stderr, whatever each cell did before: a
    renderer that forgot one cell still cannot send an escape. Idempotent (an escape stays as it is)."""
    text = text if isinstance(text, str) else str(text)
    if not _UNSAFE.search(text.replace("\n", "")):
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


def clipboard_text(s: Any) -> str:
    """`s` for the clipboard: one line that a shell or an editor takes as literal text. Controls
    (newlines, ESC, hence a bracketed-paste terminator `ESC[201~`), bidi and invisible characters
    become visible escapes, as on screen; None is empty."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return ""
    return printable(s)


def has_unsafe(s: str) -> bool:
    """True when `printable` would change `s` (for tests and checks)."""
    return bool(_UNSAFE.search(s))


# --- spreadsheet cells -----------------------------------------------------------------------

# A cell a spreadsheet would evaluate (OWASP "CSV injection"): formulas start with = + - @, and
# a leading tab or carriage return can hide one. A quote in front makes it text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(v: Any) -> Any:
    """A text cell that cannot run as a formula, printable; numbers and nulls pass unchanged."""
    if not isinstance(v, str):
        return v
    if v.startswith(_FORMULA_START):
        v = "'" + v
    return printable(v)


def spreadsheet_safe(frame):
    """A copy of a pandas DataFrame whose text cells (and column labels) are `spreadsheet_cell`s.
    Each distinct value is cleaned once (a kernel table repeats its names)."""
    import pandas as pd

    out = frame.copy()
    for c in out.columns:
        col = out[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(object)
        if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
            uniq = pd.unique(col.dropna())
            mapping = {u: spreadsheet_cell(u) for u in uniq if isinstance(u, str)}
            if any(k != v for k, v in mapping.items()):
                out[c] = col.map(lambda x: mapping.get(x, x) if isinstance(x, str) else x)
    out.columns = [spreadsheet_cell(str(c)) for c in out.columns]
    return out


def write_csv(path, frame) -> None:
    """Write `frame` as a spreadsheet-safe CSV atomically (a temporary file beside it, then a rename):
    an interrupted export leaves either nothing or the whole file, never a half one."""
    from rooftop.trace.atomic import replace_atomically

    safe = spreadsheet_safe(frame)

    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            safe.to_csv(fh, index=False)

    replace_atomically(path, write)
