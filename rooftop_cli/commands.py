"""The `rooftop` command: its commands, printing, and lazy dispatch to collectors/ and tui/ (the
arguments are `rooftop_cli.arguments`'s).

Errors reach the user as one line, `rooftop: error: FILE: problem (hint)`, with exit code 2.
Set ROOFTOP_DEBUG=1 to see the traceback of an unexpected error.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import warnings
from pathlib import Path

from rooftop_cli.arguments import (COMMANDS, UsageError, build_parser, check_gpu, model_options, peak_override,
                                   use_nsys, use_steps)

# rooftop.trace (and with it pandas and pyarrow) is imported where a command needs it, not here: a
# report served from a trace's stored summary answers before pandas could have been imported.


def _progress_line(path: str):
    """The import's progress line on stderr (`rooftop import`'s: a large file only, then its stages),
    for a trace that is not Parquet, converted in memory."""
    from collectors.readers.progress import ProgressLine, file_size
    return ProgressLine(Path(path).name, size=file_size(Path(path)))


def _analysis(path: str, peaks="auto", override=None, options: dict | None = None):
    """The trace's Analysis (collectors.open), its import's progress drawn on stderr as it goes."""
    from collectors.open import OptionError, open_analysis
    bar = _progress_line(path)
    try:
        return open_analysis(path, bar, peaks=peaks if isinstance(peaks, str) else "auto", override=override,
                             **(options or {}))
    except OptionError as exc:
        raise UsageError(str(exc)) from None
    finally:
        bar.done()  # the line ended before the report, on stdout, begins


def _stored_report(args, unsealed: list | None = None) -> str | None:
    """The report's output from the trace's stored summary (docs/summary.md), when it can answer
    (collectors.open.stored_summary: the default options, a current summary of a trace file); else
    None (analyse)."""
    from collectors.open import stored_summary
    flags = {f: getattr(args, f, None) for f in _ANALYSIS_FLAGS}
    stored = stored_summary(args.trace, top=args.top, unsealed=unsealed, peaks=args.peaks, **flags)
    if stored is None:
        return None
    from rooftop.present.render import render_report
    try:
        return stored.json_text() if args.json else render_report(stored.report)
    except ValueError:  # damaged per-step lists: analyse instead
        return None


# Every option that changes the analysis: given any, the stored summary does not answer.
_ANALYSIS_FLAGS = ("gpu", "model", "tp", "ep", "weight_dtype", "kv_dtype", "batch", "context", "new_tokens", "steps")


def cmd_report(args) -> int:
    unsealed: list = []  # a current stored summary without this user's seal: not used, compared
    text = _stored_report(args, unsealed)
    if text is None:
        from rooftop import heap
        from rooftop.present.render import render_report
        from rooftop.present.report import TEXT_KEYS, report_dict
        heap.map_from(heap.REPORT_MAP_FROM)  # (a run that ends with its output: rooftop.heap)
        a = _analysis(args.trace, args.peaks, peak_override(args), model_options(args))
        doc = report_dict(a, args.top) if args.json else report_dict(a, args.top, TEXT_KEYS)
        if unsealed:
            _say_unsealed(args.trace, unsealed[0], doc)
        if args.json:
            text = json.dumps(doc, indent=1, default=str, allow_nan=False)
        else:
            text = render_report(doc)  # only what the text shows
    if not args.json:  # (JSON is ASCII-escaped by its encoder)
        from rooftop.present.text import printable_lines
        text = printable_lines(text)  # the one last step before the terminal, whatever a cell did
    print(text)
    return 0


def _say_unsealed(path: str, stored, doc: dict) -> None:
    """The stored summary was not used (rooftop/trace/seal.py): say so under the report's warnings, and on
    stderr when its numbers are not those of the rows."""
    from rooftop.present.summary import disagreement, unsealed_note
    note = unsealed_note(path, stored, doc)
    doc["warnings"] = [*(doc.get("warnings") or []), note]
    if disagreement(stored, doc) is not None:
        from rooftop.present.text import printable
        print(f"rooftop: warning: {printable(path)}: {note}", file=sys.stderr)


def cmd_summarize(args) -> int:
    """Rewrite each trace with a current summary in its footer; its rows and metadata are kept."""
    from rooftop.present.summary import refresh
    from rooftop.present.text import printable
    from rooftop.trace import TraceError, check_input, is_parquet
    for p in args.traces:
        check_input(p, allow_dir=False)
        if not is_parquet(p):
            raise TraceError(p, "not a rooftop Parquet trace", "`rooftop import` writes one, with its summary")
        print(printable(str(refresh(p))))
    return 0


def cmd_diff(args) -> int:
    from rooftop.analysis import compare
    from rooftop.present.report import diff_text
    if isinstance(args.peaks, str) and args.peaks != "auto":
        raise UsageError("diff --peaks takes BW_TBps,TFLOPs")
    options = model_options(args)
    from rooftop.present import diff_report
    from rooftop.analysis import verdict
    from rooftop.present.text import printable_lines
    a = _analysis(args.a, override=peak_override(args), options=options)
    b = _analysis(args.b, override=peak_override(args), options=options)
    fmt = "json" if args.json else (args.format or "text")
    v = verdict.verdicts(a, b)
    status, reason = (0, None) if args.fail_above is None else verdict.gate(v, args.fail_above, args.metric)
    if fmt == "json":
        from rooftop.present.report import _clean
        doc = compare(a, b).to_dict()
        doc["verdict"] = diff_report.verdict_json(v)
        if reason is not None:
            doc["gate"] = {"status": status, "reason": reason, "fail_above": args.fail_above, "metric": args.metric}
        doc = json.loads(json.dumps(doc, default=lambda o: _clean(o) if not isinstance(o, (list, dict)) else o))
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    elif fmt == "markdown":
        sys.stdout.write(printable_lines(diff_report.verdict_markdown(v, a.trace.label, b.trace.label, args.top, reason)))
    else:
        print(printable_lines(diff_report.verdict_text(v, args.top, reason)))
        print()
        print(printable_lines(diff_text(a, b, args.top)))
    if reason is not None and fmt != "text":
        sys.stdout.flush()
        print(printable_lines(reason), file=sys.stderr)  # the one line a CI log shows, whatever went to stdout
    return status


def cmd_export(args) -> int:
    """`rooftop export TRACE --perfetto OUT`: the trace and rooftop's findings as a Perfetto timeline."""
    from rooftop.present.perfetto import write_perfetto
    from rooftop.present.text import printable
    from rooftop.trace import check_writable
    if isinstance(args.peaks, str) and args.peaks != "auto":
        raise UsageError("export --peaks takes BW_TBps,TFLOPs")
    _check_output_file(args.perfetto)
    check_writable(args.perfetto)  # before the analysis, not after it
    a = _analysis(args.trace, override=peak_override(args), options=model_options(args))
    print(printable(str(write_perfetto(a, args.perfetto))))
    return 0


def cmd_open(paths: list[str], override=None, options: dict | None = None) -> int:
    if len(paths) > 2:
        raise UsageError(f"rooftop opens one trace, or two to compare; got {len(paths)}: {' '.join(paths)}")
    from rooftop.trace import check_input
    for p in paths:
        check_input(p)  # missing, unreadable, a FIFO or a device: one line before the screen switches
    formats = {}
    if len(paths) == 1:
        # Cheap content check before the terminal switches to the full-screen app: an empty or
        # unrecognised file gets the one-line error at once (the app reports deeper problems), and
        # the app opens it as sniffed here.
        from collectors.open import sniff
        formats[paths[0]] = sniff(paths[0])
    from tui.app import run_app
    return run_app(list(paths), peaks_override=override, formats=formats, **(options or {}))



def cmd_gpus(args) -> int:
    from rooftop.hardware.gpus import all_gpus
    from rooftop.present.format import fmt_rate
    for g in all_gpus():
        ridge = g.ridge() or g.ridge("fp32")
        print(f"{g.key:15s} {g.name:42s} bf16 {fmt_rate(g.peak_bf16, 'FLOP/s'):>14s}  "
              f"fp8 {fmt_rate(g.peak_fp8, 'FLOP/s'):>14s}  fp4 {fmt_rate(g.tflops.get('fp4'), 'FLOP/s'):>14s}  "
              f"bw {fmt_rate(g.peak_bw, 'B/s'):>10s}  ridge {ridge or float('nan'):5.0f} FLOP/B"
              f"{'' if g.confirmed else '  (unconfirmed)'}")
    return 0


def _dispatch(argv: list[str]) -> int:
    try:
        return _run(argv)
    finally:
        # `--steps` lasts one command (main() may be called again in-process); if rooftop.trace.steps was
        # never imported, no pattern was set (and importing it, with pandas, is not free)
        steps = sys.modules.get("rooftop.trace.steps")
        if steps is not None:
            steps.set_user_pattern(None)
        nsys_rep = sys.modules.get("collectors.readers.nsys_rep")
        if nsys_rep is not None:
            nsys_rep.use_nsys(None)


def _run(argv: list[str]) -> int:
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv = ["open", *argv]  # `rooftop TRACE [TRACE2] [--model ...]`
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command in ("open", "report", "diff", "import", "export"):
        paths = {"open": lambda: args.traces, "report": lambda: [args.trace], "diff": lambda: [args.a, args.b],
                 "import": lambda: [args.src], "export": lambda: [args.trace]}[args.command]()
        use_nsys(getattr(args, "nsys", None))
        use_steps(getattr(args, "steps", None), paths)
    if args.command in ("open", "report", "diff"):
        check_gpu(getattr(args, "gpu", None))  # a bad key is said before a trace is loaded
    if args.command == "open":
        if isinstance(args.peaks, str) and args.peaks != "auto":
            raise UsageError("open --peaks takes BW_TBps,TFLOPs")
        return cmd_open(args.traces, peak_override(args), model_options(args))
    if args.command == "report":
        return cmd_report(args)
    if args.command == "diff":
        return cmd_diff(args)
    if args.command == "gpus":
        return cmd_gpus(args)
    if args.command == "export":
        return cmd_export(args)
    if args.command == "summarize":
        return cmd_summarize(args)
    if args.command in ("collect", "predict") and getattr(args, "output", None):
        from rooftop.trace import check_writable
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
        from rooftop.trace import TraceError
        raise TraceError(output, f"the output exists and is {kind}", "give a file name ending in .parquet")


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that `finally` blocks remove temporary files."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the `rooftop` command or `python -m rooftop`, not a caller's own process
    argv = list(sys.argv[1:] if argv is None else argv)
    rc = _main_program(argv, program)
    if program and argv and argv[0] in _DONE_AT_ONCE and sys.gettrace() is None and sys.getprofile() is None:
        _exit_now(rc)
    return rc


# Batch commands whose process ends as soon as they are done: their output is written (renamed into
# place) and said, and Python's teardown would only free every object one at a time (a visible
# wait after a large import). Not under a profiler or a coverage tracer, which write at exit.
_DONE_AT_ONCE = ("import", "report", "diff", "summarize", "export")


def _exit_now(rc: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left (`| head`), a closed stream
            pass
    os._exit(rc)


def _main_program(argv: list[str], program: bool) -> int:
    try:
        try:
            _restore_sigint()
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
        finally:
            if program:
                _ignore_late_interrupts()
    except KeyboardInterrupt:  # Ctrl-C at any moment, even while printing an error: one line
        _quiet_print("rooftop: interrupted")
        return 130
    except Terminated:
        _quiet_print("rooftop: terminated")
        return 143


def _ignore_late_interrupts() -> None:
    """The work is done and said: a Ctrl-C from here on changes nothing. Python resets its SIGINT
    handler to the default early in its teardown (freeing pandas and Arrow memory takes a while),
    and a Ctrl-C then would end a finished import with -SIGINT instead of its status."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread, or no signals here
        pass


def _restore_sigint() -> None:
    """From here Ctrl-C is a KeyboardInterrupt again (caught below: one line, temporary files
    removed); while the package was importing, `rooftop._interrupted_while_starting` answered it."""
    from rooftop import _interrupted_while_starting
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass


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
        _error(f"{where}{'permission denied' if isinstance(exc, PermissionError) else exc.strerror or exc}")
    except Exception as exc:  # a trace rooftop cannot read; else the last line of defence: never a traceback
        if _is_trace_error(exc):
            if hasattr(exc, "lines") and _stderr_is_terminal():
                # a person at a terminal: the message wrapped, its command on a line of its own to
                # copy; a script or a log (stderr not a terminal) gets the one line as always
                _quiet_print("\n".join(exc.lines(_columns())))
                return 2
            _error(str(exc))
            return 2
        if os.environ.get("ROOFTOP_DEBUG"):
            raise
        _error(f"internal error: {exc.__class__.__name__}: {exc} (set ROOFTOP_DEBUG=1 for the traceback)")
    return 2


def _is_trace_error(exc: BaseException) -> bool:
    """Whether `exc` is a `rooftop.trace.TraceError` (a file's problem, said in one line). Looked up
    where it is defined: if rooftop.errors was never imported, nothing raised one."""
    errors = sys.modules.get("rooftop.errors")
    return errors is not None and isinstance(exc, errors.TraceError)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _columns() -> int:
    import shutil
    return shutil.get_terminal_size((80, 24)).columns  # ($COLUMNS first, then the terminal's)


def _error(message: str) -> None:
    from rooftop.present.text import printable
    text = printable(" ".join(str(message).split()))
    if len(text) > ERROR_MAX:  # a name of megabytes: its middle goes, the hint at the end stays
        from rooftop.trace.names import fit
        text = fit(text, ERROR_MAX)
    # One line, never cut at the terminal's width: the terminal wraps it, and the command or the
    # path at its end is there whole to copy.
    print(f"rooftop: error: {text}", file=sys.stderr)


ERROR_MAX = 4000  # characters of an error line; longer ones lose their middle, never their end


if __name__ == "__main__":
    raise SystemExit(main())
