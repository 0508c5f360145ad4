"""``/commits/{kind}/{ref}[/{path}]``: newest first, cursor-paginated, never O(history).

A branch's list walks libgit2 for one page of commits; a path's history walks the in-memory
index (git's default history simplification), so neither counts or skips the whole history.
The cursor (``?after=``) is the walk's frontier: the commit ids where the next page starts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import falcon
import pygit2

from floorless.errors import BadRequest
from floorless.git import objects
from floorless.git.history import Page, log_page
from floorless.web.context import RepoView, raw_tail, repo_view
from floorless.web.render import urlpath
from floorless.web.views.base import View
from floorless.web.views.source import crumbs

_CURSOR = re.compile(r"[0-9a-f]{40}(,[0-9a-f]{40}){0,63}")


def parse_cursor(value: str | None) -> list[bytes] | None:
    if not value:
        return None
    if not _CURSOR.fullmatch(value):
        raise BadRequest("malformed cursor")
    return [bytes.fromhex(part) for part in value.split(",")]


def libgit2_page(handle: pygit2.Repository, starts: Sequence[bytes], limit: int) -> Page[bytes]:
    """One page of ``git log`` from ``starts`` (no path), reading only the commits shown."""
    cache: dict[bytes, pygit2.Commit] = {}

    def get(oid: bytes) -> pygit2.Commit:
        commit = cache.get(oid)
        if commit is None:
            commit = cache[oid] = objects.get_commit(handle, oid)
        return commit

    page = log_page(
        starts, lambda c: [p.raw for p in get(c).parent_ids], lambda c: get(c).commit_time, limit
    )
    assert page is not None
    return page


def history_page(
    view: RepoView, tip: bytes, path: bytes | None, cursor: list[bytes] | None, limit: int
) -> Page[bytes] | None:
    """A page of commits as raw ids; None while the index does not hold ``tip`` yet."""
    if not path:
        return libgit2_page(view.handle, cursor or [tip], limit)
    graph = view.forge.indexer.ready(view.repo.id, tip)
    if graph is None:
        return None
    starts = [graph.seq[c] for c in (cursor or [tip]) if c in graph]
    page = graph.history(starts, path, limit)
    assert page is not None
    return Page([graph.oids[s] for s in page.commits], [graph.oids[s] for s in page.frontier])


class Commits(View):
    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        owner: str,
        repo: str,
        kind: str,
        tail: str,
    ) -> None:
        view = repo_view(self.forge, owner, repo)
        resolved = view.resolve(kind, raw_tail(req, 4))
        view.commit(resolved)
        cursor = parse_cursor(req.get_param("after"))
        page = history_page(
            view, resolved.commit, resolved.path or None, cursor, self.settings.commits_per_page
        )
        commits = (
            []
            if page is None
            else [objects.commit_info(objects.get_commit(view.handle, oid)) for oid in page.commits]
        )
        following = ",".join(c.hex() for c in page.frontier) if page and page.frontier else ""
        if page is None:
            resp.set_header("Refresh", "2")
        self.html(
            resp,
            "commits.html",
            **view.template_context(
                resolved=resolved,
                kind=kind,
                commits=commits,
                indexing=page is None,
                next_cursor=following,
                crumbs=crumbs(resolved.path),
                ref_base=f"{kind}/{urlpath(resolved.ref)}",
                first_page=cursor is None,
            ),
        )
