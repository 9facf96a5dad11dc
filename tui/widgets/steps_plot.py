"""The step-time curve: one point per step, linear axes (plotext 5's log axes crash on redraw).

A multi-rank run draws one line per rank (a straggler shows as the line above the others); with
more ranks than can be told apart, the median and the slowest rank per step instead.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from textual_plotext import PlotextPlot

from rooftop.present.format import fmt_num

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
        if not xs:
            p.title("no step times: this trace marks no steps (no step ranges or step metadata)")
            return super().render()
        # y from 0: auto-ranging would blow a 0.01% wobble up to a steep-looking slope. Ticks are
        # set here, on round values and on steps that exist, so every tick and grid line is data.
        # The top tick is at or above the slowest step, so every point lies between labelled lines
        # (on a short panel, 0 / 50,000 / 100,000 for steps near 76,000, not 0 / 50,000 alone).
        top = max(tops, default=0.0)
        if top > 0:
            yt = nice_ticks(top * 1.05, max(2, (self.size.height - 4) // 2))
            p.ylim(0, yt[-1])
            p.yticks(yt, [fmt_num(v) for v in yt])
        xt = step_ticks(sorted(xs), max(2, (self.size.width - 10) // 6))
        p.xticks(xt, [str(v) for v in xt])
        p.xlim(min(xs) - 0.5, max(xs) + 0.5) if len(xs) == 1 else p.xlim(min(xs), max(xs))
        p.title(self.title)
        p.xlabel("step")
        return super().render()


def step_ticks(steps: list[int], most: int) -> list[int]:
    """At most `most` of the steps there are, evenly spread, first and last included."""
    if len(steps) <= most:
        return steps
    idx = np.unique(np.linspace(0, len(steps) - 1, most).round().astype(int))
    return [steps[i] for i in idx]


def nice_ticks(top: float, most: int) -> list[float]:
    """0 and round multiples (1, 2 or 5 x 10^k), the last at or above `top`: at most `most` + 1
    ticks (the step is at least top / most, so ceil(top / step) <= most)."""
    raw = top / max(most, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(max(1, math.ceil(top / step - 1e-9)) + 1)]
