"""`rooftop import`: its arguments, and a start that forks the decoding workers of a large Kineto
file before the analysis libraries load. Light on purpose: it imports neither pandas nor pyarrow
(`importers` does, ~0.6 s, which the workers spend decoding)."""
from __future__ import annotations

import argparse

CHUNK = 4 << 20  # bytes read at a time (`kineto.CHUNK`): big enough that per-batch overhead vanishes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="Kineto .json[.gz], nsys .sqlite, .ncu-rep, ncu CSV, or a "
                                              "directory of per-rank Kineto files")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output .parquet (default: <stem>.rooftop.parquet next to SRC; a directory for ranks)")


def run(args: argparse.Namespace) -> int:
    from ._kineto_parallel import discard_early, start_early

    start_early(args.src, CHUNK)
    try:
        from .importers import run as run_import

        return run_import(args)
    finally:
        discard_early()  # workers the read did not adopt (an error before it, another format)
