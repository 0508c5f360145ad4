"""The maintenance loop: what the forge does on its own, every ``ref_check_interval``.

On one background thread: re-check the refs of every repository in memory for changes made
behind floorless's back (``check_refs``), scan the repositories directory every
``rescan_interval`` (``rescan``: repositories new here are read and indexed, those gone are
forgotten), let go of unused handles, give freed memory back once requests have stopped
(``core/heap.py``'s ``Activity``), start a garbage collection every ``gc_interval``
(``garbage.py``) on a thread of its own, and sweep the scheduled merges (``sweep``: the
collaboration layer's ``AutoMerge.tick``, handed in, since it sits a layer above).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pygit2

from floorless.core.background import start as start_thread
from floorless.core.config import Settings
from floorless.core.errors import FloorlessError
from floorless.git.repo import HandlePool
from floorless.repos.garbage import Garbage
from floorless.repos.moves import Moves
from floorless.repos.registry import Registry, ScanResult
from floorless.repos.state import RepoStates

log = logging.getLogger(__name__)


class Maintenance:
    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        states: RepoStates,
        handles: HandlePool,
        moves: Moves,
        garbage: Garbage,
        sweep: Callable[[], None],
        quiet: Callable[[], object] = lambda: None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.states = states
        self.handles = handles
        self.moves = moves
        self.garbage = garbage
        self.sweep = sweep
        self.quiet = quiet  # asked every interval: memory goes back once requests stop
        self.last_scan = 0.0
        self.last_gc = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gc_thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = start_thread(self._run, "maintain")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def scan(self) -> ScanResult:
        """Scan the repositories directory (only: at start, before anything is read)."""
        result = self.registry.scan()
        self.last_scan = time.monotonic()
        return result

    def rescan(self) -> ScanResult:
        """Scan the directory; read the refs of (and index) repositories new to this process."""
        result = self.scan()
        self.adopt_new()
        return result

    def adopt_new(self) -> None:
        """Forget the states of repositories whose rows are gone (scans saw them missing, or
        another process removed them); read the refs of, and index, those new here."""
        current = {repo.path: repo for repo in self.registry.all()}
        for state in self.states.all():
            row = current.get(state.path)
            if row is None or row.id != state.repo.id:  # gone, or replaced at its path
                state.forget()
        for path, repo in current.items():
            known = self.states.at(path)
            state = self.states.of(repo)
            # updated_at is None too when a request read the refs before adoption got here
            if known is None or known is not state or repo.updated_at is None:
                self.moves.index_soon(state)

    def check_refs(self) -> int:
        """Check every repository whose refs are in memory for changes made behind
        floorless's back (``RepoState.check``: a removed pack reopens the handle, moved refs
        are read again); index those whose refs changed, and return how many did."""
        changed = 0
        for state in self.states.all():
            if not state.loaded:
                continue
            try:
                moved = state.check()
            except (FloorlessError, pygit2.GitError) as exc:  # the reopen failed
                log.warning("%s: %s", state.repo.full_name, exc)
                continue
            if moved and not state.forgotten:
                changed += 1
                self.moves.index_soon(state)
        return changed

    def _run(self) -> None:
        interval = self.settings.ref_check_interval
        try:
            self.adopt_new()
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("background maintenance: %s", exc)
        while True:
            try:
                self.sweep()  # at once, then every automerge.SWEEP_SECONDS
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("scheduled merges: %s", exc)
            if self._stop.wait(interval):
                return
            try:
                self.check_refs()
                if time.monotonic() - self.last_scan >= self.settings.rescan_interval:
                    self.rescan()
                self.handles.collect()
                self.quiet()
                gc_interval = self.settings.gc_interval
                running = self._gc_thread is not None and self._gc_thread.is_alive()
                if gc_interval and not running and time.monotonic() - self.last_gc >= gc_interval:
                    self.last_gc = time.monotonic()
                    self._gc_thread = start_thread(self.garbage.collect_due, "gc")
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("background maintenance: %s", exc)
