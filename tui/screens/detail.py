"""Kernel detail (pushed from Kernels or a step): every metric with its source, warp stalls, roofline point."""
from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from rooftop.format import fmt_rate

from ..widgets.breadcrumb import RooftopScreen
from ..widgets.stall_bars import StallBars, top_shares
from ..widgets.text import safe_text, sanitize

TOP_REASONS = 3  # whose meanings are spelled out in full under the bars
NO_COUNTERS = ("No hardware counters in this trace, so no warp stalls. Collect them with "
               "`rooftop collect --counters` (Nsight Compute).")


class KernelDetailScreen(RooftopScreen):
    EXPORT_NAME = "kernel"

    def __init__(self, analysis, key: str, by: str, crumbs: list[str]) -> None:
        super().__init__(analysis, crumbs)
        self.key, self.by = key, by

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="detail-body"):
            yield Static(safe_text(self.key), id="detail-name", classes="section-title")
            yield Static(self._metrics(), id="detail-metrics")
            yield Static("Warp stalls (share of cycles per issued instruction)", classes="section-title")
            shares = self._stall_shares()
            if shares is None:
                yield Static(Text(NO_COUNTERS), id="detail-stalls")
            else:
                yield StallBars(shares, top=8, meanings=False, id="detail-stalls")
                yield Static(self._meanings(shares), id="detail-stall-meanings")
            yield Static("Roofline", classes="section-title")
            yield self._roofline()

    def export_frame(self):
        import pandas as pd

        return pd.DataFrame(self.analysis.kernel_detail(self.key, by=self.by), columns=["metric", "value", "source"])

    def _metrics(self) -> Table:
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("metric", no_wrap=True, min_width=12)
        table.add_column("value", overflow="fold")
        table.add_column("source", style="dim", no_wrap=True)
        for label, value, source in self.analysis.kernel_detail(self.key, by=self.by):
            table.add_row(safe_text(label), safe_text(value), safe_text(source))
        return table

    def _stall_shares(self):
        stalls = self.analysis.stalls(by=self.by)
        if stalls is None or self.key not in stalls.index:
            return None
        return stalls.loc[self.key]

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

    def _roofline(self):
        """The colleague's RooflinePlot when present; else this kernel's point in words."""
        try:
            from ..widgets.roofline_plot import RooflinePlot
        except ModuleNotFoundError as exc:
            if exc.name != "tui.widgets.roofline_plot":
                raise
            RooflinePlot = None
        if RooflinePlot is not None and hasattr(RooflinePlot, "for_kernel"):
            return RooflinePlot.for_kernel(self.analysis, self.key, by=self.by, id="detail-roofline")
        return Static(self._roofline_text(), id="detail-roofline")

    def _roofline_text(self) -> Text:
        roof = self.analysis.roofline(by=self.by)
        row = roof[roof["key"] == self.key]
        if not len(row):
            return Text("Arithmetic intensity unknown (no FLOPs or bytes for this kernel): not on the roofline.")
        r = row.iloc[0]
        ceil = self.analysis.ceilings
        ridge = (ceil["flops"] / ceil["bw"]) if ceil.get("flops") and ceil.get("bw") else None
        text = Text()
        text.append(f"AI {r['ai']:.3g} FLOP/B", "bold")
        text.append(f" · {fmt_rate(r['achieved_flops'], 'FLOP/s')} · {fmt_rate(r['achieved_bw'])}")
        if ridge is not None:
            side = "left of" if r["ai"] < ridge else "right of"
            text.append(f" · {side} the ridge ({ridge:.0f} FLOP/B, {sanitize(ceil.get('source'))} peaks)")
        pct = r.get("pct_of_roof")
        if pct is not None and not (isinstance(pct, float) and math.isnan(pct)):
            text.append(f" · {100 * pct:.0f}% of its roof")
        if r.get("bound"):
            text.append(f" · {sanitize(r['bound'])}-bound")
        return text
