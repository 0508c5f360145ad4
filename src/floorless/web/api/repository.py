"""The repository of a request under ``/api/v1/repos/{owner}/{repo}``, found once, before the
responder runs.

A resource of one repository (``RepoResource``) never looks its repository up itself:
``FindTarget`` (middleware, after auth) does, as its operation declares, and hands the
responder a ``Target`` in place of the route's ``owner`` and ``repo``. The declaration
(``Operation.first`` and ``Operation.needs``) keeps each route's order of refusals as
Forgejo's handlers have it: most look the repository up first (404 for whoever may not read
it, exactly as for a missing one) and ask who is calling after; a few refuse an anonymous
caller (401) or a read-only token (403) before anything is looked up. A method the resource
has no responder for is left to falcon, which looks nothing up.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import falcon

from floorless.accounts.access import Level
from floorless.forge import Forge
from floorless.forgejo.git import Links
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation, Resource
from floorless.web.context import RepoView, find_repo
from floorless.web.public import public_url


class Target:
    """The repository a request names and the caller's level on it; its refs and handle
    (``view``) and absolute links (``links``) are read on first use, so that a route that
    needs only the row (an issue's) opens nothing."""

    def __init__(
        self, forge: Forge, req: falcon.Request, owner: str, name: str, repo: Repo, level: Level
    ) -> None:
        self.forge = forge
        self.req = req
        self.owner = owner  # as the URL spells them
        self.name = name
        self.repo = repo
        self.level = level

    @cached_property
    def view(self) -> RepoView:
        live = self.forge.live
        return RepoView(
            self.forge, self.repo, live.snapshot(self.repo), live.open(self.repo), self.level
        )

    @cached_property
    def links(self) -> Links:
        return Links(public_url(self.forge.settings, self.req), self.repo)

    def require(self, needed: Level) -> Level:
        """The caller's level, refused unless it reaches ``needed``: the repository looked up
        again, as the web decides access (for a route that refuses in steps: 404 for who may
        not read, then 401 or 403, then this)."""
        _, self.level = find_repo(self.forge, self.req, self.owner, self.name, needed)
        return self.level


class RepoResource(Resource):
    """A resource of one repository: its responders take ``target`` (a ``Target``) where the
    route names ``owner`` and ``repo``."""

    def first(self, req: falcon.Request, operation: Operation) -> None:
        """What is refused before the repository is looked up, as ``operation`` says."""
        if operation.first == "writer":
            self.writer(req)
        elif operation.first == "caller":
            self.caller(req)


class FindTarget:
    """Middleware: the repository of a ``RepoResource``'s request, found before its responder
    runs and passed to it as ``target``, at the level its operation needs."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        method = req.method.lower()
        if not isinstance(resource, RepoResource) or not hasattr(resource, f"on_{method}"):
            return
        operation = resource.operations.get(method, _READ)
        resource.first(req, operation)
        owner, name = params.pop("owner"), params.pop("repo")
        repo, level = find_repo(self.forge, req, owner, name, operation.needs)
        params["target"] = Target(self.forge, req, owner, name, repo, level)


_READ = Operation("", None)
