"""A repository's forks: listed (those the caller may see), and made.

A fork is made by ``floorless.collab.forks.Forking``, as the web's fork form makes one: into the
caller's name or an organisation they own, as private as its parent, its objects borrowed
(refs written, no process). Forgejo answers the new repository with 202 (its fork used to
be made in the background); so does floorless, though the fork is complete when it answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, TypedDict

import falcon

from floorless.forgejo.people import Repository, person
from floorless.forgejo.schema import Doc
from floorless.web.api.base import Operation, Unprocessable
from floorless.web.api.repos import LIST, Repositories
from floorless.web.api.repository import RepoResource, Target


class CreateForkOption(TypedDict, total=False):
    """What ``POST`` of ``Forks`` takes (Forgejo's ``CreateForkOption``)."""

    organization: Annotated[str, Doc("the organisation to own the fork")]
    name: Annotated[str, Doc("the fork's name (the repository's when not given)")]


class Forks(RepoResource, Repositories):
    operations = {
        "get": replace(
            LIST,
            summary="a repository's forks that the caller may see",
            operation_id="listForks",
            tag="repository",
        ),
        "post": Operation(
            "fork a repository, as the caller's or an organisation's they own",
            Repository,
            status=202,
            body=CreateForkOption,
            signed_in=True,
            operation_id="createFork",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = target.repo
        self.send(resp, self.page_of(req, resp, parent=(found.owner, found.name)))

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, level = target.repo, target.level  # found: 404 first for who may not read it
        account = self.writer(req)
        body = self.body(req)
        into = account.name
        if "organization" in body:
            org = person(self.forge.db, str(body["organization"]))
            if org is None or not org.is_org:
                named = str(body["organization"])[:100]
                raise Unprocessable(f"organisation does not exist [name: {named}]")
            into = org.name
        made = self.forge.forking.fork_for(
            self.viewer(req), level, found, into, str(body.get("name", ""))
        )
        self.send(resp, self.shown(req, [made])[0], 202)
