"""``/commits/{kind}/{ref}[/{path}]``: ``git log [-- path]`` newest first, in exact pages.

A branch's list walks the repository's objects; a path's history walks the in-memory index
(git's default history simplification). Neither counts or skips the whole history: the walk
is kept between pages and goes on where the last page stopped (``floorless.indexer``).

The cursor is ``?after=START&skip=N``: the commit the list started from (the branch's tip
when its first page was shown, so a push meanwhile shifts nothing) and how many commits the
pages before this one showed. That is all that defines a page, so a page is exact however
the history's dates run (``floorless.git.history`` explains why no cursor that carries the
walk's state can be both exact and bounded), and the cursor is bounded: one object id (at
most 64 hex digits) and a count of at most ``MAX_SKIP`` (10 digits), at most 86 characters
with the names. A walk no longer kept (a restart, or pushed out of memory) is walked again from
``START``; a cursor of the form of older versions (``after`` alone, one id) starts there.

A file's history follows renames as GitHub's does: its last page, when its oldest commit
renamed the file there, links to the history of the old path from that commit's parent
(one commit's diff, kept by its id), so each page stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import falcon
import pygit2

from floorless.errors import BadRequest, RepositoryBroken, UnknownRevision
from floorless.git import diff as gitdiff
from floorless.git import objects
from floorless.git.history import Page, log_page
from floorless.git.oid import parse_full
from floorless.git.refs import Resolved
from floorless.web import urls
from floorless.web.context import RepoView
from floorless.web.marks import mark
from floorless.web.views.base import RefPage
from floorless.web.views.commit import diff_limits
from floorless.web.views.source import crumbs

MAX_SKIP = 10**10 - 1  # no history has more commits: the count stays within 10 digits
_COUNT = re.compile(r"[0-9]{1,10}")


@dataclass(frozen=True)
class Cursor:
    start: bytes  # the commit the list starts from
    skip: int = 0  # commits shown before this page

    @classmethod
    def parse(cls, after: str | None, skip: str | None) -> Cursor | None:
        if not after:
            return None
        start = parse_full(after)
        if start is None or (skip and not _COUNT.fullmatch(skip)):
            raise BadRequest("malformed cursor")
        return cls(start, int(skip) if skip else 0)

    def params(self) -> dict[str, str | None]:
        """The cursor as query parameters (``skip`` left out when 0)."""
        return {"after": self.start.hex(), "skip": str(self.skip) if self.skip else None}


def libgit2_page(handle: pygit2.Repository, starts: Sequence[bytes], limit: int) -> Page[bytes]:
    """The first ``limit`` commits of ``git log`` from ``starts``, read from the objects,
    keeping no walk (a feed's)."""
    page = log_page(starts, *objects.commit_links(handle), limit)
    assert page is not None  # no budget
    return page


def history_page(
    view: RepoView, tip: bytes, path: bytes | None, cursor: Cursor | None, limit: int
) -> Page[bytes] | None:
    """A page of commits as raw ids; None while it is being prepared (the index does not
    hold ``tip`` yet, or a long walk goes on in the background)."""
    start, skip = (cursor.start, cursor.skip) if cursor else (tip, 0)
    indexer = view.forge.indexer
    if not path:
        return indexer.branch_history(view.repo, start, skip, limit)
    graph = indexer.ready(view.repo.id, tip)
    failure = indexer.failures.get(view.repo.id)
    if graph is None and failure is not None:
        # waiting would never end: the page would refresh forever
        raise RepositoryBroken(f"the history of this repository cannot be indexed: {failure}")
    if graph is not None and start not in graph:
        raise UnknownRevision("no such commit")  # as the branch's list answers: not empty
    return indexer.path_history(view.repo.id, start, path, skip, limit)


class Commits(RefPage):
    page = "commits"
    query = ("after", "skip")
    shows_statuses = True

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        view.commit(resolved)
        cursor = Cursor.parse(req.get_param("after"), req.get_param("skip"))
        if cursor is not None:  # the walk starts from this commit
            objects.get_commit(view.handle, cursor.start)
            view.reachable(pygit2.enums.ObjectType.COMMIT, cursor.start)
        page = history_page(
            view, resolved.commit, resolved.path or None, cursor, self.settings.commits_per_page
        )
        following = None
        if page is not None and page.more:
            start = cursor.start if cursor else resolved.commit
            skip = (cursor.skip if cursor else 0) + len(page.commits)
            if skip <= MAX_SKIP:
                following = Cursor(start, skip)
        commits = (
            []
            if page is None
            else [objects.commit_info(objects.get_commit(view.handle, oid)) for oid in page.commits]
        )
        latest = view.forge.statuses.latest_of(view.repo, [c.id for c in commits])
        renamed = None
        if resolved.path and page is not None and not page.more and commits:
            renamed = self.renamed(view, commits[-1].id, resolved.path)
        req.context.final_page = page is not None
        self.html(
            resp,
            "commits.html",
            **view.template_context(
                resolved=resolved,
                commits=commits,
                marks={sha: mark(found) for sha, found in latest.items()},
                indexing=page is None,
                progress=view.forge.indexer.progress(view.repo.id) if page is None else None,
                newest_url=None if cursor is None else urls.same_page(),
                next_url=urls.same_page(**following.params()) if following else None,
                crumbs=crumbs(resolved.path),
                renamed=renamed,
            ),
        )

    def renamed(self, view: RepoView, oldest: str, path: bytes) -> tuple[str, bytes] | None:
        """Where the history of ``path`` goes on when its oldest commit renamed it there:
        that commit's first parent (hex) and the path the file had in it. Asked on the last
        page alone, of one commit's diff (kept by its id): the history is followed past a
        rename page by page, never walked whole for it."""

        def find() -> tuple[str, bytes] | None:
            commit = objects.get_commit(view.handle, bytes.fromhex(oldest))
            before = gitdiff.renamed_from(view.handle, commit, path, diff_limits(self.settings))
            return None if before is None else (str(commit.parent_ids[0]), before)

        key = ("renamed-from", oldest, path)
        return cast(tuple[str, bytes] | None, self.renderer.caches["diff"].get_or_make(key, find))
