"""A repository as this node reads it now: its handle and its refs, as fresh as it knows.

``RepoStates`` (``state.py``) keeps what is in memory about each repository; this is how the
rest of the forge reads through it, by the repository's row. It adds the one rule of
freshness that needs more than the state itself: a node deaf to the others (the database is
away, or was: ``db/notices.py``) cannot learn of their pushes, so it looks at the refs'
files on each read instead, as fresh as the storage's attribute cache allows. Refs read from
their files rather than from memory are handed to ``on_fresh`` (the indexer takes them in).

Named for what it serves (the live repositories, as against the registry's rows): every page,
resource and background service that needs a handle or a snapshot asks it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pygit2

from floorless.core.errors import FloorlessError
from floorless.db.notices import Notices
from floorless.git.refs import RefSnapshot
from floorless.git.repo import HandlePool
from floorless.repos.registry import Registry, Repo
from floorless.repos.state import RepoState, RepoStates

log = logging.getLogger(__name__)


class Live:
    def __init__(
        self, states: RepoStates, handles: HandlePool, registry: Registry, notices: Notices
    ) -> None:
        self.states = states
        self.handles = handles
        self.registry = registry
        self.notices = notices
        # Called with refs just read from their files (a repository's first read here, or a
        # read while deaf to the other nodes): the composition root has the indexer follow.
        self.on_fresh: list[Callable[[Repo, RefSnapshot], None]] = []

    def state(self, repo: Repo) -> RepoState:
        """What is kept in memory about the repository ``repo`` is a row of."""
        return self.states.of(repo)

    def open(self, repo: Repo) -> pygit2.Repository:
        return self.state(repo).handle()

    def snapshot(self, repo: Repo) -> RefSnapshot:
        self.notices.catch_up()  # another process's push is taken in before its refs are used
        state = self.state(repo)
        fresh = not state.loaded
        if not fresh and not self.notices.listening:
            # Deaf to other nodes' pushes (the database is away, or was): look at the refs'
            # files on each request instead, as fresh as the storage's attribute cache allows.
            fresh = state.check()
        snapshot = state.snapshot()
        if fresh:
            for listener in self.on_fresh:
                listener(state.repo, snapshot)
        return snapshot

    def handle_of(self, repo: Repo) -> tuple[pygit2.Repository, RefSnapshot]:
        return self.open(repo), self.snapshot(repo)

    def locate(self, owner: str, name: str) -> tuple[pygit2.Repository, RefSnapshot]:
        """The handle and refs of the repository ``owner/name``, for background work."""
        return self.handle_of(self.registry.get(owner, name))

    def release_handles(self, repos: list[Repo]) -> None:
        """Open the repositories' handles anew, and free the old ones now (a dropped handle
        sits in a reference cycle: the pool's collection is a full one), rather than in the
        maintenance loop, where that collection would pause the pages of a crawl."""
        for repo in repos:
            try:
                self.state(repo).reopen()
            except (FloorlessError, pygit2.GitError, OSError) as exc:  # gone meanwhile
                log.warning("letting go of %s: %s", repo.full_name, exc)
        self.handles.collect()
