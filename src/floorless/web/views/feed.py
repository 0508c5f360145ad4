"""An Atom (and RSS) feed of a branch's latest commits."""

from __future__ import annotations

import falcon

from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import objects
from floorless.web.context import RepoView
from floorless.web.history import libgit2_page
from floorless.web.render import Renderer
from floorless.web.views.base import RepoPage

ENTRIES = 20


class Feed(RepoPage):
    """``/atom/branch/{branch}`` or ``/rss/branch/{branch}``, as ``fmt`` says."""

    def __init__(self, forge: Forge, renderer: Renderer, fmt: str) -> None:
        super().__init__(forge, renderer)
        if fmt not in urls.FEEDS:
            raise ValueError(f"no feed format {fmt!r}")
        self.fmt = fmt

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str) -> None:
        resolved = view.resolve("branch", urls.exact_tail(req))
        page = libgit2_page(view.handle, [resolved.commit], ENTRIES)
        commits = [objects.commit_info(objects.get_commit(view.handle, c)) for c in page.commits]
        atom = self.fmt == "atom"
        resp.content_type = (
            "application/atom+xml; charset=utf-8" if atom else "application/rss+xml; charset=utf-8"
        )
        resp.text = self.renderer.page(
            "feed.atom" if atom else "feed.rss",
            **view.template_context(
                resolved=resolved, commits=commits, public=self.public_url(req)
            ),
        )
