"""Steps (screen 2): one row per step; Enter opens the step's NVTX range tree and its kernels."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static, Tree

from rooftop.format import fmt_ns

from ..widgets.breadcrumb import RooftopScreen
from ..widgets.table import Col, FrameTable
from ..widgets.text import sanitize

STEP_COLS = [
    Col("phase", "phase", "text"), Col("step", "step", "int"), Col("kernels", "kernels", "int"),
    Col("span_ns", "span µs", "ns"), Col("busy_ns", "busy µs", "ns"), Col("idle_frac", "idle %", "pct"),
    Col("tflops", "TFLOP/s", "num", 2), Col("tbps", "TB/s", "num", 2), Col("mfu", "MFU %", "pct"),
    Col("mbu", "MBU %", "pct"), Col("tokens_per_s", "tok/s", "num", 0),
]

KERNEL_COLS = [
    Col("short_name", "kernel", "text"), Col("dur_ns", "time µs", "ns"), Col("start_ns", "start µs", "ns"),
    Col("path", "range", "text"), Col("category", "category", "text"),
]


class StepsScreen(RooftopScreen):
    BREADCRUMB = "Steps"
    EXPORT_NAME = "steps"

    def compose_body(self) -> ComposeResult:
        yield FrameTable(STEP_COLS, self.analysis.steps, id="steps-table")
        yield Static("Enter: open the step · e: export", classes="hint")

    @on(FrameTable.Selected, "#steps-table")
    def open_step(self, event: FrameTable.Selected) -> None:
        phase, step = event.row["phase"], int(event.row["step"])
        self.drill(StepScreen(self.analysis, phase, step, self.crumbs + [f"{phase} step {step}"]))


class StepScreen(RooftopScreen):
    """One step: its NVTX ranges as a tree (with times); the kernels under the selected range."""

    EXPORT_NAME = "step"

    def __init__(self, analysis, phase: str, step: int, crumbs: list[str]) -> None:
        super().__init__(analysis, crumbs)
        self.phase, self.step = phase, step

    def compose_body(self) -> ComposeResult:
        ranges = self.analysis.range_tree(self.phase, self.step)
        tree: Tree[str | None] = Tree(Text(f"{self.phase} step {self.step}"), data=None, id="range-tree")
        tree.show_root = True
        tree.root.expand()
        nodes = {}
        for r in ranges.to_dict("records"):
            parent_path = r["path"].rsplit("/", 1)[0] if "/" in r["path"] else None
            parent = nodes.get(parent_path, tree.root)
            node = parent.add(self._label(r), data=r["path"], expand=True)
            nodes[r["path"]] = node
        yield tree
        yield FrameTable(KERNEL_COLS, self.analysis.kernels(phase=self.phase, step=self.step),
                         id="step-kernels")

    @staticmethod
    def _label(r: dict) -> Text:
        text = Text(sanitize(r.get("name")), no_wrap=True)
        text.append(f"  {fmt_ns(r.get('dur_ns'))}", "dim")
        if r.get("kernels"):
            text.append(f" · {int(r['kernels'])} kernels, {fmt_ns(r.get('kernel_ns'))} on GPU", "dim")
        return text

    def on_mount(self) -> None:
        self.query_one("#range-tree", Tree).focus()

    @on(Tree.NodeHighlighted, "#range-tree")
    async def show_range(self, event: Tree.NodeHighlighted) -> None:
        path = event.node.data
        frame = self.analysis.kernels(phase=self.phase, step=self.step, path_prefix=path)
        await self.query_one("#step-kernels", FrameTable).set_frame(frame)

        crumb = self.query_one("#breadcrumb")
        rel = _relative(path, self.phase, self.step) if path else None
        crumb.crumbs = self.crumbs + ([rel] if rel else [])
        crumb.refresh()

    @on(Tree.NodeSelected, "#range-tree")
    def focus_kernels(self, event: Tree.NodeSelected) -> None:
        self.query_one("#step-kernels", FrameTable).query_one("DataTable").focus()

    @on(FrameTable.Selected, "#step-kernels")
    def open_kernel(self, event: FrameTable.Selected) -> None:
        from .detail import KernelDetailScreen

        key = event.row["short_name"]
        self.drill(KernelDetailScreen(self.analysis, key, "short_name", self.query_one("#breadcrumb").crumbs + [str(key)]))


def _relative(path: str, phase: str, step: int) -> str | None:
    """`decode/step=12/layer=3/attn` -> `layer=3/attn` (the breadcrumb already says the step)."""
    prefix = f"{phase}/step={step}"
    if path == prefix:
        return None
    return path[len(prefix) + 1:] if path.startswith(prefix + "/") else path


