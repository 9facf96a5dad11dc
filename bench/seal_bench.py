"""What the summary's seal (rooftop/trace/seal.py, issue 38) costs `rooftop report` on its fast path: the
report from a stored summary with the seal checked (an HMAC over the whole file) against the same
report with the check skipped, in one process, best of N; then the seal's share.

    python bench/seal_bench.py [--kernels 1000000] [--runs 7]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _best(fn, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--trace", type=Path, help="an existing trace with a sealed summary (else a synthetic one)")
    args = p.parse_args(argv)
    from rooftop.trace import seal
    from rooftop_cli import main as rooftop

    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace
        if path is None:
            from synth_trace import main as synth
            path = Path(tmp) / "synth.parquet"
            synth([str(path), "--kernels", str(args.kernels), "--summary"])

        def report():
            with contextlib.redirect_stdout(io.StringIO()):
                assert rooftop(["report", str(path)]) == 0
        real = seal.verify
        report()  # warm: imports, page cache
        checked = _best(report, args.runs)
        seal.verify = lambda *a: True
        try:
            skipped = _best(report, args.runs)
        finally:
            seal.verify = real
        size = path.stat().st_size
    print(f"{size / 1e6:.1f} MB trace: report from the summary {checked * 1e3:.1f} ms with the seal checked,"
          f" {skipped * 1e3:.1f} ms without; the seal adds {(checked - skipped) * 1e3:.1f} ms"
          f" ({checked / skipped:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
