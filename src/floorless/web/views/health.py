"""``/-/health`` and ``/-/ready``, for a load balancer in front of several nodes.

Health is liveness: the process answers, and nothing else is looked at (no database, no disk),
so a node whose database is away is not restarted for it. Ready says whether the node can do
its work now: the database answers a query, and the repositories directory can be listed (a
shared filesystem that is not mounted, or refuses, fails it). Neither is cached, compressed
or kept in a session, and neither says more than which part failed: the details go to the log.
"""

from __future__ import annotations

import logging
import os

import falcon

from floorless.core.errors import DatabaseUnavailable
from floorless.forge import Forge

log = logging.getLogger(__name__)


def _plain(resp: falcon.Response) -> None:
    resp.cache_control = ["no-store"]
    resp.content_type = "application/json"


class Health:
    identifies = False  # nobody's credentials are looked at

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _plain(resp)
        resp.media = {"status": "alive"}


class Ready:
    identifies = False

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        parts = {"database": self.database(), "repositories": self.repositories()}
        ready = all(state == "ok" for state in parts.values())
        _plain(resp)
        resp.status = falcon.HTTP_200 if ready else falcon.HTTP_503
        resp.media = {"status": "ready" if ready else "not ready", **parts}

    def database(self) -> str:
        try:
            self.forge.db.ping()
        except DatabaseUnavailable as exc:
            log.info("not ready: %s", exc)  # the data layer logs the loss itself, once
            return "unreachable"
        return "ok"

    def repositories(self) -> str:
        root = self.forge.settings.repos
        try:
            with os.scandir(root) as entries:
                next(entries, None)
        except OSError as exc:
            log.warning("not ready: the repositories directory %s: %s", root, exc)
            return "unreadable"
        return "ok"
