"""The rooftop TUI: load traces in thread workers, then screens 1-6 switched by number keys.

Each top-level screen is a Textual mode (its own stack), so drill-downs are pushed inside it and
`Esc`/`Backspace` pops back; the number keys live here, on the app, with ids for remapping.
"""
from __future__ import annotations

import importlib
import sys
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
from textual.worker import Worker, WorkerState

from rooftop.text import write_csv
from rooftop.trace import TraceError

from .widgets.breadcrumb import RooftopScreen

from .widgets.text import safe_text, sanitize

SCREENS = [  # (mode, number key, title)
    ("overview", "1", "Overview"), ("steps", "2", "Steps"), ("kernels", "3", "Kernels"),
    ("roofline", "4", "Roofline"), ("stalls", "5", "Stalls"), ("compare", "6", "Compare"),
]


# The longest the load waits for the Overview's first paint from the footer (see `Preview.shown`).
PAINT_WAIT_S = 1.0


class Loaded(Message):
    def __init__(self, index: int, analysis: Any) -> None:
        super().__init__()
        self.index, self.analysis = index, analysis


class Previewed(Message):
    """The footer of a big rooftop trace is read: the Overview can show what ran while it loads."""

    def __init__(self, preview: Any) -> None:
        super().__init__()
        self.preview = preview


class LoadFailed(Message):
    def __init__(self, index: int, error: str) -> None:
        super().__init__()
        self.index, self.error = index, error


class LoadingScreen(Screen):
    def __init__(self, paths: list[str]) -> None:
        super().__init__()
        self.paths = paths

    def compose(self) -> ComposeResult:
        with Middle():
            with Center():
                yield Static(safe_text("Loading " + ", ".join(self.paths) + " …"), id="loading-text")
            # No animated LoadingIndicator: redrawing it 60 times a second holds the GIL the loading
            # thread needs (a 1M-kernel trace loaded 0.3 s slower).
        yield Footer()


class PlaceholderScreen(RooftopScreen):
    """Stands in for a screen whose module is not there yet."""

    def __init__(self, analysis: Any, title: str, why: str) -> None:
        super().__init__(analysis)
        self.crumbs[-1] = title
        self.why = why

    def compose_body(self) -> ComposeResult:
        yield Static(self.why, id="placeholder", classes="muted")


def _colleague_screen(module: str, cls: str, title: str, *analyses: Any) -> Screen:
    """Screens 4-6 are written elsewhere: import lazily, show a placeholder while they are missing."""
    name = f"tui.screens.{module}"
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return PlaceholderScreen(analyses[0], title, f"The {title} screen is not available in this build.")
    return getattr(mod, cls)(*analyses)


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
        *(Binding(key, f"show_screen('{mode}')", title, id=f"screen.{mode}", show=mode != "compare")
          for mode, key, title in SCREENS),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("e", "export", "Export CSV", id="app.export"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(self, paths: list[str]) -> None:
        super().__init__()
        self.paths = [str(p) for p in paths]
        self.analyses: list[Any] = []
        self.errors: list[str] = []
        self._results: dict[int, Any] = {}
        self._load_workers: dict[Worker, int] = {}
        self._overview: Screen | None = None  # the Overview painted from a Preview, before the load
        self._pending_mode: str | None = None  # a screen asked for while loading, opened once loaded

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen(self.paths))
        self._load_workers = {self._load(i, path): i for i, path in enumerate(self.paths)}

    @work(thread=True, exit_on_error=False, group="load", description="loading trace")
    def _load(self, index: int, path: str) -> None:
        from .loader import open_analysis, preview

        # One trace: paint its identity from the footer at once, then read the events. (Two go to
        # Compare, which needs both loaded; the loading screen stays until then.)
        if len(self.paths) == 1 and (p := preview(path)) is not None:
            self.post_message(Previewed(p))
            p.shown.wait(timeout=PAINT_WAIT_S)
        try:
            analysis = open_analysis(path)
        except TraceError as exc:
            self.post_message(LoadFailed(index, str(exc)))
            return
        self.post_message(Loaded(index, analysis))

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
        from .screens.overview import OverviewScreen

        screen = self._overview = OverviewScreen(message.preview)
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
        from .screens.kernels import KernelsScreen
        from .screens.overview import OverviewScreen
        from .screens.steps import StepsScreen

        if self._overview is not None:
            self._overview.attach(a)
        else:
            self.add_mode("overview", lambda: OverviewScreen(a))
        self.add_mode("steps", lambda: StepsScreen(a))
        self.add_mode("kernels", lambda: KernelsScreen(a))
        self.add_mode("roofline", lambda: _colleague_screen("roofline", "RooflineScreen", "Roofline", a))
        self.add_mode("stalls", lambda: _colleague_screen("stalls", "StallsScreen", "Stalls", a))
        if len(self.analyses) > 1:
            b = self.analyses[1]
            self.add_mode("compare", lambda: _colleague_screen("compare", "CompareScreen", "Compare", a, b))
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

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_export(self) -> None:
        frame = getattr(self.screen, "export_frame", lambda: None)()
        if frame is None:
            self.notify("Nothing to export on this screen.", timeout=4)
            return
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


def run_app(paths: list[str]) -> int:
    """Run the TUI on one trace (or two, for Compare); 2 when nothing could be opened."""
    app = RooftopApp(paths)
    code = app.run()
    if app.errors and not app.analyses:
        for line in app.errors:
            print(f"rooftop: error: {line}", file=sys.stderr)
        return 2
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(run_app(sys.argv[1:]))
