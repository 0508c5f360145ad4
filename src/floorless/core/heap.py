"""Keeping long-lived objects out of the garbage collector's way, and freed memory going back
to the system.

A full collection walks every container object the interpreter tracks. After start-up and
after an index is built or loaded, most of them live as long as the process (modules,
templates, lexers, the settings, the commit graph's containers, the caches' entries), and
a full collection over them held every request in flight for hundreds of milliseconds, once
every few hundred requests: that was a small page's p99. ``settle`` moves what is alive at
such a moment to the permanent generation (``gc.freeze``), which no collection scans, so the
collections a crawl triggers walk only what the requests themselves made.

What is frozen is still freed when its last reference goes; only a cycle among frozen
objects waits for ``collect_everything``.

The C library keeps the pages ``free`` gave back in its arenas, for the next ``malloc``:
after a first index or a crawl a server held their peak for the rest of its life.
``give_back`` returns them (glibc's ``malloc_trim``), after an index and, through
``Activity``, once requests have stopped for a while. With the ``allocator`` setting at
``malloc``, Python's small objects come from the C library too, so their freed pages go back
as well; Python's own allocator (the default) keeps every page it ever used.
"""

from __future__ import annotations

import ctypes
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


def give_back() -> None:
    """Hand the free pages of the C heap back to the system (glibc's ``malloc_trim``). A
    first index frees most of what it allocated, but glibc keeps freed pages in its arenas: a
    server that had indexed a 100,000-commit repository and a 10,000-commit one held 272 MB
    idle for the rest of its life, against 124 MB after a restart loading the same index.
    Without glibc (another C library), nothing is done."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class Activity:
    """Requests counted as they come (``seen``: an increment, no lock), and memory given back
    once they have stopped: ``quiet`` (the maintenance loop asks it every few seconds) gives it
    back the first time it finds no request since the last time it was asked, after some
    came. A busy server is never held by the trim (it walks every arena under their locks);
    a quiet one pays it once per burst."""

    def __init__(self) -> None:
        self.requests = 0
        self._asked_at = 0  # requests counted the last time ``quiet`` was asked
        self._given_at = 0  # ... the last time memory was given back
        self.given = 0  # times memory was given back (tests read it)

    def seen(self) -> None:
        self.requests += 1

    def quiet(self) -> bool:
        """Whether memory was given back now."""
        now, before = self.requests, self._asked_at
        self._asked_at = now
        if now != before or now == self._given_at:  # still busy, or given back since
            return False
        self._given_at = now
        give_back()
        self.given += 1
        return True
