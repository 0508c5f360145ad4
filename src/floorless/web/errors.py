"""The one place errors become HTTP responses: an HTML page, plain text for raw routes, or
under ``/api/v1`` Forgejo's JSON (``{"message": ..., "url": ...}``), for every status there,
whichever part of floorless raised it."""

from __future__ import annotations

import json
import logging
from typing import Any

import falcon
import pygit2

from floorless.core.errors import (
    DatabaseUnavailable,
    FloorlessError,
    GitCommandError,
    RepositoryBroken,
    Throttled,
)
from floorless.web.render import Renderer

log = logging.getLogger(__name__)

_TITLES = {
    400: "Bad request",
    401: "Sign-in required",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Name taken",
    413: "Request too large",
    415: "Unsupported request",
    429: "Too many attempts",
    500: "Server error",
    502: "Git failed",
    503: "Repository unavailable",
}
_TITLES_BY_KIND: dict[type[FloorlessError], str] = {DatabaseUnavailable: "Database unavailable"}


def install(app: falcon.App[falcon.Request, falcon.Response], renderer: Renderer) -> None:
    def respond(
        req: falcon.Request,
        resp: falcon.Response,
        status: int,
        message: str,
        title: str | None = None,
    ) -> None:
        resp.status = status
        resp.set_header("Cache-Control", "no-store")
        title = title or _TITLES.get(status, "Error")
        if is_lfs(req):
            resp.content_type = LFS_MEDIA_TYPE
            resp.text = json.dumps({"message": message})
            return
        if is_api(req):
            resp.content_type = "application/json; charset=utf-8"
            resp.text = json.dumps({"message": message, "url": req.prefix + API_DOCS})
            return
        if req.context.get("plain") or req.method == "HEAD" or _wants_plain(req):
            resp.content_type = "text/plain; charset=utf-8"
            resp.text = f"{status} {title}: {message}\n"
            return
        resp.content_type = "text/html; charset=utf-8"
        # Set by repo_view once the reader was let in: a 404 inside a readable repository
        # keeps its header; a private or missing one never got this far, so leaks nothing.
        # A repository that cannot be read (5xx) gets none: the header would show what was
        # read of it before the failure (the finder's tree id), git internals to a visitor.
        view = req.context.get("repo_view") if status < 500 else None
        resp.text = renderer.page(
            "error.html",
            status=status,
            title=title,
            message=message,
            broken=req.context.get("broken_repo"),
            **(view.template_context() if view is not None else {}),
        )

    def floorless_error(
        req: falcon.Request, resp: falcon.Response, ex: FloorlessError, params: dict[str, Any]
    ) -> None:
        message = str(ex)
        if isinstance(ex, RepositoryBroken | GitCommandError):
            # The details (object ids, paths, git's own words) go to the log, not to visitors.
            log.warning("%s %s: %s", req.method, req.path, message)
            req.context.broken_repo = isinstance(ex, RepositoryBroken)
            message = message.partition(":")[0]
        respond(req, resp, ex.status, message, _TITLES_BY_KIND.get(type(ex)))
        if ex.status == 401:
            resp.set_header("WWW-Authenticate", 'Basic realm="floorless", charset="UTF-8"')
        if isinstance(ex, Throttled):
            resp.set_header("Retry-After", str(ex.retry_after))
        elif isinstance(ex, DatabaseUnavailable):
            resp.set_header("Retry-After", "5")

    def git_error(
        req: falcon.Request, resp: falcon.Response, ex: pygit2.GitError, params: dict[str, Any]
    ) -> None:
        log.warning("git error on %s: %s", req.path, ex)
        req.context.broken_repo = True
        respond(req, resp, 503, "the repository cannot be read")

    def http_error(
        req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict[str, Any]
    ) -> None:
        respond(req, resp, ex.status_code, ex.description or ex.title or "error")
        for name, value in dict(ex.headers or {}).items():
            resp.set_header(name, value)

    def unexpected(
        req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]
    ) -> None:
        log.exception("unhandled error on %s %s", req.method, req.path)
        respond(req, resp, 500, "an unexpected error occurred; it has been logged")

    app.add_error_handler(Exception, unexpected)
    app.add_error_handler(falcon.HTTPError, http_error)
    app.add_error_handler(pygit2.GitError, git_error)
    app.add_error_handler(FloorlessError, floorless_error)


API_PREFIX = "/api/v1"
API_DOCS = "/api/swagger"  # where an API error points its reader, as Forgejo's do


def is_api(req: falcon.Request) -> bool:
    path = req.path
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


LFS_MEDIA_TYPE = "application/vnd.git-lfs+json"


def is_lfs(req: falcon.Request) -> bool:
    """Whether ``req`` is Git LFS's (``views/lfs.py``), whose errors are its JSON."""
    return "/info/lfs/" in req.path


def _wants_plain(req: falcon.Request) -> bool:
    path = req.path
    return "/raw/" in path or path.endswith((".diff", ".patch"))
