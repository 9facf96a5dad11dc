"""The rooftop TUI: load traces in thread workers, then screens 1-6 switched by number keys.

Each top-level screen is a Textual mode (its own stack), so drill-downs are pushed inside it and
`Esc`/`Backspace` pops back; the number keys live here, on the app, with ids for remapping.
"""
from __future__ import annotations

import gc
import importlib
import threading
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Center, Middle
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker

from rooftop import speedups
from rooftop.present.format import fmt_bytes
from rooftop.present.text import write_csv

from tui.widgets.breadcrumb import RooftopScreen

from tui.widgets.text import safe_text, sanitize

SCREENS = [  # (mode, number key, title)
    ("overview", "1", "Overview"), ("steps", "2", "Steps"), ("kernels", "3", "Kernels"),
    ("roofline", "4", "Roofline"), ("stalls", "5", "Stalls"), ("compare", "6", "Compare"),
    ("timeline", "7", "Timeline"),
]
KEYLINE_HIDDEN = ("compare",)  # shown by the key line once two traces are open (keybar.COMPARE_ID)


# The longest the load waits for the Overview's first paint from the footer (see `Preview.shown`).
PAINT_WAIT_S = 1.0
# The longest the first mount waits for the trace's stored summary to be read (well above its read):
# when current, the Overview is the first screen, with its numbers (no loading screen painted first).
SUMMARY_WAIT_S = 0.5
# Timed rows from which the loaded heap is frozen out of the cyclic GC (see `_load`).
FREEZE_GC_FROM = 50_000
# How often an import reports its progress to the screen (each report is a message and a repaint).
PROGRESS_EVERY_S = 0.2


@dataclass
class EarlyPreview:
    """The footer preview of the one trace, read in a thread from the app's construction."""

    thread: threading.Thread
    got: list  # [Preview or None, or the Exception], once read
    # set once the stored summary was looked at: `got` then holds its Preview if it is current
    summary_seen: threading.Event


@dataclass
class Loaded(Message):
    index: int
    analysis: Any


@dataclass
class Previewed(Message):
    """The footer of a big rooftop trace is read: the Overview can show what ran while it loads."""

    preview: Any


@dataclass
class LoadFailed(Message):
    index: int
    error: str


@dataclass
class ImportProgress(Message):
    """An import of trace `index` is `done` of `total` (bytes read, or the reader's `unit`: nsys
    counts stages), `elapsed_s` after it started; `stage`: the file is read and this runs now."""

    index: int
    done: int
    total: int
    elapsed_s: float
    unit: str = "bytes"
    stage: str | None = None


class LoadReporter:
    """The progress an import reports from a load worker to the loading screen: the bytes read (or
    the reader's stages) at most every `PROGRESS_EVERY_S`, and each stage after the read (the join,
    deriving names and steps, loading the rows: about half of a large import) at once. Every call is
    where a cancelled import stops (Esc: `cancelled` is raised)."""

    def __init__(self, app: App, index: int, path: str, worker: Any, cancelled: type[Exception]):
        self.app, self.index, self.path, self.worker, self.cancelled = app, index, path, worker, cancelled
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int, unit: str = "bytes") -> None:
        self._check()
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S or done >= total:
            self.last = now
            self.app.post_message(ImportProgress(self.index, done, total, now - self.started, unit))

    def stage(self, name: str) -> None:
        self._check()
        # (a stage's line names it alone: the amounts read are not shown once the file is read)
        self.app.post_message(ImportProgress(self.index, 0, 0, time.monotonic() - self.started, stage=name))

    def _check(self) -> None:
        if self.worker.is_cancelled:
            raise self.cancelled(self.path)


@dataclass
class LoadCancelled(Message):
    index: int


@dataclass
class ChooseTrace(Message):
    """Trace `index` is a directory of traces that are not one run: the user picks one."""

    index: int
    files: list
    why: str


def progress_line(path: str, done: int, total: int, elapsed_s: float, unit: str = "bytes",
                  stage: str | None = None) -> str:
    """`importing trace.json.gz: 412 MB of 1.2 GB (34%) · 3.1 s · Esc cancels`; a reader that
    counts stages (nsys): `importing run.sqlite: stage 2 of 4 (50%) · …`; once the file is read,
    the stage the import is in: `importing trace.json.gz: joining kernels to launches and ranges · …`."""
    if stage is not None:
        amount = stage
    else:
        pct = f" ({100 * done / total:.0f}%)" if total > 0 else ""
        amount = (f"{fmt_bytes(done)} of {fmt_bytes(total)}" if unit == "bytes" else f"stage {done} of {total}") + pct
    return f"importing {Path(path).name}: {amount} · {elapsed_s:.1f} s · Esc cancels"


class LoadingScreen(Screen):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="loading.cancel")]

    def __init__(self, paths: list[str]) -> None:
        super().__init__()
        self.paths = paths
        self._progress: tuple | None = None  # the last report, with the monotonic time its import started

    def compose(self) -> ComposeResult:
        with Middle():
            with Center():
                yield Static(safe_text("Loading " + ", ".join(self.paths) + " …"), id="loading-text")
            with Center():
                yield Static("", id="loading-progress")
            # No animated LoadingIndicator: redrawing it 60 times a second holds the GIL the loading
            # thread needs (a 1M-kernel trace loaded noticeably slower).
        yield Footer()

    def on_mount(self) -> None:
        # the elapsed time goes on once a second between reports: a stage after the read reports
        # once and lasts seconds (at 1M kernels), where a clock that stops would look like a hang
        self._clock = self.set_interval(1.0, self._draw_progress)

    def on_screen_suspend(self) -> None:
        self._clock.pause()  # (the screen stays in its mode's stack once the trace is shown)

    def on_screen_resume(self) -> None:
        self._clock.resume()

    def show_progress(self, path: str, done: int, total: int, elapsed_s: float, unit: str = "bytes",
                      stage: str | None = None) -> None:
        self._progress = (path, done, total, time.monotonic() - elapsed_s, unit, stage)
        self._draw_progress()

    def _draw_progress(self) -> None:
        if self._progress is None:
            return
        path, done, total, started, unit, stage = self._progress
        self.query_one("#loading-progress", Static).update(
            safe_text(progress_line(path, done, total, time.monotonic() - started, unit, stage)))

    def action_cancel(self) -> None:
        self.app.cancel_load()


def _lazy_screen(module: str, cls: str, *analyses: Any) -> Screen:
    """Screens 4-6, imported when first shown (their charts' libraries stay out of the start)."""
    return getattr(importlib.import_module(f"tui.screens.{module}"), cls)(*analyses)


class RooftopCommands(Provider):
    """The command palette (ctrl+p): every screen and the app's actions."""

    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: RooftopApp = self.app  # type: ignore[assignment]
        out = [(f"Go to {title} ({key})", (lambda m=mode: app.action_show_screen(m)), f"Switch to screen {key}")
               for mode, key, title in SCREENS if mode != "compare" or len(app.analyses) > 1]
        out += [("Export table to CSV (e)", app.action_export, "Write the current table to ./rooftop-*.csv"),
                ("Help: keys (?)", app.action_help, "List every key"),
                ("Quit (q)", app.action_quit, "Leave rooftop")]
        return out

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


class RooftopApp(App[int]):
    CSS_PATH = "rooftop.tcss"
    TITLE = "rooftop"
    COMMANDS = App.COMMANDS | {RooftopCommands}
    BINDINGS = [
        *(Binding(key, f"show_screen('{mode}')", title, id=f"screen.{mode}", show=mode not in KEYLINE_HIDDEN)
          for mode, key, title in SCREENS),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("w", "warnings", "Warnings", id="app.warnings", show=False),
        Binding("e", "export", "Export CSV", id="app.export"),
        Binding("t", "timeline_here", "Step timeline", id="app.timeline_here", show=False),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(self, paths: list[str], peaks_override: Any = None, *, formats: dict[str, str] | None = None,
                 **analysis_options: Any) -> None:
        super().__init__()
        self.paths = [str(p) for p in paths]
        # path -> format, for a path the front door sniffed already (collectors.open.sniff)
        self.formats = {str(p): f for p, f in (formats or {}).items()}
        self.peaks_override = peaks_override  # the user's --gpu/--peaks (rooftop.hardware.gpus.Override)
        self.analysis_options = analysis_options  # `--model` and the workload flags, for `analyze`
        self.analyses: list[Any] = []
        self.errors: list[str] = []
        self._results: dict[int, Any] = {}
        self._load_workers: dict[Worker, int] = {}
        self._overview: Screen | None = None  # the Overview painted from a Preview, before the load
        self._pending_mode: str | None = None  # a screen asked for while loading, opened once loaded
        # One trace: its footer preview (and stored summary) is read from now, beside Textual's own
        # start-up, not from the first mount (sooner on screen); the load worker takes it.
        self._early_preview: EarlyPreview | None = None
        if len(self.paths) == 1:
            thread = threading.Thread(target=self._read_preview, args=(self.paths[0],), daemon=True,
                                      name="rooftop-preview")
            self._early_preview = EarlyPreview(thread, [], threading.Event())
            thread.start()

    def _read_preview(self, path: str) -> None:
        early = self._early_preview

        def summary_seen(found: Any) -> None:
            if found is not None:
                early.got.append(found)
            early.summary_seen.set()

        try:
            from tui.loader import preview
            from tui.screens import overview  # noqa: F401  (imported here, while Textual starts)

            p = preview(path, self._default_options(), summary_seen)
            if not early.got:
                early.got.append(p)
        except Exception as exc:  # the load worker reads the file again and reports it
            early.got.append(exc)
        finally:
            early.summary_seen.set()

    def _stored_preview(self) -> Any:
        """The early preview if it came from a current stored summary (waited for: the thread has
        the GIL to itself meanwhile), else None."""
        early = self._early_preview
        if early is None or not early.summary_seen.wait(SUMMARY_WAIT_S):
            return None
        p = early.got[0] if early.got else None
        return p if getattr(p, "stored", None) is not None else None

    def on_mount(self) -> None:
        from tui.keymap import load_keymap

        keymap, problems = load_keymap()
        if keymap:
            self.set_keymap(keymap)
        for line in problems:
            self.notify(sanitize(line), title="keymap", severity="warning", timeout=8, markup=False)
        stored = self._stored_preview()
        if stored is not None:  # every number of the Overview at once: no loading screen before it
            self._show_preview(stored)
        else:
            self.push_screen(LoadingScreen(self.paths))
        self._load_workers = {self._load(i, path): i for i, path in enumerate(self.paths)}

    @work(thread=True, exit_on_error=False, group="load", description="loading trace")
    def _load(self, index: int, path: str) -> None:
        from tui.loader import ImportCancelled, open_analysis, preview

        # One trace: paint its identity from the footer at once (and, from a current stored summary,
        # the Overview's numbers), then read the events. (Two go to Compare, which needs both
        # loaded; the loading screen stays until then.)
        p = None
        if len(self.paths) == 1:
            early, self._early_preview = self._early_preview, None
            if early is not None and early.thread.ident is not None and path == self.paths[0]:
                early.thread.join()
                p = early.got[0] if early.got and not isinstance(early.got[0], Exception) else None
            else:
                p = preview(path, self._default_options())
        if p is not None:
            if self._overview is None:  # (else shown already, from the first mount)
                self.post_message(Previewed(p))
            p.shown.wait(timeout=PAINT_WAIT_S)
        # pandas and pyarrow come with these, and with the load: after the first paint (above), so
        # that importing them does not hold the GIL the paint needs.
        from rooftop.trace import NotOneRun, TraceError

        progress = LoadReporter(self, index, path, get_current_worker(), ImportCancelled)
        try:
            analysis = open_analysis(path, self.peaks_override, progress, fmt=self.formats.get(path),
                                     **self.analysis_options)
        except ImportCancelled:
            self.post_message(LoadCancelled(index))
            return
        except NotOneRun as exc:
            self.post_message(ChooseTrace(index, exc.files, exc.why))
            return
        except TraceError as exc:
            self.post_message(LoadFailed(index, str(exc)))
            return
        if progress.worker.is_cancelled:
            self.post_message(LoadCancelled(index))
            return
        if len(analysis.timed) >= FREEZE_GC_FROM and speedups.on("GC_FREEZE"):
            # The interpreter now holds ~110k long-lived objects (modules, classes, the trace). A full
            # cyclic collection walks them all, as long as a key may take, and one came every ~10
            # keys in a 1M-row table. Collected once here, then frozen out of later collections
            # (gc.freeze). Only big traces: objects frozen can no longer be reclaimed as part of a cycle.
            gc.collect()
            gc.freeze()
        self.post_message(Loaded(index, analysis))

    def _default_options(self) -> bool:
        """Whether the analysis is asked with the defaults: only then can a stored summary answer."""
        from collectors.open import summary_answers

        return summary_answers(override=self.peaks_override, **self.analysis_options)

    def cancel_load(self) -> None:
        """Esc while importing: stop every load (the importer stops at its next chunk) and leave."""
        for worker in self._load_workers:
            worker.cancel()
        self.notify("Cancelling the import…", timeout=3)

    @on(ImportProgress)
    def _progress(self, message: ImportProgress) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.show_progress(self.paths[message.index], message.done, message.total, message.elapsed_s,
                                      message.unit, message.stage)

    @on(ChooseTrace)
    def _choose(self, message: ChooseTrace) -> None:
        from tui.screens.chooser import ChooserScreen

        directory = self.paths[message.index]

        def chosen(path: str | None) -> None:
            if path is None:
                self._results[message.index] = None
                self.errors.append(f"{directory}: no trace chosen")
                self._maybe_ready()
                return
            self.paths[message.index] = path
            worker = self._load(message.index, path)
            self._load_workers[worker] = message.index

        self.push_screen(ChooserScreen(directory, message.files, message.why), chosen)

    @on(LoadCancelled)
    def _cancelled(self, message: LoadCancelled) -> None:
        self.errors.append(f"{self.paths[message.index]}: import cancelled")
        self.exit(1)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # An analysis bug is not the user's file's fault, but it must still be one line, not a crash.
        if event.worker.group == "load" and event.state == WorkerState.ERROR:
            index = self._load_workers[event.worker]
            err = event.worker.error
            self.post_message(LoadFailed(index, f"{self.paths[index]}: cannot analyse ({type(err).__name__}: {err})"))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        self._results[message.index] = message.analysis
        self._maybe_ready()

    @on(Previewed)
    def _previewed(self, message: Previewed) -> None:
        self._show_preview(message.preview)

    def _show_preview(self, preview: Any) -> None:
        from tui.screens.overview import OverviewScreen

        screen = self._overview = OverviewScreen(preview)
        self.add_mode("overview", lambda: screen)
        self.switch_mode("overview")

    @on(LoadFailed)
    def _failed(self, message: LoadFailed) -> None:
        self._results[message.index] = None
        line = sanitize(" ".join(message.error.split()))
        self.errors.append(line)
        self.notify(line, title="cannot open", severity="error", timeout=10, markup=False)
        self._maybe_ready()

    def _maybe_ready(self) -> None:
        if len(self._results) < len(self.paths):
            return
        self.analyses = [self._results[i] for i in sorted(self._results) if self._results[i] is not None]
        if not self.analyses:
            self.exit(2)
            return
        a = self.analyses[0]
        from tui.screens.kernels import KernelsScreen
        from tui.screens.overview import OverviewScreen
        from tui.screens.steps import StepsScreen

        if self._overview is not None:
            self._overview.attach(a)
        else:
            self.add_mode("overview", lambda: OverviewScreen(a))
        self.add_mode("steps", lambda: StepsScreen(a))
        self.add_mode("kernels", lambda: KernelsScreen(a))
        self.add_mode("roofline", lambda: _lazy_screen("roofline", "RooflineScreen", a))
        self.add_mode("stalls", lambda: _lazy_screen("stalls", "StallsScreen", a))
        self.add_mode("timeline", lambda: _lazy_screen("timeline", "TimelineScreen", a))
        if len(self.analyses) > 1:
            b = self.analyses[1]
            self.add_mode("compare", lambda: _lazy_screen("compare", "CompareScreen", a, b))
        mode, self._pending_mode = self._pending_mode or "overview", None
        if self.current_mode != mode:
            self.switch_mode(mode)

    # --- actions ----------------------------------------------------------------------------
    def action_show_screen(self, mode: str) -> None:
        if not self.analyses and self._overview is not None and mode != "compare":
            # The Overview is up, the rows are still loading: go there as soon as they are in.
            self._pending_mode = mode if mode != self.current_mode else None
            if self._pending_mode:
                title = next(t for m, _, t in SCREENS if m == mode)
                self.notify(f"Still loading: {title} opens when the trace is in.", timeout=3)
        elif not self.analyses:
            self.notify("Still loading…", timeout=3)
        elif mode == "compare" and len(self.analyses) < 2:
            self.notify("Compare needs two traces: rooftop open A.parquet B.parquet", timeout=5)
        elif self.current_mode != mode:
            self.switch_mode(mode)

    def action_timeline_here(self) -> None:
        from tui.screens.timeline import open_for_screen

        if not self.analyses or not open_for_screen(self, self.screen):
            self.notify("t opens a step's timeline: pick a step in Steps (2); 7 shows the whole run.", timeout=4)

    def action_warnings(self) -> None:
        from tui.screens.warnings import WarningsScreen

        if not self.analyses:
            self.notify("Still loading…", timeout=3)
        elif not isinstance(self.screen, WarningsScreen):
            self.push_screen(WarningsScreen(self.analyses[0], self.screen.crumbs[:1] if hasattr(self.screen, "crumbs") else None))

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_export(self) -> None:
        frame = getattr(self.screen, "export_frame", lambda: None)()
        if frame is None:
            self.notify("Nothing to export on this screen.", timeout=4)
            return
        frame = _whole_names(frame, self.screen)
        name = getattr(self.screen, "EXPORT_NAME", "table")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path.cwd() / f"rooftop-{name}-{stamp}.csv"
        n = 1
        while path.exists():  # two exports in one second must not overwrite each other
            n += 1
            path = Path.cwd() / f"rooftop-{name}-{stamp}-{n}.csv"
        try:
            write_csv(path, frame)  # atomic, spreadsheet-safe (no formula cells), printable
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.notify(f"Wrote {len(frame)} rows to {path}", title="exported", markup=False)


def _whole_names(frame, screen):
    """A CSV carries whole kernel names, never the display names (cut with `…`) the table shows."""
    from rooftop.trace.names import whole_names, with_whole_names

    mapping: dict[str, str] = {}
    for analysis in (getattr(screen, "a", None), getattr(screen, "b", None), getattr(screen, "analysis", None)):
        timed = getattr(analysis, "timed", None)
        if timed is not None and {"name", "short_name"} <= set(timed.columns):
            mapping.update(whole_names(timed["name"], timed["short_name"]))
    return with_whole_names(frame, mapping)


def run_app(paths: list[str], peaks_override: Any = None, *, formats: dict[str, str] | None = None,
            **analysis_options: Any) -> int:
    """Run the TUI on one trace (or two, for Compare); 2 when nothing could be opened. `formats`:
    path -> format, for paths the caller sniffed already (collectors.open.sniff)."""
    if len(paths) > 2:
        print(f"rooftop: error: rooftop opens one trace, or two to compare; got {len(paths)}", file=sys.stderr)
        return 2
    app = RooftopApp(paths, peaks_override, formats=formats, **analysis_options)
    code = app.run()
    if app.errors and not app.analyses:
        for line in app.errors:
            print(f"rooftop: error: {line}", file=sys.stderr)
        return int(code or 2)
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(run_app(sys.argv[1:]))
