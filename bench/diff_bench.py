"""What the verdict of `rooftop diff` costs next to the analysis it rests on, as a ratio in one run.

On a synthetic decode loop (bench/synth_trace.py) compared with itself: the time of
`verdict.verdicts(a, b)` (kernel matching, units of work, noise, causes) against the time of the
tables `rooftop report` computes for the same two traces (steps, phases, kernel groups). Both on the
same machine in the same process, so the ratio holds on a loaded machine where seconds do not.

    python bench/diff_bench.py --kernels 200000
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rooftop.analysis import analyze, verdict  # noqa: E402
from rooftop.trace import load_trace  # noqa: E402
from synth_trace import write  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=200_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d) / "synth.parquet", args.kernels)
        a, b = analyze(load_trace(path)), analyze(load_trace(path))
        t0 = time.perf_counter()
        for an in (a, b):
            an.steps, an.phases, an.groups()
        t1 = time.perf_counter()
        v = verdict.verdicts(a, b)
        t2 = time.perf_counter()
    assert v["overall"]["direction"] == "no change"
    print(f"{args.kernels} kernels per side: verdict / report tables = {(t2 - t1) / (t1 - t0):.2f}"
          f" ({t2 - t1:.2f} s / {t1 - t0:.2f} s on this machine, this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
