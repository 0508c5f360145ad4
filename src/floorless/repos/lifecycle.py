"""A repository's life in the forge: made as a fork, renamed, made private or public, deleted.

Each of these touches more than the registry's row (``registry.py``, which records the
intent before the disk changes): the forks that borrow the repository's objects must not lose
them at any moment (``forks.py``), what this node keeps of it goes (``RepoState.forget``),
and the other nodes are told (``peers.py``). Making a repository public is refused while any
repository it borrows from is private: that question is the access policy's
(``Policy.may_publish``), handed in as ``may_publish``, since the policy sits a layer above.
"""

from __future__ import annotations

from collections.abc import Callable

from floorless.core.errors import Forbidden
from floorless.repos.forks import Forks
from floorless.repos.live import Live
from floorless.repos.moves import Moves
from floorless.repos.peers import Peers
from floorless.repos.registry import Registry, Repo, _renamed_path, check_name


class Lifecycle:
    def __init__(
        self,
        registry: Registry,
        forks: Forks,
        live: Live,
        moves: Moves,
        peers: Peers,
        may_publish: Callable[[list[Repo | None]], bool],
    ) -> None:
        self.registry = registry
        self.forks = forks
        self.live = live
        self.moves = moves
        self.peers = peers
        self.may_publish = may_publish
        # Told of a repository about to be deleted (its forks still there: what they read of
        # its records is theirs to keep), and of one deleted (its records gone with its row).
        self.before_delete: list[Callable[[Repo], None]] = []
        self.on_deleted: list[Callable[[Repo], None]] = []
        # Told of a fork just made (parent, fork): the records it starts with are copied here.
        self.on_forked: list[Callable[[Repo, Repo], None]] = []

    def fork(self, parent: Repo, owner: str, name: str) -> Repo:
        """Make ``owner/name`` a fork of ``parent``: as private as the parent, the parent's
        branches, tags and default branch, its objects borrowed. Raises Conflict when the name
        is taken, BadRequest when it is no repository name."""
        snapshot = self.live.snapshot(parent)
        repo = self.registry.create(
            owner, name, private=parent.private, description=parent.description
        )
        try:
            self.forks.lend(parent, repo, snapshot)
            for listener in self.on_forked:
                listener(parent, repo)
        except BaseException:
            self.delete(repo)
            raise
        self.moves.refs_moved(repo)
        return repo

    def rename(self, repo: Repo, new_name: str) -> Repo:
        """Rename on disk and in the database; what was kept under the old path goes (the
        first request under the new name reads the refs and has it indexed again)."""
        check_name(new_name)
        if new_name == repo.name:
            return repo
        target = _renamed_path(repo, new_name)
        target = target if repo.bare else target / ".git"
        children = self.forks.before_rename(repo, target)  # its forks borrow under both names
        try:
            renamed = self.registry.rename(repo, new_name)
        except BaseException:
            self.forks.after_rename(children, target)
            raise
        if renamed is not repo:
            self.forks.after_rename(children, repo.path)  # (the same name: nothing happened)
            self.live.states.forget(repo)
            self.peers.tell(repo.id, "gone")
        return renamed

    def delete(self, repo: Repo) -> None:
        """Remove ``repo``; its forks are made whole first (``Forks.before_delete``)."""
        self.forks.before_delete(repo)
        for listener in self.before_delete:
            listener(repo)
        self.registry.delete(repo)
        self.live.states.forget(repo)
        self.peers.tell(repo.id, "gone")
        for listener in self.on_deleted:
            listener(repo)

    def set_private(self, repo: Repo, private: bool) -> None:
        """Make ``repo`` private or public (``check_public`` first)."""
        if not private:
            self.check_public(repo)
        self.registry.set_private(repo.owner, repo.name, private)

    def check_public(self, repo: Repo) -> None:
        """Refuse to make ``repo`` public when it is a fork of a private repository (at any
        remove): ``Policy.may_publish``."""
        if not self.may_publish(self.forks.ancestors(repo)):
            raise Forbidden("a fork of a private repository stays private")
