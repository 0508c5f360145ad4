"""What every view shares: the forge, the renderer, and an HTML response helper."""

from __future__ import annotations

from typing import Any

import falcon

from floorless.forge import Forge
from floorless.web.render import Renderer


class View:
    def __init__(self, forge: Forge, renderer: Renderer) -> None:
        self.forge = forge
        self.renderer = renderer
        self.settings = forge.settings

    def html(self, resp: falcon.Response, template: str, **context: Any) -> None:
        resp.content_type = "text/html; charset=utf-8"
        resp.text = self.renderer.page(template, **context)

    def public_url(self, req: falcon.Request) -> str:
        """The forge's public base URL (no trailing slash)."""
        if self.settings.base_url:
            return self.settings.base_url.rstrip("/")
        return f"{req.scheme}://{req.netloc}"
