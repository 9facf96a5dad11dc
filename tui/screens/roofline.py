"""Screen 4: the roofline. One point per kernel group; the keyboard walks them, biggest time first."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from rooftop.present.format import fmt_ns, fmt_num, fmt_pct, fmt_rate
from rooftop.present.text import printable
from tui.widgets.breadcrumb import RooftopScreen
from tui.widgets.phase import phase_label, trace_phases
from tui.widgets.roofline_plot import BIG, GLYPHS, MID, SELECTED, SMALL, RooflinePlot, ridge
from tui.widgets.text import safe_text
from tui.workers import post_if_current



def phase_filters(analysis) -> tuple[str | None, ...]:
    """What `p` cycles through: all, then each phase the trace has; all alone for a one-phase trace
    (a trace whose only phase is `run` is not offered a prefill filter)."""
    phases = trace_phases(analysis)
    return (None, *phases) if len(phases) > 1 else (None,)


def name_text(name) -> Text:
    """A name from a trace as literal text: never markup, never terminal control."""
    return safe_text(name)


def peaks_text(analysis, ceilings: dict) -> Text:
    """Where the roofs come from, and their values: the UI always says which peaks it uses."""
    source = ceilings.get("source")
    if ceilings.get("bw") is None and ceilings.get("flops") is None:
        reason = getattr(analysis.peaks, "reason", None) or "unknown GPU"
        return Text(f"No roofs: {reason}")
    gpu = getattr(analysis.peaks, "gpu", None)
    device = getattr(gpu, "name", None) or analysis.identity.get("device") or "unknown GPU"
    where = f"measured calibration ({device})" if source == "measured" else f"datasheet {device}"
    t = Text("Roofs: ", style="bold")
    t.append(where)
    t.append(f" — HBM {fmt_rate(ceilings.get('bw'))} · bf16 {fmt_rate(ceilings.get('flops'), 'FLOP/s')}")
    if ceilings.get("fp32") is not None:
        t.append(f" · fp32 {fmt_rate(ceilings.get('fp32'), 'FLOP/s')}")
    r = ridge(ceilings)
    if r is not None:
        t.append(f" · ridge {r:.0f} FLOP/B")
    return t


class RooflineScreen(RooftopScreen):
    """Log-log roofline of the kernel groups, coloured by phase; Enter opens the selected group."""


    BINDINGS = [
        Binding("j,down", "next", "Next", id="roofline.next"),
        Binding("k,up", "previous", "Prev", id="roofline.previous"),
        Binding("enter", "open", "Open", id="roofline.open"),
        Binding("m", "toggle_peaks", "Datasheet/measured", id="roofline.peaks"),
        Binding("p", "cycle_phase", "Phase", id="roofline.phase"),
    ]

    @dataclass
    class Ready(Message):
        """Roofline data computed off the UI thread."""

        analysis: object
        phase: str | None
        points: pd.DataFrame
        ceilings: dict

    BREADCRUMB = "Roofline"
    EXPORT_NAME = "roofline"
    # The phase filter asked for (None: all); `_phase` is the one whose points are shown.
    phase: reactive[str | None] = reactive(None, init=False)
    # The ceilings asked for (`m`): "datasheet" or "measured"; the watcher recomputes against them.
    # always_update: asking again for ceilings the trace lacks says so again.
    roofs: reactive[str | None] = reactive(None, init=False, always_update=True)

    def __init__(self, analysis, crumbs: list[str] | None = None) -> None:
        super().__init__(analysis, crumbs)
        self._all = pd.DataFrame()
        self._ceilings: dict = {}
        self._phase: str | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id="roofline-title")
        yield RooflinePlot(id="roofline-plot")
        yield Static(id="roofline-legend")
        yield Static(Text("Computing the roofline…"), id="roofline-info")

    def on_mount(self) -> None:
        self._update_title()
        self._compute(self.analysis)

    @property
    def plot(self) -> RooflinePlot:
        return self.query_one(RooflinePlot)

    @work(thread=True, exclusive=True, exit_on_error=False, group="roofline")
    def _compute(self, analysis, phase: str | None = None) -> None:
        points = analysis.roofline(by="short_name", phase=phase)
        post_if_current(self, self.Ready(analysis, phase, points, dict(analysis.ceilings)))

    @on(Ready)
    def _ready(self, message: Ready) -> None:
        self.analysis, self._phase = message.analysis, message.phase
        self._all, self._ceilings = message.points, message.ceilings
        self.plot.set_data(self._all, self._ceilings, 0)
        self.query_one("#roofline-legend", Static).update(self._legend())
        self._update_title()
        self._update_info()

    def _update_title(self) -> None:
        filters = phase_filters(self.analysis)
        t = Text(f"Kernel groups, phase: {printable(self._phase or 'all')}")
        if len(filters) > 1:
            nxt = filters[(filters.index(self._phase) + 1) % len(filters)] if self._phase in filters else None
            t.append(f"  (p: {printable(nxt or 'all')})")
        t.append("   ")
        t.append_text(name_text(self.analysis.identity.get("label") or self.analysis.trace.label))
        self.query_one("#roofline-title", Static).update(t)

    def _legend(self) -> Text:
        t = peaks_text(self.analysis, self._ceilings)
        t.append("\n")
        plot = self.plot
        for ph in plot.phases_shown():  # each series its glyph and colour: apart under NO_COLOR too
            t.append(f"{GLYPHS[ph][0]} {ph}  ", style=plot.get_component_rich_style(f"roofline--{ph}", partial=True))
        t.append(f"({BIG} {MID} {SMALL} by time, {SELECTED} selected)   ")
        other = "datasheet" if self._ceilings.get("source") == "measured" else "measured"
        t.append(f"m: {other} roofs", style="italic")
        return t

    def _update_info(self) -> None:
        plot = self.plot
        info = self.query_one("#roofline-info", Static)
        i = plot.selected
        if i is None:
            where = f" in phase {printable(self._phase)} (p: next phase)" if self._phase else ""
            info.update(Text(f"No kernel group with known FLOPs and bytes to place on the roofline{where}."))
            return
        row = plot.points.iloc[i]
        # Numbers first, the (often 100-character) name second: at 80 columns the name is cut, not the numbers.
        phase = phase_label(row.get("phase"), trace_phases(self.analysis))
        t = Text(f"[{i + 1}/{len(plot.points)}] {printable(phase or '—')} · AI {fmt_num(row['ai'])} FLOP/B"
                 f" · {fmt_rate(row['achieved_flops'], 'FLOP/s')} · {fmt_rate(row.get('achieved_bw'))}"
                 f" · {fmt_pct(row.get('pct_of_roof'))} of roof · {_bound(row.get('bound'), row.get('bound_mix'))}"
                 f" · {fmt_ns(row.get('time_ns'))}\n", no_wrap=True, overflow="ellipsis")
        name = name_text(row["key"])
        name.stylize("bold")
        t.append_text(name)
        info.update(t)

    def selected_key(self) -> str | None:
        i = self.plot.selected
        return None if i is None else str(self.plot.points["key"].iloc[i])

    def name_target(self) -> tuple[str, list[str]] | None:
        key = self.selected_key()
        return None if key is None else (key, self.analysis.full_names(key) or [key])

    def action_next(self) -> None:
        self._move(+1)

    def action_previous(self) -> None:
        self._move(-1)

    def _move(self, step: int) -> None:
        plot = self.plot
        if plot.selected is None:
            return
        plot.select((plot.selected + step) % len(plot.points))
        self._update_info()

    def action_cycle_phase(self) -> None:
        filters = phase_filters(self.analysis)
        if len(filters) == 1:
            self.notify("This trace has one phase: nothing to filter by", title="Roofline", markup=False)
            return
        self.phase = filters[(filters.index(self.phase) + 1) % len(filters)] if self.phase in filters else None

    def watch_phase(self, phase: str | None) -> None:
        self._compute(self.analysis, phase)

    def action_toggle_peaks(self) -> None:
        self.roofs = "datasheet" if self._ceilings.get("source") == "measured" else "measured"

    def watch_roofs(self, want: str | None) -> None:
        if want is None:
            return
        try:
            other = self.analysis.with_peaks(source=want)
        except ValueError as exc:
            hint = "run `rooftop calibrate` on the GPU, then collect again" if want == "measured" else ""
            self.notify(printable(f"No {want} ceilings for this trace: {exc}" + (f" ({hint})" if hint else "")),
                        severity="warning", title="Roofline", markup=False)
            return
        self._compute(other, self._phase)

    def action_open(self) -> None:
        key = self.selected_key()
        if key is None:
            return
        from tui.screens.detail import KernelDetailScreen

        # A point is one group in one phase: its detail shows that phase's launches only.
        phase = self._phase or self.plot.points["phase"].iloc[self.plot.selected]
        phase = phase if isinstance(phase, str) and phase in trace_phases(self.analysis) else None
        self.drill(KernelDetailScreen(self.analysis, key, "short_name", self.crumbs + [key], phase=phase))

    def export_frame(self) -> pd.DataFrame:
        return self.plot.points


def _bound(bound, mix=None) -> str:
    """The group's verdict as the analysis states it: the sentence of its bound mix (each launch
    against its own dtype's roof), else the bound's name."""
    if isinstance(mix, dict) and isinstance(mix.get("text"), str):
        return printable(mix["text"])
    return f"{bound}-bound" if isinstance(bound, str) and bound else "bound unknown"
