"""Where a request's time goes: per-phase durations and the processes it spawned.

A ``RequestTimer`` lives in a context variable for the duration of one request. Code in any
layer wraps its work in ``phase("git")``, ``phase("db")`` or ``phase("render")``; an audit hook
counts every process started from Python (``subprocess``, ``os.posix_spawn``, ``os.exec*``,
``os.system``), attributes it to the current request, and to a process-wide total.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.system", "os.fork"})


@dataclass
class RequestTimer:
    started: float = field(default_factory=time.perf_counter)
    phases: dict[str, float] = field(default_factory=dict)
    spawns: int = 0
    queries: int = 0
    _open: str | None = None

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def total(self) -> float:
        return time.perf_counter() - self.started

    def header(self) -> str:
        """The ``Server-Timing`` header value: durations in milliseconds, and the counts of
        processes spawned and database statements run (a count, not a time, in ``dur``)."""
        parts = [f"{name};dur={self.phases.get(name, 0.0) * 1000:.2f}" for name in _PHASES]
        parts.append(f"total;dur={self.total() * 1000:.2f}")
        parts.append(f'spawn;desc="processes";dur={self.spawns}')
        parts.append(f'query;desc="database statements";dur={self.queries}')
        return ", ".join(parts)


_PHASES = ("git", "db", "render")
_current: ContextVar[RequestTimer | None] = ContextVar("floorless_timer", default=None)


def start_request() -> RequestTimer:
    timer = RequestTimer()
    _current.set(timer)
    return timer


def start_request_with(timer: RequestTimer) -> None:
    """Count what follows into ``timer`` (one kept across several steps, such as an SSH
    connection's key checks), in this context and those copied from it."""
    _current.set(timer)


def end_request() -> None:
    _current.set(None)


def current() -> RequestTimer | None:
    return _current.get()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the time spent inside the block to the current request's phase ``name``.

    Nested phases count only the outermost, so ``git`` inside ``render`` is not counted twice.
    """
    timer = _current.get()
    if timer is None or timer._open is not None:
        yield
        return
    timer._open = name
    began = time.perf_counter()
    try:
        yield
    finally:
        timer._open = None
        timer.add(name, time.perf_counter() - began)


class SpawnCounter:
    """Counts process creation across the whole interpreter, via one audit hook."""

    def __init__(self) -> None:
        self.total = 0
        self._lock = threading.Lock()
        self.listeners: list[Callable[[str], None]] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in SPAWN_EVENTS:
            return
        with self._lock:
            self.total += 1
        timer = _current.get()
        if timer is not None:
            timer.spawns += 1
        for listener in self.listeners:
            listener(event)


_counter: SpawnCounter | None = None
_counter_lock = threading.Lock()


def spawn_counter() -> SpawnCounter:
    """The process-wide counter; its audit hook is installed on first use (and never removed)."""
    global _counter
    with _counter_lock:
        if _counter is None:
            _counter = SpawnCounter()
            sys.addaudithook(_counter)
        return _counter
