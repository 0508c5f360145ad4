"""What floorless keeps in memory about each served repository, held by one owner.

A repository on disk has, in this process: an open handle (with whether it is a SHA-256
repository), its ref snapshot and the file status that snapshot was read at, the status of
its pack directory, and entries keyed by its row id in shared caches: rendered pages, the
indexer's commit graph, reachability marks and failures, and answers kept in memory. They
all describe one repository at one path, so they are kept and dropped together:

- ``RepoStates`` holds one ``RepoState`` per repository, reached by its row (path, id).
  Row ids are never given twice (``Registry._insert``), so a state whose id is older than
  the row asked for belongs to a repository that was replaced at the same path.
- ``RepoState.forget()`` is the one way a repository's state goes: after a delete or a
  rename, when another repository replaced it at its path, and when scans have seen it
  positively gone. It drops the handle, the snapshot and every ``Part``'s entries.
- ``RepoState.refs_moved()`` is the one way a ref change made through floorless (a push, a
  ref moved by an API) is taken in; ``RepoState.check()`` is the background check for
  changes made behind floorless's back: file status first, refs read only when it moved.
- ``RepoState.reopen()`` drops the handle alone, when a pack it may map is gone (``git gc``
  here, or a repack by another host) or a file it may map shrank under it (a fault that
  ``git/sigbus.py`` turned into an error): the snapshot, graph, marks and answers name
  objects by id and stay valid.

Caches bounded across repositories (the handle count, the page cache's bytes, the answers'
bytes) stay shared: their entries for one repository are dropped by that repository's
``forget()``, never by a caller reaching into them.
"""

from __future__ import annotations

import logging
import threading
import weakref
from pathlib import Path
from typing import Protocol

import pygit2

from floorless.core.errors import FloorlessError
from floorless.git import sigbus
from floorless.git.refs import Fingerprint, RefSnapshot, read_snapshot, ref_fingerprint
from floorless.git.repo import HandlePool, Packs, read_packs
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)


class Part(Protocol):
    """A cache that holds entries of many repositories, keyed by their row ids."""

    def forget_repository(self, repo_id: int) -> None:
        """Drop every entry of the repository ``repo_id``."""


class RepoState:
    """One served repository's handle, refs and cache entries."""

    def __init__(self, repo: Repo, table: RepoStates) -> None:
        self.repo = repo  # its latest row (the description and visibility may change)
        self.path = repo.path
        self._table = table
        self._lock = threading.Lock()
        self._snapshot: RefSnapshot | None = None
        self._fingerprint: Fingerprint | None = None
        self._packs: Packs | None = None
        # Bumped by every invalidation and refresh, so that a slow first load that started
        # before one of them never overwrites the newer state it brought.
        self._generation = 0
        self.forgotten = False
        self.gc_due = False  # its refs moved since its last garbage collection
        # faults past the end of a mapped file absorbed in this process when last checked:
        # any since may have been in a file this handle maps (its own, or a lender's)
        self._faults = sigbus.faults()

    # -- the handle ---------------------------------------------------------------------------

    def handle(self) -> pygit2.Repository:
        return self._table.handles.get(self.path)

    def extended_format(self) -> bool:
        """Whether the repository sets ``extensions.objectformat`` (SHA-256)."""
        return self._table.handles.extended_format(self.path)

    def reopen(self, packs: Packs | None = None) -> None:
        """Let go of the handle (a pack it may map is gone) and open a new one now: the
        caller is a background thread, so no page waits for the open. ``packs`` is the
        pack directory as just read, if it was."""
        with self._lock:
            self._packs = packs or read_packs(self.path)
        self._table.handles.forget(self.path)
        self.handle()

    # -- refs ---------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._snapshot is not None

    def snapshot(self) -> RefSnapshot:
        """The current refs, read (once) if they are not in memory."""
        snapshot = self._snapshot
        if snapshot is None:
            with self._lock:
                generation = self._generation
            # the pack directory before the handle opens: what the handle may map is in it
            packs = read_packs(self.path) if self._packs is None else None
            fingerprint, loaded = self._read()
            with self._lock:
                snapshot = self._snapshot
                if snapshot is None or self._generation == generation:
                    snapshot = self._snapshot = loaded
                    self._fingerprint = fingerprint
                if self._packs is None:
                    self._packs = packs
        return snapshot

    def _read(self) -> tuple[Fingerprint, RefSnapshot]:
        # the file status first: a ref that moves while the refs are read shows as a change
        fingerprint = ref_fingerprint(self.path)
        return fingerprint, read_snapshot(self.handle())

    def refs_moved(self) -> None:
        """floorless itself moved a ref: the next request reads the refs again."""
        with self._lock:
            self._generation += 1
            self._snapshot = None

    def check(self) -> bool:
        """For the background check: take in what changed behind floorless's back. A pack
        removed or replaced reopens the handle; refs are read only when the file status of
        one moved. True when the refs changed (the snapshot is a new object then; else the
        same object stays, and what was derived from it stays valid)."""
        with self._lock:
            packs = self._packs
        now = read_packs(self.path, packs)
        faults = sigbus.faults()
        if faults != self._faults:  # it may map the file: reopen, to see it as it is now
            self._faults = faults
            if files := sigbus.news():
                log.warning("a mapped file shrank under a read: %s", ", ".join(files))
            log.info("%s: handle reopened after a mapped file shrank", self.repo.full_name)
            self.reopen(now)
        elif now is not None and now is not packs:
            if packs is not None and packs.let_go(now):
                self.reopen(now)
            else:
                with self._lock:
                    self._packs = now
        if self._fingerprint == ref_fingerprint(self.path):
            return False  # nothing moved: no need to hold the interpreter to read the refs
        try:
            fingerprint, fresh = self._read()
        except FloorlessError:
            self.refs_moved()  # unreadable now: the next request tries again
            return False
        with self._lock:
            self._generation += 1
            self._fingerprint = fingerprint
            old = self._snapshot
            if old is not None and old.same_refs(fresh):
                return False
            self._snapshot = fresh
        return True

    # -- going --------------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop everything kept about this repository: it was deleted, renamed, replaced at
        its path or is gone. Its next use makes a new state."""
        vacant = self._table.remove(self)
        with self._lock:
            self.forgotten = True
            self._generation += 1
            self._snapshot = self._fingerprint = self._packs = None
            self.gc_due = False
        if vacant:  # (a newer repository's state at the path keeps its handle)
            self._table.handles.forget(self.path)
        for part in self._table.parts():
            part.forget_repository(self.repo.id)


class RepoStates:
    """Every served repository's ``RepoState``, by path and by row id."""

    def __init__(self, handles: HandlePool) -> None:
        self.handles = handles
        self._by_path: dict[Path, RepoState] = {}
        self._by_id: dict[int, RepoState] = {}
        self._lock = threading.Lock()
        # the page caches of every app serving this forge, the indexer: weakly, so that an
        # app let go of takes its page cache with it
        self._parts: weakref.WeakSet[Part] = weakref.WeakSet()

    def attach(self, part: Part) -> None:
        """Have ``part`` drop a repository's entries whenever its state is forgotten."""
        with self._lock:
            self._parts.add(part)

    def parts(self) -> list[Part]:
        with self._lock:
            return list(self._parts)

    def of(self, repo: Repo) -> RepoState:
        """The state of the repository ``repo`` is a row of, made if it has none. A state
        kept at its path for an older row is forgotten first: another repository now lives
        there. For a row older than the state's, the state (of what is at the path now)."""
        with self._lock:
            state = self._by_path.get(repo.path)
            if state is not None and state.repo.id >= repo.id:
                if state.repo.id == repo.id:
                    state.repo = repo
                return state
            by_id = self._by_id.get(repo.id)
        if state is not None:
            state.forget()  # replaced at the same path
        if by_id is not None:
            by_id.forget()  # the same repository at another path: a rename seen by a scan
        with self._lock:
            state = self._by_path.get(repo.path)
            if state is None:
                state = self._by_path[repo.path] = self._by_id[repo.id] = RepoState(repo, self)
            return state

    def forget(self, repo: Repo) -> None:
        """Forget the repository ``repo`` is a row of (not a newer one at its path), whether
        or not it has a state now: what caches hold under its id goes all the same."""
        with self._lock:
            state = self._by_path.get(repo.path)
            if state is None or state.repo.id != repo.id:
                state = RepoState(repo, self)  # not in the table: forgetting it drops the rest
        state.forget()

    def at(self, path: Path) -> RepoState | None:
        with self._lock:
            return self._by_path.get(path)

    def by_id(self, repo_id: int) -> RepoState | None:
        with self._lock:
            return self._by_id.get(repo_id)

    def all(self) -> list[RepoState]:
        with self._lock:
            return list(self._by_path.values())

    def remove(self, state: RepoState) -> bool:
        """Take ``state`` out of the table (``RepoState.forget`` does, and nothing else);
        True when no state is left at its path."""
        with self._lock:
            if self._by_path.get(state.path) is state:
                del self._by_path[state.path]
            if self._by_id.get(state.repo.id) is state:
                del self._by_id[state.repo.id]
            return state.path not in self._by_path
