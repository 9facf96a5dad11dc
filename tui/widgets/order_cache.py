"""Row orders of a big table, kept once computed and shared between the threads that compute them.

Sorting a million rows by one column (a packed integer sort, see `table.sort_order`) takes a good
part of what a key may take. The Kernels table changes its sort by
`s` (the next column) and `S` (the other direction), so the orders a user asks for next are
known: the table computes them in a thread after each sort is painted (`FrameTable`), and a key
then finds its order here. A key that asks for an order while that thread is still computing it
waits for it instead of computing it a second time beside it (two cores, shared with painting).

At a million rows an order is 4 MB (int32 positions); `keep` of them are kept, the least recently
used dropped first.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np


def compact(order: np.ndarray) -> np.ndarray:
    """Row positions in the narrowest integer that holds them (int32 below 2**31 rows): half the
    memory of NumPy's int64 for an order that is kept."""
    if order.dtype != np.int32 and len(order) < 2**31:
        return order.astype(np.int32)
    return order


class OrderCache:
    """The last `keep` orders by key (a table's view state); safe to use from several threads."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._running: dict[Hashable, threading.Event] = {}
        self._generation = 0  # `clear` bumps it: an order computed from what was cleared is not kept

    @property
    def generation(self) -> int:
        """Bumped by `clear`: pass it to `get` from where the key was made, so that an order of a
        frame cleared meanwhile is not kept under a key that a later frame could share."""
        return self._generation

    def clear(self) -> None:
        """Forget every order (the table shows another frame)."""
        with self._lock:
            self._done.clear()
            self._generation += 1

    def peek(self, key: Hashable) -> np.ndarray | None:
        """The order for `key` if it is kept, without computing it."""
        with self._lock:
            order = self._done.get(key)
            if order is not None:
                self._done.move_to_end(key)
            return order

    def put(self, key: Hashable, order: np.ndarray) -> None:
        """Keep `order` for `key` (computed elsewhere: the view shown)."""
        with self._lock:
            self._done[key] = order
            self._done.move_to_end(key)
            self._evict()

    def _evict(self) -> None:
        while len(self._done) > self.keep:
            self._done.popitem(last=False)  # the least recently used

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._done or key in self._running

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)

    def get(self, key: Hashable, compute: Callable[[], np.ndarray | None],
            generation: int | None = None) -> np.ndarray | None:
        """The order for `key`: kept, or awaited from the thread computing it, or computed here by
        `compute()` (which returns None when cancelled; nothing is kept then). `generation`: the
        cache's when the key was made (default: now); if the cache was cleared since, the order is
        computed and returned but not kept. Blocking: for workers."""
        while True:
            with self._lock:
                if generation is not None and generation != self._generation:
                    stale = True
                    break
                stale = False
                order = self._done.get(key)
                if order is not None:
                    self._done.move_to_end(key)
                    return order
                running = self._running.get(key)
                if running is None:
                    event = self._running[key] = threading.Event()
                    generation = self._generation
                    break
            running.wait()  # then kept (take it) or cancelled (compute it here)
        if stale:  # made for a frame cleared since: computed, never kept (nor waited for)
            order = compute()
            return None if order is None else compact(order)
        order = None
        try:
            order = compute()
            if order is not None:
                order = compact(order)
        finally:
            with self._lock:
                del self._running[key]
                if order is not None and generation == self._generation:
                    self._done[key] = order
                    self._evict()
            event.set()
        return order
