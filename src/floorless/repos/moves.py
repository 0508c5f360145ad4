"""Where a repository's refs moving is taken in: the one hub every ref move goes through.

A ref moves through floorless (a push, an API write, a merge, a pull request's
``refs/pull/N/head``) or behind its back (seen by the maintenance loop's ref check). Either
way the move ends here, in ``index_soon``: the repository is due for garbage collection, its
``updated_at`` follows its newest branch tip, the indexer indexes the new refs, and every one
of ``listeners`` is called (cheaply: each queues its work) -- pull requests follow their heads
and bases, code search its default branch, reviews and references their commits. A move made
here is told to the other nodes (``peers.py``); one they make reaches their own hub.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pygit2

from floorless.core import dates
from floorless.core.errors import FloorlessError
from floorless.git.lenient import read_commit
from floorless.git.refs import RefSnapshot
from floorless.repos.live import Live
from floorless.repos.peers import Peers
from floorless.repos.registry import Registry, Repo
from floorless.repos.state import RepoState

log = logging.getLogger(__name__)

Listener = Callable[[Repo, RefSnapshot], None]


class Moves:
    def __init__(self, live: Live, registry: Registry, peers: Peers, schedule: Listener) -> None:
        self.live = live
        self.registry = registry
        self.peers = peers
        self.schedule = schedule  # the indexer's: before any listener, and not guarded
        # Called whenever this node learns that a repository's refs moved.
        self.listeners: list[Listener] = []

    def refs_moved(self, repo: Repo) -> None:
        """Call after floorless itself moved a ref (a push, an API call): the next request
        sees it at once, and the indexer indexes it."""
        state = self.live.state(repo)
        state.refs_moved()
        self.peers.tell(repo.id, "moved")
        self.index_soon(state)

    def after_push(self, repo: Repo) -> None:
        """A push just ended: give an empty repository's first branch the default, then let the
        next request see the new refs (and the indexer index them) without waiting."""
        try:
            handle = self.live.open(repo)
            if handle.head_is_unborn and handle.branches.local:
                names = sorted(handle.branches.local)
                current_name = str(handle.references["HEAD"].target).removeprefix("refs/heads/")
                for choice in (current_name, "main", "master", names[0]):
                    if choice in names:  # not set_head: it lets go of the GIL
                        handle.create_reference_symbolic("HEAD", f"refs/heads/{choice}", True)
                        break
        except (pygit2.GitError, FloorlessError, KeyError, OSError) as exc:
            log.warning("%s: after push: %s", repo.full_name, exc)
        self.refs_moved(repo)

    def set_pull_ref(self, repo: Repo, number: int, oid: str) -> None:
        """Point ``refs/pull/{number}/head`` of ``repo`` at the commit ``oid`` (hex, present in
        ``repo``'s objects), then take the move in as any other."""
        handle = self.live.open(repo)
        handle.references.create(f"refs/pull/{number}/head", pygit2.Oid(hex=oid), force=True)
        self.refs_moved(repo)

    def index_soon(self, state: RepoState) -> None:
        """Take in that ``state``'s refs moved (see the module's docstring)."""
        repo = state.repo
        state.gc_due = True
        try:
            snapshot = state.snapshot()
            self._record_update(state, snapshot)
        except (FloorlessError, pygit2.GitError) as exc:
            log.warning("%s: %s", repo.full_name, exc)
            return
        self.schedule(repo, snapshot)
        for listener in self.listeners:
            try:
                listener(repo, snapshot)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s: after its refs moved: %s", repo.full_name, exc)

    def _record_update(self, state: RepoState, snapshot: RefSnapshot) -> None:
        """Store the newest branch tip's commit date as the repository's ``updated_at``: in
        range whatever the commit says, and never later than now (a commit dated in the year
        99999 must not keep a repository first among the recently updated)."""
        repo, handle = state.repo, state.handle()
        times: list[int] = []
        for commit in snapshot.branches.values():
            obj = read_commit(handle, pygit2.Oid(raw=commit))
            if obj is not None:
                times.append(obj.commit_time)
        updated = min(dates.clamp(max(times)), time.time()) if times else None
        self.registry.set_updated(repo.id, updated)
