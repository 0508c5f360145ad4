"""``/-/refs``: the ref switcher's list, fetched when the switcher is opened.

A page carries only the switcher's button (the ref it shows), so a page of a repository with a
thousand tags weighs what a page of one with a single tag weighs. The list is an HTML fragment:
branches (the default branch first) and tags, each newest first and at most ``SHOWN`` of each,
filtered by ``?q=``; each name links to the same page (``?for=``: src, blame, commits) and path
(``?at=``) on that ref. It is a page of the repository like any other: refused as missing to
those who may not read the repository, kept in the page cache for its ref snapshot, and given
an ETag of its bytes (``ConditionalMiddleware``).
"""

from __future__ import annotations

from dataclasses import dataclass

import falcon

from floorless.core.errors import BadRequest
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.refs import check_path
from floorless.web.context import RepoView
from floorless.web.views.base import RepoPage
from floorless.web.views.source import query_bytes

SHOWN = 50  # names of each kind: 100 links at most, whatever the repository holds
MAX_FILTER = 200  # bytes of ``?q=`` looked at


@dataclass(frozen=True)
class Group:
    kind: str  # "branch" or "tag"
    title: str
    names: list[bytes]  # the names shown, newest first
    matching: int  # how many names match the filter, shown or not


def matching(names: list[bytes], q: bytes) -> list[bytes]:
    """The names containing ``q``, ignoring ASCII case; all of them for an empty ``q``."""
    if not q:
        return names
    needle = q.lower()
    return [name for name in names if needle in name.lower()]


class RefSwitch(RepoPage):
    query = ("for", "at", "q")

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        page = req.get_param("for") or "src"
        if page not in urls.PAGES:
            raise BadRequest(f"no ref page {page!r}: use one of {', '.join(urls.PAGES)}")
        at = check_path(query_bytes(req, "at") or b"")
        q = (query_bytes(req, "q") or b"")[:MAX_FILTER].strip()
        self.cached_page(req, resp, view, lambda: self.fragment(req, resp, view, page, at, q))

    def fragment(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        page: str,
        at: bytes,
        q: bytes,
    ) -> bool:
        branches, tags = view.snapshot.newest_first(*objects.ref_dates(view.handle))
        groups = []
        for kind, title, names in (("branch", "Branches", branches), ("tag", "Tags", tags)):
            if names:
                found = matching(names, q)
                groups.append(Group(kind, title, found[:SHOWN], len(found)))
        self.html(resp, "refswitch.html", repo=view.repo, page=page, at=at, q=q, groups=groups)
        return True  # it shows names alone: nothing in it ages
