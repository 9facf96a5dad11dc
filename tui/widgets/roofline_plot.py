"""A log-log roofline drawn with plotext on linear axes.

plotext 5.3's log scales rewrite the figure's data in place on `build()`, so the second build (any
resize) raises `math domain error` (a plotext 5 quirk, measured here). We therefore take log10 ourselves, keep
the axes linear, label the decades ourselves, and rebuild the figure from stored data on every render.
The maths (ranges, roof curves, tick labels) are plain functions so they can be tested without an app.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from textual_plotext import PlotextPlot

from tui.textual_private import plotext_theme_name
from rooftop.hardware.gpus import ridge_point
from rooftop.present.text import printable  # plotext parses its text as ANSI: a name must never carry escapes

_SI = {-3: "0.001", -2: "0.01", -1: "0.1", 0: "1", 1: "10", 2: "100"}
_PREFIXES = ((15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))

# Markers by time rank: the kernels that cost the most are drawn biggest, and last (on top).
BIG, MID, SMALL, SELECTED = "●", "•", "∘", "◉"
PHASES = ("prefill", "decode", "other")
# A shape per phase as well as a colour, big to small by time: under NO_COLOR (or for a reader who
# cannot tell the colours apart) the series stay apart. The prefill glyphs are BIG, MID, SMALL.
GLYPHS = {"prefill": (BIG, MID, SMALL), "decode": ("■", "▪", "▫"), "other": ("▲", "▴", "▵")}
ALL_MARKERS = tuple(g for glyphs in GLYPHS.values() for g in glyphs) + (SELECTED,)


def decade_label(exp: int) -> str:
    """10**exp as a short SI label: 0.1, 1, 10, 100, 1k, 10k, ..., 1G, 10G, 100T, 1P."""
    if exp in _SI:
        return _SI[exp]
    for base, prefix in _PREFIXES:
        if exp >= base:
            return f"{10 ** (exp - base)}{prefix}"
    return f"1e{exp}"


def decade_ticks(lo: float, hi: float) -> tuple[list[int], list[str]]:
    """Integer log10 positions covering [lo, hi] (already in log10) and their labels."""
    exps = list(range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1))
    return exps, [decade_label(e) for e in exps]


def ridge(ceilings: dict) -> float | None:
    """The ridge of `Analysis.ceilings` (FLOP/byte), as the core defines it (`devices.ridge_point`)."""
    return ridge_point(ceilings.get("flops"), ceilings.get("bw"))


def _positive(v) -> bool:
    return v is not None and isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) and v > 0


def plottable(points: pd.DataFrame) -> pd.DataFrame:
    """Rows that can sit on log axes (AI and FLOP/s > 0), biggest time first; index 0..n-1.

    Zero or unknown values have no place on a log axis (and crash plotext), so they are dropped here;
    the tables still list them.
    """
    if points is None or points.empty:
        return pd.DataFrame(columns=["key", "phase", "ai", "achieved_flops", "time_ns"])
    ai = pd.to_numeric(points["ai"], errors="coerce")
    fl = pd.to_numeric(points["achieved_flops"], errors="coerce")
    keep = points[(ai > 0) & (fl > 0) & np.isfinite(ai) & np.isfinite(fl)]
    order = pd.to_numeric(keep["time_ns"], errors="coerce").fillna(0)
    return keep.assign(_t=order).sort_values("_t", ascending=False, kind="stable").drop(columns="_t").reset_index(drop=True)


@dataclass(frozen=True)
class Frame:
    """The figure in log10 space: axis ranges and the roof curves."""

    x: tuple[float, float]
    y: tuple[float, float]
    roof_x: np.ndarray           # log10 AI samples
    roof: np.ndarray | None      # log10 min(bf16 peak, bw·AI)
    fp32: np.ndarray | None      # log10 min(fp32 peak, bw·AI)
    ridge: float | None          # log10 of the ridge AI


def frame_for(points: pd.DataFrame, ceilings: dict, samples: int = 200) -> Frame:
    """Axis ranges that hold every point, the ridge, and a decade of roof on either side of it."""
    bw, peak, fp32 = ceilings.get("bw"), ceilings.get("flops"), ceilings.get("fp32")
    r = ridge(ceilings)
    xs = list(np.log10(points["ai"].astype(float))) if len(points) else []
    ys = list(np.log10(points["achieved_flops"].astype(float))) if len(points) else []
    if r is not None:
        xs += [math.log10(r) - 1.5, math.log10(r) + 1]
    if _positive(peak):
        ys.append(math.log10(peak))
    if not xs:
        xs = [-1.0, 3.0]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    if x1 - x0 < 2:
        x0, x1 = x0 - 1, x1 + 1
    roof_x = np.linspace(x0, x1, samples)
    roof = fp = None
    if _positive(bw):
        mem = math.log10(bw) + roof_x
        roof = np.minimum(math.log10(peak), mem) if _positive(peak) else mem
        fp = np.minimum(math.log10(fp32), mem) if _positive(fp32) else None
        ys.append(float(mem[0]))
    if not ys:
        ys = [9.0, 15.0]
    # y is not snapped to decades: room for the labels above the roof, no empty decade.
    y0, y1 = min(ys) - 0.3, max(ys) + 0.45
    if y1 - y0 < 2:
        y0, y1 = y0 - 1, y1 + 1
    if roof is not None:
        # The slope starts below the frame when bandwidth is low; clip so it doesn't draw off-canvas.
        roof = np.maximum(roof, y0)
        fp = np.maximum(fp, y0) if fp is not None else None
    return Frame((x0, x1), (y0, y1), roof_x, roof, fp, math.log10(r) if r is not None else None)


def marker_for(time_ns: float, biggest: float) -> str:
    if not biggest or not math.isfinite(time_ns):
        return SMALL
    share = time_ns / biggest
    return BIG if share >= 0.3 else MID if share >= 0.05 else SMALL


class RooflinePlot(PlotextPlot):
    """x = arithmetic intensity (FLOP/byte), y = achieved FLOP/s; HBM and compute roofs; one point per group.

    `points` needs columns key, phase, ai, achieved_flops, time_ns (as `Analysis.roofline()` returns);
    `ceilings` is `Analysis.ceilings`. Points are ordered by time, biggest first; `select(i)` uses that order.
    """

    COMPONENT_CLASSES = {
        "roofline--roof", "roofline--fp32", "roofline--ridge", "roofline--prefill",
        "roofline--decode", "roofline--other", "roofline--selected",
    }

    def __init__(self, points: pd.DataFrame | None = None, ceilings: dict | None = None,
                 selected: int | None = None, compact: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.compact = compact
        self.set_data(points, ceilings, selected)

    @classmethod
    def for_kernel(cls, analysis, key: str, by: str = "short_name", **kwargs) -> "RooflinePlot":
        """The mini roofline of the kernel-detail screen: this group's point under the trace's roofs."""
        return cls(analysis.group_point(key, by), analysis.ceilings, selected=0, compact=True, **kwargs)

    @property
    def points(self) -> pd.DataFrame:
        """The plotted points, biggest time first (the order `select` counts in)."""
        return self._points

    @property
    def selected(self) -> int | None:
        return self._selected

    def set_data(self, points: pd.DataFrame | None, ceilings: dict | None, selected: int | None = None) -> None:
        self._points = plottable(points)
        self._ceilings = dict(ceilings or {})
        self._selected = None
        self.select(selected)

    def select(self, index: int | None) -> None:
        n = len(self._points)
        self._selected = None if index is None or n == 0 else max(0, min(int(index), n - 1))
        self.refresh()

    def _colour(self, name: str):
        # Colours come from the stylesheet (component classes), never from Python literals.
        style = self.get_component_rich_style(f"roofline--{name}", partial=True)
        if style.color is None:
            return None
        return tuple(style.color.get_truecolor())

    def render(self):
        self._draw()
        return super().render()

    def _draw(self) -> None:
        p = self.plt
        p.clear_figure()
        # Set the theme before drawing: plotext gives text labels the canvas colour current at draw time.
        p.theme(plotext_theme_name(self, self.app.theme))
        pts = self._points
        fr = frame_for(pts, self._ceilings, samples=max(60, 2 * max(self.size.width, 1)))
        self._xrange, self._yrange = fr.x, fr.y
        self._boxes: list[tuple[float, float, float, float]] = []
        self._point_xy = ((np.log10(pts["ai"].astype(float).to_numpy()), np.log10(pts["achieved_flops"].astype(float).to_numpy()))
                          if len(pts) else (np.array([]), np.array([])))
        p.xlim(*fr.x)
        p.ylim(*fr.y)
        p.xticks(*decade_ticks(*fr.x))
        p.yticks(*decade_ticks(*fr.y))
        if not self.compact:
            p.xlabel("arithmetic intensity (FLOP/byte)")
            p.ylabel("FLOP/s")
        if fr.roof is not None:
            if fr.fp32 is not None:
                p.plot(fr.roof_x, fr.fp32, marker="braille", color=self._colour("fp32"))
            p.plot(fr.roof_x, fr.roof, marker="braille", color=self._colour("roof"))
        if fr.ridge is not None and fr.roof is not None:
            p.vline(fr.ridge, color=self._colour("ridge"))
        self._draw_points(pts)
        # Labels last, the selected name first: each goes only where it covers nothing drawn so far.
        self._label_selected()
        if fr.ridge is not None and fr.roof is not None and not self.compact:
            self._label_roofs(fr)
        if pts.empty and not self.compact:
            p.title("no kernel group with known FLOPs and bytes: nothing to place")

    # --- labels: placed only where they cover no point and no other label -------------------------
    def _cell(self) -> tuple[float, float]:
        """One terminal cell in log10 data units (x, y), from the plot area plotext leaves inside the
        widget (y tick labels on the left, x ticks and label below); slightly small, so the checks err
        on the side of keeping a label off a point."""
        w = max(self.size.width - 10, 10)
        h = max(self.size.height - (2 if self.compact else 4), 4)
        return (self._xrange[1] - self._xrange[0]) / w, (self._yrange[1] - self._yrange[0]) / h

    def _place(self, text: str, x: float, y: float, color, alignment: str = "left") -> bool:
        """Draw `text` at (x, y) unless its box (one cell of margin) would cover a point or a label
        already placed, or leave the frame; the same facts are in the legend and the info line, so
        a label that does not fit is left out, not drawn over something."""
        cw, ch = self._cell()
        width = len(text) * cw
        x0 = x - width if alignment == "right" else x
        box = (x0 - cw, x0 + width + cw, y - ch, y + ch)
        if box[0] < self._xrange[0] or box[1] > self._xrange[1] or box[2] < self._yrange[0] or box[3] > self._yrange[1]:
            return False
        px, py = self._point_xy
        if len(px) and bool(((px >= box[0]) & (px <= box[1]) & (py >= box[2]) & (py <= box[3])).any()):
            return False
        for a0, a1, b0, b1 in self._boxes:
            if box[0] < a1 and a0 < box[1] and box[2] < b1 and b0 < box[3]:
                return False
        self._boxes.append(box)
        # Always drawn left-aligned from the computed start: plotext's own right alignment lands a
        # few cells off, which ran labels past the frame.
        self.plt.text(text, x0, y, color=color, alignment="left")
        return True

    def _label_roofs(self, fr: Frame) -> None:
        from rooftop.present.format import fmt_rate

        c = self._ceilings
        span = fr.x[1] - fr.x[0]
        top = float(fr.roof[-1])
        self._place(f"bf16 {fmt_rate(c.get('flops'), 'FLOP/s')}", fr.x[1] - 0.02 * span, top + 0.2,
                    self._colour("roof"), "right")
        if fr.fp32 is not None and _positive(c.get("fp32")):
            self._place(f"fp32 {fmt_rate(c.get('fp32'), 'FLOP/s')}", fr.x[1] - 0.02 * span, float(fr.fp32[-1]) - 0.25,
                        self._colour("fp32"), "right")
        # The memory roof's label sits on the slope, a third of the way to the ridge.
        lx = fr.x[0] + 0.25 * (fr.ridge - fr.x[0])
        ly = math.log10(c["bw"]) + lx + 0.3
        self._place(f"HBM {fmt_rate(c.get('bw'))}", lx, ly, self._colour("roof"), "right")
        self._place(f"ridge {10 ** fr.ridge:.0f}", fr.ridge, fr.y[0] + 0.1 * (fr.y[1] - fr.y[0]),
                    self._colour("ridge"), "left")

    def phases_shown(self) -> list[str]:
        """The phase series among the points (`other` for phases that are neither prefill nor decode)."""
        if self.points is None or self.points.empty:
            return []
        ph = self.points["phase"].astype(object).where(self.points["phase"].notna(), "other").astype(str).str.rstrip("+")
        present = set(ph.where(ph.isin(PHASES[:2]), "other"))
        return [p for p in PHASES if p in present]

    def _draw_points(self, pts: pd.DataFrame) -> None:
        if pts.empty:
            return
        p = self.plt
        lx, ly = self._point_xy
        times = pd.to_numeric(pts["time_ns"], errors="coerce").fillna(0).to_numpy(dtype=float)
        biggest = float(times.max()) if len(times) else 0.0
        # "decode+" is mostly decode with some other phase: coloured by its dominant phase.
        ph = pts["phase"].astype(object).where(pts["phase"].notna(), "other").astype(str).str.rstrip("+")
        phase = ph.where(ph.isin(PHASES[:2]), "other").to_numpy()
        # Smallest first so the most expensive groups are drawn last, on top.
        for marker in (SMALL, MID, BIG):
            for ph in PHASES:
                sel = [i for i in range(len(pts)) if phase[i] == ph and marker_for(times[i], biggest) == marker]
                if sel:
                    glyph = GLYPHS[ph][(BIG, MID, SMALL).index(marker)]
                    p.scatter(lx[sel], ly[sel], marker=glyph, color=self._colour(ph))
        i = self._selected
        if i is not None:
            p.scatter([lx[i]], [ly[i]], marker=SELECTED, color=self._colour("selected"))

    def _label_selected(self) -> None:
        """The selected group's name beside its marker: right of it, else left; left out when both
        sides would cover something (the info line under the plot names it anyway)."""
        i = self._selected
        if i is None or self.compact:
            return
        lx, ly = self._point_xy
        name = printable(self._points["key"].iloc[i])[:28]
        cw, _ = self._cell()
        mine = (np.array([lx[i]]), np.array([ly[i]]))
        others = (np.delete(lx, i), np.delete(ly, i))
        self._point_xy = others  # its own marker is beside, not under, the label
        try:
            placed = (self._place(name, lx[i] + 2 * cw, ly[i], self._colour("selected"), "left")
                      or self._place(name, lx[i] - 2 * cw, ly[i], self._colour("selected"), "right"))
        finally:
            self._point_xy = (np.concatenate([mine[0], others[0]]), np.concatenate([mine[1], others[1]]))
        return placed
