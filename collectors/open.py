"""One way to open a trace: a path (any format we read, or a directory of ranks) into a `Trace`
with progress, or into an `Analysis` with options, or, when it may answer, into the stored summary.

`rooftop report`, `diff` and `export` (rooftop_cli/), the terminal UI (tui/loader.py) and the tests
open traces here and nowhere else. The format is sniffed here (`sniff`), once per open: a caller
that sniffed already (`rooftop FILE`, before the screen switches) hands the format on. Whether a
trace's stored summary answers instead of its rows is one rule, `summary_answers`.

Why it lives in collectors/ and not in the core: opening a Kineto, nsys or ncu file needs the
readers (collectors/readers/), and the core (rooftop/) never imports an edge. The front door and
the TUI both stand above it. It never imports torch (the readers don't), and imports the readers,
pandas and pyarrow only where a load needs them: a report served from a stored summary imports
none of them.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from rooftop.analysis import Analysis
    from rooftop.present.summary import Stored
    from rooftop.trace import Trace


class OptionError(Exception):
    """An option this trace cannot be judged with (a `--gpu`/`--peaks` override its device table
    entry refuses): the front door says it as a usage error."""


def sniff(path: str | os.PathLike) -> str:
    """The format of a file or directory, from its content (`importers.detect`), or the one-line
    error for an empty, unknown or unsupported file. The one place a format is sniffed to open."""
    from collectors.readers.importers import check_format

    return check_format(path)


def refuse_steps(paths: Iterable[str | os.PathLike]) -> None:
    """`--steps` names the step ranges while a profiler file is imported; a rooftop trace no longer
    has the ranges it would read (launch records, GPU spans): an error naming it."""
    from rooftop.trace import TraceError

    from collectors.readers.importers import detect

    for p in paths:
        if Path(p).exists() and detect(p) == "rooftop":
            raise TraceError(p, "--steps applies when a profiler file is imported; this is a rooftop trace already",
                             "import the original Kineto/nsys file with --steps")


def open_trace(path: str | os.PathLike, progress: Any = None, *, fmt: str | None = None,
               lazy_host: bool = False) -> "Trace":
    """A `Trace` from any supported file, or from a directory that is one run (any other directory
    raises `NotOneRun`, naming the traces it holds). A rooftop Parquet file is read; anything else
    is converted in memory, `progress(done, total[, unit])` called as it reads (and its `stage`, if
    it has one, told the stages after the read). `fmt`: the format `sniff` gave, when the caller
    sniffed already. `lazy_host` (a rooftop file): the runtime rows stay on disk until the timeline
    asks for them (`Trace.runtime_rows`)."""
    from rooftop import heap
    from rooftop.trace import load_trace, trace_from_table

    from collectors.readers.progress import LOADING, stage
    from collectors.readers.importers import check_directory, convert

    p = Path(path)
    if p.is_dir():  # any other directory than one run: NotOneRun (the TUI offers its files)
        check_directory(p)
    if fmt is None:
        fmt = sniff(p)
    if fmt == "rooftop":
        return load_trace(p, lazy_host=lazy_host)
    if fmt == "rooftop-dir":
        return load_trace(p)
    # converted in memory to be viewed: the viewer's heap from the start (rooftop.heap), so that the
    # read's freed column-sized temporaries go back to the system instead of holding the heap at
    # the read's peak through the conforming and the load that follow
    heap.trim()
    table, meta = convert(p, progress, fmt=fmt)
    stage(progress, LOADING)
    return trace_from_table(table, meta, p)


def analysis_of(trace: "Trace", override: Any = None, **options: Any) -> "Analysis":
    """The `Analysis` of a trace, judged against the user's `override` (`--gpu`, explicit peaks)
    when there is one. `options` go to `rooftop.analysis.analyze` (`model`, `workload`)."""
    from rooftop.analysis import analyze
    from rooftop.hardware.gpus import peaks as device_peaks

    given = None
    if override is not None:
        try:
            given = device_peaks(trace.meta, override=override)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    return analyze(trace, given, **options)


def open_analysis(path: str | os.PathLike, progress: Any = None, *, fmt: str | None = None, lazy_host: bool = False,
                  peaks: str = "auto", override: Any = None, note_unsealed: bool = False,
                  **options: Any) -> "Analysis":
    """`open_trace` then `analysis_of`, judged against the ceilings `peaks` names ("auto", else
    "datasheet" or "measured": a `TraceError` when the trace has none such). A progress display
    that drew the import (a `ProgressLine` that is `shown`) hears the analysis as its last stage.
    `note_unsealed`: a current stored summary that was not used (no seal of this user's) is named
    among the trace's warnings, for a viewer that does not compare it with the rows (the TUI;
    `rooftop report` compares)."""
    trace = open_trace(path, progress, fmt=fmt, lazy_host=lazy_host)
    if note_unsealed:
        from rooftop.present.summary import NOT_USED, unsealed

        if unsealed(path):
            trace.warnings.append(NOT_USED)
    if getattr(progress, "shown", False):  # (an import's line: the tables are computed as the report asks)
        from collectors.readers.progress import ANALYSING, stage

        stage(progress, ANALYSING)
    a = analysis_of(trace, override, **options)
    if peaks != "auto":
        try:
            a = a.with_peaks(peaks)
        except ValueError as exc:
            from rooftop.trace import TraceError

            raise TraceError(path, str(exc), "calibrate with `rooftop calibrate` on the GPU") from None
    return a


def summary_answers(*, peaks: Any = "auto", top: Any = None, **options: Any) -> bool:
    """The one rule for when a trace's stored summary may answer instead of its rows (the file's
    side, current, sealed, holding `top` groups, is `rooftop.present.summary.load_stored`'s): the analysis
    is asked with the defaults. The ceilings are "auto", `top` (None: the default) is a count of at
    least one, and every other option (`override`, `model`, `workload`, a flag's raw value) is
    unset: None, or a workload none of whose fields is set."""
    if peaks != "auto" or (top is not None and not (isinstance(top, int) and top >= 1)):
        return False
    return all(_unset(v) for v in options.values())


def _unset(value: Any) -> bool:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(getattr(value, f.name) is None for f in dataclasses.fields(value))
    return value is None


def stored_summary(path: str | os.PathLike, *, top: int | None = None, footer: Any = None,
                   unsealed: list | None = None, **options: Any) -> "Stored | None":
    """The trace's current stored summary with its `top` groups, when it may answer
    (`summary_answers`), else None: the caller analyses the rows. Reads the footer only (no pandas,
    no pyarrow); `footer`: one the caller read already. A current summary that lacks this user's
    seal goes to `unsealed` (see `rooftop.present.summary.load_stored`)."""
    if not summary_answers(top=top, **options):
        return None
    from rooftop.present.summary import DEFAULT_TOP, load_stored

    return load_stored(path, DEFAULT_TOP if top is None else top, footer=footer, unsealed=unsealed)
