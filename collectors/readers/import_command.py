"""`rooftop import`: its arguments, and a start that forks the decoding workers of a large Kineto
file before the analysis libraries load. Light on purpose: it imports neither pandas nor pyarrow
(`importers` does: time the workers spend decoding)."""
from __future__ import annotations

import argparse
import gc
import sys
from contextlib import contextmanager
from pathlib import Path

from collectors.readers._jsonstream import CHUNK
from collectors.readers.progress import ProgressLine


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="Kineto .json[.gz], nsys .sqlite, .ncu-rep, ncu CSV, or a "
                                              "directory of per-rank Kineto files")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output .parquet (default: <stem>.rooftop.parquet next to SRC; a directory for ranks)")


def run(args: argparse.Namespace) -> int:
    from rooftop import heap

    from collectors.readers._kineto_early import start_early

    heap.map_from(heap.IMPORT_MAP_FROM)  # (a run of its own: speed before RSS, see there; set before the fork)

    # (a gzip file is inflated first: its progress is drawn from here, on a line of its own, ended
    # before the import's line or its error)
    inflating = ProgressLine(Path(args.src).name, verb="inflating")
    try:
        early = start_early(args.src, CHUNK, inflating)
    finally:
        inflating.done()  # (ended before an interruption's message too)
    try:
        with _no_cyclic_gc():  # (collections while pandas and pyarrow load cost time otherwise)
            from collectors.readers.importers import run as run_import

            if early.waiting():
                _summary_modules()
        return run_import(args, early=early)
    finally:
        early.discard()  # workers the read did not adopt (an error before it, another format)


@contextmanager
def _no_cyclic_gc():
    """The cyclic garbage collector off, and what was made meanwhile kept out of its sight after:
    importing a library makes tens of thousands of objects that live as long as the program,
    which every collection would scan again (`gc.freeze`). Only where the libraries are yet to
    load (a fresh process): a caller's own objects are never frozen."""
    if "pandas" in sys.modules:
        yield
        return
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _summary_modules() -> None:
    """Import what the summary after the read imports, while the workers decode: this
    process then takes fewer of the pieces, where after the read it would hold up the rest."""
    import importlib

    # (Arrow to pandas for the summary's load of the rows, then the analysis and its report)
    for name in ("pyarrow.pandas_compat", "rooftop.analysis", "rooftop.present.report"):
        importlib.import_module(name)
