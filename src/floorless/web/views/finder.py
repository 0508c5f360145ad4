"""The file finder: every path of a ref, for ``t`` on any page of a ref, and its page without
script.

``/-/paths/{tree}`` answers the paths of a tree as JSON, fetched once when the finder opens
and filtered in the browser as one types: a tree never changes, so the list is built once per
tree id (``tree_paths``, cached with the rendered fragments), served with that id as its ETag
and cached by the browser for good. The tree must be reachable from the repository's refs,
as any object asked for by id must (``RepoView.reachable``); otherwise it is missing.

``/find/{kind}/{ref}?q=`` is the same finder as a page, for a browser without script: the
ref's paths matching ``q``, ranked as the script ranks them (``rank``).

Ranking (here and in ``static/finder.js``, kept the same): a path matches when the query's
characters appear in it in order, ignoring ASCII case and spaces; matches in the file's own
name come before matches across directories, a run of the query found whole before scattered
letters, fewer separate runs before more, then shorter paths, then by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import falcon
import pygit2
from pygit2.enums import ObjectType

from floorless.core.caches import Cache
from floorless.core.errors import NotFound
from floorless.forgejo import urls
from floorless.git.oid import is_full
from floorless.git.paths import tree_paths
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.render import text
from floorless.web.views.base import RefPage, RepoPage
from floorless.web.views.source import query_bytes

MAX_PATHS = 200_000  # paths listed of one tree: git.git has ~4,500, the Linux kernel ~90,000
MAX_QUERY = 200  # characters of a query looked at
SHOWN = 100  # paths shown on the page for a query
_PLAIN = re.compile(rb"[A-Za-z0-9_.~/-]*")  # what urls.path leaves as it is
LISTED = 1000  # paths shown on the page without a query


@dataclass(frozen=True)
class PathList:
    paths: list[bytes]
    truncated: bool
    body: bytes  # the JSON answer, encoded once


def path_list(
    cache: Cache[Hashable, object], handle: pygit2.Repository, tree: pygit2.Tree
) -> PathList:
    """The paths of ``tree``, kept by its id (the same tree has the same paths anywhere)."""

    def make() -> PathList:
        paths, truncated = tree_paths(handle, tree, MAX_PATHS)
        # as in a URL (urls.path): most paths need no escaping, and quote() is the dear part
        listed = [p.decode("ascii") if _PLAIN.fullmatch(p) else urls.path(p) for p in paths]
        body = json.dumps(
            {"tree": str(tree.id), "truncated": truncated, "paths": listed},
            separators=(",", ":"),
        ).encode()
        return PathList(paths, truncated, body)

    return cast(PathList, cache.get_or_make(("paths", str(tree.id)), make))


def _runs(needle: str, hay: str) -> int | None:
    """How many separate runs the characters of ``needle`` take in ``hay``, matched in order
    from the left (each character as soon as it can be, a run kept going while it can); None
    when they are not all there."""
    runs, at, previous = 0, 0, -2
    for char in needle:
        found = hay.find(char, at)
        if found < 0:
            return None
        if found != previous + 1:
            runs += 1
        previous, at = found, found + 1
    return runs


def score(path: str, needle: str) -> tuple[int, int] | None:
    """(tier, runs) of ``path`` for the lower-cased ``needle``: tier 4 when the file's name
    starts with it, 3 when its name holds it whole, 2 when its name holds its letters in order,
    1 when the path holds it whole, 0 when the path holds its letters in order; None for no
    match."""
    hay = path.lower()
    name = hay[hay.rfind("/") + 1 :]
    if name.startswith(needle):
        return 4, 1
    if needle in name:
        return 3, 1
    runs = _runs(needle, name)
    if runs is not None:
        return 2, runs
    if needle in hay:
        return 1, 1
    runs = _runs(needle, hay)
    if runs is not None:
        return 0, runs
    return None


def normalise(q: str) -> str:
    return "".join(q.split()).lower()[:MAX_QUERY]


def rank(paths: Iterable[tuple[bytes, str]], q: str) -> list[bytes]:
    """The paths (each with its shown text) that match ``q``, best first."""
    needle = normalise(q)
    if not needle:
        return [raw for raw, _ in paths]
    scored = []
    for raw, shown in paths:
        found = score(shown, needle)
        if found is not None:
            scored.append((-found[0], found[1], len(shown), shown, raw))
    scored.sort()
    return [entry[-1] for entry in scored]


class Paths(RepoPage):
    """``/-/paths/{tree}``: a tree's paths as JSON for the finder."""

    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        if not is_full(params["tree"]):
            raise NotFound("not a tree id")

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tree: str) -> None:
        try:
            obj = view.handle.get(tree)
        except ValueError as exc:  # not hex at all: is_full let it through as text
            raise NotFound("not a tree id") from exc
        if not isinstance(obj, pygit2.Tree):
            raise NotFound("no such tree")
        view.reachable(ObjectType.TREE, obj.id.raw)
        etag = str(obj.id)
        resp.etag = etag
        # private: a shared cache must not keep a private repository's paths for others
        scope = "private" if view.repo.private else "public"
        resp.cache_control = [scope, "max-age=31536000", "immutable"]
        if any(tag in ("*", etag) for tag in req.if_none_match or []):
            resp.status = falcon.HTTP_304
            return
        found = path_list(self.renderer.caches["paths"], view.handle, obj)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = found.body


class Find(RefPage):
    """``/find/{kind}/{ref}``: the finder as a page, filtered on the server by ``?q=``."""

    page = "find"
    query = ("q",)

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> bool:
        if resolved.path:
            raise NotFound("the finder lists a whole ref: leave the path out")
        commit = view.commit(resolved)
        found = path_list(self.renderer.caches["paths"], view.handle, commit.tree)
        raw_q = (query_bytes(req, "q") or b"")[: MAX_QUERY * 4]
        q = raw_q.decode("utf-8", "replace").strip()
        matches = rank(((p, text(p)) for p in found.paths), q)
        limit = SHOWN if q else LISTED
        self.html(
            resp,
            "find.html",
            **view.template_context(
                resolved=resolved,
                crumbs=[],
                q=q,
                shown=[(p, text(p)) for p in matches[:limit]],
                matching=len(matches),
                total=len(found.paths),
                truncated=found.truncated,
            ),
        )
        return True  # paths of a commit: nothing in the page ages
