"""Overview (screen 1): what ran, how each phase did against the roofs, what looks wrong."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from rooftop.present.columns import GAP, PHASES, RANK_PHASES, RANK_STEPS
from rooftop.present.format import fmt_bounded, fmt_ns, fmt_pct, fmt_rate, fmt_tera, is_unknown
from rooftop.present.overview import OverviewData
from rooftop.present.render import is_integrity

from tui.loader import Preview, overview_data, warm_overview_rest
from tui.widgets.breadcrumb import MODELED, RooftopScreen
from tui.widgets.text import safe_text, sanitize
from tui.workers import HEAVY, post_if_current

if TYPE_CHECKING:
    import pandas as pd

# Nothing here imports pandas at module level: a trace with a current stored summary is painted
# from the summary's records (lists of dicts) before pandas is imported. What the screen shows is
# one shape, `OverviewData` (rooftop/present/overview.py), whether it came from the stored summary
# or from the Analysis: every table below reads its records.

_SEVERITY_MARK = {"bad": "✖", "warn": "▲", "info": "•"}


class StyledStatic(Static):
    """A Static whose Rich styles come from the stylesheet (no colours in Python)."""

    COMPONENT_CLASSES = {
        "phase--prefill", "phase--decode", "bound--memory", "bound--compute", "bound--latency",
        "finding--bad", "finding--warn", "finding--info", "muted",
    }

    def style_of(self, name: str):
        # An unknown bound (no peaks: a CPU trace) or an unusual phase name has no class: plain text.
        if name not in self.COMPONENT_CLASSES:
            return ""
        return self.get_component_rich_style(name)


class PhaseTable(StyledStatic):
    """Per-phase figures as a Rich table: time, tokens/s, TFLOP/s, TB/s, MFU, MBU, bound."""

    def __init__(self, phases: list[dict], **kwargs) -> None:
        super().__init__(**kwargs)
        self.phases = phases

    def on_mount(self) -> None:
        table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
        _add_columns(table, PHASES.pick("phase", "span_ns", "tokens_per_s", "tflops", "tbps", "mfu", "mbu", "bound"))
        for r in self.phases:
            phase, bound = r.get("phase"), r.get("bound")
            table.add_row(
                safe_text(phase, self.style_of(f"phase--{phase}")), fmt_ns(r.get("span_ns")),
                fmt_rate(r.get("tokens_per_s"), "").strip(),
                # the report's formatter: unknown as a dash, lower bounds with ">="
                fmt_bounded(r.get("tflops"), r.get("mfu_status"), lambda v: fmt_tera(v, "TFLOP/s"), r.get("flops_coverage")),
                fmt_bounded(r.get("tbps"), r.get("mbu_status"), lambda v: fmt_tera(v, "TB/s"), r.get("bytes_coverage")),
                fmt_bounded(r.get("mfu"), r.get("mfu_status"), None, r.get("flops_coverage")),
                fmt_bounded(r.get("mbu"), r.get("mbu_status"), None, r.get("bytes_coverage")),
                safe_text("—" if is_unknown(bound) else bound, self.style_of(f"bound--{bound}")),
            )
        self.table = table  # kept for tests and export
        self.update(table)


def sources_line(v: OverviewData) -> str:
    """Where the bytes and the peaks came from, e.g. `bytes: model (no counters) · peaks: datasheet H100 SXM (...)`."""
    srcs = sorted({s for r in v.phases if not is_unknown(s := r.get("bytes_source"))})
    counters = v.counters
    if not srcs:
        bytes_part = "bytes: unknown"
    else:
        src = srcs[0] if len(srcs) == 1 else "mixed"
        bytes_part = f"bytes: {src}" + ("" if counters else " (no counters)")
    p = v.peaks
    if p.source is None:
        peaks_part = f"peaks: unknown ({p.reason or 'device not recognised'})"
    else:
        gpu = f" {p.gpu}" if p.gpu is not None else ""
        peaks_part = (f"peaks: {p.source}{gpu} ({fmt_rate(p.flops, 'FLOP/s')} bf16, {fmt_rate(p.bw)})"
                      f" · MBU/MFU columns use the {p.source} peaks")
    return f"{bytes_part} · {peaks_part}"


def ceilings_table(phases: list[dict]) -> Table:
    """Per phase, MBU and MFU against both ceilings (decode: MBU 79.8% of datasheet, 99.8% of measured)."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    pairs = PHASES.pick("mbu_datasheet", "mbu_measured", "mfu_datasheet", "mfu_measured")
    table.add_column(PHASES["phase"].label, justify="left", no_wrap=True)
    for i, c in enumerate(pairs):  # `MBU of datasheet`, `of measured`: each pair reads as one
        table.add_column(c.label if i % 2 == 0 else c.label.split(" ", 1)[1], justify="right", no_wrap=True)
    for r in phases:
        table.add_row(safe_text(r.get("phase")), *(c.format(r.get(c.key)) for c in pairs))
    return table


GAP_PARTS = GAP.pick("ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns", "edge_idle_ns", "copies_ns",
                     "unmodeled_ns")


def _add_columns(table: Table, columns) -> None:
    """Registry columns as a Rich table's columns: text on the left, numbers on the right."""
    for c in columns:
        table.add_column(c.label, justify="left" if c.kind == "text" else "right", no_wrap=True)


def gap_table(records: list[dict]) -> Table:
    """Measured time = ideal + slow kernels + extra bytes + launch gaps + unmodeled, one column per phase
    (time and share of the measured time), so the sum reads top to bottom at any width."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("", no_wrap=True)
    for r in records:
        table.add_column(safe_text(r.get("phase")), justify="right", no_wrap=True)
    table.add_row(GAP["measured_ns"].label, *(fmt_ns(r.get("measured_ns")) for r in records))
    for i, part in enumerate(GAP_PARTS):
        cells = []
        for r in records:
            value, total = r.get(part.key), r.get("measured_ns")
            share = value / total if not is_unknown(value) and not is_unknown(total) and total > 0 else None
            cells.append(f"{fmt_ns(value)} {fmt_pct(share, 0):>4}")
        table.add_row(f"{'=' if i == 0 else '+'} {part.label}", *cells)
    if any(r.get("basis_reason") for r in records):
        table.add_row("basis", *(safe_text("unknown: " + r["basis_reason"]) if r.get("basis_reason")
                                 else safe_text(r.get("basis") or "—") for r in records))
    return table


def comm_table(devices: list[dict]) -> Table:
    """Per rank and device: communication kernel time, the part compute hid, the exposed rest."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for label in ("rank", "device", "comm", "overlapped", "exposed", "exposed %", "of time"):
        table.add_column(label, justify="right", no_wrap=True)
    for r in devices:
        table.add_row("—" if r["rank"] < 0 else str(int(r["rank"])), "—" if r["device"] < 0 else str(int(r["device"])),
                      fmt_ns(r["comm_ns"]), fmt_ns(r["overlapped_ns"]), fmt_ns(r["exposed_ns"]),
                      fmt_pct(r["exposed_frac"], 0), fmt_pct(r["exposed_share"], 0))
    return table


def rank_phase_table(rank_phases: list[dict]) -> Table:
    """Per rank and phase: time, MBU, MFU, TB/s."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    _add_columns(table, RANK_PHASES.pick("rank", "phase", "span_ns", "mbu", "mfu", "tbps"))
    for r in rank_phases:
        table.add_row(str(r["rank"]), safe_text(r.get("phase")), fmt_ns(r.get("span_ns")), fmt_pct(r.get("mbu")),
                      fmt_pct(r.get("mfu")), fmt_tera(r.get("tbps"), "TB/s"))
    return table


WORST_STEPS = 5


def spread_table(rank_steps: list[dict], n: int = WORST_STEPS) -> Table:
    """The steps whose time differs most between ranks, with the slowest (straggler) rank."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    _add_columns(table, RANK_STEPS.pick("phase", "step", "min_ns", "median_ns", "max_ns", "spread", "straggler"))
    # widest first, unknown last, ties in their order (pandas' stable descending sort)
    worst = sorted(rank_steps, key=lambda r: (is_unknown(r.get("spread")), -(r.get("spread") or 0)))[:n]
    for r in worst:
        table.add_row(safe_text(r.get("phase")), str(r["step"]), fmt_ns(r.get("min_ns")), fmt_ns(r.get("median_ns")),
                      fmt_ns(r.get("max_ns")), fmt_pct(r.get("spread")), f"rank {r['straggler']}")
    return table


class OverviewScreen(RooftopScreen):
    BREADCRUMB = "Overview"
    EXPORT_NAME = "overview"

    def export_frame(self) -> pd.DataFrame | None:
        return None if isinstance(self.analysis, Preview) else self.analysis.phases  # (a table: the Analysis')

    @dataclass
    class PhasesReady(Message):
        """The Overview's worker computed the phase table."""

        view: OverviewData

    @dataclass
    class RestReady(Message):
        """The Overview's worker computed findings, gap and ranks."""

        view: OverviewData

    @dataclass
    class Warmed(Message):
        """The Analysis computed behind an Overview painted from the stored summary."""

        view: OverviewData

    @dataclass
    class StepsLoaded(Message):
        """The stored summary's per-step table, parsed after the first paint."""

        steps: pd.DataFrame

    # What the screen shows below the identity, in one shape (rooftop.present.overview): from the
    # trace's stored summary while the rows load, kept until the Analysis has computed the same
    # numbers; else from the Analysis, as far as its workers have computed it.
    view: OverviewData = OverviewData()

    @property
    def stored(self) -> OverviewData | None:
        """The view while it is the stored summary's, else None."""
        return self.view if self.view.version is not None else None

    def compose_body(self) -> ComposeResult:
        a = self.analysis
        ident = a.identity
        v = self.view = overview_data(a)
        self._phases_shown = v.phases is not None
        with VerticalScroll(id="overview-body"):
            if ident.get("modeled"):
                yield Static(MODELED, id="modeled-badge", classes="modeled-badge")
            yield Static(self._identity_text(ident), id="identity")
            yield Static(self._warnings_line(), id="warnings-count")
            # A big trace paints in stages, each as soon as its worker has it (identity comes with
            # the load); a small one was analysed whole by the loader, and a current stored summary
            # has every number: both paint at once.
            if v.phases is not None:
                yield from self._phases(v)
                if v.complete:
                    yield from self._rest(v)
            pending = self._pending_text()
            if pending is not None:
                yield Static(pending, id="overview-pending", classes="muted")

    def _pending_text(self) -> str | None:
        """What is still coming: the rows (only the footer is read: the app calls `attach` when
        they are in), or the rest of the analysis; None when nothing is."""
        a, v = self.analysis, self.view
        if isinstance(a, Preview):
            if v.version is not None:  # a current stored summary: every number at once, the rows behind it
                return f"from the stored summary (analysis v{v.version}) · loading {a.rows:,} events for the other screens …"
            return f"loading {a.rows:,} events …"
        return None if v.complete else "computing the phase table, findings, gap to ideal, step curve …"

    def attach(self, analysis) -> None:
        """The loaded Analysis, replacing the Preview this screen was painted from: compute the rest
        (painted from a stored summary: compute the same numbers behind it, for the other screens)."""
        self.analysis = analysis
        if self.stored is not None:
            for pending in self.query("#overview-pending"):
                pending.remove()
            self._warm_behind()
        elif self.is_mounted:  # else `on_mount`, still to come, finds the Analysis and starts the same
            self.view = overview_data(analysis)  # (its warnings: the file's own until the rest is in)
            self._refresh_warnings()
            self._start_rest()

    @work(thread=True, exclusive=True, exit_on_error=False, group="overview", description="overview")
    def _warm_behind(self) -> None:
        with HEAVY:
            warm_overview_rest(self.analysis)
            if post_if_current(self, self.Warmed(overview_data(self.analysis))):
                self.analysis.groups(by="short_name")  # the Kernels screen's table, ready before `3` is pressed

    @work(thread=True, exit_on_error=False, group="overview-steps", description="stored steps")
    def _load_steps(self) -> None:
        from tui.widgets import steps_plot  # noqa: F401  (plotext: imported here, off the UI thread)

        try:
            steps = self.view.load_steps()
        except (ValueError, AttributeError):
            return  # damaged stored steps: the curve comes with the analysis' own once computed
        post_if_current(self, self.StepsLoaded(steps))

    @on(StepsLoaded)
    async def _show_loaded_steps(self, message: StepsLoaded) -> None:
        if not self.query("#step-curve"):
            pending = self.query("#overview-pending")
            await self.query_one("#overview-body", VerticalScroll).mount(
                _steps_plot(message.steps), before=pending.first() if pending else None)

    @on(Warmed)
    async def _warmed(self, message: Warmed) -> None:
        self.view = message.view  # the Analysis' (the same numbers): the warnings line reads them
        self._refresh_warnings()
        if not self.query("#step-curve"):
            await self.query_one("#overview-body", VerticalScroll).mount(_steps_plot(self.view.steps))

    def on_mount(self) -> None:
        self._refresh_warnings()
        if self.view.steps_to_load:
            self.call_after_refresh(self._load_steps)  # the step curve, after the first paint
        if self.stored is not None and not isinstance(self.analysis, Preview):
            self._warm_behind()  # the rows came before the first mount
        elif isinstance(self.analysis, Preview):
            self.call_after_refresh(self.analysis.shown.set)  # the load thread starts now
        elif not self.view.complete:
            # Start after the first paint has reached the terminal: pandas in a thread holds the GIL
            # for long stretches, and would delay the paint (and a first key press) by up to a second.
            self.call_after_refresh(self.set_timer, 0.05, self._start_rest)

    def _start_rest(self) -> None:
        if not self._phases_shown:  # painted from a Preview, the line still says "loading"
            for pending in self.query("#overview-pending"):
                pending.update("computing the phase table, findings, gap to ideal, step curve …")
        self._compute_rest()

    @work(thread=True, exclusive=True, exit_on_error=False, group="overview", description="overview")
    def _compute_rest(self) -> None:
        a = self.analysis
        with HEAVY:
            if not self._phases_shown:
                a.phases
                if not post_if_current(self, self.PhasesReady(overview_data(a))):
                    return
            warm_overview_rest(a)
            if not post_if_current(self, self.RestReady(overview_data(a))):
                return
            a.groups(by="short_name")  # the Kernels screen's table, ready before `3` is pressed

    @on(PhasesReady)
    async def _show_phases(self, message: PhasesReady) -> None:
        self.view = message.view
        pending = self.query_one("#overview-pending", Static)
        await self.query_one("#overview-body", VerticalScroll).mount_all(list(self._phases(message.view)),
                                                                         before=pending)
        pending.update("computing findings, gap to ideal, step curve …")
        self._phases_shown = True

    def _warnings_line(self) -> Text:
        """`▲ 3 warnings (w: list)` once known; the file's own warnings before the analysis' are in."""
        items = self.view.warnings
        if items is None:  # (only the footer is read)
            return Text("")
        if not items:
            return Text("no warnings (w: list)", "dim")
        t = Text(f"▲ {len(items)} warning{'s' if len(items) > 1 else ''} (w: list)")
        # what the file lost (truncated, rows dropped) is said here, before any number made from it
        for msg in [m for _, m in items if is_integrity(m)][:2]:
            t.append("\n  the file: ")
            t.append_text(safe_text(str(msg)))
        return t

    def _refresh_warnings(self) -> None:
        line = self.query_one("#warnings-count", Static)
        line.update(self._warnings_line())
        line.set_class(bool(self.view.warnings), "has-warnings")

    @on(RestReady)
    async def _show_rest(self, message: RestReady) -> None:
        self.view = message.view
        self._refresh_warnings()
        body = self.query_one("#overview-body", VerticalScroll)
        await body.mount_all(list(self._rest(message.view)))
        await self.query_one("#overview-pending").remove()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # An analysis bug must not take the screen down: one line where the missing part would be.
        if event.worker.group == "overview" and event.state == WorkerState.ERROR:
            err = event.worker.error
            for pending in self.query("#overview-pending"):
                pending.update(safe_text(f"cannot compute the rest of the overview ({type(err).__name__}: {err})"))

    def _phases(self, v: OverviewData):
        """The phase table, the ceilings, where bytes and peaks came from."""
        yield PhaseTable(v.phases, id="phases")
        if v.model_lines:  # `--model`: the model-level headline
            yield Static(Text("\n".join(v.model_lines)), id="model-level")
        if v.peaks.both_ceilings and len(v.phases):
            yield Static(ceilings_table(v.phases), id="ceilings")
        yield Static(safe_text(sources_line(v)), id="sources", classes="muted")  # may quote the device name

    def _rest(self, v: OverviewData):
        """The widgets below the sources line: rank note, findings, gap, ranks, step curve."""
        ranks = v.ranks
        if len(ranks) > 1 and v.rank_phases is not None:
            yield Static(f"phase table: rank {ranks[0]} of {len(ranks)}; every rank below", classes="muted")
        yield Static("Findings", classes="section-title")
        yield Findings(v.findings, id="findings")
        if v.gap:
            yield Static("Gap to ideal (where the measured time goes)", classes="section-title")
            yield Static(gap_table(v.gap), id="gap")
        if v.comm:
            yield Static("Communication (exposed: not hidden by compute on other streams)", classes="section-title")
            yield Static(comm_table(v.comm), id="comm")
        if len(ranks) > 1 and v.rank_phases is not None:
            yield Static(f"Ranks ({len(ranks)})", classes="section-title")
            yield Static(rank_phase_table(v.rank_phases), id="rank-phases")
            if v.rank_steps:
                yield Static("Rank-to-rank spread of step time (worst steps)", classes="section-title")
                yield Static(spread_table(v.rank_steps), id="rank-spread")
        if v.steps is not None:  # (from a stored summary: parsed after the first paint)
            yield _steps_plot(v.steps)

    @staticmethod
    def _identity_text(ident: dict) -> Text:
        text = Text()
        for label in ("model", "workload", "device", "source"):
            if text:
                text.append("\n")
            text.append(f"{label:<9}", "bold")
            text.append(sanitize(ident.get(label) or "—"))
        return text



class Findings(StyledStatic):
    """The diagnosis in plain words, worst first."""

    def __init__(self, findings: list, **kwargs) -> None:
        super().__init__(**kwargs)
        order = {"bad": 0, "warn": 1, "info": 2}
        self.findings = sorted(findings, key=lambda f: order.get(f.severity, 3))

    def on_mount(self) -> None:
        text = Text()
        if not self.findings:
            text.append("Nothing stands out.", self.style_of("muted"))
        for i, f in enumerate(self.findings):
            if i:
                text.append("\n")
            style = self.style_of(f"finding--{f.severity}")
            text.append(f"{_SEVERITY_MARK.get(f.severity, '•')} ", style)
            text.append(sanitize(f.title), style)
            if f.detail:
                text.append(" — ")
                text.append(sanitize(f.detail))
        self.update(text)


def _steps_plot(steps: pd.DataFrame):
    """The step curve. plotext is imported here, after the first paint, not with this module: at
    start-up it delayed a stored summary's numbers."""
    from tui.widgets.steps_plot import StepsPlot

    return StepsPlot(steps, id="step-curve")
