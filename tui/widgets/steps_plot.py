"""The step-time curve: one point per step, linear axes (plotext 5's log axes crash on redraw).

A multi-rank run draws one line per rank (a straggler shows as the line above the others); with
more ranks than can be told apart, the median and the slowest rank per step instead.
"""
from __future__ import annotations

import pandas as pd
from textual_plotext import PlotextPlot

MAX_RANK_LINES = 4


def curves(series: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """(label, frame with step and span_ns) for each line to draw."""
    if "rank" not in series.columns or series["rank"].nunique() < 2:
        return [(None, series)]
    if series["rank"].nunique() <= MAX_RANK_LINES:
        return [(f"rank {int(r)}", g) for r, g in series.groupby("rank", sort=True)]
    g = series.groupby("step", sort=True)["span_ns"]
    return [("median", g.median().reset_index()), ("slowest rank", g.max().reset_index())]


class StepsPlot(PlotextPlot):
    """Span of each step (µs) against its index; rebuilt from stored data on every render."""

    def __init__(self, steps: pd.DataFrame, **kwargs) -> None:
        super().__init__(**kwargs)
        decode = steps[steps["phase"] == "decode"] if "phase" in steps.columns else steps
        self.series = decode if len(decode) else steps
        self.title = "decode step time (µs)" if len(decode) else "step time (µs)"

    def render(self):
        p = self.plt
        p.clear_data()
        p.clear_figure()
        lines = curves(self.series) if len(self.series) else []
        tops, xs = [], set()
        for label, s in lines:
            x = [int(v) for v in pd.to_numeric(s["step"], errors="coerce").fillna(-1)]
            y = [float(v) / 1e3 for v in pd.to_numeric(s["span_ns"], errors="coerce").fillna(0.0)]
            p.plot(x, y, marker="dot", label=label)
            p.scatter(x, y, marker="x")
            tops.append(max(y, default=0.0))
            xs.update(x)
        # y from 0: auto-ranging would blow a 0.01% wobble up to a steep-looking slope.
        top = max(tops, default=0.0)
        if top > 0:
            p.ylim(0, top * 1.1)
        if 0 < len(xs) <= 12:
            p.xticks(sorted(xs), [str(v) for v in sorted(xs)])
        p.title(self.title)
        p.xlabel("step")
        return super().render()
