"""The object gate: whether an object may be served by its id, asked before any is.

A page, a raw file or a fetch that names an object by id would otherwise serve whatever the
repository's objects hold: a commit of a branch deleted since, or (through a fork's
alternates) what a private parent holds. An object is served only when the repository's refs
reach it (``reachability.py``, over the indexer's knowledge of its history), and an object a
fork borrows only as its parent serves it to anyone. A push may build on what the
repositories the pushed one borrows from hold, as far as the pusher may read them
(``readable_lenders``, for ``git/pushgate.py``).

It sits beside the reachability marks it asks (the indexer's), and asks the access policy
one question (a lender's level), which is the same layer's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Level, Policy, Viewer
from floorless.core.errors import NotFound
from floorless.git.refs import RefSnapshot
from floorless.index.indexer import Indexer
from floorless.repos.forks import Forks, owns
from floorless.repos.live import Live
from floorless.repos.registry import Registry, Repo


class Gate:
    def __init__(
        self, indexer: Indexer, live: Live, registry: Registry, forks: Forks, policy: Policy
    ) -> None:
        self.indexer = indexer
        self.live = live
        self.registry = registry
        self.forks = forks
        self.policy = policy
        self._stop = threading.Event()  # a fetch waiting for the indexer gives up at once

    def stop(self) -> None:
        self._stop.set()

    def reachable(
        self, repo: Repo, snapshot: RefSnapshot, kind: int, oid: bytes, budget: int | None
    ) -> bool | None:
        """Whether the object ``oid`` of type ``kind`` (an ``ObjectType``) may be served by its
        id: the refs of ``snapshot`` reach it. None when that is not known yet within
        ``budget`` commits read."""
        tips, reach, handle = snapshot.tip_set, self.indexer.reach, self.live.open(repo)
        if kind == ObjectType.COMMIT:
            return reach.commit(repo.id, handle, tips, oid, budget)
        if kind == ObjectType.TAG:
            return oid in snapshot.tag_objects
        if repo.parent is not None and not owns(Path(handle.path), oid):
            return self._borrowed(repo.parent, kind, oid, budget)
        return reach.blob_or_tree(repo.id, handle, tips, oid, budget)

    def _borrowed(
        self, parent_name: tuple[str, str], kind: int, oid: bytes, budget: int | None
    ) -> bool | None:
        """A tree or blob a fork reads from its parent's objects (alternates) is served by id
        only as the parent serves it to anyone: the parent public and its refs reaching it.
        The fork's own index knows nothing of what the parent gained since the fork, so its
        suspects would let through whatever the parent (perhaps private by now) holds."""
        try:
            parent = self.registry.get(*parent_name)
        except NotFound:
            return False
        if parent.private:
            return False
        return self.reachable(parent, self.live.snapshot(parent), kind, oid, budget)

    def fetchable(self, repo: Repo, wait: float = 2.0) -> Callable[[bytes], bool | None]:
        """For a fetch: whether an object id may be sent; None when that is not known yet
        (the index is behind a ref that was deleted) after waiting ``wait`` seconds for the
        indexer. The wait is short: it holds a request thread."""

        def allowed(oid: bytes) -> bool | None:
            deadline = time.monotonic() + wait
            try:  # the header alone: a large blob is not read (nor a cached header trusted:
                # garbage collection may have removed the object since)
                kind, _ = self.live.open(repo).odb.read_header(pygit2.Oid(raw=oid))
            except (KeyError, ValueError, pygit2.GitError):
                return False
            while True:
                answer = self.reachable(repo, self.live.snapshot(repo), kind, oid, None)
                if answer is not None:
                    return answer
                if repo.id in self.indexer.failures:
                    return False
                if time.monotonic() > deadline:
                    return None
                self._stop.wait(0.05)

        return allowed

    def readable_lenders(self, viewer: Viewer, repo: Repo) -> list[Repo]:
        """The repositories whose objects ``repo`` borrows (``Forks.ancestors``) that
        ``viewer`` may read now: a push into ``repo`` may build on their refs
        (``git/pushgate.py``), and on nothing else they hold."""
        return [
            lender
            for lender in self.forks.ancestors(repo)
            if lender is not None and self.policy.level(viewer, lender) >= Level.READ
        ]
