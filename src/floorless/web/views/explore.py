"""The explore page, an owner's page, and the metrics endpoint."""

from __future__ import annotations

import hmac
import os

import falcon
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from floorless.core.errors import BadRequest, NotFound
from floorless.core.metrics import Metrics
from floorless.core.timing import spawn_counter
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.web.auth import viewer_of
from floorless.web.proxies import Proxies, networks, within
from floorless.web.views.base import View, admin_command

SORTS = {"recent": "Recently updated", "name": "Name", "oldest": "Least recently updated"}
MAX_PAGE = 1_000_000


class Explore(View):
    owner_page = False

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str | None = None) -> None:
        query = req.get_param("q", default="")[:100]
        sort = req.get_param("sort", default="recent")
        if sort not in SORTS:
            sort = "recent"
        try:
            page = max(1, int(req.get_param("page", default="1")))
        except ValueError as exc:
            raise BadRequest("page must be a number") from exc
        if page > MAX_PAGE:  # an offset SQLite cannot take; no listing is that long
            raise BadRequest("page out of range")
        visible = self.forge.policy.visible_clause(viewer_of(req))
        if owner is not None and not self.forge.registry.owner_exists(owner, visible):
            raise NotFound(f"no owner {owner!r}")
        size = self.settings.repos_per_page
        repos, total = self.forge.registry.listing(
            query, owner=owner, sort=sort, offset=(page - 1) * size, limit=size, visible=visible
        )
        pages = max(1, -(-total // size))

        def listing(number: int) -> str:
            if owner is None:
                return urls.explore(query, sort, number)
            return urls.owner(owner, query, sort, number)

        self.html(
            resp,
            "explore.html",
            repos=repos,
            total=total,
            query=query,
            sort=sort,
            sorts=SORTS,
            page=page,
            pages=pages,
            prev_url=listing(page - 1) if page > 1 else None,
            next_url=listing(page + 1) if page < pages else None,
            owner=owner,
            first_run=owner is None and self.forge.accounts.first_run(),
            admin_command=lambda: admin_command(self.settings),
        )


class Owner(Explore):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str | None = None) -> None:
        super().on_get(req, resp, owner=owner)


class MetricsPage:
    """Prometheus metrics, for ``metrics_addresses`` or whoever sends ``metrics_token``; to
    anyone else this URL does not exist (404)."""

    identifies = False  # its own token, not an account's: no password is checked here

    def __init__(self, forge: Forge, metrics: Metrics) -> None:
        self.forge = forge
        self.metrics = metrics
        self.proxies = Proxies(forge.settings.trusted_proxies)
        self.addresses = networks(forge.settings.metrics_addresses)
        self.token = forge.settings.metrics_token.encode()

    def allowed(self, req: falcon.Request) -> bool:
        scheme, _, sent = (req.get_header("Authorization") or "").strip().partition(" ")
        if self.token and scheme.lower() == "bearer":
            return hmac.compare_digest(sent.strip().encode("utf-8", "replace"), self.token)
        if self.proxies.unvouched(req):  # the peer is a proxy that does not say for whom
            return False
        return within(self.proxies.client_address(req), self.addresses)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self.allowed(req):
            raise NotFound("no such page")
        self.metrics.index_lag.set(self.forge.indexer.lag())
        self.metrics.index_pending.set(0 if self.forge.indexer.idle() else 1)
        self.metrics.process_id.set(os.getpid())
        self.metrics.index_commits.set(self.forge.indexer.commits_indexed)
        _ = spawn_counter()
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(self.metrics.registry)
