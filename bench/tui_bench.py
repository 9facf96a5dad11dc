"""TUI at scale: rooftop on a 1M-kernel trace vs the stock Textual DataTable on 100k rows.

Each measurement runs headless (`run_test(size=(120, 40))`) in its own process (bench/tui_child.py)
so RSS is separate: time from launch to the Overview's FIRST NUMBER on screen (the phase table
painted with a figure, see tui_pilot.py; also the screen's first paint and the worker finishing), to the Kernels
screen, to the raw-launches view with every kernel row, key-press-to-repaint latency (median of N
`down` / `pagedown`), RSS; and the stock `textual.widgets.DataTable` (add_rows + mount + first
paint) and textual-fastdatatable on the same synthetic table.

    python bench/tui_bench.py [--kernels 1000000] [--stock-rows 100000] [--presses 20] [--trace T.parquet]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import ROOT, machine, run

OUT = ROOT / "bench" / "out"
CHILD = str(ROOT / "bench" / "tui_child.py")


def child(*args, timeout_s: float = 600) -> tuple[dict | None, float, str]:
    res = run([sys.executable, CHILD, *map(str, args)], timeout_s=timeout_s)
    if not res.ok:
        return None, res.rss_mb, res.status + ": " + res.stderr.strip()[-300:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.rss_mb, ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--stock-rows", type=int, default=100_000)
    p.add_argument("--presses", type=int, default=20)
    p.add_argument("--trace", help="a rooftop trace to open instead of the synthetic one (e.g. a Kineto import)")
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    trace = Path(args.trace) if args.trace else OUT / f"synth_{args.kernels}.parquet"
    if not trace.exists() and not args.trace:
        sys.path.insert(0, str(ROOT))
        import synth_trace
        t = time.perf_counter()
        synth_trace.write(trace, args.kernels)
        print(f"built {trace.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    roof, roof_peak, err = child("rooftop", trace, args.presses)
    stock, stock_peak, serr = child("stock", args.stock_rows, args.presses)
    fast, fast_peak, ferr = child("fast", args.stock_rows, args.presses)
    print(f"## TUI ({args.kernels:,}-kernel rooftop trace, {trace.stat().st_size / 1e6:.1f} MB Parquet) — "
          f"{time.strftime('%Y-%m-%d')}, {machine()}\n")
    print("Keys: median ms from press to idle as Textual's pilot sees it (its polling alone reads ~60-85 ms "
          "for a key that does nothing), and in brackets from press to the last frame composed (tui_pilot.py).\n")
    print("| view | rows | first paint s | RSS after mount MB | peak RSS MB | down ms | pagedown ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    if roof:
        print(f"| rooftop Overview, screen with identity (launch to paint) | {roof['raw_rows']:,} | "
              f"{roof['overview_screen_s']:.2f} | | | | |")
        print(f"| rooftop Overview, **first number** (phase table painted) | {roof['raw_rows']:,} | "
              f"{roof['first_number_s']:.2f} | {roof['rss_first_number_mb']:.0f} | | | |")
        print(f"| rooftop Overview complete (findings, gap, steps; worker done) | | "
              f"{roof['overview_complete_s']:.2f} | {roof['rss_overview_mb']:.0f} | | | |")
        print(f"| rooftop Kernels, grouped (key `3`) | | {roof['kernels_grouped_s']:.2f} | | | | |")
        print(f"| rooftop Kernels, raw launches (key `g`) | {roof['raw_rows']:,} | {roof['kernels_raw_s']:.2f} | "
              f"{roof['rss_kernels_mb']:.0f} | {roof_peak:.0f} | {roof['down_ms']:.0f} ({roof['down_frame_ms']:.0f}) | "
              f"{roof['pagedown_ms']:.0f} ({roof['pagedown_frame_ms']:.0f}) |")
        print(f"| rooftop raw launches, sort (key `s`, every column in turn; median ms) | {roof['raw_rows']:,} | "
              f"{roof['sorts_median_ms']:.0f} ({roof['sorts_median_frame_ms']:.0f}) | | | | |")
        print(f"| rooftop raw launches, reverse sort (key `S` x3; median ms) | {roof['raw_rows']:,} | "
              f"{roof['reverse_median_ms']:.0f} ({roof['reverse_median_frame_ms']:.0f}) | | | | |")
        print(f"| rooftop raw launches, sort with the order computed on the key (every column; median ms) | "
              f"{roof['raw_rows']:,} | {roof['cold_sorts_median_ms']:.0f} ({roof['cold_sorts_median_frame_ms']:.0f}) | | | | |")
    else:
        print(f"| rooftop | | {err} | | {roof_peak:.0f} | | |")
    for label, r, peak, e in (("stock textual DataTable", stock, stock_peak, serr),
                              ("textual-fastdatatable (Arrow)", fast, fast_peak, ferr)):
        if r:
            print(f"| {label} | {args.stock_rows:,} | {r['first_paint_s']:.2f} | {r['rss_mounted_mb']:.0f} | "
                  f"{peak:.0f} | {r['down_ms']:.0f} ({r['down_frame_ms']:.0f}) | {r['pagedown_ms']:.0f} ({r['pagedown_frame_ms']:.0f}) |")
        else:
            print(f"| {label} | {args.stock_rows:,} | {e} | | {peak:.0f} | | |")
    if roof and stock:
        print(f"\nrooftop raw view of {roof['raw_rows']:,} rows vs stock DataTable first paint of "
              f"{args.stock_rows:,}: {stock['first_paint_s'] / roof['kernels_raw_s']:.1f}x faster; "
              f"rooftop peak RSS {roof_peak:.0f} MB vs stock {stock_peak:.0f} MB")
    (OUT / "tui_bench.json").write_text(json.dumps({"rooftop": roof, "stock": stock, "fast": fast,
                                                    "peaks": [roof_peak, stock_peak, fast_peak]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
