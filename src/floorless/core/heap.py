"""Keeping long-lived objects out of the garbage collector's way.

A full collection walks every container object the interpreter tracks. After start-up and
after an index is built or loaded, most of them live as long as the process (modules,
templates, lexers, the settings, the commit graph's containers, the caches' entries), and
a full collection over them held every request in flight for hundreds of milliseconds, once
every few hundred requests: that was a small page's p99. ``settle`` moves what is alive at
such a moment to the permanent generation (``gc.freeze``), which no collection scans, so the
collections a crawl triggers walk only what the requests themselves made.

What is frozen is still freed when its last reference goes; only a cycle among frozen
objects waits for ``collect_everything``.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
settled = 0  # how many times this process froze what was alive (tests read it)


def settle() -> None:
    """Free the young garbage, then freeze every object alive now (see the module)."""
    global settled
    with _lock:
        gc.collect(1)  # the young generations only: cheap, unlike a full collection
        gc.freeze()
        settled += 1


def collect_everything() -> None:
    """A full collection that reaches the frozen objects too (to close a dropped handle in a
    cycle), then freeze what is left again. As long as a full collection over the whole
    heap: for what is rare (a repository moved or deleted)."""
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()


def frozen() -> int:
    """How many objects are in the permanent generation: read under the lock, since during
    ``collect_everything`` they are briefly unfrozen (its finalizers can let other threads
    run), and a reading then would say none."""
    with _lock:
        return gc.get_freeze_count()
