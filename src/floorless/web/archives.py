"""A ref's archive (``.tar.gz``, ``.tar``, ``.zip``): one ``git archive`` child, streamed as it
runs; the archive page's (``views/archive.py``) and the API's, beside both so that neither
imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import falcon

from floorless.core.errors import NotFound, RepositoryBroken, UnknownRevision
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import transport
from floorless.git.refs import Resolved
from floorless.web.context import RepoView

FORMATS = {
    ".tar.gz": ("tar.gz", "application/gzip"),
    ".zip": ("zip", "application/zip"),
    ".tar": ("tar", "application/x-tar"),
}


def resolve_any(view: RepoView, ref: bytes) -> Resolved:
    """A branch, then a tag, then a commit id, as ``git`` itself would try them."""
    for kind in ("branch", "tag", "commit"):
        try:
            resolved = view.resolve(kind, ref)
        except UnknownRevision:
            continue
        if not resolved.path:
            return resolved
    raise NotFound("no such branch, tag or commit")


@dataclass(frozen=True)
class Target:
    view: RepoView
    ref: bytes  # as the URL spells it
    resolved: Resolved
    suffix: str
    prefix: str  # the archive's top directory

    @property
    def commit(self) -> str:
        return self.resolved.commit.hex()


def target_in(view: RepoView, req: falcon.Request) -> Target:
    """The archive the URL's tail names (``{ref}.tar.gz``) in a repository already found."""
    name = urls.exact_tail(req)
    found = next((s for s in FORMATS if name.endswith(s.encode())), None)
    if found is None:
        raise NotFound("archives are .tar.gz, .tar or .zip")
    ref = name[: -len(found)]
    resolved = resolve_any(view, ref)
    view.commit(resolved)  # a well-formed id of no commit: 404 here, not git failing later
    label = ref.decode("utf-8", "replace").replace("/", "-")
    return Target(view, ref, resolved, found, f"{view.repo.name}-{label}")


def headers(resp: falcon.Response, target: Target) -> None:
    resp.content_type = FORMATS[target.suffix][1]
    filename = quote(target.prefix + target.suffix, safe="")
    resp.set_header("Content-Disposition", f"attachment; filename*=UTF-8''{filename}")
    if target.resolved.kind == "commit" and target.resolved.ref == target.ref:  # a full id
        resp.cache_control = ["public", "max-age=31536000", "immutable"]


def send(forge: Forge, resp: falcon.Response, target: Target) -> None:
    """Stream the archive from one ``git archive`` child (the API's archives come here too)."""
    fmt = FORMATS[target.suffix][0]
    body = transport.start(
        forge.git,
        target.view.repo.path,
        ["archive", f"--format={fmt}", f"--prefix={target.prefix}/", target.commit],
        forge.git_slots,
        "archives",
    )
    # git fails before writing anything when it cannot read the commit: say so, rather
    # than answer 200 with an empty archive
    if not body.first() and not body.succeeded():
        body.close()
        raise RepositoryBroken("git archive cannot read this commit")
    headers(resp, target)
    resp.stream = body
