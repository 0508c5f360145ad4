"""Code search pages: one repository's (``/{owner}/{repo}/search``) and every repository its
reader may read (``/-/search``, the explore page's "Code" tab). Both are plain GET forms
(``<form role="search">`` with ``q``), working without JavaScript.

A repository's page is found and refused as every other page of it is (``RepoPage``: 404
for a reader who may not read it); the site-wide page searches only the repositories the
access policy's ``visible_clause`` keeps for its reader. Either reads files from the
repository's own objects through its open handle: no process is started.
"""

from __future__ import annotations

from collections.abc import Callable

import falcon
import pygit2

from floorless.core.errors import BadRequest, FloorlessError, NotFound
from floorless.forgejo import urls
from floorless.search import query as code
from floorless.search.index import Indexed
from floorless.web.auth import viewer_of
from floorless.web.context import RepoView
from floorless.web.views.base import RepoPage, View

MODES = {"": "Text", "regex": "Regular expression"}


def _page(req: falcon.Request) -> int:
    try:
        return int(req.get_param("page", default="1"))
    except ValueError as exc:
        raise BadRequest("page must be a number") from exc


def _form(req: falcon.Request) -> tuple[str, str]:
    q = req.get_param("q", default="") or ""
    mode = req.get_param("mode", default="") or ""
    if mode not in MODES:
        raise BadRequest("mode is text (empty) or regex")
    return q, mode


class RepoSearch(RepoPage):
    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        q, mode = _form(req)
        ref = (req.get_param("ref") or "").encode("utf-8", "surrogateescape")
        indexed = self._ref(view, ref) if ref else self.forge.code.indexed(view.repo.id)
        pending = indexed is not None and self.forge.code.stored_tree(indexed.tree) is None
        if pending and indexed is not None:  # a ref asked for the first time
            self.forge.code.queue_tree(view.repo, indexed.tree)

        def targets(parsed: code.Query) -> list[code.Target]:
            if parsed.repos:
                raise BadRequest("repo: filters are for the site-wide search")
            return [code.Target(view.repo, indexed, view.handle)] if indexed is not None else []

        results, error, page = _answer(self, req, resp, "" if pending else q, mode, targets)
        home = view.snapshot.home
        self.html(
            resp,
            "search.html",
            **view.template_context(
                q=q,
                mode=mode,
                modes=MODES,
                results=results,
                error=error,
                page=page,
                indexed=indexed,
                pending=pending,
                ref=ref,
                behind=not ref
                and indexed is not None
                and home is not None
                and indexed.commit != home[2],
                action=urls.repo_search(view.repo),
                page_url=lambda n: urls.repo_search(view.repo, q, mode, n, ref),
                site_wide=False,
            ),
        )

    def _ref(self, view: RepoView, ref: bytes) -> Indexed:
        """What searching the branch (or else tag) ``ref`` reads: its commit's tree."""
        kind, commit = "branch", view.snapshot.branches.get(ref)
        if commit is None:
            tag = view.snapshot.tags.get(ref)
            kind, commit = "tag", tag.commit if tag is not None else None
        if commit is None:
            raise NotFound("no such branch or tag")
        found = view.handle.get(pygit2.Oid(raw=commit))
        if not isinstance(found, pygit2.Commit):
            raise NotFound("no such branch or tag")
        return Indexed(view.repo.id, kind, ref, commit, found.tree_id.raw, 0.0)


class SiteSearch(View):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        q, mode = _form(req)
        results, error, page = _answer(
            self, req, resp, q, mode, lambda parsed: self._targets(req, parsed)
        )
        self.html(
            resp,
            "search.html",
            q=q,
            mode=mode,
            modes=MODES,
            results=results,
            error=error,
            page=page,
            ref=b"",
            action=urls.code_search(),
            page_url=lambda n: urls.code_search(q, mode, n),
            site_wide=True,
        )

    def _targets(self, req: falcon.Request, parsed: code.Query) -> list[code.Target]:
        """Every repository the reader may read that is indexed (those ``repo:`` names)."""
        rows = self.forge.db.query("SELECT * FROM search_repos")
        indexed = {
            int(row["repo_id"]): Indexed(
                int(row["repo_id"]),
                row["kind"],
                bytes(row["ref"]),
                bytes(row["commit_id"]),
                bytes(row["tree"]),
                row["indexed_at"],
            )
            for row in rows
        }
        visible = self.forge.policy.visible_clause(viewer_of(req))
        repos = self.forge.registry.readable(visible, sorted(indexed))
        if parsed.repos:
            wanted = {name.lower().removesuffix(".git") for name in parsed.repos}
            repos = [r for r in repos if r.full_name.lower() in wanted or r.name.lower() in wanted]
        targets = []
        for repo in repos:
            try:
                handle = self.forge.live.open(repo)
            except FloorlessError:  # gone or broken on disk: nothing of it to show
                continue
            targets.append(code.Target(repo, indexed[repo.id], handle))
        return targets


def _answer(
    view: View,
    req: falcon.Request,
    resp: falcon.Response,
    q: str,
    mode: str,
    targets: Callable[[code.Query], list[code.Target]],
) -> tuple[code.Results | None, str, int]:
    """What ``q`` finds in ``targets`` (of the parsed query), the error to show, and the page
    number; nothing for an empty query; a query that cannot run answers 400 with its reason."""
    if not q.strip():
        return None, "", 1
    page = _page(req)
    try:
        parsed = code.parse(q, mode)
        found = code.search(
            view.forge.code, targets(parsed), parsed, page, view.settings.search_seconds
        )
    except BadRequest as exc:
        resp.status = falcon.HTTP_400
        return None, exc.args[0] if exc.args else "bad query", page
    return found, "", page
