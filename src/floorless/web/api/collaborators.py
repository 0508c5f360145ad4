"""A repository's collaborators, and who issues may be assigned to, in Forgejo's shapes.

The rules are the settings page's, kept in ``access.py`` (its table says who may do what): a
private repository is a 404 to whoever may not read it, before anything else is asked; a
signed-in reader may list the collaborators and ask whether someone is one; only the
repository's admins may add, change or remove one; what someone may do (``permission``) is
told to the repository's admins, to site administrators and to that person alone.

Forgejo answers a name that is no account with 422 where it is the object of the request
(check, add, remove) and 404 where it asks about them (``permission``); so does floorless.
"""

from __future__ import annotations

from typing import Annotated, TypedDict

import falcon

from floorless.accounts.access import ROLES, Level, Viewer
from floorless.accounts.accounts import Account
from floorless.core.errors import Forbidden, NotFound
from floorless.forgejo.people import User, people, user_json
from floorless.forgejo.schema import Doc
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url


class RepoCollaboratorPermission(TypedDict):
    """Forgejo's ``RepoCollaboratorPermission``."""

    permission: str
    role_name: str
    user: User


class AddCollaboratorOption(TypedDict, total=False):
    """What ``PUT`` of ``Collaborator`` takes (Forgejo's ``AddCollaboratorOption``)."""

    permission: Annotated[str, Doc("read, write (the default) or admin")]


_SIGNED_IN_LIST = Operation(
    "a repository's collaborators",
    list[User],
    query=Paged,
    paged=True,
    signed_in=True,
    operation_id="repoListCollaborators",
    tag="repository",
)


class CollaboratorResource(RepoResource):
    def signed_in_reader(self, req: falcon.Request, target: Target) -> Repo:
        """The repository, for a signed-in caller who may read it (404 first, then 401)."""
        self.caller(req)
        return target.repo

    def users(self, req: falcon.Request, names: list[str]) -> list[User]:
        """Forgejo's ``User`` for each of ``names``, in their order, read in one statement."""
        found = people(self.forge.db, names)
        viewer, public = self.viewer(req), public_url(self.forge.settings, req)
        return [user_json(found[n.lower()], viewer, public) for n in names if n.lower() in found]

    def named(self, name: str, missing: type[Exception] = Unprocessable) -> Account:
        """The person ``name`` names; ``missing`` (Forgejo's status for the operation) when no
        account has that name."""
        account = self.forge.accounts.get(name)
        if account is None:
            raise missing(f"user does not exist [name: {name[:100]}]")
        return account


class Collaborators(CollaboratorResource):
    operations = {"get": _SIGNED_IN_LIST}

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = self.signed_in_reader(req, target)
        paging = self.paging(req)
        policy = self.forge.policy
        page = policy.collaborators(found, paging.offset, paging.limit)
        self.paged(req, resp, self.forge, paging, policy.collaborator_count(found))
        self.send(resp, self.users(req, [c.name for c in page]))


class Collaborator(CollaboratorResource):
    operations = {
        "get": Operation(
            "whether someone is a collaborator (204 yes, 404 no)",
            None,
            204,
            signed_in=True,
            operation_id="repoCheckCollaborator",
            tag="repository",
        ),
        "put": Operation(
            "add a collaborator, or change their permission (the repository's admins)",
            None,
            204,
            body=AddCollaboratorOption,
            signed_in=True,
            operation_id="repoAddCollaborator",
            tag="repository",
        ),
        "delete": Operation(
            "remove a collaborator (the repository's admins)",
            None,
            204,
            signed_in=True,
            operation_id="repoDeleteCollaborator",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, user: str) -> None:
        found = self.signed_in_reader(req, target)
        if self.forge.policy.role(found, self.named(user)) is None:
            raise NotFound(f"{user[:100]} is not a collaborator of {found.full_name}")
        self.nothing(resp)

    def admin(self, req: falcon.Request, target: Target) -> Repo:
        """The repository, for its administrator: 404 first for whoever may not read it
        (``target`` was found so), then 401 or 403 for the token, then its level."""
        self.writer(req)
        target.require(Level.ADMIN)
        return target.repo

    def on_put(self, req: falcon.Request, resp: falcon.Response, target: Target, user: str) -> None:
        found = self.admin(req, target)
        body = self.body(req)
        role = body.get("permission")
        if role is not None and role not in ROLES:
            raise Unprocessable(f"[permission]: must be one of {', '.join(ROLES)}")
        person = self.named(user)
        if person.is_org:
            raise Unprocessable(f"{person.name} is an organisation: a collaborator is a person")
        # as Forgejo: no permission named adds with write, and leaves an existing role alone
        role = role or self.forge.policy.role(found, person) or "write"
        self.forge.policy.set_collaborator(found, person, role)
        self.nothing(resp)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, user: str
    ) -> None:
        found = self.admin(req, target)
        self.forge.policy.remove_collaborator(found, self.named(user))
        self.nothing(resp)


class Permission(CollaboratorResource):
    operations = {
        "get": Operation(
            "what someone may do with a repository (its admins, or that person)",
            RepoCollaboratorPermission,
            signed_in=True,
            operation_id="repoGetRepoPermissions",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, user: str) -> None:
        found = self.signed_in_reader(req, target)
        caller = self.caller(req)
        person = self.named(user, NotFound)
        policy = self.forge.policy
        asking_admin = policy.level(Viewer(caller), found) >= Level.ADMIN
        if not (caller.is_admin or caller.id == person.id or asking_admin):
            raise Forbidden(
                "only the repository's admins may ask about others' permissions;"
                " a collaborator may ask about their own"
            )
        mode = policy.access_mode(found, person)
        (shown,) = self.users(req, [person.name])
        self.send(resp, {"permission": mode, "role_name": mode, "user": shown})


class Assignees(CollaboratorResource):
    operations = {
        "get": Operation(
            "who issues and pull requests may be assigned to",
            list[User],
            operation_id="repoGetAssignees",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = target.repo
        self.send(resp, self.users(req, self.forge.policy.assignable(found)))
