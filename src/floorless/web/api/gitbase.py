"""What the API's git endpoints share: the repository (refused as the web refuses it), its
absolute links, the ref a ``sha`` or ``ref`` parameter names, query parameters checked, and
pages of a list with Forgejo's headers.

Every read here is in-process, through the repository's open handle and the forge's caches:
no process is started to answer one (as for pages).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

import falcon
import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Level
from floorless.core.errors import BadRequest, NotFound, TooLarge, UnknownRevision
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.oid import is_abbreviation, is_full
from floorless.git.refs import Resolved, check_path
from floorless.web.api.base import Resource, json_object
from floorless.web.api.repository import RepoResource
from floorless.web.context import RepoView

_PAGING = ("page", "limit", "per_page")
MAX_BODY = 64 << 20  # a write's JSON body: its files' content, in base64


class GitApi(RepoResource):
    """A resource of ``/api/v1/repos/{owner}/{repo}/...`` over the repository's git data (its
    ``target``'s ``view``: refs and handle)."""


def query_bytes(req: falcon.Request, name: str) -> bytes | None:
    """The exact bytes of query parameter ``name`` (a ref or path need not be UTF-8)."""
    for part in req.query_string.split("&"):
        key, _, value = part.partition("=")
        if key == name:
            return unquote_to_bytes(value.replace("+", " "))
    return None


def paging(req: falcon.Request) -> tuple[int, int]:
    """``page`` and ``limit`` as the framework reads them."""
    found = Resource.paging(req)
    return found.page, found.limit


def page_headers(
    req: falcon.Request,
    resp: falcon.Response,
    page: int,
    limit: int,
    total: int | None,
    more: bool,
    base: str = "",
) -> None:
    """``Link`` (next and last, first and prev), ``X-Total-Count`` when the total is known,
    and Forgejo's ``X-HasMore``, ``X-Page`` and ``X-PerPage``; ``base`` is the forge's
    public URL."""
    params: dict[str, str | bytes | int | None] = {
        k: v for k, v in req.params.items() if isinstance(v, str) and k not in _PAGING
    }

    def at(number: int, rel: str) -> str:
        query = urls.query({**params, "page": number, "limit": limit})
        return f'<{base}{req.path}{query}>; rel="{rel}"'

    links = []
    if more:
        links.append(at(page + 1, "next"))
    if total is not None and limit:
        last = max(1, -(-total // limit))
        if page < last:
            links.append(at(last, "last"))
    if page > 1:
        links.append(at(1, "first"))
        links.append(at(page - 1, "prev"))
    if links:
        resp.set_header("Link", ",".join(links))
    if total is not None:
        resp.set_header("X-Total-Count", str(total))
    resp.set_header("X-HasMore", "true" if more else "false")
    resp.set_header("X-Page", str(page))
    resp.set_header("X-PerPage", str(limit))
    resp.append_header("Access-Control-Expose-Headers", "Link, X-Total-Count, X-HasMore")


def resolve_ref(view: RepoView, ref: bytes) -> Resolved:
    """What a ``ref`` or ``sha`` parameter names: a branch, a tag (either also spelled
    ``refs/heads/...``, ``refs/tags/...``), or a commit id, full or abbreviated, that a
    branch or tag reaches. Never a path: a ref with a path after it is no ref."""
    if not ref or len(ref) > 1024 or b"\0" in ref:
        raise NotFound("no such branch, tag or commit")
    kinds: tuple[str, ...] = ("branch", "tag", "commit")
    if ref.startswith(b"refs/heads/"):
        ref, kinds = ref[len(b"refs/heads/") :], ("branch",)
    elif ref.startswith(b"refs/tags/"):
        ref, kinds = ref[len(b"refs/tags/") :], ("tag",)
    for kind in kinds:
        if kind == "commit" and not is_abbreviation(ref.lower()):
            continue
        try:
            resolved = view.resolve(kind, ref)
        except (UnknownRevision, BadRequest):
            continue
        if not resolved.path:
            return resolved
    raise NotFound(f"no such branch, tag or commit {ref.decode('utf-8', 'replace')!r}")


def default_ref(view: RepoView) -> Resolved:
    """The default branch (the home page's ref): 404 in an empty repository."""
    home = view.snapshot.home
    if home is None:
        raise NotFound("the repository is empty")
    kind, ref, commit = home
    return Resolved(kind, ref, commit, b"")


def ref_or_default(view: RepoView, req: falcon.Request, name: str = "ref") -> Resolved:
    ref = query_bytes(req, name)
    return resolve_ref(view, ref) if ref else default_ref(view)


def object_by_id(view: RepoView, sha: bytes, wanted: ObjectType) -> pygit2.Object:
    """The object a full hex id names, of type ``wanted``, that a branch or tag reaches;
    refused as missing otherwise."""
    if not is_full(sha.lower()):
        raise NotFound(f"no such {wanted.name.lower()}")
    raw = bytes.fromhex(sha.decode())
    header = objects.object_header(view.handle, objects.to_oid(raw))
    if header is None or header[0] != wanted:
        raise NotFound(f"no such {wanted.name.lower()}")
    view.reachable(wanted, raw)
    found = view.handle.get(objects.to_oid(raw))
    if found is None:
        raise NotFound(f"no such {wanted.name.lower()}")
    return found


def path_of(req: falcon.Request) -> bytes:
    """The route's ``{tail}`` as exact bytes, checked: no ``..``, no NUL, not overlong."""
    return check_path(urls.exact_tail(req))


def read_body(req: falcon.Request) -> dict[str, Any]:
    """The request's JSON object, up to ``MAX_BODY`` (files' content makes bodies larger than
    the framework's limit for other writes): 413 past it, 422 for anything but an object."""
    length = req.content_length
    if length is not None and length > MAX_BODY:
        raise TooLarge(f"the request body is over {MAX_BODY} bytes")
    data = req.bounded_stream.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise TooLarge(f"the request body is over {MAX_BODY} bytes")
    return json_object(data)


def may_write(view: RepoView) -> bool:
    return view.level >= Level.WRITE
