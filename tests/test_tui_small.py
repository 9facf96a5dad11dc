"""The small things a new user found: chart ticks on the data, labels that cover nothing, an empty
chart that says why, Enter that keeps a range open, nothing clipped at 60x20 without a way to see it."""
from __future__ import annotations

import asyncio
import re

import pandas as pd
from textual.app import App
from textual.widgets import Tree

from rooftop.analysis import analyze
from rooftop.trace import load_trace
from tui.widgets.roofline_plot import BIG, MID, SELECTED, SMALL, RooflinePlot
from tui.widgets.steps_plot import StepsPlot, nice_ticks, step_ticks

from test_tui_app import drive
from tui_helpers import STYLESHEET, small_trace

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MARKERS = (BIG, MID, SMALL, SELECTED)


def test_step_ticks_are_steps_and_y_ticks_round():
    assert step_ticks([0, 1, 2], 8) == [0, 1, 2]
    assert step_ticks(list(range(100)), 8) == [0, 14, 28, 42, 57, 71, 85, 99]  # steps that exist, ends kept
    assert nice_ticks(135.3, 4) == [0, 50, 100, 150]   # 33.8 per tick rounds up to 50; the top tick covers 135.3
    assert nice_ticks(0.0042, 3) == [0.0, 0.002, 0.004, 0.006]
    assert nice_ticks(79_800, 2) == [0, 50_000, 100_000]  # a short panel: the data lies under a labelled line
    assert nice_ticks(100, 4) == [0, 50, 100]            # a top on a multiple is its own last tick


class One(App):


    CSS_PATH = STYLESHEET
    def __init__(self, widget):
        super().__init__()
        self.widget = widget

    def compose(self):
        yield self.widget


def _canvas(widget, size=(100, 30)) -> list[str]:
    async def run():
        app = One(widget)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            widget.render()
            return [ANSI.sub("", line) for line in widget.plt.build().splitlines()]
    return asyncio.run(run())


def test_empty_step_chart_says_why():
    empty = pd.DataFrame(columns=["phase", "step", "span_ns"])
    assert any("no step times: this trace marks no steps" in line for line in _canvas(StepsPlot(empty)))


def test_roofline_labels_cover_no_point(tmp_path):
    a = analyze(load_trace(small_trace(tmp_path, counters=True)))
    points = a.roofline()

    def markers(lines):
        return sum(line.count(m) for line in lines for m in MARKERS)

    with_labels = _canvas(RooflinePlot(points, a.ceilings, selected=0))
    bare = RooflinePlot(points, a.ceilings, selected=0)
    bare._place = lambda *args, **kwargs: False  # the same plot with no text at all
    without = _canvas(bare)
    assert markers(with_labels) == markers(without) > 0  # no marker was written over
    text = "\n".join(with_labels)
    assert "ridge" in text or "bf16" in text  # and labels were placed


def test_enter_on_a_range_keeps_it_open(tmp_path):
    def check(app):
        tree = app.screen.query_one("#range-tree", Tree)
        node = tree.cursor_node
        assert node is not None and node.allow_expand and node.is_expanded

    # Steps, open prefill step 0, move onto its first range (layer=0, which has children), Enter.
    drive([small_trace(tmp_path)], ["2", "enter", "down", "enter", "shift+tab"], check=check)


def test_a_trace_without_steps_says_so_on_the_steps_screen(tmp_path):
    from rooftop.trace import write_trace
    from tui.screens.steps import NO_STEPS

    from tui_helpers import _meta

    meta = _meta(modeled=False)
    meta.pop("steps")
    path = tmp_path / "nosteps.parquet"
    write_trace(path, [{"kind": "kernel", "name": "k", "start_ns": i * 100, "dur_ns": 50, "device": 0, "stream": 7}
                       for i in range(3)], meta)

    def check(app):
        from test_tui_app import text_of
        assert app.screen.query_one("#steps-table").shown == 0
        assert text_of(app.screen.query_one("#steps-hint")) == NO_STEPS

    drive([path], ["2"], check=check)
