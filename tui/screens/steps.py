"""Steps (screen 2): one row per step; Enter opens the step's NVTX range tree and its kernels.

A multi-rank run has one row per rank and step, and `r` switches to one row per step with the
rank-to-rank spread of its time and the straggler (slowest) rank; Enter there opens the straggler's step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static, Tree

from rooftop.present.columns import RANK_STEPS, STEPS
from rooftop.present.format import FULL_COVERAGE, fmt_count, fmt_ns

from tui.widgets.breadcrumb import RooftopScreen
from tui.widgets.columns import grid_col, grid_cols
from tui.widgets.table import FrameTable
from tui.widgets.table_values import Col
from tui.widgets.text import sanitize
from tui.workers import post_if_current

# Headers and units come from the core's column registry (rooftop/present/columns.py). A rate over part of
# the step's time (its costs known for less than all of it) is a lower bound: `>=x`, as in the report.
_LOWER = {"tflops": "_flops_lower", "mfu": "_flops_lower", "tbps": "_bytes_lower", "mbu": "_bytes_lower"}
STEP_COLS = [replace(c, lower=_LOWER.get(c.key)) for c in grid_cols(
    STEPS, "phase", "step", "kernels", "span_ns", "busy_ns", "idle_frac", "tflops", "tbps", "mfu", "mbu",
    "tokens_per_s", "phase_source")]


def bounded_steps(rows: pd.DataFrame) -> pd.DataFrame:
    """The step table as the grid shows it: a rate whose status is unknown is unknown (never 0), and
    `_bytes_lower` / `_flops_lower` mark the rows whose rates are lower bounds (status "lower bound",
    or coverage below full: `rooftop.present.format.bounded_cell`'s rule)."""
    out = rows.copy()
    for status, cov, cols, flag in (("mbu_status", "bytes_coverage", ("tbps", "mbu"), "_bytes_lower"),
                                    ("mfu_status", "flops_coverage", ("tflops", "mfu"), "_flops_lower")):
        st = out[status].astype(object) if status in out.columns else pd.Series(None, index=out.index, dtype=object)
        c = pd.to_numeric(out[cov], errors="coerce") if cov in out.columns else pd.Series(np.nan, index=out.index)
        for col in cols:
            if col in out.columns:
                out[col] = out[col].where(st != "unknown")
        out[flag] = ((st == "lower bound") | (c < FULL_COVERAGE)).to_numpy(dtype=bool)
    return out

RANK_COL = grid_col(STEPS["rank"])
DEVICE_COL = grid_col(STEPS["device"])  # one rank driving several GPUs: a row per device, chosen like a rank

SPREAD_COLS = grid_cols(RANK_STEPS, "phase", "step", "ranks", "min_ns", "median_ns", "max_ns", "spread", "straggler")

HINT = "Enter: open the step · a: the whole run's ranges · e: export"
NO_STEPS = ("No steps: this trace marks none (no step ranges such as `decode/step=3`, no step metadata); "
            "a: the whole run's NVTX ranges and kernels; Kernels (3) and the Overview cover the whole run.")
RANK_HINTS = {False: "Enter: open the step on its rank · r: spread between ranks · a: whole run · e: export",
              True: "Enter: open the step on its straggler rank · r: every rank · a: whole run · e: export"}
WHOLE_RUN = "whole run"
# The whole run's tree stops at the last depth within this many ranges (a million-kernel run has a
# few hundred thousand, one subtree per step: too many to lay out, and a step view shows them).
WHOLE_RUN_NODES = 5_000

KERNEL_COLS = [
    Col("short_name", "kernel", "text"), Col("dur_ns", "time µs", "ns"), Col("start_ns", "start µs", "ns"),
    Col("path", "range", "text"), Col("category", "category", "text"),
]


class StepsScreen(RooftopScreen):
    BREADCRUMB = "Steps"
    EXPORT_NAME = "steps"
    BINDINGS = [Binding("r", "toggle_spread", "Rank spread", id="steps.spread"),
                Binding("a", "whole_run", "Whole run", id="steps.whole_run",
                        tooltip="the NVTX range tree and kernels of the whole run, steps or not")]
    # One row per step with the spread between ranks (else one row per rank and step).
    spread: reactive[bool] = reactive(False, init=False)

    @dataclass
    class RowsReady(Message):
        spread: bool
        rows: pd.DataFrame | None

    def __init__(self, analysis, crumbs: list[str] | None = None) -> None:
        super().__init__(analysis, crumbs)
        self.multi_rank = len(analysis.trace.ranks) > 1  # from the rows' rank column: no analysis
        self.multi_device = False  # known once the step table is loaded (it has a device column)

    def compose_body(self) -> ComposeResult:
        cols = [RANK_COL, *STEP_COLS] if self.multi_rank else STEP_COLS
        yield FrameTable(cols, id="steps-table")
        yield Static(RANK_HINTS[False] if self.multi_rank else HINT, id="steps-hint", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#steps-table", FrameTable).query_one("DataTable").focus()
        self._load(self.spread)

    @work(thread=True, exclusive=True, exit_on_error=False, group="steps")
    def _load(self, spread: bool) -> None:
        rows = self.analysis.rank_steps if spread else self.analysis.steps
        post_if_current(self, self.RowsReady(spread, rows))

    @on(RowsReady)
    async def _show_rows(self, message: RowsReady) -> None:
        if message.spread != self.spread or message.rows is None:
            return
        table = self.query_one("#steps-table", FrameTable)
        if message.spread:
            await table.set_frame(message.rows, SPREAD_COLS)
        else:
            self.multi_device = "device" in message.rows.columns
            cols = ([RANK_COL] if self.multi_rank else []) + ([DEVICE_COL] if self.multi_device else []) + STEP_COLS
            await table.set_frame(bounded_steps(message.rows), cols)
        hint = RANK_HINTS[message.spread] if self.multi_rank else HINT
        if not len(message.rows):
            hint = NO_STEPS
        self.query_one("#steps-hint", Static).update(hint)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "toggle_spread":
            return self.multi_rank  # a single-rank run has no spread: keep `r` off the key line
        return super().check_action(action, parameters)

    def action_toggle_spread(self) -> None:
        self.spread = not self.spread

    def action_whole_run(self) -> None:
        # Every range, inside steps or not: an Nsight Systems capture of a benchmark has NVTX ranges
        # but no steps, and this is where they are browsed. A multi-rank run: the first rank (ranges
        # of ranks that ran side by side would add up).
        rank = self.analysis.first_rank if self.multi_rank else None
        crumb = WHOLE_RUN + (f" · rank {rank}" if rank is not None else "")
        self.drill(StepScreen(self.analysis, None, None, self.crumbs + [crumb], rank=rank))

    def watch_spread(self, spread: bool) -> None:
        self._load(spread)

    @on(FrameTable.Selected, "#steps-table")
    def open_step(self, event: FrameTable.Selected) -> None:
        row = event.row
        phase, step = row["phase"], int(row["step"])
        rank = None
        if self.multi_rank:
            rank = int(row["straggler"] if self.spread else row["rank"])
        device = int(row["device"]) if not self.spread and self.multi_device and "device" in row else None
        crumb = (f"{phase} step {step}" + (f" · rank {rank}" if rank is not None else "")
                 + (f" · device {device}" if device is not None else ""))
        self.drill(StepScreen(self.analysis, phase, step, self.crumbs + [crumb], rank=rank, device=device))


class StepScreen(RooftopScreen):
    """One step: its NVTX ranges as a tree (with times); the kernels under the selected range.
    `phase` and `step` None: the whole run.

    On a multi-rank run, one rank's step (`rank`): the same step on every rank would add up ranges
    that ran side by side on different GPUs."""

    EXPORT_NAME = "step"

    def __init__(self, analysis, phase: str | None, step: int | None, crumbs: list[str],
                 rank: int | None = None, device: int | None = None) -> None:
        super().__init__(analysis, crumbs)
        self.phase, self.step, self.rank, self.device = phase, step, rank, device

    def _kernels(self, path_prefix: str | None = None) -> pd.DataFrame:
        return self.analysis.kernels(phase=self.phase, step=self.step, path_prefix=path_prefix, rank=self.rank,
                                     device=self.device)

    @property
    def whole_run(self) -> bool:
        return self.step is None

    def _ranges(self) -> pd.DataFrame:
        return self.analysis.range_tree(self.phase, self.step, rank=self.rank,
                                        max_nodes=WHOLE_RUN_NODES if self.whole_run else None, device=self.device)

    @dataclass
    class StepReady(Message):
        ranges: pd.DataFrame
        kernels: pd.DataFrame

    def compose_body(self) -> ComposeResult:
        root = Text(f"{self.phase} step {self.step}" if self.step is not None else WHOLE_RUN)
        why = _inferred_phase(self.analysis.trace.meta, self.phase, self.step)
        if why:  # the phase is the step's own work's, not its marker's: say from what
            root.append(f"  (phase inferred: {sanitize(why)})", "dim")
        tree: Tree[str | None] = Tree(root, data=None, id="range-tree")
        tree.show_root = True
        tree.auto_expand = False  # Enter on a range shows its kernels; it must not fold the range away
        tree.root.expand()
        yield tree
        yield FrameTable(KERNEL_COLS, id="step-kernels")

    @work(thread=True, exclusive=True, exit_on_error=False, group="step")
    def _load(self) -> None:
        post_if_current(self, self.StepReady(self._ranges(), self._kernels()))

    @on(StepReady)
    async def _show_step(self, message: StepReady) -> None:
        tree = self.query_one("#range-tree", Tree)
        nodes = {}
        for r in message.ranges.to_dict("records"):
            parent_path = r["path"].rsplit("/", 1)[0] if "/" in r["path"] else None
            parent = nodes.get(parent_path, tree.root)
            nodes[r["path"]] = parent.add(self._label(r), data=r["path"], expand=True)
        cut = message.ranges.attrs.get("cut_below_depth")
        if cut is not None:
            tree.root.add_leaf(Text(f"(ranges deeper than level {cut} left out: over {WHOLE_RUN_NODES:,} ranges; "
                                    "a step view (Steps, Enter) shows a step's)", style="dim"))
        await self.query_one("#step-kernels", FrameTable).set_frame(message.kernels)

    @staticmethod
    def _label(r: dict) -> Text:
        text = Text(sanitize(r.get("name")), no_wrap=True)
        text.append(f"  {fmt_ns(r.get('dur_ns'))}", "dim")
        if r.get("kernels") or r.get("copies"):
            copies = f" + {fmt_count(int(r['copies']), 'copy', 'copies')}" if r.get("copies") else ""
            text.append(f" · {fmt_count(int(r['kernels']), 'kernel')}{copies}, {fmt_ns(r.get('kernel_ns'))} on GPU", "dim")
        return text

    def on_mount(self) -> None:
        self.query_one("#range-tree", Tree).focus()
        self._load()

    @dataclass
    class RangeReady(Message):
        """The kernels under one range, filtered off the UI thread."""

        path: str | None
        kernels: pd.DataFrame

    @on(Tree.NodeHighlighted, "#range-tree")
    def show_range(self, event: Tree.NodeHighlighted) -> None:
        path = event.node.data
        self._load_range(path)  # a million-row filter per key press would stall the UI
        crumb = self.query_one("#breadcrumb")
        rel = _relative(path, self.phase, self.step) if path else None
        crumb.crumbs = self.crumbs + ([rel] if rel else [])
        crumb.refresh()

    @work(thread=True, exclusive=True, exit_on_error=False, group="step-range")
    def _load_range(self, path: str | None) -> None:
        post_if_current(self, self.RangeReady(path, self._kernels(path)))

    @on(RangeReady)
    async def _show_range(self, message: RangeReady) -> None:
        node = self.query_one("#range-tree", Tree).cursor_node
        if node is not None and node.data != message.path:
            return  # the cursor moved on: a newer result follows
        await self.query_one("#step-kernels", FrameTable).set_frame(message.kernels)

    @on(Tree.NodeSelected, "#range-tree")
    def focus_kernels(self, event: Tree.NodeSelected) -> None:
        self.query_one("#step-kernels", FrameTable).query_one("DataTable").focus()

    @on(FrameTable.Selected, "#step-kernels")
    def open_kernel(self, event: FrameTable.Selected) -> None:
        from tui.screens.detail import KernelDetailScreen

        key = event.row["short_name"]
        self.drill(KernelDetailScreen(self.analysis, key, "short_name", self.query_one("#breadcrumb").crumbs + [str(key)],
                                      phase=self.phase, step=self.step, rank=self.rank, device=self.device))


def _inferred_phase(meta: dict, phase: str | None, step: int | None) -> str | None:
    """The evidence for a step's phase where rooftop.trace.steps.infer_phases gave it (`phase_reason`)."""
    if step is None:
        return None
    for e in meta.get("steps") or []:
        if isinstance(e, dict) and e.get("phase") == phase and e.get("index") == step \
                and e.get("phase_source") == "inferred":
            return str(e.get("phase_reason") or "from the step's work")
    return None


def _relative(path: str, phase: str | None, step: int | None) -> str | None:
    """`decode/step=12/layer=3/attn` -> `layer=3/attn` (the breadcrumb already says the step); the
    whole run's paths as they are."""
    if step is None:
        return path
    prefix = f"{phase}/step={step}"
    if path == prefix:
        return None
    return path[len(prefix) + 1:] if path.startswith(prefix + "/") else path


