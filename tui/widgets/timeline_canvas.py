"""The timeline canvas: a time ruler, one line per lane (CUDA stream or host thread), a gap marker.

Drawn line by line with the Line API (`render_line`), as Toolong draws a huge log: each line asks
its lane for the busy fraction and category of each visible column (`Lane.raster`, binary searches
over sorted starts and busy-time prefix sums), so the cost of a repaint depends on the width, not on
how many kernels the lane holds. Categories have a glyph each as well as a colour: the canvas reads
the same with `NO_COLOR=1`.
"""
from __future__ import annotations

import math

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from rooftop.analysis import lanes as tl
from rooftop.present.format import fmt_ns, fmt_ns_at

LABEL_W = 13  # "stream 123", "host 2910249" (Linux thread ids reach 7 digits) and a space
# One glyph per category, all one cell wide (block elements and box drawing).
GLYPHS = {
    "gemm": "█", "attention": "▓", "norm": "▒", "elementwise": "░", "reduction": "▚", "comm": "▞",
    "memory": "▄", "routing": "▙", "quantize": "▟", "other": "▀", "launch": "┃", "sync": "━", "copy": "┅", "call": "┄",
}
PARTIAL = "▁"  # a column less than half busy: short kernels in mostly idle time
IDLE = " "
GAP_IDLE = "·"  # idle columns inside the selected gap
_GLYPH_OF = np.array([GLYPHS[c] for c in tl.CODES], dtype=object)


def glyph_row(frac: np.ndarray, code: np.ndarray) -> list[str]:
    """The characters of one lane line from its raster (pure: tested without an app)."""
    out = np.full(len(frac), IDLE, dtype=object)
    some = code >= 0
    out[some & (frac < 0.5)] = PARTIAL
    full = some & (frac >= 0.5)
    out[full] = _GLYPH_OF[code[full]]
    return out.tolist()


def ruler_ticks(t0: float, t1: float, width: int, origin: int, every: int = 16) -> list[tuple[int, str]]:
    """(column, label) of time ticks at round offsets from `origin` (1, 2 or 5 x 10^k ns apart,
    about every `every` columns), as Nsight Systems labels its ruler: `+20 ms`, `+40 ms`, never
    `-797 µs` or `+18.6 ms`. A tick sits in the column whose time span holds its time."""
    if width <= 0 or t1 <= t0:
        return []
    per_col = (t1 - t0) / width
    want = per_col * every
    mag = 10.0 ** math.floor(math.log10(want)) if want > 0 else 1.0
    step = next((m * mag for m in (1, 2, 5, 10) if m * mag >= want), 10 * mag)
    step = max(step, 1.0)
    first = math.ceil((t0 - origin) / step)
    out: list[tuple[int, str]] = []
    k = first
    while True:
        offset = k * step
        col = int((origin + offset - t0) / per_col)
        if col >= width:
            break
        label = ("+" if offset > 0 else "-") + fmt_ns_at(abs(offset), step) if offset else "0"
        if col >= 0 and col + len(label) + 1 <= width and (not out or col > out[-1][0] + len(out[-1][1])):
            out.append((col, label))
        k += 1
    return out


class TimelineView(Widget, can_focus=True):
    """The lanes of a `rooftop.analysis.lanes.Timeline`; the screen owns the keys and moves
    the view through `set_view`, `select_block`, `select_gap`."""

    COMPONENT_CLASSES = {f"timeline--{c}" for c in tl.CODES} | {
        "timeline--label", "timeline--label-selected", "timeline--ruler", "timeline--gap", "timeline--cursor",
        "timeline--partial",
    }

    def __init__(self, timeline: tl.Timeline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tl = timeline
        self.t0, self.t1 = float(timeline.t0), float(timeline.t1)
        self.lane = 0  # selected lane
        self.block = -1  # selected row index within the selected lane, -1 none
        self.gap: tuple[int, int] | None = None  # selected gap [start, end)
        self.top = 0  # first lane shown when they do not all fit

    # --- geometry -------------------------------------------------------------------------------
    @property
    def canvas_width(self) -> int:
        return max(1, self.size.width - LABEL_W)

    def lane_rows(self) -> int:
        """How many lanes fit (the ruler and the gap marker take a line each)."""
        return max(1, self.size.height - 2) if self.size.height else len(self.tl.lanes)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.tl.lanes) + 2

    def column_of(self, t: float) -> int:
        return int((t - self.t0) / max(self.t1 - self.t0, 1e-9) * self.canvas_width)

    # --- state ----------------------------------------------------------------------------------
    def set_view(self, t0: float, t1: float) -> None:
        span = max(t1 - t0, 50.0)  # 50 ns wide at most zoom: finer than any kernel
        full = self.tl.t1 - self.tl.t0
        if span >= full * 1.5:  # never zoom out past the whole (with some margin)
            span = full * 1.5
        mid = (t0 + t1) / 2
        mid = min(max(mid, self.tl.t0), self.tl.t1)
        self.t0, self.t1 = mid - span / 2, mid + span / 2
        self.refresh()

    def fit(self) -> None:
        pad = (self.tl.t1 - self.tl.t0) * 0.01
        self.t0, self.t1 = self.tl.t0 - pad, self.tl.t1 + pad
        self.refresh()

    def select_lane(self, lane: int) -> None:
        n = len(self.tl.lanes)
        if not n:
            return
        old = self.tl.lanes[self.lane] if self.block >= 0 else None
        t = (old.start[self.block] if old is not None else (self.t0 + self.t1) / 2)
        self.lane = min(max(lane, 0), n - 1)
        rows = self.lane_rows()
        if self.lane < self.top:
            self.top = self.lane
        elif self.lane >= self.top + rows:
            self.top = self.lane - rows + 1
        # keep the cursor at the same time on the new lane: the row running then, else the next
        ln = self.tl.lanes[self.lane]
        i = ln.at(int(t))
        if i < 0:
            i = int(np.searchsorted(ln.start, t))
        self.block = i if 0 <= i < len(ln) else (len(ln) - 1 if len(ln) else -1)
        self.refresh()

    def select_block(self, lane: int, index: int, follow: bool = True) -> None:
        self.lane, self.block = lane, index
        rows = self.lane_rows()
        if not (self.top <= lane < self.top + rows):
            self.top = max(0, lane - rows + 1)
        if follow and index >= 0:
            ln = self.tl.lanes[lane]
            s, e = float(ln.start[index]), float(ln.end_of(index))
            if e < self.t0 or s > self.t1:
                span = self.t1 - self.t0
                self.t0, self.t1 = s - span / 2, s + span / 2
        self.refresh()

    def step_block(self, delta: int) -> None:
        """The next/previous row on the selected lane (the first one in view when none is selected)."""
        if not self.tl.lanes:
            return
        ln = self.tl.lanes[self.lane]
        if not len(ln):
            return
        if self.block < 0:
            lo, hi = ln.visible(int(self.t0), int(self.t1))
            i = lo if lo < len(ln) else len(ln) - 1
        else:
            i = min(max(self.block + delta, 0), len(ln) - 1)
        self.select_block(self.lane, i)

    def selected(self) -> tuple[tl.Lane, int] | None:
        if not self.tl.lanes or self.block < 0:
            return None
        ln = self.tl.lanes[self.lane]
        return (ln, self.block) if self.block < len(ln) else None

    # --- drawing --------------------------------------------------------------------------------
    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"timeline--{name}", partial=True)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        rows = self.lane_rows()
        base = self.rich_style
        if y == 0:
            return self._ruler(width).apply_style(base)
        lane_y = y - 1
        if lane_y < min(rows, len(self.tl.lanes) - self.top):
            return self._lane(self.top + lane_y, width).apply_style(base)
        if lane_y == min(rows, len(self.tl.lanes) - self.top):
            return self._gap_marker(width).apply_style(base)
        return Strip.blank(width, base)

    def _ruler(self, width: int) -> Strip:
        cw = self.canvas_width
        line = [" "] * cw
        for col, label in ruler_ticks(self.t0, self.t1, cw, self.tl.t0):
            line[col] = "╵"
            for k, ch in enumerate(label, start=col + 1):
                if k < cw:
                    line[k] = ch
        head = fmt_ns(self.t1 - self.t0).ljust(LABEL_W)[:LABEL_W]  # the width of the view
        return Strip([Segment(head, self._style("ruler")), Segment("".join(line), self._style("ruler"))], width)

    def _lane(self, index: int, width: int) -> Strip:
        ln = self.tl.lanes[index]
        cw = self.canvas_width
        frac, code = ln.raster(self.t0, self.t1, cw)
        chars = glyph_row(frac, code)
        gap_cols = None
        if self.gap is not None:
            a, b = self.column_of(self.gap[0]), self.column_of(self.gap[1])
            gap_cols = (max(a, 0), min(b, cw))
            for c in range(gap_cols[0], gap_cols[1]):
                if code[c] < 0:
                    chars[c] = GAP_IDLE
        cursor = None
        if index == self.lane and self.block >= 0 and self.block < len(ln):
            a = self.column_of(ln.start[self.block])
            b = max(a + 1, self.column_of(ln.end_of(self.block)))
            if b > 0 and a < cw:
                cursor = (max(a, 0), min(b, cw))
                for c in range(*cursor):
                    if chars[c] in (IDLE, GAP_IDLE, PARTIAL):
                        chars[c] = GLYPHS[tl.CODES[ln.code[self.block]]]
        label_style = self._style("label-selected" if index == self.lane else "label")
        segs = [Segment(ln.label.ljust(LABEL_W)[:LABEL_W], label_style)]
        # runs of one style: a few segments per line, not one per cell
        styles = [self._cell_style(code[c], frac[c], gap_cols, cursor, c) for c in range(cw)]
        start = 0
        for c in range(1, cw + 1):
            if c == cw or styles[c] is not styles[start]:
                segs.append(Segment("".join(chars[start:c]), styles[start]))
                start = c
        return Strip(segs, width)

    def _cell_style(self, code: int, frac: float, gap_cols, cursor, c: int) -> Style:
        if cursor is not None and cursor[0] <= c < cursor[1]:
            return self._styles["cursor"]
        if code < 0:
            return self._styles["gap"] if gap_cols is not None and gap_cols[0] <= c < gap_cols[1] else self._styles["idle"]
        if frac < 0.5:
            return self._styles["partial"]
        return self._styles[tl.CODES[code]]

    @property
    def _styles(self) -> dict[str, Style]:
        # resolved once per render (the CSS may change with the theme), shared by identity per line
        cache = getattr(self, "_style_cache", None)
        key = self.app.theme if self.is_mounted else None
        if cache is None or cache[0] != key:
            styles = {c: self._style(c) for c in tl.CODES}
            styles.update(cursor=self._style("cursor"), gap=self._style("gap"), partial=self._style("partial"),
                          idle=Style())
            self._style_cache = cache = (key, styles)
        return cache[1]

    def _gap_marker(self, width: int) -> Strip:
        cw = self.canvas_width
        if self.gap is None:
            return Strip.blank(width, self.rich_style)
        a, b = self.column_of(self.gap[0]), self.column_of(self.gap[1])
        label = f" {fmt_ns(self.gap[1] - self.gap[0])} idle "
        line = [" "] * cw
        lo, hi = max(a, 0), min(max(b, a + 1), cw)
        for c in range(lo, hi):
            line[c] = "─"
        if 0 <= a < cw:
            line[a] = "└"
        if 0 <= b - 1 < cw and b - 1 > a:
            line[b - 1] = "┘"
        # the label under the gap when it fits, else beside it
        at = lo + max(0, (hi - lo - len(label)) // 2) if hi - lo >= len(label) else min(hi + 1, max(0, cw - len(label)))
        for k, ch in enumerate(label, start=at):
            if 0 <= k < cw:
                line[k] = ch
        return Strip([Segment(" " * LABEL_W), Segment("".join(line), self._style("gap"))], width)
