"""What every repository page starts from: the repository, its refs, an open handle, and what
the URL's ref-and-path tail names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import falcon
import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Level
from floorless.core.errors import DatabaseUnavailable, NotFound, RepositoryBroken, UnknownRevision
from floorless.db.store import UNREACHABLE
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.lenient import AnyCommit
from floorless.git.refs import RefSnapshot, Resolved, resolve
from floorless.index.reachability import PAGE_BUDGET
from floorless.repos.registry import Repo
from floorless.web.auth import viewer_of

KINDS = urls.KINDS


@dataclass
class RepoView:
    forge: Forge
    repo: Repo
    snapshot: RefSnapshot
    handle: pygit2.Repository
    level: Level = Level.READ
    extra: dict[str, Any] = field(default_factory=dict)
    parent: Repo | None = None  # what it was forked from, when the viewer may read that

    def resolve(self, kind: str, tail: bytes) -> Resolved:
        """The ref and path of a URL tail; a commit id (full or abbreviated) must be reachable
        from a branch or tag (``reachable``)."""
        if kind not in KINDS:
            raise NotFound(f"unknown ref kind {kind!r}: use branch, tag or commit")
        resolved = resolve(
            self.snapshot, kind, tail, lambda prefix: objects.expand_commit_id(self.handle, prefix)
        )
        if kind == "commit":
            objects.get_commit(self.handle, resolved.commit)  # it exists, and is a commit
            self.reachable(ObjectType.COMMIT, resolved.commit)
        return resolved

    def reachable(self, kind: ObjectType, oid: bytes) -> None:
        """Refuse an object asked for by id that no branch or tag reaches (a deleted branch's
        commit, say) exactly as one that does not exist; 503 while that is not known yet."""
        answer = self.forge.gate.reachable(self.repo, self.snapshot, kind, oid, PAGE_BUDGET)
        if answer is None:
            raise falcon.HTTPServiceUnavailable(
                description="this repository's history is being indexed; try again in a moment",
                retry_after=1,
            )
        if not answer:
            raise UnknownRevision(f"no such {kind.name.lower()}")

    def resolve_url(self, req: falcon.Request, page: str, kind: str) -> Resolved:
        """The ref and path of a ``/{page}/{kind}/{ref}/{path}`` URL.

        Without a kind (``/src/main/README.md``, an older link shape) the ref is looked up as a
        branch, a tag, then a commit, and the client is redirected to the canonical URL.
        """
        if kind in KINDS:
            return self.resolve(kind, urls.exact_tail(req))
        # the route's {kind} is the ref's first segment
        raise self.canonical(page, urls.exact_tail(req, "kind"))

    def canonical(self, page: str, tail: bytes) -> falcon.HTTPFound:
        """The redirect from a ref-and-path ``tail`` whose kind is not spelled out (an older
        floorless link, or GitHub's ``/tree/REF/path``) to ``page``'s own URL for it: the
        ref is looked up as a branch, a tag, then a commit, as git itself would."""
        for candidate in KINDS:
            try:
                found = self.resolve(candidate, tail)
            except UnknownRevision:
                continue
            url = urls.ref_page(page, self.repo, candidate, found.ref, found.path)
            return falcon.HTTPFound(url)
        raise NotFound("no such branch, tag or commit")

    def commit(self, resolved: Resolved) -> AnyCommit:
        return objects.get_commit(self.handle, resolved.commit)

    def template_context(self, **more: Any) -> dict[str, Any]:
        # the file finder's list is fetched by tree id (views/finder.py): the ref's on a page
        # of a ref, the home page's ref's on the repository's other pages (``t`` works there)
        resolved = more.get("resolved")
        if isinstance(resolved, Resolved) and "finder_tree" not in more:
            more["finder_tree"] = str(self.commit(resolved).tree_id)
        elif not isinstance(resolved, Resolved) and self.snapshot.home is not None:
            kind, ref, head = self.snapshot.home
            try:
                tree = str(objects.get_commit(self.handle, head).tree_id)
            except (UnknownRevision, RepositoryBroken):  # the page shows without a finder
                tree = None
            if tree is not None:
                more.setdefault("finder_home", (kind, ref, tree))
        return {
            "repo": self.repo,
            "snapshot": self.snapshot,
            "home_ref": self.snapshot.home,
            "branches": self.snapshot.sorted_branches,
            "tags": self.snapshot.sorted_tags,
            "level": self.level,
            "parent": self.parent,
            **more,
        }


def find_repo(
    forge: Forge, req: falcon.Request, owner: str, name: str, needed: Level = Level.READ
) -> tuple[Repo, Level]:
    """The repository ``owner/name`` if the requester may reach ``needed`` on it; a repository
    they may not read is refused exactly as one that does not exist."""
    stamp = _visibility(forge)  # before the read: a write meanwhile moves past it
    try:
        repo: Repo | None = forge.registry.get(owner, name)
    except NotFound:
        repo = None
    except DatabaseUnavailable:
        return remembered(forge, req, owner, name, needed), Level.READ
    if repo is not None:
        forge.read_visibility[repo.id] = stamp
    level = forge.policy.require(viewer_of(req), repo, needed)
    assert repo is not None
    return repo, level


def remembered(forge: Forge, req: falcon.Request, owner: str, name: str, needed: Level) -> Repo:
    """While the database cannot be reached: the repository as this process last read its
    row, for reading by an anonymous visitor, if that row said public. Anything else needs the
    database and is refused as such (503): a private repository, and one whose access cannot be
    checked, are never shown; a name not known here answers as a private one does."""
    name = name.removesuffix(".git")
    if needed == Level.READ and viewer_of(req).anonymous:
        for state in forge.states.all():
            repo = state.repo
            if repo.owner == owner and repo.name == name and not state.forgotten:
                # public when last read, and no write to visibility known since
                fresh = forge.read_visibility.get(repo.id) == _visibility(forge)
                if not repo.private and fresh:
                    return repo
                break
    raise DatabaseUnavailable(UNREACHABLE)


def _visibility(forge: Forge) -> tuple[int, int]:
    return forge.db.version("repos"), forge.db.version("repo_access")


def repo_view(forge: Forge, req: falcon.Request, owner: str, name: str) -> RepoView:
    repo, level = find_repo(forge, req, owner, name)
    snapshot = forge.live.snapshot(repo)
    view = RepoView(
        forge, repo, snapshot, forge.live.open(repo), level, parent=_parent(forge, req, repo)
    )
    # An error past this point (an unknown ref or path) is shown under the repository's
    # header: the reader may read the repository, so its name and tabs tell nothing new.
    req.context.repo_view = view
    return view


def _parent(forge: Forge, req: falcon.Request, repo: Repo) -> Repo | None:
    """The repository ``repo`` was forked from, if the viewer may read it (its name alone
    would tell of a private one): read for a fork's pages alone."""
    if repo.parent is None:
        return None
    try:
        parent = forge.registry.get(*repo.parent)
    except NotFound:
        return None
    return parent if forge.policy.level(viewer_of(req), parent) >= Level.READ else None
