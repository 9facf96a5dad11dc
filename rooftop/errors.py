"""The error every reader raises for a file it cannot read, apart from the trace package so that
the decoders import it without pandas or pyarrow (an import forks its decoding workers first)."""
from __future__ import annotations

import os


class TraceError(Exception):
    """A trace could not be read. The message is one line and names the file and the problem."""

    def __init__(self, path: str | os.PathLike | None, problem: str, hint: str | None = None):
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.hint = hint
        where = f"{self.path}: " if self.path else ""
        tail = f" ({hint})" if hint else ""
        super().__init__(one_line(f"{where}{problem}{tail}"))


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
