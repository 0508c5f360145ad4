"""The OpenAPI (Swagger 2.0, as Forgejo's) description of what floorless's API implements,
made from the route table and each resource's ``operations``, and a page listing it.

The schemas of the answers are written out here, field by field; a test compares them with
real answers, so that neither can gain a field the other lacks.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

import falcon

from floorless import __version__
from floorless.forgejo import urls
from floorless.forgejo.git import SCHEMAS as GIT_SCHEMAS
from floorless.forgejo.issues import SCHEMAS as ISSUE_SCHEMAS
from floorless.forgejo.pulls import SCHEMAS as PULL_SCHEMAS
from floorless.web.api.base import JSON, Operation, Resource
from floorless.web.api.statuses import STATUS_SCHEMAS
from floorless.web.views.base import public_url

_USER = {
    **{k: "integer" for k in ("id", "source_id", "followers_count", "following_count")},
    "starred_repos_count": "integer",
    **{
        k: "string"
        for k in (
            "login",
            "login_name",
            "full_name",
            "email",
            "avatar_url",
            "html_url",
            "language",
            "location",
            "pronouns",
            "website",
            "description",
            "visibility",
            "username",
        )
    },
    "last_login": "date-time",
    "created": "date-time",
    **{k: "boolean" for k in ("is_admin", "restricted", "active", "prohibit_login")},
}
_REPO = {
    "owner": "User",
    "parent": "Repository",
    "permissions": "Permission",
    "topics": "[string]",
    **{
        k: "integer"
        for k in (
            "id",
            "size",
            "stars_count",
            "forks_count",
            "watchers_count",
            "open_issues_count",
            "open_pr_counter",
            "release_counter",
        )
    },
    **{
        k: "string"
        for k in (
            "name",
            "full_name",
            "description",
            "language",
            "languages_url",
            "html_url",
            "url",
            "link",
            "ssh_url",
            "clone_url",
            "original_url",
            "website",
            "default_branch",
            "default_merge_style",
            "avatar_url",
            "mirror_interval",
            "object_format_name",
        )
    },
    **{k: "date-time" for k in ("created_at", "updated_at", "archived_at")},
    **{
        k: "boolean"
        for k in (
            "empty",
            "private",
            "fork",
            "template",
            "mirror",
            "archived",
            "has_issues",
            "has_wiki",
            "has_pull_requests",
            "has_projects",
            "has_releases",
            "has_packages",
            "has_actions",
            "ignore_whitespace_conflicts",
            "allow_merge_commits",
            "allow_rebase",
            "allow_rebase_explicit",
            "allow_squash_merge",
            "allow_fast_forward_only_merge",
            "allow_rebase_update",
            "default_delete_branch_after_merge",
            "default_allow_maintainer_edit",
            "internal",
        )
    },
}
SCHEMAS: dict[str, dict[str, str]] = {
    "ServerVersion": {"version": "string"},
    "GeneralAPISettings": {
        k: "integer"
        for k in (
            "max_response_items",
            "default_paging_num",
            "default_git_trees_per_page",
            "default_max_blob_size",
        )
    },
    "User": _USER,
    "UserSearchResults": {"ok": "boolean", "data": "[User]"},
    "Organization": {
        "id": "integer",
        "repo_admin_change_team_access": "boolean",
        **{
            k: "string"
            for k in (
                "name",
                "username",
                "full_name",
                "email",
                "avatar_url",
                "description",
                "website",
                "location",
                "visibility",
            )
        },
    },
    "AccessToken": {
        "id": "integer",
        "name": "string",
        "sha1": "string",
        "token_last_eight": "string",
        "scopes": "[string]",
        "created_at": "date-time",
        "last_used_at": "date-time",
    },
    "Permission": {"admin": "boolean", "push": "boolean", "pull": "boolean"},
    "Repository": _REPO,
    "SearchResults": {"ok": "boolean", "data": "[Repository]"},
    "RepoCollaboratorPermission": {"permission": "string", "role_name": "string", "user": "User"},
    "APIError": {"message": "string", "url": "string"},
    "Hook": {
        "id": "integer",
        "type": "string",
        "branch_filter": "string",
        "url": "string",
        "content_type": "string",
        "config": "object",
        "events": "[string]",
        "authorization_header": "string",
        "active": "boolean",
        "updated_at": "date-time",
        "created_at": "date-time",
    },
    **GIT_SCHEMAS,
    **ISSUE_SCHEMAS,
    **PULL_SCHEMAS,
    **STATUS_SCHEMAS,
}
_PRIMITIVES = {"string", "integer", "boolean", "date-time", "object"}
# a body field's array kinds (``base.Field``) as schemas: ids may be names too, as Forgejo's
_ARRAYS = {
    "array": "[string]",
    "integers": "[integer]",
    "ids": "[integer]",
    "objects": "[object]",
}


def _schema(kind: str) -> dict[str, Any]:
    if kind.startswith("["):
        return {"type": "array", "items": _schema(kind[1:-1])}
    if kind == "date-time":
        return {"type": "string", "format": "date-time"}
    if kind in _PRIMITIVES:
        return {"type": kind}
    return {"$ref": f"#/definitions/{kind}"}


def _parameters(template: str, operation: Operation) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "type": "string"}
        for name in re.findall(r"{(\w+)(?::path)?}", template)  # a path: slashes and all
    ]
    for name, spec in operation.query.items():
        found.append(
            {"name": name, "in": "query", "type": spec.kind, "description": spec.description}
        )
    if operation.body is not None:
        properties = {
            name: {
                **_schema(_ARRAYS.get(spec.kind, spec.kind)),
                "description": spec.description,
            }
            for name, spec in operation.body.items()
        }
        required = [name for name, spec in operation.body.items() if spec.required]
        body: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            body["required"] = required
        found.append({"name": "body", "in": "body", "schema": body})
    return found


def describe(routes: Sequence[tuple[str, type[Resource]]], host_url: str) -> dict[str, Any]:
    """The OpenAPI 2.0 document for ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    for template, kind in routes:
        path = template.removeprefix("/api/v1").replace(":path}", "}")
        for method, operation in kind.operations.items():
            answer: dict[str, Any] = {"description": operation.summary}
            if operation.answer is not None:
                answer["schema"] = _schema(operation.answer)
            responses: dict[str, Any] = {str(operation.status): answer}
            for status in ("401", "403", "404", "422"):
                responses[status] = {"description": "error", "schema": _schema("APIError")}
            entry: dict[str, Any] = {
                "summary": operation.summary,
                "operationId": f"{method}{re.sub(r'[^A-Za-z0-9]+', '_', path)}",
                "parameters": _parameters(template, operation),
                "responses": responses,
            }
            if operation.basic:
                entry["security"] = [{"BasicAuth": []}]
            paths.setdefault(path, {})[method] = entry
    definitions = {
        name: {"type": "object", "properties": {k: _schema(v) for k, v in fields.items()}}
        for name, fields in SCHEMAS.items()
    }
    return {
        "swagger": "2.0",
        "info": {
            "title": "floorless API",
            "description": "The part of Forgejo's API that floorless implements.",
            "version": __version__,
        },
        "basePath": "/api/v1",
        "host": host_url.split("://", 1)[-1],
        "schemes": [host_url.split("://", 1)[0]],
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BasicAuth": {"type": "basic"},
            "AuthorizationHeaderToken": {
                "type": "apiKey",
                "name": "Authorization",
                "in": "header",
                "description": "token TOKEN or Bearer TOKEN",
            },
            "AccessToken": {"type": "apiKey", "name": "access_token", "in": "query"},
            "Token": {"type": "apiKey", "name": "token", "in": "query"},
        },
        "security": [{"AuthorizationHeaderToken": []}, {"BasicAuth": []}],
    }


class Description(Resource):
    """``/swagger.v1.json``."""

    identifies = False

    def __init__(self, routes: Sequence[tuple[str, type[Resource]]], settings: Any) -> None:
        self.routes = routes
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = JSON
        resp.text = json.dumps(describe(self.routes, public_url(self.settings, req)), indent=1)


class Page(Description):
    """``/api/swagger``: the description as a plain page, no script."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        document = describe(self.routes, public_url(self.settings, req))
        rows = []
        for path, methods in document["paths"].items():
            for method, entry in methods.items():
                params = ", ".join(
                    f"{p['name']} ({p['in']})" for p in entry["parameters"] if p["in"] != "path"
                )
                rows.append(
                    f"<tr><td><code>{method.upper()}</code></td>"
                    f"<td><code>/api/v1{html.escape(path)}</code></td>"
                    f"<td>{html.escape(entry['summary'])}</td><td>{html.escape(params)}</td></tr>"
                )
        resp.content_type = "text/html; charset=utf-8"
        resp.text = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            "<title>floorless API</title>"
            f'<link rel="stylesheet" href="{urls.static("style.css")}"></head><body><main>'
            "<h1>floorless API</h1><p>The part of Forgejo's API that floorless implements; "
            'its OpenAPI description is <a href="/swagger.v1.json">/swagger.v1.json</a>. '
            "Send a token as <code>Authorization: token TOKEN</code>.</p>"
            "<table><thead><tr><th>Method</th><th>Path</th><th>What</th><th>Parameters</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></main></body></html>"
        )
