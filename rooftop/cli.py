"""The front door: argument parsing, and lazy dispatch to collectors/ and tui/.

Errors reach the user as one line, `rooftop: error: FILE: problem (hint)`, with exit code 2.
Set ROOFTOP_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings
from pathlib import Path

from . import __version__
from .trace import TraceError

COMMANDS = ("open", "report", "diff", "import", "collect", "predict", "calibrate", "gpus")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + exits 2; keep it to one line
        raise UsageError(message)


def _subparsers(parser: argparse.ArgumentParser):
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("open", help="explore one trace, or compare two, in the terminal UI")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="rooftop Parquet, Kineto JSON, nsys SQLite, ncu report/CSV")

    p = sub.add_parser("report", help="print the phase table, top kernels and findings")
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--top", type=int, default=10, help="kernel groups to list (default 10)")
    p.add_argument("--peaks", choices=("auto", "datasheet", "measured"), default="auto",
                   help="which ceilings to judge against (default: measured when calibrated)")

    p = sub.add_parser("diff", help="compare two traces: phase and kernel-group deltas, changed findings")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--json", action="store_true")
    p.add_argument("--top", type=int, default=10)

    p = sub.add_parser("import", help="convert a Kineto/nsys/ncu trace to a rooftop trace")
    _lazy_args(p, "collectors.readers.importers", fallback=_import_fallback_args)

    p = sub.add_parser("collect", help="run a built-in model under the profiler and write a trace")
    _lazy_args(p, "collectors.capture.collect")

    p = sub.add_parser("predict", help="write the analytic (roofline) trace of a model on a GPU")
    _lazy_args(p, "collectors.predict")

    p = sub.add_parser("calibrate", help="measure this GPU's achievable bandwidth and GEMM rate")
    _lazy_args(p, "collectors.capture.calibrate")

    sub.add_parser("gpus", help="list the GPU spec table")
    return sub


def _import_fallback_args(p):
    p.add_argument("src")
    p.add_argument("-o", "--output")


def _lazy_args(p: argparse.ArgumentParser, module: str, fallback=None) -> None:
    """Let a command's own module declare its options, but only when that command is used.

    Importing collectors.capture.collect would import torch; `rooftop report` must not pay for that.
    """
    p.set_defaults(_module=module)
    p._rooftop_fallback = fallback  # type: ignore[attr-defined]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="rooftop", description="A terminal profiler explorer for LLM inference on NVIDIA GPUs. "
                     "`rooftop TRACE [TRACE2]` opens the explorer.")
    parser.add_argument("--version", action="version", version=f"rooftop {__version__}")
    sub = _subparsers(parser)
    if command in ("import", "collect", "predict", "calibrate"):
        p = sub.choices[command]
        module = p.get_default("_module")
        try:
            mod = __import__(module, fromlist=["add_arguments"])
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            raise UsageError(f"`rooftop {command}` needs {missing}: pip install 'rooftop[collect]'") from None
        mod.add_arguments(p)
    return parser


def _load(path: str):
    """Any supported trace (rooftop Parquet, or an import converted in memory)."""
    try:
        from collectors.readers.importers import load_any
    except ImportError:
        from .trace import load_trace
        return load_trace(path)
    return load_any(path)


def _analysis(path: str, peaks: str = "auto"):
    from .analysis import analyze
    a = analyze(_load(path))
    if peaks != "auto":
        try:
            a = a.with_peaks(peaks)
        except ValueError as exc:
            raise TraceError(path, str(exc), "calibrate with `rooftop calibrate` on the GPU") from None
    return a


def cmd_report(args) -> int:
    from .report import report_dict, report_text
    a = _analysis(args.trace, args.peaks)
    if args.json:
        json.dump(report_dict(a, args.top), sys.stdout, indent=1, default=str, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(report_text(a, args.top))
    return 0


def cmd_diff(args) -> int:
    from .analysis import compare
    from .report import diff_text
    a, b = _analysis(args.a), _analysis(args.b)
    if args.json:
        from .report import _clean
        doc = compare(a, b).to_dict()
        doc = json.loads(json.dumps(doc, default=lambda o: _clean(o) if not isinstance(o, (list, dict)) else o))
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print(diff_text(a, b, args.top))
    return 0


def cmd_open(paths: list[str]) -> int:
    from .trace import check_input
    for p in paths:
        check_input(p)  # missing, unreadable, a FIFO or a device: one line before the screen switches
    if len(paths) == 1:
        # Cheap content check before the terminal switches to the full-screen app: an empty or
        # unrecognised file gets the one-line error at once (the app reports deeper problems).
        try:
            from collectors.readers.importers import check_format
        except ImportError:
            check_format = None
        if check_format is not None:
            check_format(paths[0])
    try:
        from tui.app import run_app
    except ImportError as exc:
        raise UsageError(f"the terminal UI needs textual: {exc}") from None
    return run_app(list(paths))


def cmd_gpus(args) -> int:
    from .devices import all_gpus
    from .format import fmt_rate
    for g in all_gpus():
        print(f"{g.key:14s} {g.name:28s} bf16 {fmt_rate(g.peak_bf16, 'FLOP/s'):>14s}  "
              f"bw {fmt_rate(g.peak_bw, 'B/s'):>10s}  ridge {g.ridge():5.0f} FLOP/B")
    return 0


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        return cmd_open(argv)  # `rooftop TRACE [TRACE2]`
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "open":
        return cmd_open(args.traces)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "diff":
        return cmd_diff(args)
    if args.command == "gpus":
        return cmd_gpus(args)
    if args.command in ("collect", "predict") and getattr(args, "output", None):
        from .trace import check_writable
        _check_output_file(args.output)
        check_writable(args.output)  # a full disk or a bad -o is reported before the run, not after it
    mod = __import__(args._module, fromlist=["run"])
    return int(mod.run(args) or 0)


def _check_output_file(output: str) -> None:
    """`-o` must name a regular file (or nothing yet): never a device, a FIFO or a directory."""
    import stat
    try:
        st = os.stat(output)
    except OSError:
        return  # absent (or unreachable: check_writable says why)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise TraceError(output, f"the output exists and is {kind}", "give a file name ending in .parquet")


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that `finally` blocks remove temporary files."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        old = _install_sigterm(argv)
        try:
            with warnings.catch_warnings():
                if not os.environ.get("ROOFTOP_DEBUG"):
                    # numpy/pandas RuntimeWarnings about a damaged file's values are not for users: what
                    # rooftop dropped or ignored is said in its own warnings
                    warnings.simplefilter("ignore")
                return _main(argv)
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    except KeyboardInterrupt:  # Ctrl-C at any moment, even while printing an error: one line
        _quiet_print("rooftop: interrupted")
        return 130
    except Terminated:
        _quiet_print("rooftop: terminated")
        return 143


def _install_sigterm(argv: list[str]):
    """Batch commands turn SIGTERM into an exception (temporary files are then removed by the
    writers' cleanup); the terminal UI keeps Textual's own handling."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return None
    if not argv or (argv[0] not in COMMANDS and not argv[0].startswith("-")) or argv[0] == "open":
        return None
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return None


def _quiet_print(line: str) -> None:
    try:
        print(line, file=sys.stderr)
    except (OSError, ValueError, KeyboardInterrupt):
        pass


def _main(argv: list[str]) -> int:
    try:
        return _dispatch(argv)
    except TraceError as exc:
        _error(str(exc))
    except UsageError as exc:
        _error(str(exc) + " (see rooftop --help)")
    except KeyboardInterrupt:
        _quiet_print("rooftop: interrupted")
        return 130
    except Terminated:
        _quiet_print("rooftop: terminated")
        return 143
    except BrokenPipeError:
        # `rooftop report x | head`: the reader left; not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except MemoryError:
        _error("out of memory")
    except OSError as exc:  # name too long, permission denied, I/O error on a path the user gave
        where = f"{exc.filename}: " if exc.filename is not None else ""
        _error(f"{where}{exc.strerror or exc}")
    except Exception as exc:  # the last line of defence: never a traceback at the user
        if os.environ.get("ROOFTOP_DEBUG"):
            raise
        _error(f"internal error: {exc.__class__.__name__}: {exc} (set ROOFTOP_DEBUG=1 for the traceback)")
    return 2


def _error(message: str) -> None:
    from .text import printable
    text = printable(" ".join(str(message).split()))
    if len(text) > 500:
        text = text[:499] + "…"
    print(f"rooftop: error: {text}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
