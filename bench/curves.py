"""Growth curves: time and peak memory against kernel count, for import, `rooftop report` and the
TUI's first paint, with the floor and the peers on the same axes.

For each size (synthetic decode loop, bench/make_kineto.py --synthetic) one run measures, each in
a fresh process (bench/measure.py: wall time, peak RSS summed over the process and its workers):

- import: rooftop (1 and 2 processes), the msgspec typed-decode floor, `json.load`, HTA
  (bench/import_bench.py; HTA up to --hta-max kernels: at 1M it is killed or times out);
- report: `rooftop report` on the Parquet that import wrote;
- first paint: bench/tui_child.py on the same Parquet (the Overview on screen, headless 120x40),
  and the stock `textual.widgets.DataTable` with as many rows, up to --stock-max.

Writes bench/results/curves.json and .csv, import_bench's table of ratios for the same runs
(bench/results/import.md, .json), draws the curves in the terminal (plotext), and writes
bench/results/curves.svg (hand-written: log-log axes) and, when cairosvg is installed (the `bench`
extra), curves.png.

    python bench/curves.py --sizes 1000,10000,100000,1000000 --hta-max 100000
    python bench/curves.py --plot-only        # redraw from bench/results/curves.json
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import import_bench
from measure import ROOT, machine, run

RESULTS = ROOT / "bench" / "results"
STAGES = ("import", "report", "first paint")
# (stage, tool) -> how the line is drawn: colour, dashed (a floor or a peer, not rooftop)
STYLE = {
    ("import", import_bench.ROOFTOP_1): ("#1f77b4", False),
    ("import", import_bench.ROOFTOP_2): ("#2ca02c", False),
    ("import", import_bench.ROOFTOP_PY): ("#98df8a", False),
    ("import", import_bench.FLOOR): ("#7f7f7f", True),
    ("import", import_bench.JSON): ("#ff7f0e", True),
    ("import", import_bench.HTA): ("#d62728", True),
    ("report", "rooftop report"): ("#1f77b4", False),
    ("first paint", "rooftop Overview"): ("#1f77b4", False),
    ("first paint", "stock DataTable (same rows)"): ("#d62728", True),
}


def measure(args) -> tuple[list[dict], list[dict]]:
    """One record per (size, stage, tool): kernels, wall_s, peak_mb, status; and import_bench's
    rows (for its table of ratios, from the same runs)."""
    out: list[dict] = []
    imports: list[dict] = []
    for size in map(int, args.sizes.split(",")):
        row = import_bench.bench_size(size, args)
        imports.append(row)
        k = row["kernels"]
        for tool, res in row["tools"].items():
            out.append(_record(k, "import", tool, res))
        pq = ROOT / row["parquet"]
        if not pq.exists():
            print(f"  no Parquet for {k} kernels: report and first paint skipped", file=sys.stderr)
            continue
        res = run([sys.executable, "-m", "rooftop", "report", str(pq)], timeout_s=args.timeout, mem_gb=args.mem_gb)
        out.append(_record(k, "report", "rooftop report", res))
        print(f"  report {res.cell(args.timeout, args.mem_gb)}, {res.tree_mb:.0f} MB", file=sys.stderr)
        child = str(ROOT / "bench" / "tui_child.py")
        res = run([sys.executable, child, "rooftop", str(pq), "1"], timeout_s=args.timeout, mem_gb=args.mem_gb)
        out.append(_record(k, "first paint", "rooftop Overview", res, _first_paint(res)))
        print(f"  first paint {out[-1]['wall_s']}, {res.tree_mb:.0f} MB", file=sys.stderr)
        if not args.stock_max or k <= args.stock_max:
            res = run([sys.executable, child, "stock", str(k), "1"], timeout_s=args.timeout, mem_gb=args.mem_gb)
            out.append(_record(k, "first paint", "stock DataTable (same rows)", res, _first_paint(res)))
            print(f"  stock DataTable {out[-1]['wall_s']}, {res.tree_mb:.0f} MB", file=sys.stderr)
    return out, imports


def _first_paint(res) -> tuple[float | None, str]:
    """Seconds to the first paint as the child reports it (after its imports), and which key it was."""
    if not res.ok:
        return None, ""
    try:
        doc = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, ""
    for key in ("first_number_s", "overview_s", "first_paint_s"):  # the first the child reports
        if isinstance(doc.get(key), (int, float)):
            return float(doc[key]), key
    return None, ""


def _record(kernels: int, stage: str, tool: str, res, paint: tuple | None = None) -> dict:
    wall = res.wall_s if res.ok else None
    what = "process wall time"
    if paint is not None:
        wall, key = paint
        what = f"tui_child.py {key} (from app start, after imports)" if key else "tui_child.py: no time"
    return {"kernels": kernels, "stage": stage, "tool": tool, "wall_s": wall, "process_wall_s": res.wall_s,
            "cpu_s": res.cpu_s, "peak_mb": res.tree_mb if res.ok else None, "reached_mb": res.tree_mb,
            "status": res.status, "time_is": what}


def write(records: list[dict], meta: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "curves.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    with open(RESULTS / "curves.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)


def growth_table(records: list[dict]) -> str:
    """Markdown: one row per (stage, tool), one column per size: wall s and peak MB, or why none."""
    sizes = sorted({r["kernels"] for r in records})
    keys: list[tuple] = []
    for r in records:
        if (r["stage"], r["tool"]) not in keys:
            keys.append((r["stage"], r["tool"]))
    lines = ["| stage | tool | " + " | ".join(f"{k:,} kernels" for k in sizes) + " |",
             "|---|---|" + "---:|" * len(sizes)]
    for stage, tool in keys:
        cells = []
        for k in sizes:
            r = next((x for x in records if x["kernels"] == k and x["stage"] == stage and x["tool"] == tool), None)
            if r is None:
                cells.append("not run")
            elif r["wall_s"] is None:
                cells.append(f"{r['status']} ({r['reached_mb']:.0f} MB reached)")
            else:
                cells.append(f"{r['wall_s']:.2f} s, {r['peak_mb']:.0f} MB")
        lines.append(f"| {stage} | {tool} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def series(records: list[dict], stage: str, value: str) -> dict[str, list[tuple[int, float]]]:
    """tool -> [(kernels, value)] of the runs that finished, in size order."""
    out: dict[str, list] = {}
    for r in records:
        if r["stage"] == stage and r[value]:
            out.setdefault(r["tool"], []).append((r["kernels"], r[value]))
    return {t: sorted(v) for t, v in out.items()}


def _ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten (as log10 values) covering [lo, hi], at least two."""
    a, b = math.floor(lo), math.ceil(hi)
    return [float(x) for x in range(a, max(b, a + 1) + 1)]


def _label(e: float, unit: str) -> str:
    v = 10 ** e
    if unit == "kernels":
        return {3: "1k", 4: "10k", 5: "100k", 6: "1M", 7: "10M"}.get(int(e), f"{v:g}")
    return f"{v:g}"


def terminal(records: list[dict]) -> None:
    """The curves in the terminal, log10 axes taken by hand (plotext's own log axes crash)."""
    import plotext as plt

    for stage in STAGES:
        for value, unit in (("wall_s", "s"), ("peak_mb", "MB")):
            lines = series(records, stage, value)
            if not lines:
                continue
            plt.clear_figure()
            plt.plotsize(90, 18)
            plt.theme("clear")
            xs = [math.log10(k) for v in lines.values() for k, _ in v]
            ys = [math.log10(y) for v in lines.values() for _, y in v]
            for tool, pts in lines.items():
                plt.plot([math.log10(k) for k, _ in pts], [math.log10(y) for _, y in pts], label=tool, marker="dot")
            xt, yt = _ticks(min(xs), max(xs)), _ticks(min(ys), max(ys))
            plt.xticks(xt, [_label(x, "kernels") for x in xt])
            plt.yticks(yt, [_label(y, unit) for y in yt])
            plt.title(f"{stage}: {'time' if value == 'wall_s' else 'peak memory'} ({unit}, log10) vs kernels (log10)")
            plt.show()


def svg(records: list[dict], meta: dict) -> str:
    """Six small log-log plots (stages across, time and memory down) as one SVG document."""
    W, H, PAD, TOP = 330, 230, 52, 40
    panels = [(stage, value) for value in ("wall_s", "peak_mb") for stage in STAGES]
    width, height = 3 * W, 2 * H + TOP + 120
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           '<text x="10" y="20" font-size="14" font-weight="bold">rooftop: time and peak memory against '
           'kernel count (log-log)</text>',
           f'<text x="10" y="34" fill="#555">{_esc(meta.get("when", ""))}; {_esc(meta.get("machine", ""))}; '
           f'load average {_esc(meta.get("load", ""))}</text>']
    legend: dict[str, tuple] = {}
    for i, (stage, value) in enumerate(panels):
        ox, oy = (i % 3) * W, TOP + (i // 3) * H
        lines = series(records, stage, value)
        pts_all = [p for v in lines.values() for p in v]
        x0, y0, pw, ph = ox + PAD, oy + 22, W - PAD - 14, H - 22 - 40
        unit = "s" if value == "wall_s" else "MB"
        out.append(f'<text x="{x0}" y="{oy + 14}" font-weight="bold">{_esc(stage)}: '
                   f'{"time" if value == "wall_s" else "peak memory"} ({unit})</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        if not pts_all:
            out.append(f'<text x="{x0 + 10}" y="{y0 + 20}" fill="#999">no data</text>')
            continue
        xt = _ticks(min(math.log10(k) for k, _ in pts_all), max(math.log10(k) for k, _ in pts_all))
        yt = _ticks(min(math.log10(v) for _, v in pts_all), max(math.log10(v) for _, v in pts_all))

        def sx(k):
            return x0 + (math.log10(k) - xt[0]) / (xt[-1] - xt[0]) * pw

        def sy(v):
            return y0 + ph - (math.log10(v) - yt[0]) / (yt[-1] - yt[0]) * ph

        for t in xt:
            x = x0 + (t - xt[0]) / (xt[-1] - xt[0]) * pw
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + ph}" stroke="#eee"/>')
            out.append(f'<text x="{x:.1f}" y="{y0 + ph + 14}" text-anchor="middle">{_label(t, "kernels")}</text>')
        for t in yt:
            y = y0 + ph - (t - yt[0]) / (yt[-1] - yt[0]) * ph
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{_label(t, unit)}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 28}" text-anchor="middle" fill="#555">kernels</text>')
        for tool, pts in lines.items():
            colour, dashed = STYLE.get((stage, tool), ("#9467bd", True))
            legend[f"{stage}: {tool}".replace("import: rooftop import, ", "import: rooftop, ")] = (colour, dashed)
            path = " ".join(f"{sx(k):.1f},{sy(v):.1f}" for k, v in pts)
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
            for k, v in pts:
                out.append(f'<circle cx="{sx(k):.1f}" cy="{sy(v):.1f}" r="2.5" fill="{colour}"/>')
    ly = TOP + 2 * H + 8
    for j, (name, (colour, dashed)) in enumerate(legend.items()):
        lx, yy = 10 + (j % 3) * W, ly + (j // 3) * 16
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(f'<line x1="{lx}" y1="{yy}" x2="{lx + 22}" y2="{yy}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 28}" y="{yy + 4}">{_esc(name)}</text>')
    out.append(f'<text x="10" y="{height - 8}" fill="#555">Solid: rooftop. Dashed: the msgspec typed-decode floor '
               f'and the peers. Missing points: did not finish (see bench/RESULTS.md).</text>')
    out.append("</svg>")
    return "\n".join(out)


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def images(records: list[dict], meta: dict) -> list[Path]:
    doc = svg(records, meta)
    path = RESULTS / "curves.svg"
    path.write_text(doc)
    written = [path]
    try:
        import cairosvg
    except ImportError:  # the `bench` extra is not installed: the SVG alone
        return written
    png = RESULTS / "curves.png"
    cairosvg.svg2png(bytestring=doc.encode(), write_to=str(png), output_width=990)
    return written + [png]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000,1000000", help="kernel counts, comma-separated")
    import_bench.add_arguments(p)
    p.add_argument("--stock-max", type=int, default=100000, help="stock DataTable up to this many rows")
    p.add_argument("--plot-only", action="store_true", help="redraw from bench/results/curves.json")
    args = p.parse_args(argv)
    args.synthetic = True  # the decode loop: no fixtures needed, closer to an inference trace
    if args.plot_only:
        doc = json.loads((RESULTS / "curves.json").read_text())
        records, meta = doc["records"], doc["meta"]
    else:
        import_bench.OUT.mkdir(parents=True, exist_ok=True)
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load_before = import_bench.load()
        records, imports = measure(args)
        meta = {"when": f"{started} to {time.strftime('%H:%M UTC', time.gmtime())}", "machine": machine(),
                "load": f"{load_before} at start, {import_bench.load()} at end", "sizes": args.sizes,
                "limits": f"{args.timeout:.0f} s, {args.mem_gb:.0f} GB address space per run",
                "hta_max": args.hta_max, "stock_max": args.stock_max}
        write(records, meta)
        text = (f"## Kineto import (synthetic decode loop), {meta['when']}; {meta['machine']}; load average "
                f"{meta['load']}\nlimits per run: {meta['limits']}\n\n{import_bench.table(imports, args)}\n")
        (RESULTS / "import.md").write_text(text)
        (RESULTS / "import.json").write_text(json.dumps(import_bench.to_json(imports), indent=1))
        print(text)
    table = growth_table(records)
    (RESULTS / "curves.md").write_text(f"{meta['when']}; {meta['machine']}; load average {meta['load']}\n\n{table}\n")
    print(table)
    terminal(records)
    for path in images(records, meta):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
