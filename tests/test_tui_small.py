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
from tui.widgets.roofline_plot import ALL_MARKERS, RooflinePlot
from tui.widgets.steps_plot import StepsPlot, nice_ticks, step_ticks

from test_tui_app import drive
from tui_helpers import STYLESHEET, small_trace

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MARKERS = ALL_MARKERS


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


def nvtx_trace_without_steps(tmp_path):
    """An Nsight-Systems-like capture: NVTX ranges `main/bench/{warmup,run}` with kernels under them,
    no steps. warmup: 2 kernels of 50 ns; run: 3 kernels of 100 ns and a 40 ns copy."""
    from rooftop.trace import write_trace

    from tui_helpers import _meta

    meta = _meta(modeled=False)
    meta.pop("steps")
    rows = [{"kind": "range", "name": "main", "path": "main", "start_ns": 0, "dur_ns": 2_000},
            {"kind": "range", "name": "bench", "path": "main/bench", "start_ns": 10, "dur_ns": 1_900},
            {"kind": "range", "name": "warmup", "path": "main/bench/warmup", "start_ns": 20, "dur_ns": 300},
            {"kind": "range", "name": "run", "path": "main/bench/run", "start_ns": 400, "dur_ns": 1_000}]
    rows += [{"kind": "kernel", "name": "warm_k", "path": "main/bench/warmup", "start_ns": 30 + 100 * i, "dur_ns": 50,
              "device": 0, "stream": 7} for i in range(2)]
    rows += [{"kind": "kernel", "name": "run_k", "path": "main/bench/run", "start_ns": 500 + 200 * i, "dur_ns": 100,
              "device": 0, "stream": 7} for i in range(3)]
    rows.append({"kind": "memcpy", "name": "Memcpy HtoD", "path": "main/bench/run", "start_ns": 1_200, "dur_ns": 40,
                 "device": 0, "stream": 7})
    path = tmp_path / "nvtx.parquet"
    write_trace(path, rows, meta)
    return path


def test_the_whole_runs_ranges_open_from_steps_without_steps(tmp_path):
    """`a` on the Steps screen opens the NVTX range tree of the whole run (a capture with ranges but no
    steps has nowhere else to browse them): times from the range rows, kernel and copy counts under
    each range; Enter on a range lists its kernels; `t` opens the whole run's timeline."""
    from textual.widgets import Tree

    from tui.screens.steps import StepScreen
    from tui.screens.timeline import TimelineScreen

    def tree(app):
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.whole_run
        root = screen.query_one("#range-tree", Tree).root
        labels, stack = [], [(root, 0)]
        while stack:
            node, depth = stack.pop()
            labels.append("  " * depth + node.label.plain)
            stack.extend((c, depth + 1) for c in reversed(node.children))
        return labels

    def kernels(app):
        return sorted(str(k) for k in app.screen.query_one("#step-kernels").column("short_name"))

    def timeline(app):
        return isinstance(app.screen, TimelineScreen) and app.screen.step is None

    got = drive([nvtx_trace_without_steps(tmp_path)], steps=[
        (["2", "a"], tree), ([], kernels), (["down", "down", "down", "down", "enter"], kernels), (["t"], timeline)])
    assert got[0] == ["whole run",
                      "  main  2 µs · 5 kernels + 1 copy, 440 ns on GPU",
                      "    bench  1.9 µs · 5 kernels + 1 copy, 440 ns on GPU",
                      "      warmup  300 ns · 2 kernels, 100 ns on GPU",
                      "      run  1 µs · 3 kernels + 1 copy, 340 ns on GPU"]
    assert got[1] == ["Memcpy HtoD", "run_k", "run_k", "run_k", "warm_k", "warm_k"]  # the root: every row
    assert got[2] == ["Memcpy HtoD", "run_k", "run_k", "run_k"]  # Enter on `run`
    assert got[3]


def test_a_whole_run_tree_stops_at_the_depth_that_fits():
    """`max_nodes`: the tree keeps whole depths while the count stays within it, and says where it
    stopped; without it (or when everything fits) nothing is left out."""
    import pandas as pd

    from rooftop.analysis.tree import range_tree

    # 3 steps x 4 layers x 2 sublayers: 3 + 12 + 24 nodes
    paths = [f"step={s}/layer={l}/{part}" for s in range(3) for l in range(4) for part in ("attn", "mlp")]
    timed = pd.DataFrame({"path": pd.Categorical(paths), "start_ns": range(0, 240, 10), "dur_ns": 5,
                          "kind": "kernel", "phase": "decode", "step": 0})
    events = timed.copy()
    full = range_tree(events, timed, None, None)
    assert len(full) == 39 and full.attrs["cut_below_depth"] is None
    assert range_tree(events, timed, None, None, max_nodes=39).attrs["cut_below_depth"] is None
    cut = range_tree(events, timed, None, None, max_nodes=38)
    assert len(cut) == 15 and cut.attrs["cut_below_depth"] == 2 and cut["depth"].max() == 1
    # a cut tree's nodes hold the same numbers as the full tree's
    merged = cut.merge(full, on="path", suffixes=("", "_full"))
    assert (merged["kernels"] == merged["kernels_full"]).all() and (merged["dur_ns"] == merged["dur_ns_full"]).all()
    assert list(cut.loc[cut["depth"] == 0, "kernels"]) == [8, 8, 8]
    assert range_tree(events, timed, None, None, max_nodes=2).attrs["cut_below_depth"] == 1  # the top level always shows
