"""Overview (screen 1): what ran, how each phase did against the roofs, what looks wrong."""
from __future__ import annotations

import math

import pandas as pd
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from rooftop.format import fmt_ns, fmt_pct, fmt_rate

from ..widgets.breadcrumb import MODELED, RooftopScreen
from ..widgets.steps_plot import StepsPlot
from ..widgets.text import safe_text, sanitize

_SEVERITY_MARK = {"bad": "✖", "warn": "▲", "info": "•"}


def _known(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


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

    def __init__(self, phases: pd.DataFrame, **kwargs) -> None:
        super().__init__(**kwargs)
        self.phases = phases

    def on_mount(self) -> None:
        table = Table(box=None, pad_edge=False, expand=False, header_style="bold")
        for label, justify in (("phase", "left"), ("time", "right"), ("tok/s", "right"), ("TFLOP/s", "right"),
                               ("TB/s", "right"), ("MFU", "right"), ("MBU", "right"), ("bound", "left")):
            table.add_column(label, justify=justify, no_wrap=True)
        for r in self.phases.to_dict("records"):
            phase, bound = r.get("phase"), r.get("bound")
            table.add_row(
                safe_text(phase, self.style_of(f"phase--{phase}")), fmt_ns(r.get("span_ns")),
                fmt_rate(r.get("tokens_per_s"), "").strip() if _known(r.get("tokens_per_s")) else "—",
                f"{r['tflops']:.3g}" if _known(r.get("tflops")) else "—",
                f"{r['tbps']:.3g}" if _known(r.get("tbps")) else "—",
                fmt_pct(r.get("mfu")), fmt_pct(r.get("mbu")),
                safe_text(bound if _known(bound) else "—", self.style_of(f"bound--{bound}")),
            )
        self.table = table  # kept for tests and export
        self.update(table)


def sources_line(a) -> str:
    """Where the bytes and the peaks came from, e.g. `bytes: model (no counters) · peaks: datasheet H100 SXM (...)`."""
    phases = a.phases
    srcs = sorted({s for s in phases.get("bytes_source", pd.Series(dtype=object)).dropna()}) if len(phases) else []
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
        peaks_part = f"peaks: {p.source}{gpu} ({fmt_rate(p.flops, 'FLOP/s')} bf16, {fmt_rate(p.bw)})"
    return f"{bytes_part} · {peaks_part}"


class OverviewScreen(RooftopScreen):
    BREADCRUMB = "Overview"
    EXPORT_NAME = "overview"

    def export_frame(self) -> pd.DataFrame:
        return self.analysis.phases

    def compose_body(self) -> ComposeResult:
        a = self.analysis
        ident = a.identity
        with VerticalScroll(id="overview-body"):
            if ident.get("modeled"):
                yield Static(MODELED, id="modeled-badge", classes="modeled-badge")
            yield Static(self._identity_text(ident), id="identity")
            yield PhaseTable(a.phases, id="phases")
            yield Static(sources_line(a), id="sources", classes="muted")
            yield Static("Findings", classes="section-title")
            yield Findings(a.findings, id="findings")
            gap = a.gap
            if gap is not None and len(gap):
                yield Static("Gap to ideal", classes="section-title")
                yield Static(self._gap_table(gap), id="gap")
            yield StepsPlot(a.steps, id="step-curve")

    @staticmethod
    def _identity_text(ident: dict) -> Text:
        text = Text()
        for label in ("model", "workload", "device", "source"):
            if text:
                text.append("\n")
            text.append(f"{label:<9}", "bold")
            text.append(sanitize(ident.get(label) or "—"))
        return text

    @staticmethod
    def _gap_table(gap: pd.DataFrame) -> Table:
        table = Table(box=None, pad_edge=False, header_style="bold")
        for label in ("phase", "measured", "ideal", "slow kernels", "extra bytes", "launch gaps"):
            table.add_column(label, justify="left" if label == "phase" else "right", no_wrap=True)
        for r in gap.to_dict("records"):
            table.add_row(safe_text(r.get("phase")), *(fmt_ns(r.get(k)) for k in
                          ("measured_ns", "ideal_ns", "slow_kernels_ns", "extra_bytes_ns", "launch_gaps_ns")))
        return table


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
