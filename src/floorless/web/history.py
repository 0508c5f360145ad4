"""A history's pages as a cursor names them: what the commits page (``views/commits.py``,
whose docstring tells the cursor's design) and the API's commit lists both read, beside
them so that neither imports the other."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pygit2

from floorless.core.errors import BadRequest, RepositoryBroken, UnknownRevision
from floorless.git import objects
from floorless.git.history import Page, log_page
from floorless.git.oid import parse_full
from floorless.web.context import RepoView

MAX_SKIP = 10**10 - 1  # no history has more commits: the count stays within 10 digits
_COUNT = re.compile(r"[0-9]{1,10}")
MAX_FOLLOWED_PATH = 4096  # bytes of the followed path a cursor may carry


@dataclass(frozen=True)
class Cursor:
    start: bytes  # the commit the list starts from
    skip: int = 0  # commits shown before this page (of ``path``'s history)
    path: bytes | None = None  # the path followed past a rename; None: the URL's

    @classmethod
    def parse(cls, after: str | None, skip: str | None, path: str | None = None) -> Cursor | None:
        if not after:
            if path:
                raise BadRequest("a followed path needs its cursor")
            return None
        start = parse_full(after)
        if start is None or (skip and not _COUNT.fullmatch(skip)):
            raise BadRequest("malformed cursor")
        followed = None
        if path:
            followed = path.encode("utf-8", "surrogateescape")
            if (
                len(followed) > MAX_FOLLOWED_PATH
                or b"\0" in followed
                or followed.startswith(b"/")
                or any(part in (b"", b".", b"..") for part in followed.split(b"/"))
            ):
                raise BadRequest("malformed path in the cursor")
        return cls(start, int(skip) if skip else 0, followed)

    def params(self) -> dict[str, str | None]:
        """The cursor as query parameters (``skip`` left out when 0, ``path`` when the URL's
        own)."""
        return {
            "after": self.start.hex(),
            "skip": str(self.skip) if self.skip else None,
            "path": None if self.path is None else self.path.decode(),
        }


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
    indexer, answers = view.forge.indexer, view.forge.answers
    if not path:
        return answers.branch_history(view.repo, start, skip, limit)
    graph = indexer.ready(view.repo.id, tip)
    failure = indexer.failures.get(view.repo.id)
    if graph is None and failure is not None:
        # waiting would never end: the page would refresh forever
        raise RepositoryBroken(f"the history of this repository cannot be indexed: {failure}")
    if graph is not None and start not in graph:
        raise UnknownRevision("no such commit")  # as the branch's list answers: not empty
    return answers.path_history(view.repo.id, start, path, skip, limit, view.repo)
