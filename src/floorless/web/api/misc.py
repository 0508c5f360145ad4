"""The server's version and API settings, and the answer to an unknown API path."""

from __future__ import annotations

from typing import Any, TypedDict

import falcon

from floorless import __version__
from floorless.core.errors import NotFound
from floorless.web.api.base import DEFAULT_LIMIT, MAX_LIMIT, Operation, Resource


# The Forgejo release whose API floorless answers as; clients that check a version before
# using a feature (the Gitea SDK, tea) read the part before the ``+``.
class ServerVersion(TypedDict):
    """Forgejo's ``ServerVersion``."""

    version: str


class GeneralAPISettings(TypedDict):
    """Forgejo's ``GeneralAPISettings``."""

    max_response_items: int
    default_paging_num: int
    default_git_trees_per_page: int
    default_max_blob_size: int


FORGEJO_COMPATIBLE = "11.0.0"
MAX_BLOB = 10 << 20
TREE_ENTRIES = 1000


class Version(Resource):
    operations = {
        "get": Operation(
            "the version of the server",
            ServerVersion,
            operation_id="getVersion",
            tag="miscellaneous",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.send(resp, {"version": f"{FORGEJO_COMPATIBLE}+floorless-{__version__}"})


class ApiSettings(Resource):
    operations = {
        "get": Operation(
            "the server's API settings",
            GeneralAPISettings,
            operation_id="getGeneralAPISettings",
            tag="settings",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.send(
            resp,
            {
                "max_response_items": MAX_LIMIT,
                "default_paging_num": DEFAULT_LIMIT,
                "default_git_trees_per_page": TREE_ENTRIES,
                "default_max_blob_size": MAX_BLOB,
            },
        )


class Unknown(Resource):
    """Any path under ``/api/v1`` no route names: a JSON 404 whatever the method, never the
    web's pages (``/api`` is a reserved owner name, so no repository can be there)."""

    identifies = False

    def _answer(self, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
        raise NotFound("the API has no such path")

    on_get = on_post = on_put = on_patch = on_delete = on_options = _answer
