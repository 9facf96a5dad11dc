"""glibc's heap, set for how rooftop allocates: column-sized arrays made and freed by the hundred.

Where an array of at least the mmap threshold gets pages of its own from the system, they go back
when it is freed, and a new one is faulted in page by page (and zeroed) again. Viewing a trace
keeps the threshold at 1 MiB: a freed column in the heap under a live one would never be given back
(less RSS for the TUI at 1M kernels). An import is a run of its own that ends with its
file, whose peak the import bounds itself: there, arrays below 32 MiB come from the heap and are
reused without faults (much less system time, a little more at the peak; at 100k kernels, whose
columns sit just above 1 MiB, too: bench/RESULTS.md has the import's figures). A threshold set by hand
also stops glibc from raising its trim threshold with it (left at 128 KiB, every free at the top
of the heap gave the pages back, to be faulted in again by the next array): an import sets that to
twice the mmap threshold, as glibc's own adjustment would, and trims at its stages (`trim`). It
sets both first thing, before its decoding workers fork, so that they read their pieces into the heap
too.

Light on purpose (no pandas, no pyarrow): the import command sets it before loading them. Nothing
where glibc is not (macOS, musl), nor with `ROOFTOP_HEAP_TUNING=0` (rooftop/speedups.py)."""
from __future__ import annotations

from rooftop import speedups

VIEW_MAP_FROM = 1 << 20
IMPORT_MAP_FROM = 32 << 20  # (glibc's own ceiling for its dynamic threshold)
# `rooftop report` converting a trace in memory ends with its output, like an import, but its peak
# is the converted trace and the analysis at once (`diff`, holding two, keeps the viewer's): arrays of a
# million rows (8 MB) come from the heap and are reused, larger ones still go back when freed. On a
# 1M-kernel nsys export that is ~1 s less system time (page faults) than the viewer's 1 MiB for
# ~2% more peak memory, and ~10% less peak than 32 MiB (bench/RESULTS.md).
REPORT_MAP_FROM = 8 << 20
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1

_applied = False  # (a threshold set: the viewer's is set by the first `trim`)


def map_from(nbytes: int) -> None:
    """From now on, arrays of at least `nbytes` get pages of their own from the system (above the
    viewer's 1 MiB, the trim threshold is raised with it: see the module's docstring)."""
    global _applied
    if not speedups.on("HEAP_TUNING"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, nbytes)
        if nbytes > VIEW_MAP_FROM:
            libc.mallopt(_M_TRIM_THRESHOLD, 2 * nbytes)
    except (OSError, AttributeError):  # not glibc: nothing to set
        pass
    _applied = True


def trim() -> None:
    """Give the heap's free pages back to the system; the first call sets the viewer's threshold
    unless one is set (left to glibc, it rises to 32 MiB after the first big array is freed,
    whatever rooftop runs)."""
    if not speedups.on("HEAP_TUNING"):
        return
    if not _applied:
        map_from(VIEW_MAP_FROM)
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass
