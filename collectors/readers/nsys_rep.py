"""Nsight Systems reports (`.nsys-rep`, older `.qdrep`): read through `nsys export --type sqlite`.

A report is a closed binary format only `nsys` reads; its SQLite export is what rooftop's nsys reader
(`nsys.py`) knows. `sqlite_for(report)` gives that export, made once and kept as a cache keyed by
the report's size and modification time (a report rewritten in place gets a new export):
next to the report when its directory is writable (`.NAME.SIZE-MTIME.sqlite`), else in the user's
cache directory (`$XDG_CACHE_HOME/rooftop/nsys-rep/`). Every command that opens a path (`rooftop
FILE`, `report`, `diff`, `import`, `export`, the TUI) reaches it through the importers' `_read`,
so the second open of a report is as fast as opening its SQLite.

The export is written under a temporary name and renamed only once `nsys` has exited 0 and the
file is a SQLite database holding tables: a failed, killed, interrupted or timed-out export never
leaves a cache behind. `nsys` runs in its own process group, killed whole on a timeout, a Ctrl-C or
an Esc in the TUI (its export forks helpers). Which `nsys`: `--nsys PATH`, else `$NSYS`, else
`nsys` on PATH. Without one, `NsysMissing` says the exact export command for this report.

The command line follows Nsight Systems' exporter usage (`nsys export [<args>] [report]`; `-t,
--type=sqlite`, `-o, --output=` path of the result, `-f, --force-overwrite=true|false`), documented
in the Nsight Systems user guide, "Export Formats" / nsys-exporter overview.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from rooftop.errors import TraceError

from collectors.readers.progress import stage

SUFFIXES = (".nsys-rep", ".qdrep")
NSYS_ENV = "NSYS"
TIMEOUT_ENV = "ROOFTOP_NSYS_TIMEOUT"
# An export of a large report (GBs, millions of events) takes minutes; one that runs this long has
# hung (a licence prompt, a network home directory that does not lock files).
DEFAULT_TIMEOUT_S = 1800.0
SQLITE_MAGIC = b"SQLite format 3\x00"
# Names up to this many bytes are kept in the cache's file name; longer ones are hashed, so that
# `.NAME.SIZE-MTIME.sqlite` stays under the 255 bytes a file name may have.
_NAME_KEPT = 150

_given: str | None = None  # `--nsys PATH` of the command in progress


def use_nsys(path: str | None) -> None:
    """`--nsys PATH`: the nsys executable for this command (None: back to $NSYS, then PATH)."""
    global _given
    _given = path


def is_report(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(SUFFIXES)


def find_nsys() -> str | None:
    """The nsys to run: `--nsys`, else `$NSYS`, else `nsys` on PATH; None when there is none.
    A `--nsys` or `$NSYS` that names no executable is an error, not a silent fall-back."""
    for given, where in ((_given, "--nsys"), (os.environ.get(NSYS_ENV) or None, f"${NSYS_ENV}")):
        if given is None:
            continue
        found = shutil.which(given)
        if found is None:
            raise TraceError(given, f"{where} names no executable nsys", "give the path of Nsight Systems' nsys")
        return found
    return shutil.which("nsys")


def timeout_s() -> float:
    try:
        value = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def export_argv(report: str | os.PathLike, output: str | os.PathLike, nsys: str = "nsys") -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]


def user_command(report: str | os.PathLike) -> list[str]:
    """The export a user runs by hand: the SQLite next to the report, named as nsys names it."""
    report = str(report)
    stem = report[: -len(next(s for s in SUFFIXES if report.lower().endswith(s)))] if is_report(report) else report
    return ["nsys", "export", "--type", "sqlite", "--output", stem + ".sqlite", report]


class NsysMissing(TraceError):
    """No nsys to export a report with. Its message is one line and never shortened (the command in
    it is what the user needs); `lines(width)` is the same message wrapped for a person at a terminal,
    the command on a line of its own."""

    def __init__(self, report: str | os.PathLike):
        self.command = shlex.join(user_command(report))
        super().__init__(report, "an Nsight Systems report is read through `nsys export`, and no nsys was found "
                                 f"(not on PATH; ${NSYS_ENV} and --nsys name none)",
                         f"install Nsight Systems, or export it yourself and open the .sqlite: {self.command}")
        Exception.__init__(self, f"{self.path}: {self.problem} ({self.hint})")  # whole, not cut at 400

    def lines(self, width: int, prefix: str = "rooftop: error: ") -> list[str]:
        """The message wrapped at `width` columns between words, never shortened; the command on a
        line of its own, whole (copied as shown, it runs: a terminal folds a long line, a line
        break inside it would not)."""
        from rooftop.present.text import printable

        width = max(int(width), 20)
        prose = f"{prefix}{printable(self.path)}: {self.problem}. Install Nsight Systems, or export the " \
                "report yourself and open the .sqlite:"
        out = textwrap.wrap(prose, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        return out + ["  " + printable(self.command)]


# --- the cache ---------------------------------------------------------------------------------

def _key(report: Path) -> str:
    st = report.stat()
    return f"{st.st_size}-{st.st_mtime_ns}"


def _base(report: Path) -> str:
    name = report.name
    return name if len(name.encode("utf-8", "surrogateescape")) <= _NAME_KEPT else \
        hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rooftop" / "nsys-rep"


def cache_paths(report: str | os.PathLike) -> list[Path]:
    """Where the export of `report` is kept, in the order looked at: beside it, then the user's
    cache directory (its name prefixed by a hash of the report's full path: two reports of one
    name in different directories do not share an export)."""
    report = Path(report)
    key, base = _key(report), _base(report)
    where = hashlib.sha256(os.fsencode(os.path.realpath(report))).hexdigest()[:16]
    return [report.parent / f".{base}.{key}.sqlite", user_cache_dir() / f"{where}-{base}.{key}.sqlite"]


def cached(report: str | os.PathLike) -> Path | None:
    """The existing export of this version of `report`, or None."""
    for p in cache_paths(report):
        if _is_sqlite(p):
            return p
    return None


def _is_sqlite(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _holds_tables(p: Path) -> bool:
    """Whether `p` is a SQLite database with at least one table (an export nsys finished)."""
    if not _is_sqlite(p):
        return False
    try:
        con = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _drop_stale(target: Path) -> None:
    """Earlier exports of the same report name in the target's directory (the report changed since:
    its key did), which would otherwise pile up, each as big as the export."""
    m = re.fullmatch(r"(.*)\.\d+-\d+\.sqlite", target.name)
    if m is None:
        return
    pattern = re.compile(re.escape(m.group(1)) + r"\.\d+-\d+\.sqlite")
    try:
        for old in target.parent.iterdir():
            if old != target and pattern.fullmatch(old.name):
                old.unlink(missing_ok=True)
    except OSError:
        pass


# --- the export ----------------------------------------------------------------------------------

EXPORTING = "exporting to SQLite with nsys"


def sqlite_for(report: str | os.PathLike, progress=None) -> Path:
    """The SQLite export of `report`: the cached one, else made now with nsys (progress: the
    import's display, told the stage and the seconds elapsed; Esc in the TUI raises from it)."""
    report = Path(report)
    hit = cached(report)
    if hit is not None:
        return hit
    nsys = find_nsys()
    if nsys is None:
        raise NsysMissing(report)
    if getattr(progress, "min_bytes", None):  # (a ProgressLine: an export takes seconds whatever the size)
        progress.min_bytes = 0
    errors = []
    for target in cache_paths(report):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not _writable(target.parent):
                raise _NotWritable("not writable")
        except OSError as exc:
            errors.append(f"{target.parent}: {exc.strerror or exc}")
            continue
        except _NotWritable as exc:
            errors.append(f"{target.parent}: {exc}")
            continue
        try:
            return _export(nsys, report, target, progress)
        except _NotWritable as exc:
            errors.append(f"{target.parent}: {exc}")
    raise TraceError(report, "no writable place for its SQLite export (" + "; ".join(errors) + ")",
                     f"set XDG_CACHE_HOME to a writable directory, or run `{shlex.join(user_command(report))}`")


class _NotWritable(Exception):
    pass


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK)


def _export(nsys: str, report: Path, target: Path, progress) -> Path:
    tmp = target.with_name(f"{target.name[: -len('.sqlite')]}.tmp-{os.getpid()}.sqlite")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # (the place is writable)
        os.close(fd)
        os.unlink(tmp)  # nsys creates it (with --force-overwrite it would replace it anyway)
    except FileExistsError:
        os.unlink(tmp)
    except OSError as exc:
        raise _NotWritable(exc.strerror or str(exc)) from None
    limit = timeout_s()
    stage(progress, EXPORTING)
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(export_argv(report, tmp, nsys), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise TraceError(report, f"cannot run {nsys}: {exc.strerror or exc}", "check --nsys / $NSYS") from None
        started = time.monotonic()
        try:
            rc = _wait(proc, started, limit, progress, report)
            if rc != 0:
                raise TraceError(report, f"`nsys export` failed (exit status {rc}){_said(log)}",
                                 "the report may be damaged, or from a newer Nsight Systems than this nsys")
            if not _holds_tables(tmp):
                raise TraceError(report, f"`nsys export` exited 0 but wrote no SQLite database{_said(log)}",
                                 f"run `{shlex.join(user_command(report))}` to see what nsys says")
            os.replace(tmp, target)
        finally:
            if proc.poll() is None:
                _kill(proc)
            for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                try:
                    leftover.unlink()
                except OSError:
                    pass
    _drop_stale(target)
    return target


def _wait(proc: subprocess.Popen, started: float, limit: float, progress, report: Path) -> int:
    last = started
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now - started > limit:
            _kill(proc)
            raise TraceError(report, f"`nsys export` did not finish in {limit:g} s and was stopped",
                             f"set {TIMEOUT_ENV} to allow longer, or run `{shlex.join(user_command(report))}`")
        if now - last >= 1.0:
            last = now
            stage(progress, f"{EXPORTING} · {now - started:.0f} s")  # (Esc in the TUI raises here)


def _kill(proc: subprocess.Popen) -> None:
    """Kill nsys and whatever it started (its own process group, made by start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _said(log) -> str:
    """The last line nsys wrote, as `: <line>` (empty when it said nothing)."""
    try:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - 4096))
        text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return f": {last[:200]}"


def check_readable(report: str | os.PathLike) -> None:
    """Raise `NsysMissing` when `report` can be read neither from a cached export nor through an nsys
    (checked before a long command or the TUI starts); a `--nsys`/`$NSYS` naming nothing raises too."""
    if cached(report) is None and find_nsys() is None:
        raise NsysMissing(report)
