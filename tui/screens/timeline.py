"""Timeline (screen 7, and `t` on a step): streams and the launching host thread over time, idle gaps,
and what the host was doing in each gap.

The lanes and gaps come from `rooftop.analysis.lanes` (built in a thread worker); the canvas
(`TimelineView`) draws only the visible columns. Keys: `+`/`-` zoom, `h`/`l` pan, `0` fit, `j`/`k`
lane, `,`/`.` previous/next block, `]`/`[` next/previous gap by size (largest first), `g` the gap
list, Enter the kernel detail of the selected block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from rooftop.analysis import lanes as tl
from rooftop.present.format import fmt_count, fmt_ns, is_unknown

from tui.widgets.breadcrumb import RooftopScreen, trace_title
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col
from tui.widgets.text import sanitize
from tui.widgets.timeline_canvas import GLYPHS, PARTIAL, TimelineView
from tui.workers import HEAVY, post_if_current

ZOOM = 2.0
PAN = 0.25  # of the view per h/l
GAP_VIEW = 3.0  # a selected gap fills a third of the view


@dataclass
class TimelineReady(Message):
    """The lanes and gaps, built off the UI thread, and the rank whose streams they are."""

    timeline: tl.Timeline
    rank: int | None


class TimelineScreen(RooftopScreen):
    BREADCRUMB = "Timeline"
    EXPORT_NAME = "gaps"
    BINDINGS = [  # the key line shows them in this order, as far as the width allows
        Binding("right_square_bracket", "gap(1)", "Next gap", id="timeline.next_gap", key_display="]"),
        Binding("left_square_bracket", "gap(-1)", "Prev gap", id="timeline.prev_gap", key_display="["),
        Binding("g", "gap_list", "Gaps", id="timeline.gap_list"),
        Binding("enter", "open_block", "Detail", id="timeline.open"),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom", id="timeline.zoom_in", key_display="+"),
        Binding("minus", "zoom(2.0)", "Out", id="timeline.zoom_out", key_display="-"),
        Binding("h,left", "pan(-1)", "Pan", id="timeline.pan_left", key_display="h"),
        Binding("l,right", "pan(1)", "Pan right", id="timeline.pan_right", key_display="l"),
        Binding("0", "fit", "Fit", id="timeline.fit"),
        Binding("j,down", "lane(1)", "Lane down", id="timeline.lane_down", show=False),
        Binding("k,up", "lane(-1)", "Lane up", id="timeline.lane_up", show=False),
        Binding("full_stop", "block(1)", "Next block", id="timeline.next_block", show=False, key_display="."),
        Binding("comma", "block(-1)", "Prev block", id="timeline.prev_block", show=False, key_display=","),
    ]

    def __init__(self, analysis: Any, phase: str | None = None, step: int | None = None, rank: int | None = None,
                 crumbs: list[str] | None = None) -> None:
        if crumbs is None:
            crumbs = [trace_title(analysis), "Timeline"]
            if phase is not None and step is not None:
                crumbs[-1] = f"Timeline · {phase} step {step}"
        super().__init__(analysis, crumbs)
        self.phase, self.step, self.rank = phase, step, rank
        self.timeline: tl.Timeline | None = None
        self.gap_rank = -1  # position in the size order of the selected gap

    def compose_body(self) -> ComposeResult:
        yield Vertical(Static("Building the timeline…", classes="muted"), id="timeline-body")
        yield Static("", id="timeline-info")
        yield Static("", id="timeline-legend")

    def on_mount(self) -> None:
        self._build()

    # --- data -----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="timeline", description="building the timeline")
    def _build(self) -> None:
        a = self.analysis
        with HEAVY:  # after the Overview's analysis, if it still runs: their peaks would add up
            # One rank's streams (ranks run side by side): the one asked for, else the lowest.
            rank = self.rank if self.rank is not None else a.first_rank
            gpu = a.kernels(phase=self.phase, step=self.step, rank=rank)
            calls = a.trace.runtime_rows()  # read from the file now, if the load left them there
            within = None
            if calls is not None and rank is not None and "rank" in calls.columns:
                within = (calls["rank"] == rank).fillna(False).to_numpy(dtype=bool)
            t = tl.build(gpu, calls, within)
            if len(t.gaps) and len(t.gaps) <= 1_000_000:
                t.gap_causes(t.gaps.order[:1])  # classify the gaps here, off the UI thread
            t.comm_summary()
        post_if_current(self, TimelineReady(t, rank))  # (which gives the build's freed heap back)

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # A bug in building must not take the app down: say so in one line where the lanes would be.
        if event.worker.group == "timeline" and event.state == WorkerState.ERROR:
            err = event.worker.error
            body = self.query_one("#timeline-body", Vertical)
            await body.remove_children()
            await body.mount(Static(Text(sanitize(f"Cannot build the timeline ({type(err).__name__}: {err})")),
                                    classes="muted"))

    @on(TimelineReady)
    async def _ready(self, message: TimelineReady) -> None:
        self.timeline, self.rank = message.timeline, message.rank
        body = self.query_one("#timeline-body", Vertical)
        await body.remove_children()
        if not self.timeline.lanes:
            await body.mount(Static("No GPU rows here: nothing to draw on a timeline.", classes="muted"))
            return
        if self.rank is not None and not any("rank" in c for c in self.crumbs):
            crumb = self.query_one("#breadcrumb")
            crumb.crumbs = self.crumbs = [*self.crumbs, f"rank {self.rank}"]  # whose streams these are
            crumb.refresh()
        view = TimelineView(self.timeline, id="timeline")
        await body.mount(view)
        self.query_one("#timeline-legend", Static).update(legend(self.timeline))
        view.fit()
        view.focus()
        self._update_info()

    @property
    def view(self) -> TimelineView | None:
        views = self.query(TimelineView)
        return views.first() if views else None

    # --- actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in {"zoom", "pan", "fit", "gap", "gap_list", "lane", "block", "open_block"} and self.view is None:
            return None  # still building: shown greyed out
        return super().check_action(action, parameters)

    def action_zoom(self, factor: float) -> None:
        v = self.view
        sel = v.selected()
        span = (v.t1 - v.t0) * factor
        if sel is not None and v.t0 <= sel[0].start[sel[1]] <= v.t1:
            # zoom about the selected block, keeping it where it is on screen
            anchor = float(sel[0].start[sel[1]])
            left = (anchor - v.t0) / (v.t1 - v.t0)
            v.set_view(anchor - left * span, anchor + (1 - left) * span)
        else:
            mid = (v.t0 + v.t1) / 2
            v.set_view(mid - span / 2, mid + span / 2)
        self._update_info()

    def action_pan(self, direction: int) -> None:
        v = self.view
        shift = (v.t1 - v.t0) * PAN * direction
        v.set_view(v.t0 + shift, v.t1 + shift)
        self._update_info()

    def action_fit(self) -> None:
        self.view.fit()
        self._update_info()

    def action_lane(self, delta: int) -> None:
        self.view.select_lane(self.view.lane + delta)
        self._update_info()

    def action_block(self, delta: int) -> None:
        self.view.step_block(delta)
        self._update_info()

    def action_gap(self, delta: int) -> None:
        """`]`: the next gap in size order (the largest first); `[`: back towards the largest."""
        n = len(self.timeline.gaps)
        if not n:
            self.notify("No idle gaps between the GPU rows here.", timeout=3)
            return
        self.select_gap(min(max(self.gap_rank + delta, 0), n - 1) if self.gap_rank >= 0 else 0)

    def select_gap(self, rank: int) -> None:
        t, v = self.timeline, self.view
        self.gap_rank = rank
        k = int(t.gaps.order[rank])
        start, end = int(t.gaps.start(k)), int(t.gaps.end(k))
        v.gap = (start, end)
        span = max((end - start) * GAP_VIEW, 100.0)
        mid = (start + end) / 2
        v.set_view(mid - span / 2, mid + span / 2)
        # select the row that ends the gap: Enter opens it
        after = int(t.gaps.next_row(k))
        for li, ln in enumerate(t.lanes):
            i = -1 if ln.host else ln.index_of(after)
            if i >= 0:
                v.select_block(li, i, follow=False)
                break
        self._update_info()

    def action_gap_list(self) -> None:
        frame = self.gap_frame()
        if frame.empty:
            self.notify("No idle gaps between the GPU rows here.", timeout=3)
            return

        def chosen(rank: int | None) -> None:
            if rank is not None:
                self.select_gap(rank)

        self.app.push_screen(GapListScreen(frame), chosen)

    def action_open_block(self) -> None:
        sel = self.view.selected()
        if sel is None:
            self.notify("Select a block first (. and , step through a lane; ] jumps to a gap).", timeout=4)
            return
        ln, i = sel
        if ln.host:
            self.notify("A host row is a CUDA runtime call, not a kernel: no kernel detail.", timeout=4)
            return
        from tui.screens.detail import KernelDetailScreen

        key = self.timeline.describe_row(False, int(ln.pos(i)))["name"]
        self.drill(KernelDetailScreen(self.analysis, key, "short_name", self.crumbs + [str(key)]))

    # --- what the screen says -------------------------------------------------------------------
    def gap_frame(self, limit: int = 2000) -> pd.DataFrame:
        """The gaps, largest first (at most `limit`), with the kernel after each and its launch-to-start."""
        t = self.timeline
        if t is None or not len(t.gaps):
            return pd.DataFrame()
        g = t.gaps.frame(t.gaps.order[:limit])
        after = g["after"].to_numpy()
        col = "short_name" if "short_name" in t.gpu.columns else "name"
        cause, what = t.gap_causes(t.gaps.order[:limit])
        return pd.DataFrame({
            "rank": np.arange(1, len(g) + 1), "dur_ns": g["dur_ns"], "at_ns": g["start_ns"] - t.t0,
            "next_kernel": t.gpu[col].iloc[after].astype(object).to_numpy(),
            "launch_ns": t.launch_to_start(after),
            "cause": [CAUSE_WORDS.get(c, "—") for c in cause],
            "what": [w if isinstance(w, str) else "" for w in what],
        })

    def export_frame(self) -> pd.DataFrame | None:
        return self.gap_frame(limit=1_000_000) if self.timeline is not None else None

    def _update_info(self) -> None:
        info = self.query_one("#timeline-info", Static)
        if self.timeline is None or self.view is None:
            return
        info.update(self.describe())

    def describe(self) -> Text:
        t, v = self.timeline, self.view
        text = Text(no_wrap=False)
        n = len(t.gaps)
        total = fmt_ns(t.t1 - t.t0)
        largest = f" (max {fmt_ns(int(t.gaps.dur(t.gaps.order[0])))})" if n else ""
        lo, hi = max(v.t0, t.t0) - t.t0, min(v.t1, t.t1) - t.t0
        text.append(f"{fmt_count(len(t.gpu), 'row')} in {total} · {fmt_count(n, 'gap')}{largest} · "
                    f"view +{fmt_ns(lo)}–{fmt_ns(hi)}", "dim")
        comm = t.comm_summary()
        if comm:
            c, o, x = comm
            text.append(f"\ncommunication {fmt_ns(c)}: {fmt_ns(o)} overlapped by compute, {fmt_ns(x)} exposed "
                        f"({x / c:.0%})" if c > 0 else "", "bold" if c > 0 and x / c >= 0.5 else "")
        if v.gap is not None and self.gap_rank >= 0:
            self._describe_gap(text)
        sel = v.selected()
        if sel is not None:
            ln, i = sel
            row = t.describe_row(ln.host, int(ln.pos(i)))
            what = tl.CODES[ln.code[i]]
            text.append(f"\n▶ {ln.label}: ", "bold")
            text.append(sanitize(row["name"]))
            text.append(f" · {fmt_ns(row['dur_ns'])} at +{fmt_ns(row['start_ns'] - t.t0)} · {what}")
            if not ln.host:
                d = t.launch_to_start(int(ln.pos(i)))[0]
                if np.isfinite(d):
                    text.append(f" · launch→start {fmt_ns(d)}")
        return text

    def _describe_gap(self, text: Text) -> None:
        t = self.timeline
        k = int(t.gaps.order[self.gap_rank])
        start, end = int(t.gaps.start(k)), int(t.gaps.end(k))
        dur = end - start
        text.append(f"\nGap {self.gap_rank + 1} of {len(t.gaps):,} (by size): ", "bold")
        text.append(f"{fmt_ns(dur)} idle at +{fmt_ns(start - t.t0)}")
        cause, what = t.gap_causes([k])
        if cause[0] is not None:
            text.append(" · cause: ", "bold")
            text.append(CAUSE_WORDS.get(cause[0], str(cause[0])))
            if isinstance(what[0], str):
                text.append(" in ")
                text.append(sanitize(what[0]))
        hosts = t.host_lanes
        if not hosts:
            text.append("\nHost: unknown (no CUDA runtime calls in this trace; Kineto and nsys imports carry them)",
                        "dim")
        for ln in hosts:
            act = tl.host_during(ln, t.host, start, end)
            text.append(f"\n{ln.label}: ", "bold")
            if act.calls and act.calls[0].overlap_ns * 2 >= dur:
                c = act.calls[0]
                text.append(sanitize(c.name))
                text.append(f" ({c.category}) for {fmt_ns(c.overlap_ns)} of it")
                if c.op:
                    text.append(" in ")
                    text.append(sanitize(c.op))
            else:
                text.append(f"in no CUDA call for {fmt_ns(act.outside_calls_ns)} of it (Python / CPU ops)")
                if act.calls:
                    text.append(f"; {fmt_count(act.total_calls, 'call')}, longest ")
                    text.append(sanitize(act.calls[0].name))
                    text.append(f" {fmt_ns(act.calls[0].overlap_ns)}")
        after = int(t.gaps.next_row(k))
        row = t.describe_row(False, after)
        text.append("\nNext: ", "bold")
        text.append(sanitize(row["name"]))
        d = t.launch_to_start(after)[0]
        if np.isfinite(d):
            launched = int(row["start_ns"]) - int(d)
            why = ("after the GPU went idle: it waited on the host" if launched > start
                   else "before the gap: queued behind something else (a sync, an event, another stream)")
            text.append(f" launch→start {fmt_ns(d)}, launched {why}")
        else:
            text.append(" launch→start unknown (no matching runtime call)", "dim")


def legend(timeline: tl.Timeline) -> Text:
    """The glyphs of the categories this timeline holds (all of them would not fit in 80 columns)."""
    present = np.zeros(len(tl.CODES), dtype=bool)
    for ln in timeline.lanes:
        present |= np.bincount(ln.code[ln.code >= 0], minlength=len(tl.CODES)).astype(bool)
    text = Text(no_wrap=True, overflow="ellipsis")
    for i in np.flatnonzero(present).tolist():
        cat = tl.CODES[i]
        text.append(GLYPHS[cat])
        text.append(f"{cat} ", "dim")
    text.append(PARTIAL)
    text.append("<half busy", "dim")
    return text


# What a gap's cause means on screen (rooftop.analysis.idle: the definitions).
CAUSE_WORDS = {"edge": "edge", "launch": "launch floor", "sync": "sync", "host": "host-bound", "other": "queued"}

GAP_COLS = [
    Col("rank", "#", "int"), Col("dur_ns", "idle µs", "ns"), Col("at_ns", "at µs", "ns"),
    Col("cause", "cause", "text"), Col("what", "host op / call", "text"),
    Col("launch_ns", "launch→start µs", "ns"), Col("next_kernel", "next kernel", "text"),
]


class GapListScreen(ModalScreen[int | None]):
    """The gaps, largest first; Enter jumps to one."""

    BINDINGS = [Binding("escape,g", "dismiss_none", "Close", id="gaps.close")]

    def __init__(self, frame: pd.DataFrame) -> None:
        super().__init__()
        self.frame = frame

    def compose(self) -> ComposeResult:
        with Vertical(id="gap-list-body"):
            yield Static(f"Idle gaps, largest first ({len(self.frame):,} shown) · Enter: go there · Esc: close",
                         classes="hint")
            yield FrameTable(GAP_COLS, self.frame, id="gap-table")

    def on_mount(self) -> None:
        table = self.query_one("#gap-table", FrameTable).table
        if table is not None:
            table.focus()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @on(FrameTable.Selected, "#gap-table")
    def _chosen(self, event: FrameTable.Selected) -> None:
        self.dismiss(int(event.row["rank"]) - 1)


def open_for_screen(app, screen) -> bool:
    """`t`: the timeline of the step the screen shows (a step view, or the Steps table's row)."""
    analysis = getattr(screen, "analysis", None)
    phase, step, rank = getattr(screen, "phase", None), getattr(screen, "step", None), getattr(screen, "rank", None)
    if analysis is not None and getattr(screen, "whole_run", False):  # the whole run's range tree
        app.push_screen(TimelineScreen(analysis, None, None, rank, list(screen.crumbs) + ["timeline"]))
        return True
    if step is None:
        tables = [t for t in screen.query(FrameTable) if t.id == "steps-table"]
        row = tables[0].current() if tables else None
        if row is None or "step" not in row.index:
            return False
        phase, step = row.get("phase"), int(row["step"])
        rank = row.get("straggler") if "straggler" in row.index else row.get("rank")
        rank = None if is_unknown(rank) else int(rank)
    if analysis is None or step is None:
        return False
    crumbs = list(getattr(screen, "crumbs", [trace_title(analysis)]))
    if getattr(screen, "step", None) is None:
        crumbs.append(f"{phase} step {step}")
    app.push_screen(TimelineScreen(analysis, phase, int(step), rank, crumbs + ["timeline"]))
    return True
