"""``/commits/{kind}/{ref}[/{path}]``: newest first, cursor-paginated, never O(history).

A branch's list walks libgit2 for one page of commits; a path's history walks the in-memory
index (git's default history simplification), so neither counts or skips the whole history.
The cursor is the walk's state between pages: ``?after=`` the commit ids where the next page
starts (its frontier), ``&seen=`` the few already-walked commits the next page could reach
again (timestamp ties at the boundary) and ``&skew=`` commits dated after a child; each a
comma-separated list of hex ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import falcon
import pygit2

from floorless.errors import BadRequest, RepositoryBroken, UnknownRevision
from floorless.git import objects
from floorless.git.history import Page, log_page
from floorless.git.lenient import AnyCommit
from floorless.git.oid import parse_list
from floorless.git.refs import Resolved
from floorless.web import urls
from floorless.web.context import RepoView
from floorless.web.views.base import RefPage
from floorless.web.views.source import crumbs

MAX_CURSOR_IDS = 1024


@dataclass(frozen=True)
class Cursor:
    after: list[bytes]
    seen: list[bytes]
    skew: list[bytes]

    @classmethod
    def parse(cls, after: str | None, seen: str | None, skew: str | None) -> Cursor | None:
        if not after:
            return None
        lists = [parse_list(value or "", MAX_CURSOR_IDS) for value in (after, seen, skew)]
        if lists[0] is None or lists[1] is None or lists[2] is None:
            raise BadRequest("malformed cursor")
        return cls(lists[0], lists[1], lists[2])

    @classmethod
    def of(cls, page: Page[bytes]) -> Cursor | None:
        return cls(page.frontier, page.seen, page.skewed) if page.frontier else None

    def params(self) -> dict[str, str | None]:
        """The cursor as query parameters (those with no ids left out)."""
        parts = {"after": self.after, "seen": self.seen, "skew": self.skew}
        return {name: ",".join(c.hex() for c in ids) or None for name, ids in parts.items()}


def libgit2_page(
    handle: pygit2.Repository,
    starts: Sequence[bytes],
    limit: int,
    exclude: Sequence[bytes] = (),
    skewed: Sequence[bytes] = (),
) -> Page[bytes]:
    """One page of ``git log`` from ``starts`` (no path), reading only the commits shown."""
    cache: dict[bytes, AnyCommit] = {}

    def get(oid: bytes) -> AnyCommit:
        commit = cache.get(oid)
        if commit is None:
            commit = cache[oid] = objects.get_commit(handle, oid)
        return commit

    page = log_page(
        starts,
        lambda c: [p.raw for p in get(c).parent_ids],
        lambda c: get(c).commit_time,
        limit,
        exclude=exclude,
        skewed=skewed,
    )
    assert page is not None
    return page


def history_page(
    view: RepoView, tip: bytes, path: bytes | None, cursor: Cursor | None, limit: int
) -> Page[bytes] | None:
    """A page of commits as raw ids; None while the index does not hold ``tip`` yet."""
    starts = cursor.after if cursor else [tip]
    seen = cursor.seen if cursor else []
    skew = cursor.skew if cursor else []
    if not path:
        return libgit2_page(view.handle, starts, limit, seen, skew)
    indexer = view.forge.indexer
    graph = indexer.ready(view.repo.id, tip)
    failure = indexer.failures.get(view.repo.id)
    if graph is None and failure is not None:
        # waiting would never end: the page would refresh forever
        raise RepositoryBroken(f"the history of this repository cannot be indexed: {failure}")
    if graph is not None and any(c not in graph for c in starts):
        raise UnknownRevision("no such commit")  # as the branch's list answers: not empty
    return indexer.path_history(view.repo.id, tip, path, (starts, seen, skew), limit)


class Commits(RefPage):
    page = "commits"
    query = ("after", "seen", "skew")

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        view.commit(resolved)
        cursor = Cursor.parse(req.get_param("after"), req.get_param("seen"), req.get_param("skew"))
        for start in cursor.after if cursor else []:  # the walk goes on from these commits
            objects.get_commit(view.handle, start)
            view.reachable(pygit2.enums.ObjectType.COMMIT, start)
        page = history_page(
            view, resolved.commit, resolved.path or None, cursor, self.settings.commits_per_page
        )
        commits = (
            []
            if page is None
            else [objects.commit_info(objects.get_commit(view.handle, oid)) for oid in page.commits]
        )
        following = Cursor.of(page) if page else None
        req.context.final_page = page is not None
        self.html(
            resp,
            "commits.html",
            **view.template_context(
                resolved=resolved,
                commits=commits,
                indexing=page is None,
                progress=view.forge.indexer.progress(view.repo.id) if page is None else None,
                newest_url=None if cursor is None else urls.same_page(),
                next_url=urls.same_page(**following.params()) if following else None,
                crumbs=crumbs(resolved.path),
            ),
        )
