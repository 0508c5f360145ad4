"""Background threads: started with a name the operating system sees as well.

Linux shows a thread's name (``/proc/<tid>/comm``, ``top -H``) only when the thread sets it
itself; Python's ``threading`` names stay inside Python. Tools that watch a running forge
(the benchmark's slow-filesystem counter among them) tell floorless's background work from its
request threads by these names, which all start with ``PREFIX``.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Hashable

PREFIX = "fl-bg-"
_PR_SET_NAME = 15
_libc: ctypes.CDLL | None = None


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, from the symbols the interpreter already has loaded: no search for
    the library (``ctypes.util.find_library`` runs ``ldconfig``, a process)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    prctl: Callable[..., int] = _libc.prctl
    return prctl


def name_this_thread(name: str) -> None:
    """Give the calling thread ``name`` (at most 15 bytes) where the operating system shows
    it; the request threads' pools call it as their initializer (``fl-request``,
    ``fl-expensive``, ``fl-stream``), so that a tool tells them from each other and from the
    background threads."""
    try:
        prctl = _prctl()
        if prctl is not None:
            prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the name stays Python's own
        pass


def start(target: Callable[[], None], name: str) -> threading.Thread:
    """Start a daemon thread running ``target``, named ``PREFIX + name`` (at most 15 bytes)
    for Python and for the operating system."""
    full = (PREFIX + name)[:15]

    def run() -> None:
        name_this_thread(full)
        target()

    thread = threading.Thread(target=run, name=full, daemon=True)
    thread.start()
    return thread


class Jobs:
    """One background thread running jobs queued under keys, one at a time. A job queued
    while one of the same key waits is dropped: the waiting one runs later and sees the
    newest state. ``errors`` are logged and the thread goes on; ``idle`` says when nothing
    is queued or running (for tests)."""

    def __init__(
        self, name: str, log: logging.Logger, errors: tuple[type[BaseException], ...]
    ) -> None:
        self.name = name
        self.log = log
        self.errors = errors
        self._jobs: dict[Hashable, Callable[[], object]] = {}
        self._busy = 0
        self._wake = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def queue(self, key: Hashable, job: Callable[[], object]) -> None:
        with self._wake:
            self._jobs.setdefault(key, job)
            self._wake.notify_all()

    def start(self) -> None:
        self._thread = start(self._run, self.name)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def idle(self) -> bool:
        with self._wake:
            return not self._jobs and not self._busy

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._jobs and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                key = next(iter(self._jobs))
                job = self._jobs.pop(key)
                self._busy += 1
            try:
                job()
            except self.errors as exc:
                self.log.warning("%s: %s: %s", self.name, key, exc)
            finally:
                with self._wake:
                    self._busy -= 1
