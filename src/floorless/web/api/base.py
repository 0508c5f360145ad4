"""What every ``/api/v1`` resource shares: JSON in and out, who is asking, pages of lists.

Each resource declares its operations (``Operation``: a summary, the shapes of the body and
the query parameters it reads and of what it answers, each a ``TypedDict``, and Forgejo's
name and tag for it) once; the same declaration checks a request's body
(``forgejo/schema.py``) and writes the OpenAPI description (``openapi.py``), so the two
cannot drift apart. A resource of one repository is handed it, found before it runs
(``repository.py``).

A body is read as Forgejo's Go handlers read theirs: a JSON object, fields of the declared
types (a wrong type is a 422, as a missing required field is), ``null`` as a field not sent,
and unknown fields ignored (clients send fields of newer Forgejo versions; refusing them
would break those clients for nothing). Errors raised here, or anywhere below, become
``{"message": ..., "url": ...}`` in ``web/errors.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypedDict
from urllib.parse import urlencode

import falcon

from floorless.accounts.access import Level, Viewer
from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, FloorlessError, TooLarge, Unauthorized
from floorless.forge import Forge
from floorless.forgejo import schema
from floorless.forgejo.schema import Doc
from floorless.web.auth import Authenticator, viewer_of
from floorless.web.public import public_url

DEFAULT_LIMIT = 30  # Forgejo's DEFAULT_PAGING_NUM
MAX_LIMIT = 50  # Forgejo's MAX_RESPONSE_ITEMS
MAX_BODY = 1 << 20  # bytes of JSON a request may send
MAX_PAGE = 1_000_000  # a page past any list, and an offset every database can hold
JSON = "application/json; charset=utf-8"


class Unprocessable(FloorlessError):
    """A body that is not what the operation takes: Forgejo's 422."""

    status = 422


@dataclass(frozen=True)
class Operation:
    """What a resource's method does, for its checks and its description: ``answer``, the
    shape it answers (``list[Shape]`` for a list of them, None for no body); ``body`` and
    ``query``, the shapes (``TypedDict``) of what it reads (``forgejo/schema.py``)."""

    summary: str
    answer: object = None
    status: int = 200
    body: type | None = None
    query: type | None = None
    paged: bool = False  # takes page and limit; answers Link and X-Total-Count
    signed_in: bool = False  # refused (401) to an anonymous caller
    basic: bool = False  # needs HTTP Basic with the password
    operation_id: str = ""  # Forgejo's name of the operation (``repoGetPullRequest``)
    tag: str = ""  # Forgejo's group of it (``repository``, ``issue``, ``user``, ...)
    # Of a repository's operation (``repository.py``): the level the caller needs on it, and
    # what is refused before it is looked up ("caller": 401 to an anonymous one; "writer":
    # also 403 to a read-only token; "": nothing, the repository's 404 comes first)
    needs: Level = Level.READ
    first: str = ""


class Paged(TypedDict, total=False):
    """``page`` and ``limit``: what every list takes."""

    page: Annotated[int, Doc("page number of results to return (1-based)")]
    limit: Annotated[int, Doc(f"page size of results (at most {MAX_LIMIT})")]


@dataclass(frozen=True)
class Paging:
    page: int
    limit: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit


class Resource:
    """A resource under ``/api/v1``: identified by ``Authenticator.identify_api`` (the
    middleware sees ``api``), answering JSON."""

    api = True
    operations: ClassVar[dict[str, Operation]] = {}

    def __init__(self, forge: Forge, auth: Authenticator) -> None:
        self.forge = forge
        self.auth = auth

    # -- who is asking ------------------------------------------------------------------------

    @staticmethod
    def viewer(req: falcon.Request) -> Viewer:
        return viewer_of(req)

    def caller(self, req: falcon.Request) -> Account:
        """The signed-in caller; 401 for an anonymous one."""
        account = viewer_of(req).account
        if account is None:
            raise Unauthorized("token is required")
        return account

    def writer(self, req: falcon.Request) -> Account:
        """The signed-in caller with a credential that may change things."""
        account = self.caller(req)
        if viewer_of(req).scope == "read":
            raise ForbiddenScope()
        return account

    # -- in and out ---------------------------------------------------------------------------

    @staticmethod
    def send(resp: falcon.Response, data: object, status: int = 200) -> None:
        resp.status = status
        resp.content_type = JSON
        resp.text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def nothing(resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_204
        resp.text = None

    def body(self, req: falcon.Request) -> dict[str, Any]:
        """The request's JSON object, its declared fields checked (see the module's words);
        undeclared fields are dropped."""
        operation = self.operations.get(req.method.lower())
        shape = operation.body if operation is not None else None
        length = req.content_length
        if length is not None and length > MAX_BODY:
            raise TooLarge(f"the request body is over {MAX_BODY} bytes")
        raw = req.bounded_stream.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            raise TooLarge(f"the request body is over {MAX_BODY} bytes")
        data = json_object(raw)
        return {} if shape is None else decode(shape, data)

    def query(self, req: falcon.Request) -> dict[str, Any]:
        """The query parameters the operation declares (its ``query`` shape) that the
        request gives, each read as its declared type: a boolean as ``query_flag`` reads one
        (400 for another word), a whole number as Forgejo reads ``page`` (one that is not a
        positive number is left out), text as sent. What is not declared is not read here."""
        operation = self.operations.get(req.method.lower())
        if operation is None or operation.query is None:
            return {}
        found: dict[str, Any] = {}
        for name, kind in schema.fields(operation.query).items():
            raw = req.get_param(name)
            if raw is None or raw == "":
                continue
            wanted = schema.python_type(kind)
            if wanted is bool:
                found[name] = query_flag(req, name)
            elif wanted is int:
                if (raw.isascii() and raw.isdigit()) and 0 < len(raw) < 10 and int(raw) > 0:
                    found[name] = int(raw)
            else:
                found[name] = raw
        return found

    # -- pages of lists -----------------------------------------------------------------------

    @staticmethod
    def paging(req: falcon.Request) -> Paging:
        """``page`` and ``limit`` as Forgejo reads them: anything but a positive number is the
        default, a limit over the maximum is the maximum."""
        page = min(_positive(req.get_param("page")) or 1, MAX_PAGE)
        limit = min(_positive(req.get_param("limit")) or DEFAULT_LIMIT, MAX_LIMIT)
        return Paging(page, limit)

    @staticmethod
    def paged(
        req: falcon.Request, resp: falcon.Response, forge: Forge, paging: Paging, total: int
    ) -> None:
        """``X-Total-Count`` and a ``Link`` header to the next, previous, first and last pages."""
        resp.set_header("X-Total-Count", str(total))
        resp.set_header("Access-Control-Expose-Headers", "Link, X-Total-Count")
        last = max(1, -(-total // paging.limit))
        params = [(k, v) for k, v in req.params.items() if k not in ("page", "limit")]
        base = public_url(forge.settings, req) + req.path

        def link(page: int, rel: str) -> str:
            query = urlencode([*_flat(params), ("limit", str(paging.limit)), ("page", str(page))])
            return f'<{base}?{query}>; rel="{rel}"'

        links = []
        if paging.page < last:
            links += [link(paging.page + 1, "next"), link(last, "last")]
        if paging.page > 1:
            links += [link(1, "first"), link(min(paging.page - 1, last), "prev")]
        if links:
            resp.set_header("Link", ",".join(links))


class ForbiddenScope(FloorlessError):
    status = 403

    def __init__(self) -> None:
        super().__init__("token does not have at least one of required scope(s): write")


def decode(shape: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``shape`` (a ``TypedDict``) that ``data`` holds, each checked against its
    declared type: a required one missing (or null) is ``[name]: Required``, one of the wrong
    type ``[name]: must be of type integer`` (in the words of ``schema.kind_name``)."""
    needed = schema.required(shape)
    found: dict[str, Any] = {}
    for name, kind in schema.fields(shape).items():
        value = data.get(name)
        if value is None:
            if name in needed:
                raise Unprocessable(f"[{name}]: Required")
            continue
        if not schema.accepts(kind, value):
            raise Unprocessable(f"[{name}]: must be of type {schema.kind_name(kind)}")
        found[name] = value
    return found


INT64 = (-(1 << 63), (1 << 63) - 1)  # what every database stores, and git's dates allow
MAX_DEPTH = 32  # levels of arrays and objects in a body; Forgejo's bodies use four at most


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body as the JSON object it must be, its values checked (``_check_values``):
    422 for anything else, with the reason. A body nested past the parser's stack (100,000
    ``[``) is refused as clearly as one nested past ``MAX_DEPTH``, which is what any code
    below that walks a value recursively (``json.dumps`` of a webhook's config) can take."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except RecursionError:
        raise Unprocessable(f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unprocessable(f"the request body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise Unprocessable("the request body must be a JSON object")
    _check_values(data)
    return data


def _check_values(body: dict[str, Any]) -> None:
    """Refuse (422) what JSON can say but nothing below can take: text with NUL (git cuts a
    message there; the databases refuse it) or a lone surrogate (not UTF-8), integers beyond
    64 bits, and arrays or objects nested past ``MAX_DEPTH``. Once, for the whole body, so
    that no field is forgotten; without recursion, so that no depth can break it."""
    pending: list[tuple[object, str, int]] = [(body, "", 1)]
    while pending:
        value, where, depth = pending.pop()
        if isinstance(value, str):
            if "\0" in value:
                raise Unprocessable(f"[{where or 'body'}]: text may not contain NUL")
            try:
                value.encode()
            except UnicodeEncodeError:
                raise Unprocessable(f"[{where or 'body'}]: text is not valid Unicode") from None
        elif isinstance(value, int) and not isinstance(value, bool):
            if not INT64[0] <= value <= INT64[1]:
                raise Unprocessable(f"[{where or 'body'}]: number out of range")
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise Unprocessable(f"[{where or 'body'}]: nested deeper than {MAX_DEPTH} levels")
            if isinstance(value, dict):
                for key, item in value.items():
                    pending.append((key, where, depth))
                    pending.append((item, f"{where}.{key}" if where else str(key), depth + 1))
            else:
                pending.extend((item, where, depth + 1) for item in value)


def _positive(value: str | None) -> int:
    if value is not None and len(value) > 12:
        return 0
    try:
        number = int(value or "")
    except ValueError:
        return 0
    return number if number > 0 else 0


def _flat(params: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    flat: list[tuple[str, str]] = []
    for key, value in params:
        for item in value if isinstance(value, list) else [value]:
            flat.append((key, str(item)))
    return flat


def query_flag(req: falcon.Request, name: str) -> bool | None:
    """A true/false query parameter; None when absent, 422 when it is neither."""
    value = req.get_param(name)
    if value is None or value == "":
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise BadRequest(f"{name} must be true or false")


class APIError(TypedDict):
    """Forgejo's ``APIError``."""

    message: str
    url: str
