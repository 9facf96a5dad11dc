"""Kernel detail (pushed from Kernels, the Roofline or a step): every metric with its source, each
launch, warp stalls, the roofline point.

Opened from a phase (a roofline point of one phase, a (name, phase) row) or from a step, every
number is of that scope's launches only, and the breadcrumb and the scope line say which.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from rooftop.analysis import scope_name
from rooftop.hardware.gpus import ridge_point
from rooftop.present.format import fmt_num, fmt_rate, is_unknown
from rooftop.trace.names import fit

from tui.widgets.breadcrumb import RooftopScreen
from tui.widgets.stall_bars import StallBars, top_shares
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col
from tui.widgets.text import safe_text, sanitize
from tui.workers import post_if_current

TOP_REASONS = 3  # whose meanings are spelled out in full under the bars
NAME_LINES = 3  # the most a name takes above the metrics; `i` shows it whole
FULL_NAME_HINT = " (i: whole name)"
# Where other kernels of the trace have stall counters: this one was not among those profiled.
NOT_PROFILED = ("No warp-stall counters for this kernel: it was not among the launches Nsight Compute "
                "profiled (a filter such as --kernel-name or --launch-count left it out).")

# Time and the gap first: at 80 columns they must not scroll off behind the shapes.
LAUNCH_COLS = [
    Col("start_ns", "start µs", "ns"), Col("dur_ns", "time µs", "ns", 2), Col("gap_before_ns", "gap before µs", "ns", 2),
    Col("grid_dims", "grid", "text"), Col("block_dims", "block", "text"), Col("registers", "regs", "int"),
    Col("phase", "phase", "text"), Col("step", "step", "int"), Col("stream", "stream", "int"),
]


@dataclass(frozen=True)
class DetailData:
    """What the screen shows, computed off the UI thread."""

    metrics: list[tuple[str, str, str]]
    shares: pd.Series | None
    launches: pd.DataFrame
    points: pd.DataFrame


class KernelDetailScreen(RooftopScreen):
    EXPORT_NAME = "kernel"

    @dataclass
    class Ready(Message):
        data: DetailData

    def __init__(self, analysis, key: str, by: str, crumbs: list[str], phase: str | None = None,
                 step: int | None = None, rank: int | None = None, device: int | None = None) -> None:
        self.key, self.by = key, by
        self.phase, self.step, self.rank, self.device = phase, step, rank, device
        self.scope = scope_name(phase, step, rank, device)
        # `crumbs` ends with the key; the scope goes before it unless the path already says it
        # (a step's breadcrumb names the step).
        if self.scope and not any(self.scope in str(c) or (step is not None and f"step {step}" in str(c))
                                  for c in crumbs[:-1]):
            crumbs = [*crumbs[:-1], self.scope, crumbs[-1]]
        super().__init__(analysis, crumbs)
        self.data: DetailData | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="detail-body"):
            yield Static(self._name_text(), id="detail-name", classes="section-title")
            yield Static(self._scope_text(), id="detail-scope", classes="muted")
            yield Static(Text("computing…"), id="detail-metrics")
            yield Static("Launches", id="detail-launches-title", classes="section-title")
            yield FrameTable(LAUNCH_COLS, id="detail-launches")
            yield Static("Warp stalls (share of cycles per issued instruction)", classes="section-title")
            yield Vertical(id="detail-stalls-box")
            yield Static("Roofline", classes="section-title")
            yield Vertical(id="detail-roofline-box")

    def _name_text(self) -> Text:
        return self._three_lines(self.key, max(20, (self.app.size.width or 80) - 4))

    @staticmethod
    def _three_lines(name: str, width: int) -> Text:
        """`name` in at most NAME_LINES lines of `width` (a templated kernel name can fill three
        screens before the first metric): cut in the middle, with the keys to the whole name."""
        room = NAME_LINES * width
        if len(name) <= room:
            return safe_text(name)
        # cut into lines here: a word wrap would leave lines short at the name's spaces
        cut = fit(name, room - len(FULL_NAME_HINT))
        t = Text("\n").join(safe_text(cut[i:i + width]) for i in range(0, len(cut), width))
        t.append(FULL_NAME_HINT, style="dim")
        return t

    def on_resize(self) -> None:
        self.query_one("#detail-name", Static).update(self._name_text())

    def _scope_text(self) -> Text:
        if self.scope is None:
            return Text("scope: the whole trace (every phase and step)")
        return Text(f"scope: {self.scope} only (every number below is of these launches)")

    def on_mount(self) -> None:
        self._compute()

    @work(thread=True, exclusive=True, exit_on_error=False, group="detail")
    def _compute(self) -> None:
        a, scope = self.analysis, dict(phase=self.phase, step=self.step, rank=self.rank, device=self.device)
        data = DetailData(a.kernel_detail(self.key, by=self.by, **scope), a.group_stalls(self.key, self.by, **scope),
                          a.launches(self.key, by=self.by, **scope), a.group_point(self.key, self.by, **scope))
        post_if_current(self, self.Ready(data))

    @on(Ready)
    async def _show(self, message: Ready) -> None:
        self.data = d = message.data
        self.query_one("#detail-metrics", Static).update(self._metrics(d.metrics))
        self.query_one("#detail-launches-title", Static).update(
            f"Launches ({len(d.launches):,}; gap before: idle time on the GPU before the launch started)")
        await self.query_one("#detail-launches", FrameTable).set_frame(d.launches)
        box = self.query_one("#detail-stalls-box", Vertical)
        await box.remove_children()
        if d.shares is None:
            why = NOT_PROFILED if self.analysis.stalls() is not None else self.analysis.stalls_missing
            await box.mount(Static(Text(why), id="detail-stalls"))
        else:
            await box.mount_all([StallBars(d.shares, top=8, meanings=False, id="detail-stalls"),
                                 Static(self._meanings(d.shares), id="detail-stall-meanings")])
        await self.query_one("#detail-roofline-box", Vertical).mount(self._roofline(d.points))

    def name_target(self) -> tuple[str, list[str]] | None:
        return self.key, self.analysis.full_names(self.key, self.by) or [self.key]

    def export_frame(self):
        if self.data is None:
            return None
        return pd.DataFrame(self.data.metrics, columns=["metric", "value", "source"])

    def _metrics(self, rows) -> Table:
        table = Table(box=None, pad_edge=False, header_style="bold")
        # about what the value column gets beside the metric and source columns
        value_width = max(16, (self.app.size.width or 80) - 44)
        # The value keeps room to read at 60 columns; the source gives way first (cut, not wrapped).
        table.add_column("metric", no_wrap=True, min_width=12, max_width=28, overflow="ellipsis")
        table.add_column("value", overflow="fold", min_width=16, ratio=1)
        table.add_column("source", style="dim", no_wrap=True, overflow="ellipsis", max_width=24)
        for label, value, source in rows:
            shown = self._three_lines(str(value), value_width) if label == "name" else safe_text(value)
            table.add_row(safe_text(label), shown, safe_text(source))
        return table

    @staticmethod
    def _meanings(shares) -> Text:
        """What the top reasons mean, in full (the bars' line is too narrow for them at 80 columns)."""
        from rooftop.analysis.stalls import STALL_MEANING

        text = Text()
        for reason in top_shares(shares, TOP_REASONS).index:
            if text:
                text.append("\n")
            text.append(f"{reason}: ", "bold")
            text.append(sanitize(STALL_MEANING.get(str(reason), "")))
        return text

    def _roofline(self, points: pd.DataFrame):
        """This group's point under the trace's roofs; in words when it cannot be placed."""
        from tui.widgets.roofline_plot import RooflinePlot, plottable

        if len(plottable(points)):
            return RooflinePlot(points, self.analysis.ceilings, selected=0, compact=True, id="detail-roofline")
        return Static(self._roofline_text(points), id="detail-roofline")

    def _missing_costs(self) -> str:
        """Which of FLOPs and bytes this group lacks (a group whose bytes are known is not told it
        has neither)."""
        shown = {label: value for label, value, _ in (self.data.metrics if self.data else [])}
        missing = [w for w in ("FLOPs", "bytes") if shown.get(w, "—") in ("—", "", None)]
        if missing == ["FLOPs"]:
            return f"bytes known ({shown['bytes']}), FLOPs not: no FLOP counter or op shape for this kernel"
        if missing == ["bytes"]:
            return f"FLOPs known ({shown['FLOPs']}), bytes not: no DRAM counter or op shape for this kernel"
        from rooftop.present.hints import costs_hint
        return f"no FLOPs or bytes for this kernel; to get them, {costs_hint(self.analysis.trace.meta.get('source'))}"

    def _roofline_text(self, roof: pd.DataFrame) -> Text:
        if not len(roof):
            return Text(f"Arithmetic intensity unknown ({self._missing_costs()}): not on the roofline.")
        r = roof.iloc[0]
        # the ridge of the group's own compute dtype (an fp32 GEMM against the fp32 ridge, not bf16's)
        own = r.get("peak_flops")
        ridge = ridge_point(own, self.analysis.peaks.bw) if not is_unknown(own) else self.analysis.ridge
        dtype = r.get("dtype") if isinstance(r.get("dtype"), str) else None
        text = Text()
        text.append(f"AI {fmt_num(r['ai'])} FLOP/B", "bold")
        text.append(f" · {fmt_rate(r['achieved_flops'], 'FLOP/s')} · {fmt_rate(r['achieved_bw'])}")
        if ridge is not None:
            side = "left of" if r["ai"] < ridge else "right of"
            what = f"the {sanitize(dtype)} ridge" if dtype and not is_unknown(own) else "the ridge"
            text.append(f" · {side} {what} ({ridge:.0f} FLOP/B, {sanitize(self.analysis.peaks.source)} peaks)")
        pct = r.get("pct_of_roof")
        if not is_unknown(pct):
            text.append(f" · {100 * pct:.0f}% of its roof")
        mix = r.get("bound_mix")
        if isinstance(mix, dict) and isinstance(mix.get("text"), str):
            text.append(f" · {sanitize(mix['text'])}")
        elif r.get("bound"):
            text.append(f" · {sanitize(r['bound'])}-bound")
        return text
