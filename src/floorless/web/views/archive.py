"""``/archive/{ref}.tar.gz`` and ``.zip``: one ``git archive`` child, streamed as it runs."""

from __future__ import annotations

from typing import Any

import falcon

from floorless.web.archives import headers, send, target_in
from floorless.web.context import RepoView
from floorless.web.views.base import RepoPage


class Archive(RepoPage):
    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        req.context.plain = True

    def on_head(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str
    ) -> None:
        """The headers a GET would send, without starting git."""
        headers(resp, target_in(view, req))

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str) -> None:
        send(self.forge, resp, target_in(view, req))
