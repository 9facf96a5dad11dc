"""What every thread worker of the TUI does with its result: post it, unless it was superseded.

Workers are `exclusive`: starting a new one cancels the old, but a thread cannot be stopped, so
the old one runs on and would post its stale result after the new one (Textual's workers guide).
"""
from __future__ import annotations

import threading

from textual.message import Message
from textual.worker import get_current_worker


# Analysis work that builds big temporaries runs one at a time: the Overview's (findings, gap,
# groups, computed behind the first paint) and a timeline's lanes. At a million kernels each adds
# big temporaries to the frame; opened together (the timeline pressed while the Overview still
# computes) their peaks added up, and on two cores, with the GIL held
# by pandas for long stretches, running both at once finishes them little sooner.
HEAVY = threading.Lock()


def post_if_current(node, message: Message) -> bool:
    """Post `message` from `node` unless the worker running this was cancelled; whether it was posted.

    A worker has just done its pandas work: the temporaries it freed sit in the C heap (glibc
    keeps them while anything above is in use), so they are handed back here, off the UI thread."""
    # (imported here, not with this module: the Overview's first paint imports it, and no pandas)
    from rooftop.trace.frame import give_back_memory

    give_back_memory()
    if get_current_worker().is_cancelled:
        return False
    node.post_message(message)
    return True
