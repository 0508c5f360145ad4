"""``/commits/{kind}/{ref}[/{path}]``: ``git log [-- path]`` newest first, in exact pages.

A branch's list walks the repository's objects; a path's history walks the in-memory index
(git's default history simplification). Neither counts or skips the whole history: the walk
is kept between pages and goes on where the last page stopped (``floorless.index.indexer``).

The cursor is ``?after=START&skip=N``: the commit the list started from (the branch's tip
when its first page was shown, so a push meanwhile shifts nothing) and how many commits the
pages before this one showed. That is all that defines a page, so a page is exact however
the history's dates run (``floorless.git.history`` explains why no cursor that carries the
walk's state can be both exact and bounded), and the cursor is bounded: one object id (at
most 64 hex digits) and a count of at most ``MAX_SKIP`` (10 digits), at most 86 characters
with the names. A walk no longer kept (a restart, or pushed out of memory) is walked again from
``START``; a cursor of the form of older versions (``after`` alone, one id) starts there.

A file's history follows renames as ``git log --follow`` does: when the oldest commit of the
path's history renamed the file there, the list goes on, on the same page and through
``Older``, with the old path's history from that commit's parent, behind a "renamed from"
row. The cursor then also names the path followed (``&path=OLD``, ``skip`` counting that
path's commits alone), so each page is still one bounded walk of the index's postings per
path it shows, and each rename is found from one commit's diff (kept by its id): the history
is never walked whole to follow a file. An old path that is not UTF-8 cannot travel in the
query: its history is linked to instead (as before following was seamless).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import falcon
import pygit2

from floorless.core.errors import BadRequest
from floorless.forgejo import urls
from floorless.git import diff as gitdiff
from floorless.git import objects
from floorless.git.refs import Resolved
from floorless.web.comparing import diff_limits
from floorless.web.context import RepoView
from floorless.web.history import MAX_SKIP, Cursor, history_page
from floorless.web.marks import mark
from floorless.web.views.base import RefPage
from floorless.web.views.source import crumbs

MAX_RENAMES_A_PAGE = 8  # renames one page follows at most (each costs one commit's diff)


@dataclass(frozen=True)
class Followed:
    """One page of a file's history followed across renames: the commits shown (raw ids);
    after which of them a "renamed from" row stands (an index into ``commits``, -1 for the
    top when the commit that renamed it ended the page before), with the old path and that
    commit; the cursor of the next page; a link to an old path's history that cannot be
    followed in the query; and whether the page is still being prepared."""

    commits: list[bytes]
    renames: dict[int, tuple[bytes, str]]
    following: Cursor | None
    linked: tuple[str, bytes] | None
    preparing: bool


class Commits(RefPage):
    page = "commits"
    query = ("after", "skip", "path")
    shows_statuses = True

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> bool:
        view.commit(resolved)
        cursor = Cursor.parse(req.get_param("after"), req.get_param("skip"), req.get_param("path"))
        if cursor is not None and cursor.path is not None and not resolved.path:
            raise BadRequest("a branch's list follows no path")
        if cursor is not None:  # the walk starts from this commit
            objects.get_commit(view.handle, cursor.start)
            view.reachable(pygit2.enums.ObjectType.COMMIT, cursor.start)
        found = self.follow(view, resolved, cursor, self.settings.commits_per_page)
        commits = [
            objects.commit_info(objects.get_commit(view.handle, oid)) for oid in found.commits
        ]
        latest = view.forge.statuses.latest_of(view.repo, [c.id for c in commits])
        self.html(
            resp,
            "commits.html",
            **view.template_context(
                resolved=resolved,
                commits=commits,
                renames=found.renames,
                marks={sha: mark(found) for sha, found in latest.items()},
                indexing=found.preparing and not commits,
                progress=view.forge.indexer.progress(view.repo.id) if found.preparing else None,
                newest_url=None if cursor is None else urls.same_page(),
                next_url=urls.same_page(**found.following.params()) if found.following else None,
                crumbs=crumbs(resolved.path),
                renamed=found.linked,
            ),
        )
        return not found.preparing

    def follow(
        self, view: RepoView, resolved: Resolved, cursor: Cursor | None, limit: int
    ) -> Followed:
        """A page of at most ``limit`` commits: the history of the path the cursor follows
        (the URL's, or an old name of it), going on into the old path's history from the
        parent of the commit that renamed it there, while room is left on the page. Each
        path's part is one bounded walk of the index (``history_page``)."""
        start = cursor.start if cursor else resolved.commit
        skip = cursor.skip if cursor else 0
        path = cursor.path if cursor and cursor.path is not None else (resolved.path or None)
        shown: list[bytes] = []
        renames: dict[int, tuple[bytes, str]] = {}
        for _ in range(MAX_RENAMES_A_PAGE + 1):
            here = Cursor(start, skip) if (cursor or shown or renames) else None
            page = history_page(view, resolved.commit, path, here, limit - len(shown))
            if page is None:  # the index is not ready for this part yet: the next page asks
                following = Cursor(start, skip, self._carried(resolved, path)) if shown else None
                return Followed(shown, renames, following, None, True)
            shown += page.commits
            if page.more:
                skip += len(page.commits)
                following = (
                    Cursor(start, skip, self._carried(resolved, path)) if skip <= MAX_SKIP else None
                )
                return Followed(shown, renames, following, None, False)
            if not path:
                break
            oldest = page.commits[-1] if page.commits else None
            if oldest is None and skip > 0:  # the part's last commit ended the page before
                last = history_page(view, resolved.commit, path, Cursor(start, skip - 1), 1)
                oldest = last.commits[-1] if last is not None and last.commits else None
            if oldest is None:
                break
            before = self.renamed(view, oldest.hex(), path)
            if before is None:
                break
            parent, old = before
            try:
                old.decode()
            except UnicodeDecodeError:  # cannot travel in the query: linked to instead
                return Followed(shown, renames, None, before, False)
            renames[len(shown) - 1] = (old, oldest.hex())
            start, skip, path = bytes.fromhex(parent), 0, old
            if len(shown) >= limit:  # the page is full: the next one starts the old path
                return Followed(shown, renames, Cursor(start, 0, old), None, False)
        else:  # renames enough for one page: the next page goes on with the old path
            return Followed(shown, renames, Cursor(start, skip, path), None, False)
        return Followed(shown, renames, None, None, False)

    @staticmethod
    def _carried(resolved: Resolved, path: bytes | None) -> bytes | None:
        """The path a cursor carries: None while it is the URL's own."""
        return None if path == (resolved.path or None) else path

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
