"""The `rooftop` command: the top floor, above the core (rooftop/), the readers (collectors/) and
the terminal UI (tui/). It parses arguments and prints; opening a trace is `collectors.open`'s, and
each edge is imported only inside the command that needs it (`rooftop report` never pays for
Textual or torch). Nothing below imports this package, but `rooftop/__main__.py`, which keeps
`python -m rooftop` working (checked by tests/test_layers.py)."""
from rooftop_cli.commands import main

__all__ = ["main"]
