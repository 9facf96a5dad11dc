"""The step-time curve: one point per step, linear axes (plotext 5's log axes crash on redraw)."""
from __future__ import annotations

import pandas as pd
from textual_plotext import PlotextPlot


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
        s = self.series
        if len(s):
            x = [int(v) for v in pd.to_numeric(s["step"], errors="coerce").fillna(-1)]
            y = [float(v) / 1e3 for v in pd.to_numeric(s["span_ns"], errors="coerce").fillna(0.0)]
            # y from 0: auto-ranging would blow a 0.01% wobble up to a steep-looking slope.
            top = max(y) if y else 0.0
            if top > 0:
                p.ylim(0, top * 1.1)
            p.plot(x, y, marker="dot")
            p.scatter(x, y, marker="x")
            if len(x) <= 12:
                p.xticks(x, [str(v) for v in x])
        p.title(self.title)
        p.xlabel("step")
        return super().render()
