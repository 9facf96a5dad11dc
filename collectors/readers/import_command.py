"""`rooftop import`: its arguments, and a start that forks the decoding workers of a large Kineto
file before the analysis libraries load. Light on purpose: it imports neither pandas nor pyarrow
(`importers` does, ~0.6 s, which the workers spend decoding)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

CHUNK = 4 << 20  # bytes read at a time (`kineto.CHUNK`): big enough that per-batch overhead vanishes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="Kineto .json[.gz], nsys .sqlite, .ncu-rep, ncu CSV, or a "
                                              "directory of per-rank Kineto files")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output .parquet (default: <stem>.rooftop.parquet next to SRC; a directory for ranks)")


def run(args: argparse.Namespace) -> int:
    from ._kineto_parallel import discard_early, start_early

    # (a gzip file is inflated first: its progress is drawn from here, on a line of its own, ended
    # before the import's line or its error)
    inflating = ProgressLine(Path(args.src).name, verb="inflating")
    start_early(args.src, CHUNK, inflating)
    inflating.done()
    try:
        from .importers import run as run_import

        return run_import(args)
    finally:
        discard_early()  # workers the read did not adopt (an error before it, another format)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ProgressLine:
    """`importing trace.json.gz: 42%` on stderr, at most ~5 times a second, only for large inputs
    (`verb`: what is being done, "inflating" for the early start's gzip inflation)."""

    def __init__(self, label: str, stream=sys.stderr, min_bytes: int = 32 << 20, size: int = 0,
                 verb: str = "importing"):
        self.label, self.stream, self.min_bytes, self.size, self.verb = label, stream, min_bytes, size, verb
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, total: int, unit: str = "bytes") -> None:
        now = time.monotonic()
        if (total if unit == "bytes" else self.size) < self.min_bytes or now - self.last < 0.2:
            return
        self.last, self.shown = now, True
        what = f"({done >> 20}/{total >> 20} MB)" if unit == "bytes" else f"(stage {done} of {total})"
        self.stream.write(f"\r{self.verb} {self.label}: {100 * done // max(total, 1):3d}% {what}")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
