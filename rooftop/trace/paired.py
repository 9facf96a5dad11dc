"""Independent column builds run two at a time, for the steps of an import that leave a core idle.

After the decode, an import runs in one process while the second core waits (the join, conforming).
Most of a column's build there is NumPy gathers, Arrow casts and hashing of integer codes, which
release the GIL: two threads then keep both cores busy. The columns are the same, in the same
order; an error in any build is raised, as it would be one after the other. `ROOFTOP_THREADS=0`
builds them one after the other (rooftop/speedups.py)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

from rooftop import speedups

THREADS = 2  # the cores this is measured on; more threads would only compete for the GIL


def built(builders: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """`{name: build()}` for every builder, in the builders' order, built on `THREADS` threads."""
    if len(builders) < 2 or not speedups.on("THREADS"):
        return {k: f() for k, f in builders.items()}
    with ThreadPoolExecutor(THREADS, thread_name_prefix="rooftop-build") as pool:
        futures = {k: pool.submit(f) for k, f in builders.items()}
        try:
            return {k: f.result() for k, f in futures.items()}
        except BaseException:
            for f in futures.values():
                f.cancel()
            raise
