"""GitHub's URL shapes, redirected to floorless's own, so that a pasted link keeps working:
``/tree/REF/path`` (a directory) and ``/blob/REF/path`` (a file) both become
``/src/{kind}/REF/path``, the ref looked up as a branch, a tag, then a commit; and
``/commit/REF`` of a ref with a ``/`` in its name (``/commit/feature/x``) to the commit it
names (a one-segment ref is the commit page's own redirect). A repository the reader may not
read answers 404 exactly as a missing one does (``RepoPage``)."""

from __future__ import annotations

import falcon

from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.web.context import RepoView
from floorless.web.render import Renderer
from floorless.web.views.base import RepoPage
from floorless.web.views.commit import ref_commit


class GitHubShape(RepoPage):
    def __init__(self, forge: Forge, renderer: Renderer, page: str) -> None:
        super().__init__(forge, renderer)
        self.page = page  # floorless's page for it (urls.PAGES)

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        ref: str,
        tail: str = "",
    ) -> None:
        raise view.canonical(self.page, urls.exact_tail(req, "ref"))


class RefCommit(RepoPage):
    """``/commit/{ref}/{more}``: ``/commit/feature/x`` (``.diff``, ``.patch``) to the page of the
    commit the branch or tag ``feature/x`` names now."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, sha: str, tail: str
    ) -> None:
        name, variant = urls.exact_tail(req, "sha"), ""
        for suffix in (b".diff", b".patch"):
            if name.endswith(suffix):
                name, variant = name[: -len(suffix)], suffix[1:].decode()
        raise falcon.HTTPFound(urls.commit(view.repo, ref_commit(view, name), variant))
