"""Webhooks through the API: a repository's (its administrators') and an organisation's (its
owners'), listed, created, read, edited, deleted and tested, as Forgejo's ``Hook``.

A repository the caller may not read is a 404, exactly as a missing one; one they may read
but not administer is a 403. The secret is written, never read back. What the hook is set to
is checked by ``webhooks.py`` (an http or https URL, known events, a supported type): a bad
value is a 422 and nothing is written.
"""

from __future__ import annotations

from typing import Annotated, Any, Required, TypedDict

import falcon

from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forgejo import payloads as hookpayloads
from floorless.forgejo.people import person, rfc3339
from floorless.forgejo.schema import DateTime, Doc
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation, Paged, Resource, Unprocessable
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url
from floorless.webhooks.hooks import Hook as Webhook


class Hook(TypedDict):
    """Forgejo's ``Hook``."""

    id: int
    type: str
    branch_filter: str
    url: str
    content_type: str
    config: dict[str, Any]
    events: list[str]
    authorization_header: str
    active: bool
    updated_at: DateTime
    created_at: DateTime


_CONFIG = Doc(
    "url (http or https), content_type (json or form), secret, http_method (POST by default)"
)


class HookOptions(TypedDict, total=False):
    """What a hook's creation and edit both take."""

    events: Annotated[list[str], Doc("Forgejo's event names (push when none)")]
    branch_filter: Annotated[str, Doc("a glob the branch must match (every branch when empty)")]
    authorization_header: Annotated[str, Doc("sent as the Authorization header")]
    active: Annotated[bool, Doc("whether it is sent events (false when not given, as Forgejo)")]


class CreateHookOption(HookOptions, total=False):
    """What ``POST hooks`` takes (Forgejo's ``CreateHookOption``)."""

    type: Required[Annotated[str, Doc("forgejo, gitea or gogs (the same payloads)")]]
    config: Required[Annotated[dict[str, Any], _CONFIG]]


class EditHookOption(HookOptions, total=False):
    """What ``PATCH hooks/{id}`` takes (Forgejo's ``EditHookOption``)."""

    config: Annotated[dict[str, Any], _CONFIG]


class HookTestQuery(TypedDict, total=False):
    """What ``POST`` of ``RepoHookTest`` reads from its query."""

    ref: Annotated[str, Doc("not supported: the default branch is sent")]


def hook_json(hook: Webhook) -> Hook:
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

    def hooks_of(
        self, req: falcon.Request, owner: str, target: Target | None
    ) -> tuple[int | None, int | None, Repo | None]:
        """(repo_id, org_id, repo) of the hooks asked for, if the caller may manage them: a
        repository's (``target``, found once its operation refused a caller who may not
        write) or organisation ``owner``'s."""
        self.writer(req)
        viewer = self.viewer(req)
        if target is not None:
            if not self.forge.policy.may_manage_hooks(viewer, target.level):
                raise Forbidden("only the repository's administrators may manage its webhooks")
            return target.repo.id, None, target.repo
        org = person(self.forge.db, owner)
        if org is None or not org.is_org:
            raise NotFound(f"organisation does not exist [name: {owner}]")
        if not self.forge.policy.may_manage_org_hooks(viewer, org.id):
            raise Forbidden("only the organisation's owners may manage its webhooks")
        return None, org.id, None

    def list_hooks(
        self, req: falcon.Request, resp: falcon.Response, owner: str, target: Target | None
    ) -> None:
        repo_id, org_id, _ = self.hooks_of(req, owner, target)
        hooks = self.forge.webhooks.hooks(repo_id, org_id)
        paging = self.paging(req)
        self.paged(req, resp, self.forge, paging, len(hooks))
        shown = hooks[paging.offset : paging.offset + paging.limit]
        self.send(resp, [hook_json(h) for h in shown])

    def create_hook(
        self, req: falcon.Request, resp: falcon.Response, owner: str, target: Target | None
    ) -> None:
        repo_id, org_id, _ = self.hooks_of(req, owner, target)
        body = self.body(req)
        fields = _fields(body, _config(body, required=True))
        fields.setdefault("active", False)
        try:
            hook = self.forge.webhooks.create(repo_id, org_id, kind=str(body["type"]), **fields)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        self.send(resp, hook_json(hook), 201)

    def one(
        self, req: falcon.Request, owner: str, target: Target | None, hook_id: str
    ) -> tuple[Webhook, Repo | None]:
        repo_id, org_id, found = self.hooks_of(req, owner, target)
        try:
            number = int(hook_id)
        except ValueError:
            number = 0
        if not 0 < number < 1 << 62:
            raise NotFound(f"webhook does not exist [id: {hook_id[:20]}]")
        return self.forge.webhooks.hook(number, repo_id, org_id), found

    def get_hook(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        owner: str,
        target: Target | None,
        hook_id: str,
    ) -> None:
        hook, _ = self.one(req, owner, target, hook_id)
        self.send(resp, hook_json(hook))

    def edit_hook(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        owner: str,
        target: Target | None,
        hook_id: str,
    ) -> None:
        hook, _ = self.one(req, owner, target, hook_id)
        body = self.body(req)
        fields = _fields(body, _config(body, required=False))
        try:
            hook = self.forge.webhooks.update(hook, **fields)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        self.send(resp, hook_json(hook))

    def delete_hook(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        owner: str,
        target: Target | None,
        hook_id: str,
    ) -> None:
        hook, _ = self.one(req, owner, target, hook_id)
        self.forge.webhooks.delete(hook)
        self.nothing(resp)


def _hook_ops(who: str, tag: str) -> dict[str, Operation]:
    """One hook's operations, of a repository's (``who`` "repo") or an organisation's
    ("org"): Forgejo names them apart (``repoGetHook``, ``orgGetHook``). Who may not write is
    refused before a repository's is looked up."""
    return {
        "get": Operation("a webhook", Hook, operation_id=f"{who}GetHook", tag=tag, first="writer"),
        "patch": Operation(
            "edit a webhook",
            Hook,
            body=EditHookOption,
            signed_in=True,
            operation_id=f"{who}EditHook",
            tag=tag,
            first="writer",
        ),
        "delete": Operation(
            "delete a webhook",
            None,
            status=204,
            signed_in=True,
            operation_id=f"{who}DeleteHook",
            tag=tag,
            first="writer",
        ),
    }


def _hooks_ops(who: str, tag: str) -> dict[str, Operation]:
    """The operations of a repository's or an organisation's list of hooks."""
    return {
        "get": Operation(
            "list webhooks",
            list[Hook],
            query=Paged,
            paged=True,
            operation_id=f"{who}ListHooks",
            tag=tag,
            first="writer",
        ),
        "post": Operation(
            "create a webhook",
            Hook,
            status=201,
            body=CreateHookOption,
            signed_in=True,
            operation_id=f"{who}CreateHook",
            tag=tag,
            first="writer",
        ),
    }


class RepoHooks(RepoResource, HookResource):
    operations = _hooks_ops("repo", "repository")

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        self.list_hooks(req, resp, target.owner, target)

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        self.create_hook(req, resp, target.owner, target)


class RepoHook(RepoResource, HookResource):
    operations = _hook_ops("repo", "repository")

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        self.get_hook(req, resp, target.owner, target, id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        self.edit_hook(req, resp, target.owner, target, id)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        self.delete_hook(req, resp, target.owner, target, id)


class RepoHookTest(RepoResource, HookResource):
    operations = {
        "post": Operation(
            "send a webhook a push of the default branch's last commit",
            None,
            status=204,
            query=HookTestQuery,
            signed_in=True,
            operation_id="repoTestHook",
            tag="repository",
            first="writer",
        )
    }

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        hook, found = self.one(req, target.owner, target, id)
        assert found is not None
        account = self.writer(req)
        payload = hookpayloads.test_payload(
            self.forge, found, account, public_url(self.forge.settings, req)
        )
        if payload is not None:
            self.forge.webhooks.emit([hook], "push", payload, forced=True)
        self.nothing(resp)


class OrgHooks(HookResource):
    operations = _hooks_ops("org", "organization")

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        self.list_hooks(req, resp, org, None)

    def on_post(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        self.create_hook(req, resp, org, None)


class OrgHook(HookResource):
    operations = _hook_ops("org", "organization")

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.get_hook(req, resp, org, None, id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.edit_hook(req, resp, org, None, id)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, org: str, id: str) -> None:
        self.delete_hook(req, resp, org, None, id)
