"""The stylesheet, the highlighting theme and the small script, with long-lived caching."""

from __future__ import annotations

from importlib import resources

import falcon

from floorless.core.errors import NotFound
from floorless.web.markup import stylesheet

TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


class Static:
    identifies = False  # the same bytes for everyone: credentials are never even looked at

    def __init__(self) -> None:
        folder = resources.files("floorless.web") / "static"
        self.files: dict[str, bytes] = {
            f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()
        }
        self.files["code.css"] = stylesheet().encode()

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        data = self.files.get(name)
        if data is None:
            raise NotFound("no such file")
        resp.content_type = next(
            (mime for ext, mime in TYPES.items() if name.endswith(ext)), "application/octet-stream"
        )
        resp.cache_control = ["public", "max-age=3600"]
        resp.data = data
