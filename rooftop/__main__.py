"""`python -m rooftop`: the `rooftop` command, which lives above the core (rooftop_cli/). The one
module of rooftop/ that imports the floor above it, and only it (tests/test_layers.py)."""
import sys

try:
    from rooftop_cli.commands import main
except KeyboardInterrupt:  # Ctrl-C while Python was still importing: one line, not a traceback
    print("rooftop: interrupted", file=sys.stderr)
    raise SystemExit(130)

raise SystemExit(main())
