"""The OpenAPI (Swagger 2.0, as Forgejo's) description of what floorless's API implements,
made from the route table and each resource's ``operations``, and a page listing it.

The definitions are made from the shapes the operations answer and take (``TypedDict``s
beside their builders, read by ``forgejo/schema.py``): each shape is written once, and the
builders are held to it by mypy. The operation ids and tags are Forgejo's (``Operation``),
so a client generated from this document has the methods of one generated from Forgejo's.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

import falcon

from floorless import __version__
from floorless.forgejo import schema, urls
from floorless.web.api.base import JSON, APIError, Operation, Resource
from floorless.web.public import public_url


def _parameters(template: str, operation: Operation, definitions: dict[str, Any]) -> list[Any]:
    found: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "type": "string"}
        for name in re.findall(r"{(\w+)(?::path)?}", template)  # a path: slashes and all
    ]
    if operation.query is not None:
        for name, kind in schema.fields(operation.query).items():
            found.append(
                {
                    "name": name,
                    "in": "query",
                    "type": schema.kind_name(kind),
                    "description": schema.unwrap(kind)[1],
                }
            )
    if operation.body is not None:
        body = schema.object_schema(operation.body, definitions, described=True)
        found.append({"name": "body", "in": "body", "schema": body})
    return found


def describe(routes: Sequence[tuple[str, type[Resource]]], host_url: str) -> dict[str, Any]:
    """The OpenAPI 2.0 document for ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    definitions: dict[str, Any] = {}
    error = schema.schema(APIError, definitions)
    for template, kind in routes:
        path = template.removeprefix("/api/v1").replace(":path}", "}")
        for method, operation in kind.operations.items():
            answer: dict[str, Any] = {"description": operation.summary}
            if operation.answer is not None:
                answer["schema"] = schema.schema(operation.answer, definitions)
            responses: dict[str, Any] = {str(operation.status): answer}
            for status in ("401", "403", "404", "422"):
                responses[status] = {"description": "error", "schema": error}
            entry: dict[str, Any] = {
                "tags": [operation.tag],
                "summary": operation.summary,
                "operationId": operation.operation_id,
                "parameters": _parameters(template, operation, definitions),
                "responses": responses,
            }
            if operation.basic:
                entry["security"] = [{"BasicAuth": []}]
            paths.setdefault(path, {})[method] = entry
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
        "definitions": dict(sorted(definitions.items())),
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
