"""People: the caller, anyone by name, a search, and a person's access tokens."""

from __future__ import annotations

from typing import Annotated, Required, TypedDict

import falcon

from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Forbidden, NotFound, Unauthorized
from floorless.forgejo import people as shapes
from floorless.forgejo.people import AccessToken, people, person, scope_from, token_json, user_json
from floorless.forgejo.schema import Doc
from floorless.web.api.base import Operation, Paged, Resource, Unprocessable
from floorless.web.public import public_url


class UserSearchResults(TypedDict):
    """Forgejo's ``UserSearchResults``."""

    ok: bool
    data: list[shapes.User]


class UserSearchQuery(Paged, total=False):
    """What ``GET`` of ``UserSearch`` reads from its query."""

    q: Annotated[str, Doc("keyword")]
    uid: Annotated[int, Doc("a user id")]


class CreateAccessTokenOption(TypedDict, total=False):
    """What ``POST`` of ``Tokens`` takes (Forgejo's ``CreateAccessTokenOption``)."""

    name: Required[Annotated[str, Doc("the token's name")]]
    scopes: Annotated[list[str], Doc("Forgejo scopes: write if any writes, else read")]


class CurrentUser(Resource):
    operations = {
        "get": Operation(
            "the authenticated user",
            shapes.User,
            signed_in=True,
            operation_id="userGetCurrent",
            tag="user",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.caller(req)
        who = person(self.forge.db, account.name)
        if who is None:
            raise Unauthorized("this account no longer exists")
        self.send(resp, user_json(who, self.viewer(req), public_url(self.forge.settings, req)))


class User(Resource):
    operations = {
        "get": Operation(
            "a user or organisation by name", shapes.User, operation_id="userGet", tag="user"
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        who = person(self.forge.db, name)
        if who is None:
            raise NotFound(f"user does not exist [name: {name}]")
        self.send(resp, user_json(who, self.viewer(req), public_url(self.forge.settings, req)))


class UserSearch(Resource):
    operations = {
        "get": Operation(
            "search for people by name (answers {ok, data})",
            UserSearchResults,
            query=UserSearchQuery,
            paged=True,
            operation_id="userSearch",
            tag="user",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        paging = self.paging(req)
        q = (req.get_param("q") or "").strip().lower()
        escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where = "kind = 'user' AND lower(name) LIKE ? ESCAPE '\\'"
        params: list[object] = [f"%{escaped}%"]
        uid = req.get_param("uid")
        if uid:
            if not (uid.isascii() and uid.isdigit()) or len(uid) > 18:
                raise BadRequest("uid must be a number")
            where += " AND id = ?"
            params.append(int(uid))
        db = self.forge.db
        total_row = db.one(f"SELECT COUNT(*) AS n FROM accounts WHERE {where}", params)  # noqa: S608
        rows = db.query(
            f"SELECT name FROM accounts WHERE {where} ORDER BY lower(name), id"  # noqa: S608
            " LIMIT ? OFFSET ?",
            [*params, paging.limit, paging.offset],
        )
        names = [str(row["name"]) for row in rows]
        found = people(db, names)
        public = public_url(self.forge.settings, req)
        viewer = self.viewer(req)
        data = [user_json(found[n.lower()], viewer, public) for n in names if n.lower() in found]
        self.paged(req, resp, self.forge, paging, int(total_row["n"]) if total_row else 0)
        self.send(resp, {"ok": True, "data": data})


class TokenResource(Resource):
    """A person's tokens: only with their password over HTTP Basic, as on Forgejo, so that a
    token that leaks cannot be used to make more."""

    def owner(self, req: falcon.Request, name: str) -> Account:
        """The caller, signed in with their password over Basic, if ``name`` is theirs."""
        account = self.caller(req)
        if req.context.get("auth_method") != "password":
            raise Unauthorized("auth required: HTTP Basic with the password")
        if account.name.lower() != name.lower():
            raise Forbidden("you may only manage your own tokens")
        return account


class Tokens(TokenResource):
    operations = {
        "get": Operation(
            "the user's access tokens",
            list[AccessToken],
            query=Paged,
            paged=True,
            basic=True,
            operation_id="userGetTokens",
            tag="user",
        ),
        "post": Operation(
            "create an access token",
            AccessToken,
            status=201,
            body=CreateAccessTokenOption,
            basic=True,
            operation_id="userCreateToken",
            tag="user",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        account = self.owner(req, name)
        paging = self.paging(req)
        active = [t for t in self.forge.accounts.tokens(account) if t.revoked_at is None]
        self.paged(req, resp, self.forge, paging, len(active))
        shown = active[paging.offset : paging.offset + paging.limit]
        self.send(resp, [token_json(t) for t in shown])

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        account = self.owner(req, name)
        body = self.body(req)
        title = str(body["name"]).strip()
        if not title:
            raise Unprocessable("[name]: Required")
        scope = scope_from(body.get("scopes") or [])
        if scope is None:
            raise BadRequest("access token must have a scope: read:... or write:... (or all)")
        if any(
            t.name == title for t in self.forge.accounts.tokens(account) if t.revoked_at is None
        ):
            raise BadRequest("access token name has been used already")
        plain, token = self.forge.accounts.create_token(account, scope, title)
        self.send(resp, token_json(token, plain), 201)


class Token(TokenResource):
    operations = {
        "delete": Operation(
            "delete an access token",
            None,
            status=204,
            basic=True,
            operation_id="userDeleteAccessToken",
            tag="user",
        )
    }

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str, token: str) -> None:
        account = self.owner(req, name)
        active = [t for t in self.forge.accounts.tokens(account) if t.revoked_at is None]
        if token.isascii() and token.isdigit():
            found = [t for t in active if t.id == int(token)]
        else:
            found = [t for t in active if t.name == token]
        if not found:
            raise NotFound("access token does not exist")
        if len(found) > 1:
            raise Unprocessable("multiple matches for token name: use its id")
        self.forge.accounts.revoke_token(account, found[0].id)
        self.nothing(resp)
