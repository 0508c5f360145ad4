"""What every repository page starts from: the repository, its refs, an open handle, and the
exact bytes of the URL's ref-and-path tail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import falcon
import pygit2

from floorless.errors import BadRequest, NotFound
from floorless.forge import Forge
from floorless.git import objects
from floorless.git.refs import RefSnapshot, Resolved, resolve
from floorless.repos import Repo

KINDS = ("branch", "tag", "commit")


@dataclass
class RepoView:
    forge: Forge
    repo: Repo
    snapshot: RefSnapshot
    handle: pygit2.Repository
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"/{quote(self.repo.owner)}/{quote(self.repo.name)}"

    def resolve(self, kind: str, tail: bytes) -> Resolved:
        if kind not in KINDS:
            raise NotFound(f"unknown ref kind {kind!r}: use branch, tag or commit")
        return resolve(
            self.snapshot, kind, tail, lambda prefix: objects.expand_commit_id(self.handle, prefix)
        )

    def commit(self, resolved: Resolved) -> pygit2.Commit:
        return objects.get_commit(self.handle, resolved.commit)

    def template_context(self, **more: Any) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "base": self.base,
            "snapshot": self.snapshot,
            "branches": sorted(self.snapshot.branches),
            "tags": sorted(self.snapshot.tags),
            **more,
        }


def repo_view(forge: Forge, owner: str, name: str) -> RepoView:
    repo = forge.registry.get(owner, name)
    snapshot = forge.snapshot(repo)
    return RepoView(forge, repo, snapshot, forge.open(repo))


def raw_tail(req: falcon.Request, skip: int) -> bytes:
    """The URL path after its first ``skip`` segments, as the exact bytes the client sent."""
    path: str = req.env.get("PATH_INFO", "")
    raw = path.encode("latin-1", "replace")
    if b"\0" in raw:
        raise BadRequest("NUL byte in URL")
    return b"/".join(raw.split(b"/")[1 + skip :])


def ref_url(kind: str, resolved: Resolved) -> str:
    """The ``{kind}/{ref}`` part of a URL for a resolved ref."""
    return f"{kind}/{quote(resolved.ref, safe='/')}"
