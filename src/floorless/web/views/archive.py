"""``/archive/{ref}.tar.gz`` and ``.zip``: one ``git archive`` child, streamed as it runs."""

from __future__ import annotations

import falcon

from floorless.web.archives import headers, send, target
from floorless.web.views.base import View


class Archive(View):
    def on_head(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, tail: str
    ) -> None:
        """The headers a GET would send, without starting git."""
        headers(resp, target(self.forge, req, owner, repo))

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, tail: str
    ) -> None:
        send(self.forge, resp, target(self.forge, req, owner, repo))
