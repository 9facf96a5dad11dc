"""The off switches of rooftop's speed code: every accelerator gives the same answer as the plain
code beside it, and each can be turned off to prove it (or to rule it out when a number looks
wrong). docs/speed.md lists them all.

`ROOFTOP_<NAME>=0` turns one off, any other value keeps it on; `ROOFTOP_SPEEDUPS=0` (or `off`)
turns off every one whose own variable is not set: an accelerator's own variable wins, so a test
about one accelerator can keep it on while the rest are off. Read at the moment of use (the
compiled decoder: when its module is imported), never cached. Light on purpose: the import
command and the footer-only paths read it before pandas is imported."""
from __future__ import annotations

import os

UMBRELLA = "ROOFTOP_SPEEDUPS"

# name -> what it turns off (the table in docs/speed.md says more); `ROOFTOP_WORKERS` is a count
# (1 = one process), read by collectors/readers/_kineto_parallel.py through `all_off`.
SWITCHES = {
    "COMPILED": "the compiled parts: the Kineto batch decoder and the interval nesting pass in C"
                " (collectors/readers/_kineto_fast.c, _nesting_fast.c)",
    "MSGSPEC": "msgspec's typed decode of Kineto batches (collectors/readers/_kineto_events.py)",
    "HEAP_TUNING": "glibc's mmap and trim thresholds set for rooftop (rooftop/heap.py)",
    "THREADS": "column builds, the summary's sections, the report's wait tables and an nsys export's large tables"
               " on a second thread (rooftop/trace/paired.py, summary.py, report.py, collectors/readers/_nsys_columns.py)",
    "SUMMARY": "answering from a trace's stored summary (rooftop/present/summary.py)",
    "ADBC": "the ADBC SQLite driver for nsys exports (collectors/readers/_nsys_columns.py)",
    "PLAIN_CELLS": "painting plain table cells without Rich's layout (tui/widgets/plain_cells.py)",
    "SORT_AHEAD": "computing the next sort orders in a thread (tui/widgets/table.py, order_cache.py)",
    "GC_FREEZE": "freezing the heap out of the cyclic GC after a big load (tui/app.py)",
}


def all_off() -> bool:
    """Whether `ROOFTOP_SPEEDUPS` turns the accelerators off (those without their own setting)."""
    return os.environ.get(UMBRELLA, "").strip().lower() in ("0", "off", "false", "no")


def on(name: str) -> bool:
    """Whether the accelerator `name` (a key of `SWITCHES`) runs: its own `ROOFTOP_<name>` if set
    (`0`: off), else off only under `ROOFTOP_SPEEDUPS=0`."""
    own = os.environ.get(f"ROOFTOP_{name}", "").strip()
    if own:
        return own != "0"
    return not all_off()
