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
objects waits for ``collect_everything``. While requests come, ``Activity`` settles every
few seconds what they left alive (caches' entries above all: a crawl of git.git's distinct
pages made full collections of 119 ms), and once they stop, collects everything, frozen
too, at a moment no request waits through (and every ``FULL_AFTER`` seconds of a server
that never stops being busy), so a request's cycle frozen in flight is not kept for good.
The collections made here are told apart from those the interpreter starts (``chosen``).

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
import time

_lock = threading.Lock()
settled = 0  # how many times this process froze what was alive (tests read it)
everything = 0  # how many times it collected everything, the frozen too (tests read it)
# Whether a collection running now is one of this module's, at a moment it chose (read by
# the metrics' callback: no other collection can start while one runs)
chosen = False
FULL_AFTER = 600.0  # seconds a server busy without a pause goes between full collections


def _collect(generation: int) -> None:
    """A collection of this module's choosing (``chosen`` while it runs), under the lock."""
    global chosen
    chosen = True
    try:
        gc.collect(generation)
    finally:
        chosen = False


def settle() -> None:
    """Free the young garbage, then freeze every object alive now (see the module)."""
    global settled
    with _lock:
        _collect(1)  # the young generations only: cheap, unlike a full collection
        gc.freeze()
        settled += 1


def collect_everything() -> None:
    """A full collection that reaches the frozen objects too (to close a dropped handle in a
    cycle), then freeze what is left again. As long as a full collection over the whole
    heap: for a moment no request waits (``Activity``), or what is rare (a repository moved
    or deleted)."""
    global everything
    with _lock:
        gc.unfreeze()
        _collect(2)
        gc.freeze()
        everything += 1


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
    """Requests counted as they come (``seen``: an increment, no lock), and the heap kept
    small by the maintenance loop, which asks ``quiet`` every few seconds: while requests
    came since it last asked, what is alive is settled (young garbage freed, the rest
    frozen); the first time none came, after some did, everything is collected and the
    memory freed given back to the system. A busy server is never held by the trim (it walks
    every arena under their locks) nor by a full collection, but once every FULL_AFTER
    seconds; a quiet one pays both once per burst."""

    def __init__(self) -> None:
        self.requests = 0
        self._asked_at = 0  # requests counted the last time ``quiet`` was asked
        self._given_at = 0  # ... the last time memory was given back
        self.given = 0  # times memory was given back (tests read it)
        self._full_at = time.monotonic()  # when everything was last collected

    def seen(self) -> None:
        self.requests += 1

    def quiet(self) -> bool:
        """Whether memory was given back now."""
        now, before = self.requests, self._asked_at
        self._asked_at = now
        if now != before:  # still busy
            if time.monotonic() - self._full_at >= FULL_AFTER:
                self._collect()
            else:
                settle()
            return False
        if now == self._given_at:  # given back since
            return False
        self._given_at = now
        self._collect()
        give_back()
        self.given += 1
        return True

    def _collect(self) -> None:
        collect_everything()
        self._full_at = time.monotonic()
