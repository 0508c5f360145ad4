"""Webhooks through the API: a repository's (its administrators') and an organisation's (its
owners'), listed, created, read, edited, deleted and tested, as Forgejo's ``Hook``.

A repository the caller may not read is a 404, exactly as a missing one; one they may read
but not administer is a 403. The secret is written, never read back. What the hook is set to
is checked by ``webhooks.py`` (an http or https URL, known events, a supported type): a bad
value is a 422 and nothing is written.
"""

from __future__ import annotations

from typing import Any

import falcon

from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forgejo import payloads as hookpayloads
from floorless.forgejo.people import person, rfc3339
from floorless.repos.registry import Repo
from floorless.web.api.base import PAGED, Field, Operation, Resource, Unprocessable
from floorless.web.views.base import public_url
from floorless.webhooks.hooks import Hook

_CONFIG = "url (http or https), content_type (json or form), secret, http_method (POST by default)"
_CREATE = {
    "type": Field("string", "forgejo, gitea or gogs (the same payloads)", required=True),
    "config": Field("object", _CONFIG, required=True),
    "events": Field("array", "Forgejo's event names (push when none)"),
    "branch_filter": Field("string", "a glob the branch must match (every branch when empty)"),
    "authorization_header": Field("string", "sent as the Authorization header"),
    "active": Field("boolean", "whether it is sent events (false when not given, as Forgejo)"),
}
_EDIT = {k: v for k, v in _CREATE.items() if k != "type"} | {
    "config": Field("object", _CONFIG),
}


def hook_json(hook: Hook) -> dict[str, Any]:
    """Forgejo's ``Hook``: everything but the secret."""
    return {
        "id": hook.id,
        "type": hook.kind,
        "branch_filter": hook.branch_filter,
        "url": hook.url,
        "content_type": hook.content_type,
        "config": {
            "url": hook.url,
            "content_type": hook.content_type,
            "http_method": hook.http_method.lower(),
        },
        "events": list(hook.events),
        "authorization_header": hook.authorization_header,
        "active": hook.active,
        "updated_at": rfc3339(hook.updated_at),
        "created_at": rfc3339(hook.created_at),
    }


def _config(body: dict[str, Any], required: bool) -> dict[str, str]:
    config = body.get("config")
    if config is None:
        return {}
    if not all(isinstance(v, str) for v in config.values()):
        raise Unprocessable("[config]: its values must be strings")
    if required and not config.get("url"):
        raise Unprocessable("[config]: url is required")
    if required and not config.get("content_type"):
        raise Unprocessable("[config]: content_type is required")
    return {str(k): str(v) for k, v in config.items()}


def _fields(body: dict[str, Any], config: dict[str, str]) -> dict[str, Any]:
    """The hook's fields a create or edit body sets."""
    fields: dict[str, Any] = {}
    for key, field in (
        ("url", "url"),
        ("content_type", "content_type"),
        ("http_method", "http_method"),
        ("secret", "secret"),
    ):
        if key in config:
            fields[field] = config[key]
    for key in ("events", "branch_filter", "authorization_header", "active"):
        if key in body:
            fields[key] = body[key]
    return fields


class HookResource(Resource):
    """Shared by the repository's and the organisation's hooks."""

    def target(
        self, req: falcon.Request, owner: str, repo: str | None
    ) -> tuple[int | None, int | None, Repo | None]:
        """(repo_id, org_id, repo) of the hooks asked for, if the caller may manage them."""
        self.writer(req)
        viewer = self.viewer(req)
        if repo is not None:
            found, level = self.repo(req, owner, repo)
            if not self.forge.policy.may_manage_hooks(viewer, level):
                raise Forbidden("only the repository's administrators may manage its webhooks")
            return found.id, None, found
        org = person(self.forge.db, owner)
        if org is None or not org.is_org:
            raise NotFound(f"organisation does not exist [name: {owner}]")
        if not self.forge.policy.may_manage_org_hooks(viewer, org.id):
            raise Forbidden("only the organisation's owners may manage its webhooks")
        return None, org.id, None

    def list_hooks(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str | None
    ) -> None:
        repo_id, org_id, _ = self.target(req, owner, repo)
        hooks = self.forge.webhooks.hooks(repo_id, org_id)
        paging = self.paging(req)
        self.paged(req, resp, self.forge, paging, len(hooks))
        shown = hooks[paging.offset : paging.offset + paging.limit]
        self.send(resp, [hook_json(h) for h in shown])

    def create_hook(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str | None
    ) -> None:
        repo_id, org_id, _ = self.target(req, owner, repo)
        body = self.body(req)
        fields = _fields(body, _config(body, required=True))
        fields.setdefault("active", False)
        try:
            hook = self.forge.webhooks.create(repo_id, org_id, kind=str(body["type"]), **fields)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        self.send(resp, hook_json(hook), 201)

    def one(
        self, req: falcon.Request, owner: str, repo: str | None, hook_id: str
    ) -> tuple[Hook, Repo | None]:
        repo_id, org_id, found = self.target(req, owner, repo)
        try:
            number = int(hook_id)
        except ValueError:
            number = 0
        if not 0 < number < 1 << 62:
            raise NotFound(f"webhook does not exist [id: {hook_id[:20]}]")
        return self.forge.webhooks.hook(number, repo_id, org_id), found

    def get_hook(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str | None, hook_id: str
    ) -> None:
        hook, _ = self.one(req, owner, repo, hook_id)
        self.send(resp, hook_json(hook))

    def edit_hook(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str | None, hook_id: str
    ) -> None:
        hook, _ = self.one(req, owner, repo, hook_id)
        body = self.body(req)
        fields = _fields(body, _config(body, required=False))
        try:
            hook = self.forge.webhooks.update(hook, **fields)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        self.send(resp, hook_json(hook))

    def delete_hook(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str | None, hook_id: str
    ) -> None:
        hook, _ = self.one(req, owner, repo, hook_id)
        self.forge.webhooks.delete(hook)
        self.nothing(resp)


_HOOK_OPS = {
    "get": Operation("a webhook", "Hook"),
    "patch": Operation("edit a webhook", "Hook", body=_EDIT, signed_in=True),
    "delete": Operation("delete a webhook", None, status=204, signed_in=True),
}
_HOOKS_OPS = {
    "get": Operation("list webhooks", "[Hook]", query=dict(PAGED), paged=True),
    "post": Operation("create a webhook", "Hook", status=201, body=_CREATE, signed_in=True),
}


class RepoHooks(HookResource):
    operations = _HOOKS_OPS

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        self.list_hooks(req, resp, owner, repo)

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        self.create_hook(req, resp, owner, repo)


class RepoHook(HookResource):
    operations = _HOOK_OPS

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, id: str
    ) -> None:
        self.get_hook(req, resp, owner, repo, id)

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, id: str
    ) -> None:
        self.edit_hook(req, resp, owner, repo, id)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, id: str
    ) -> None:
        self.delete_hook(req, resp, owner, repo, id)


class RepoHookTest(HookResource):
    operations = {
        "post": Operation(
            "send a webhook a push of the default branch's last commit",
            None,
            status=204,
            query={"ref": Field("string", "not supported: the default branch is sent")},
            signed_in=True,
        )
    }

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, id: str
    ) -> None:
        hook, found = self.one(req, owner, repo, id)
        assert found is not None
        account = self.writer(req)
        payload = hookpayloads.test_payload(
            self.forge, found, account, public_url(self.forge.settings, req)
        )
        if payload is not None:
            self.forge.webhooks.emit([hook], "push", payload, forced=True)
        self.nothing(resp)


class OrgHooks(HookResource):
    operations = _HOOKS_OPS

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        self.list_hooks(req, resp, org, None)

    def on_post(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        self.create_hook(req, resp, org, None)


class OrgHook(HookResource):
    operations = _HOOK_OPS

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.get_hook(req, resp, org, None, id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.edit_hook(req, resp, org, None, id)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.delete_hook(req, resp, org, None, id)
