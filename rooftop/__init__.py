"""rooftop: the headless core. Imports neither Textual nor torch, ever."""
__version__ = "0.1.0"


def _starting_as_the_program() -> bool:
    """`python -m rooftop` (argv[0] is "-m" while the package is imported) or the `rooftop` command."""
    import sys

    argv0 = (getattr(sys, "argv", None) or [""])[0]
    return argv0 == "-m" or argv0.replace("\\", "/").rsplit("/", 1)[-1] in ("rooftop", "rooftop.exe")


def _interrupted_while_starting(signum, frame):  # nothing is written yet: one line, no traceback
    import os

    os.write(2, b"rooftop: interrupted\n")
    os._exit(130)


if _starting_as_the_program():
    # Ctrl-C while Python imports pandas and pyarrow (a second or more) would print a traceback of
    # the import machinery; `rooftop_cli.commands.main` puts the usual KeyboardInterrupt back once it runs.
    import signal as _signal

    try:
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)
    except (ValueError, OSError):  # not the main thread, or no signals here
        pass
