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
from rooftop.present.format import fmt_bounded, fmt_ns, fmt_num, fmt_pct, fmt_rate, fmt_tera, is_unknown
from rooftop.present.render import is_integrity

from tui.loader import Preview, overview_ready, phases_ready, warm_overview_rest
from tui.widgets.breadcrumb import MODELED, RooftopScreen
from tui.widgets.text import safe_text, sanitize
from tui.workers import HEAVY, post_if_current

if TYPE_CHECKING:
    import pandas as pd

# Nothing here imports pandas at module level: a trace with a current stored summary is painted
# from the summary's records (lists of dicts) before pandas is imported; an Analysis' tables are
# DataFrames. Every table below reads either (`_records`).

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

    def __init__(self, phases: pd.DataFrame | list[dict], **kwargs) -> None:
        super().__init__(**kwargs)
        self.phases = phases

    def on_mount(self) -> None:
        table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
        _add_columns(table, PHASES.pick("phase", "span_ns", "tokens_per_s", "tflops", "tbps", "mfu", "mbu", "bound"))
        for r in _records(self.phases):
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


def _records(table: pd.DataFrame | list[dict]) -> list[dict]:
    """A table's rows as dicts: an Analysis' DataFrame, or a stored summary's records as they are."""
    return table if isinstance(table, list) else table.to_dict("records")


def sources_line(a) -> str:
    """Where the bytes and the peaks came from, e.g. `bytes: model (no counters) · peaks: datasheet H100 SXM (...)`."""
    srcs = sorted({s for r in _records(a.phases) if not is_unknown(s := r.get("bytes_source"))})
    counters = bool(a.identity.get("counters"))
    if not srcs:
        bytes_part = "bytes: unknown"
    else:
        src = srcs[0] if len(srcs) == 1 else "mixed"
        bytes_part = f"bytes: {src}" + ("" if counters else " (no counters)")
    p = a.peaks
    if p.source is None:
        peaks_part = f"peaks: unknown ({p.reason or 'device not recognised'})"
    else:
        gpu = f" {p.gpu.name}" if getattr(p, "gpu", None) is not None else ""
        peaks_part = (f"peaks: {p.source}{gpu} ({fmt_rate(p.flops, 'FLOP/s')} bf16, {fmt_rate(p.bw)})"
                      f" · MBU/MFU columns use the {p.source} peaks")
    return f"{bytes_part} · {peaks_part}"


def has_both_ceilings(a) -> bool:
    """A calibrated trace: both datasheet and measured ceilings known, so both percentages mean something."""
    p = a.peaks
    return bool((p.measured_bw or p.measured_flops) and (p.datasheet_bw or p.datasheet_flops))


def ceilings_table(phases: pd.DataFrame | list[dict]) -> Table:
    """Per phase, MBU and MFU against both ceilings (decode: MBU 79.8% of datasheet, 99.8% of measured)."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    pairs = PHASES.pick("mbu_datasheet", "mbu_measured", "mfu_datasheet", "mfu_measured")
    table.add_column(PHASES["phase"].label, justify="left", no_wrap=True)
    for i, c in enumerate(pairs):  # `MBU of datasheet`, `of measured`: each pair reads as one
        table.add_column(c.label if i % 2 == 0 else c.label.split(" ", 1)[1], justify="right", no_wrap=True)
    for r in _records(phases):
        table.add_row(safe_text(r.get("phase")), *(c.format(r.get(c.key)) for c in pairs))
    return table


GAP_PARTS = GAP.pick("ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns", "edge_idle_ns", "copies_ns",
                     "unmodeled_ns")


def _add_columns(table: Table, columns) -> None:
    """Registry columns as a Rich table's columns: text on the left, numbers on the right."""
    for c in columns:
        table.add_column(c.label, justify="left" if c.kind == "text" else "right", no_wrap=True)


def gap_table(gap: pd.DataFrame | list[dict]) -> Table:
    """Measured time = ideal + slow kernels + extra bytes + launch gaps + unmodeled, one column per phase
    (time and share of the measured time), so the sum reads top to bottom at any width."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("", no_wrap=True)
    records = _records(gap)
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


def comm_table(devices: pd.DataFrame) -> Table:
    """Per rank and device: communication kernel time, the part compute hid, the exposed rest."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for label in ("rank", "device", "comm", "overlapped", "exposed", "exposed %", "of time"):
        table.add_column(label, justify="right", no_wrap=True)
    for r in devices.to_dict("records"):
        table.add_row("—" if r["rank"] < 0 else str(int(r["rank"])), "—" if r["device"] < 0 else str(int(r["device"])),
                      fmt_ns(r["comm_ns"]), fmt_ns(r["overlapped_ns"]), fmt_ns(r["exposed_ns"]),
                      fmt_pct(r["exposed_frac"], 0), fmt_pct(r["exposed_share"], 0))
    return table


def rank_phase_table(rank_phases: pd.DataFrame) -> Table:
    """Per rank and phase: time, MBU, MFU, TB/s."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    _add_columns(table, RANK_PHASES.pick("rank", "phase", "span_ns", "mbu", "mfu", "tbps"))
    for r in rank_phases.to_dict("records"):
        table.add_row(str(r["rank"]), safe_text(r.get("phase")), fmt_ns(r.get("span_ns")), fmt_pct(r.get("mbu")),
                      fmt_pct(r.get("mfu")), fmt_tera(r.get("tbps"), "TB/s"))
    return table


WORST_STEPS = 5


def spread_table(rank_steps: pd.DataFrame, n: int = WORST_STEPS) -> Table:
    """The steps whose time differs most between ranks, with the slowest (straggler) rank."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    _add_columns(table, RANK_STEPS.pick("phase", "step", "min_ns", "median_ns", "max_ns", "spread", "straggler"))
    worst = rank_steps.sort_values("spread", ascending=False, kind="stable").head(n)
    for r in worst.to_dict("records"):
        table.add_row(safe_text(r.get("phase")), str(r["step"]), fmt_ns(r.get("min_ns")), fmt_ns(r.get("median_ns")),
                      fmt_ns(r.get("max_ns")), fmt_pct(r.get("spread")), f"rank {r['straggler']}")
    return table


class OverviewScreen(RooftopScreen):
    BREADCRUMB = "Overview"
    EXPORT_NAME = "overview"

    def export_frame(self) -> pd.DataFrame | None:
        return None if isinstance(self.analysis, Preview) else self.analysis.phases

    class PhasesReady(Message):
        """The Overview's worker computed the phase table."""

    @dataclass
    class RestReady(Message):
        """The Overview's worker computed findings, gap and ranks."""

        gap: pd.DataFrame | None

    class Warmed(Message):
        """The Analysis computed behind an Overview painted from the stored summary."""

    @dataclass
    class StoredSteps(Message):
        """The stored summary's per-step table, parsed after the first paint."""

        steps: pd.DataFrame

    # The Overview's numbers from the trace's stored summary (tui.loader.StoredOverview) while the
    # rows load; kept until the Analysis has computed the same numbers itself.
    stored = None

    def compose_body(self) -> ComposeResult:
        a = self.analysis
        ident = a.identity
        self._phases_shown = not isinstance(a, Preview) and phases_ready(a)
        with VerticalScroll(id="overview-body"):
            if ident.get("modeled"):
                yield Static(MODELED, id="modeled-badge", classes="modeled-badge")
            yield Static(self._identity_text(ident), id="identity")
            if isinstance(a, Preview) and a.stored is not None:
                # A current stored summary: every number at once, the rows load behind it.
                self.stored = a.stored
                yield Static(self._warnings_line(), id="warnings-count")
                yield from self._phases(a.stored)
                yield from self._rest(a.stored.gap, a.stored)
                yield Static(f"from the stored summary (analysis v{a.stored.version}) · loading {a.rows:,} events"
                             " for the other screens …", id="overview-pending", classes="muted")
                return
            yield Static(self._warnings_line(), id="warnings-count")
            if isinstance(a, Preview):  # only the footer is read: the app calls `attach` when the rows are
                yield Static(f"loading {a.rows:,} events …", id="overview-pending", classes="muted")
                return
            # A big trace paints in stages, each as soon as its worker has it (identity comes with
            # the load); a small one was analysed whole by the loader and paints at once.
            if phases_ready(a):
                yield from self._phases()
                if overview_ready(a):
                    yield from self._rest(a.gap)
                    return
            yield Static("computing the phase table, findings, gap to ideal, step curve …",
                         id="overview-pending", classes="muted")

    def attach(self, analysis) -> None:
        """The loaded Analysis, replacing the Preview this screen was painted from: compute the rest
        (painted from a stored summary: compute the same numbers behind it, for the other screens)."""
        self.analysis = analysis
        if self.stored is not None:
            for pending in self.query("#overview-pending"):
                pending.remove()
            self._warm_behind()
        elif self.is_mounted:  # else `on_mount`, still to come, finds the Analysis and starts the same
            self._refresh_warnings()
            self._start_rest()

    @work(thread=True, exclusive=True, exit_on_error=False, group="overview", description="overview")
    def _warm_behind(self) -> None:
        with HEAVY:
            warm_overview_rest(self.analysis)
            if post_if_current(self, self.Warmed()):
                self.analysis.groups(by="short_name")  # the Kernels screen's table, ready before `3` is pressed

    @work(thread=True, exit_on_error=False, group="overview-steps", description="stored steps")
    def _stored_steps(self) -> None:
        from tui.widgets import steps_plot  # noqa: F401  (plotext: imported here, off the UI thread)

        try:
            steps = self.stored.load_steps()
        except (ValueError, AttributeError):
            return  # damaged stored steps: the curve comes with the analysis' own once computed
        post_if_current(self, self.StoredSteps(steps))

    @on(StoredSteps)
    async def _show_stored_steps(self, message: StoredSteps) -> None:
        if not self.query("#step-curve"):
            pending = self.query("#overview-pending")
            await self.query_one("#overview-body", VerticalScroll).mount(
                _steps_plot(message.steps), before=pending.first() if pending else None)

    @on(Warmed)
    async def _warmed(self, message: Warmed) -> None:
        self.stored = None  # the Analysis has the same numbers now: the warnings line reads them
        self._refresh_warnings()
        if not self.query("#step-curve"):
            await self.query_one("#overview-body", VerticalScroll).mount(_steps_plot(self.analysis.steps))

    def on_mount(self) -> None:
        self._refresh_warnings()
        if self.stored is not None:
            self.call_after_refresh(self._stored_steps)  # the step curve, after the first paint
        if self.stored is not None and not isinstance(self.analysis, Preview):
            self._warm_behind()  # the rows came before the first mount
        elif isinstance(self.analysis, Preview):
            self.call_after_refresh(self.analysis.shown.set)  # the load thread starts now
        elif not overview_ready(self.analysis):
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
                if not post_if_current(self, self.PhasesReady()):
                    return
            warm_overview_rest(a)
            if not post_if_current(self, self.RestReady(a.gap)):
                return
            a.groups(by="short_name")  # the Kernels screen's table, ready before `3` is pressed

    @on(PhasesReady)
    async def _show_phases(self, message: PhasesReady) -> None:
        pending = self.query_one("#overview-pending", Static)
        await self.query_one("#overview-body", VerticalScroll).mount_all(list(self._phases()), before=pending)
        pending.update("computing findings, gap to ideal, step curve …")
        self._phases_shown = True

    def _warnings_line(self) -> Text:
        """`▲ 3 warnings (w: list)` once known; the file's own warnings before the analysis' are in."""
        a = self.analysis
        if self.stored is not None:
            items = self.stored.warnings
        elif isinstance(a, Preview):
            return Text("")
        else:
            items = a.warnings if overview_ready(a) else a.trace_warnings
        if not items:
            return Text("no warnings (w: list)", "dim")
        t = Text(f"▲ {len(items)} warning{'s' if len(items) > 1 else ''} (w: list)")
        # what the file lost (truncated, rows dropped) is said here, before any number made from it
        for msg in [m for m in (i[-1] if isinstance(i, (tuple, list)) else i for i in items) if is_integrity(m)][:2]:
            t.append("\n  the file: ")
            t.append_text(safe_text(str(msg)))
        return t

    def _refresh_warnings(self) -> None:
        line = self.query_one("#warnings-count", Static)
        line.update(self._warnings_line())
        a = self.analysis
        if self.stored is not None:
            has = bool(self.stored.warnings)
        else:
            has = not isinstance(a, Preview) and bool(a.warnings if overview_ready(a) else a.trace_warnings)
        line.set_class(has, "has-warnings")

    @on(RestReady)
    async def _show_rest(self, message: RestReady) -> None:
        self._refresh_warnings()
        body = self.query_one("#overview-body", VerticalScroll)
        await body.mount_all(list(self._rest(message.gap)))
        await self.query_one("#overview-pending").remove()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # An analysis bug must not take the screen down: one line where the missing part would be.
        if event.worker.group == "overview" and event.state == WorkerState.ERROR:
            err = event.worker.error
            for pending in self.query("#overview-pending"):
                pending.update(safe_text(f"cannot compute the rest of the overview ({type(err).__name__}: {err})"))

    def _phases(self, a=None):
        """The phase table, the ceilings, where bytes and peaks came from (of the Analysis, or of
        the stored summary)."""
        a = a if a is not None else self.analysis
        yield PhaseTable(a.phases, id="phases")
        if a.model is not None and a.model.source != "trace metadata":  # `--model`: the model-level headline
            from rooftop.present.report import model_lines

            yield Static(Text("\n".join(model_lines(a))), id="model-level")
        if has_both_ceilings(a) and len(a.phases):
            yield Static(ceilings_table(a.phases), id="ceilings")
        yield Static(safe_text(sources_line(a)), id="sources", classes="muted")  # may quote the device name

    def _rest(self, gap: pd.DataFrame | list[dict] | None, a=None):
        """The widgets below the sources line: rank note, findings, gap, ranks, step curve."""
        a = a if a is not None else self.analysis
        ranks = a.trace.ranks
        if len(ranks) > 1 and a.rank_phases is not None:
            yield Static(f"phase table: rank {ranks[0]} of {len(ranks)}; every rank below", classes="muted")
        yield Static("Findings", classes="section-title")
        yield Findings(a.findings, id="findings")
        if gap is not None and len(gap):
            yield Static("Gap to ideal (where the measured time goes)", classes="section-title")
            yield Static(gap_table(gap), id="gap")
        computed = getattr(a, "is_computed", None)  # (a stored summary has no such table)
        comm = a.comm_devices if computed is not None and computed("comm_devices") else None  # (findings made it)
        if comm is not None and len(comm):
            yield Static("Communication (exposed: not hidden by compute on other streams)", classes="section-title")
            yield Static(comm_table(comm), id="comm")
        if len(ranks) > 1 and a.rank_phases is not None:
            yield Static(f"Ranks ({len(ranks)})", classes="section-title")
            yield Static(rank_phase_table(a.rank_phases), id="rank-phases")
            if a.rank_steps is not None and len(a.rank_steps):
                yield Static("Rank-to-rank spread of step time (worst steps)", classes="section-title")
                yield Static(spread_table(a.rank_steps), id="rank-spread")
        if a.steps is not None:  # (from a stored summary: parsed after the first paint)
            yield _steps_plot(a.steps)

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
