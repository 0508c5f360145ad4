"""SSH keys through the API: the caller's own (``/user/keys``), anyone's public keys
(``/users/{name}/keys``), and a repository's deploy keys (``/repos/{owner}/{repo}/keys``, its
administrators').

As on Forgejo, a key that is not an SSH public key, or that floorless refuses (a private key,
DSA, RSA under 2048 bits), is a 422 saying why, and so is a key already in use anywhere (a key
names one person or one repository). Adding or deleting a key takes a credential that may
write (a read-only token: 403). A person's key that is not the caller's answers 404 as a
missing one; a repository's deploy keys answer as its settings do: 404 to whoever may not read
it, 401 to an anonymous caller, 403 to whoever may read but not administer it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Required, TypedDict

import falcon

from floorless.accounts.access import Level
from floorless.accounts.accounts import Account
from floorless.accounts.keys import SshKey
from floorless.core.errors import BadRequest, Conflict, NotFound, Unauthorized
from floorless.forgejo.keys import DeployKey, PublicKey, deploy_key_json, key_json
from floorless.forgejo.people import Person, RepoFacts, person, repo_json, user_json
from floorless.forgejo.schema import Doc
from floorless.web.api.base import Operation, Paged, Resource, Unprocessable
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url


class CreateKeyOption(TypedDict, total=False):
    """What ``POST`` of a list of keys takes (Forgejo's ``CreateKeyOption``)."""

    key: Required[Annotated[str, Doc("the public key, as OpenSSH writes it (a .pub file)")]]
    title: Required[Annotated[str, Doc("the key's title")]]
    read_only: Annotated[
        bool, Doc("a deploy key's: it may not push (false when not given, as Forgejo)")
    ]


class KeyListQuery(Paged, total=False):
    """What a person's list of keys reads from its query."""

    fingerprint: Annotated[str, Doc("only the key of this SHA256 fingerprint")]


class DeployKeyListQuery(KeyListQuery, total=False):
    """What a repository's list of deploy keys reads from its query."""

    key_id: Annotated[int, Doc("only the key of this id")]


def _key_id(text: str, missing: str) -> int:
    number = int(text) if (text.isascii() and text.isdigit()) and len(text) < 18 else 0
    if number <= 0:
        raise NotFound(missing)
    return number


def adding(add: Callable[[], SshKey]) -> SshKey:
    """A key added by ``add``, its refusals in Forgejo's status: 422 for a key that is not
    one or is refused, and for one already in use."""
    try:
        return add()
    except BadRequest as exc:
        raise Unprocessable(f"Invalid key content: {exc}") from exc
    except Conflict as exc:
        raise Unprocessable(str(exc)) from exc


def _title(body: dict[str, object]) -> str:
    title = str(body["title"]).strip()
    if not title:
        raise Unprocessable("[title]: Required")
    return title


class KeyResource(Resource):
    """What a person's lists of keys share: a page of them, as the caller may see them."""

    def keys_of(
        self, req: falcon.Request, resp: falcon.Response, owner: Person, keys: list[SshKey]
    ) -> None:
        fingerprint = self.query(req).get("fingerprint")
        if fingerprint is not None:
            keys = [k for k in keys if k.fingerprint == fingerprint]
        paging = self.paging(req)
        self.paged(req, resp, self.forge, paging, len(keys))
        shown = keys[paging.offset : paging.offset + paging.limit]
        public = public_url(self.forge.settings, req)
        self.send(resp, [self.key_json(req, k, owner, public) for k in shown])

    def key_json(self, req: falcon.Request, key: SshKey, owner: Person, public: str) -> PublicKey:
        """The key as the caller sees it: whose it is only to its owner and to an admin."""
        viewer = self.viewer(req)
        me = viewer.account
        private = me is not None and (me.id == owner.id or me.is_admin)
        user = user_json(owner, viewer, public) if private else None
        return key_json(key, user, public)

    def me(self, req: falcon.Request, account: Account) -> Person:
        found = person(self.forge.db, account.name)
        if found is None:
            raise Unauthorized("this account no longer exists")
        return found


class MyKeys(KeyResource):
    operations = {
        "get": Operation(
            "the authenticated user's SSH keys",
            list[PublicKey],
            query=KeyListQuery,
            paged=True,
            signed_in=True,
            operation_id="userCurrentListKeys",
            tag="user",
        ),
        "post": Operation(
            "add an SSH key to the authenticated user",
            PublicKey,
            status=201,
            body=CreateKeyOption,
            signed_in=True,
            operation_id="userCurrentPostKey",
            tag="user",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.caller(req)
        self.keys_of(req, resp, self.me(req, account), self.forge.keys.of_user(account.id))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.writer(req)
        body = self.body(req)
        title = _title(body)
        key = adding(lambda: self.forge.keys.add_user_key(account, str(body["key"]), title))
        public = public_url(self.forge.settings, req)
        self.send(resp, self.key_json(req, key, self.me(req, account), public), 201)


class MyKey(KeyResource):
    operations = {
        "get": Operation(
            "one of the authenticated user's SSH keys",
            PublicKey,
            signed_in=True,
            operation_id="userCurrentGetKey",
            tag="user",
        ),
        "delete": Operation(
            "delete one of the authenticated user's SSH keys",
            None,
            status=204,
            signed_in=True,
            operation_id="userCurrentDeleteKey",
            tag="user",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, id: str) -> None:
        account = self.caller(req)
        key = self.forge.keys.user_key(account.id, _key_id(id, "no such key"))
        public = public_url(self.forge.settings, req)
        self.send(resp, self.key_json(req, key, self.me(req, account), public))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, id: str) -> None:
        account = self.writer(req)
        key = self.forge.keys.user_key(account.id, _key_id(id, "no such key"))
        self.forge.keys.delete(key)
        self.nothing(resp)


class UserKeys(KeyResource):
    operations = {
        "get": Operation(
            "a user's public SSH keys",
            list[PublicKey],
            query=KeyListQuery,
            paged=True,
            operation_id="userListKeys",
            tag="user",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        who = person(self.forge.db, name)
        if who is None:
            raise NotFound(f"user does not exist [name: {name[:100]}]")
        keys = [] if who.is_org else self.forge.keys.of_user(who.id)
        self.keys_of(req, resp, who, keys)


class DeployKeyResource(RepoResource):
    """What a repository's deploy keys share: the repository's JSON in each."""

    def deploy_json(
        self, req: falcon.Request, target: Target, keys: list[SshKey]
    ) -> list[DeployKey]:
        public = public_url(self.forge.settings, req)
        repository = repo_json(
            target.repo, RepoFacts(self.forge, self.viewer(req), [target.repo]), public
        )
        return [deploy_key_json(k, target.repo, repository, public) for k in keys]


class RepoKeys(DeployKeyResource):
    operations = {
        "get": Operation(
            "a repository's deploy keys (its administrators)",
            list[DeployKey],
            query=DeployKeyListQuery,
            paged=True,
            signed_in=True,
            operation_id="repoListKeys",
            needs=Level.ADMIN,
            tag="repository",
        ),
        "post": Operation(
            "add a deploy key to a repository (its administrators)",
            DeployKey,
            status=201,
            body=CreateKeyOption,
            signed_in=True,
            operation_id="repoCreateKey",
            needs=Level.ADMIN,
            first="writer",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        keys = self.forge.keys.of_repo(target.repo.id)
        query = self.query(req)
        if "fingerprint" in query:
            keys = [k for k in keys if k.fingerprint == query["fingerprint"]]
        if "key_id" in query:
            keys = [k for k in keys if k.id == query["key_id"]]
        paging = self.paging(req)
        self.paged(req, resp, self.forge, paging, len(keys))
        self.send(
            resp, self.deploy_json(req, target, keys[paging.offset : paging.offset + paging.limit])
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        account = self.writer(req)
        body = self.body(req)
        title = _title(body)
        key = adding(
            lambda: self.forge.keys.add_deploy_key(
                target.repo.id, str(body["key"]), title, bool(body.get("read_only")), account
            )
        )
        self.send(resp, self.deploy_json(req, target, [key])[0], 201)


class RepoKey(DeployKeyResource):
    operations = {
        "get": Operation(
            "one of a repository's deploy keys (its administrators)",
            DeployKey,
            signed_in=True,
            operation_id="repoGetKey",
            needs=Level.ADMIN,
            tag="repository",
        ),
        "delete": Operation(
            "delete a deploy key (its administrators)",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDeleteKey",
            needs=Level.ADMIN,
            first="writer",
            tag="repository",
        ),
    }

    def found(self, target: Target, id: str) -> SshKey:
        return self.forge.keys.deploy_key(target.repo.id, _key_id(id, "no such deploy key"))

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        self.send(resp, self.deploy_json(req, target, [self.found(target, id)])[0])

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        self.writer(req)
        self.forge.keys.delete(self.found(target, id))
        self.nothing(resp)
