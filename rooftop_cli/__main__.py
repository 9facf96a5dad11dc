import sys

try:
    from rooftop_cli.commands import main
except KeyboardInterrupt:  # Ctrl-C while Python was still importing: one line, not a traceback
    print("rooftop: interrupted", file=sys.stderr)
    raise SystemExit(130)

raise SystemExit(main())
