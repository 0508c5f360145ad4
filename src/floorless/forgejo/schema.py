"""What a shape's type says on the wire: the one place a ``TypedDict`` becomes an OpenAPI 2.0
schema and a request's value is checked against it.

Every shape of the API (an answer such as ``PullRequest``, a request body such as
``CreateIssueOption``, the query parameters of a list) is declared once, as a ``TypedDict``
beside the code that builds or reads it. Strict mypy holds each builder's literal to its
shape (a key missing, one too many, a value of the wrong type is a type error); this module
reads the same declaration for ``/swagger.v1.json``'s definitions and for the checks of a
request, so the document, the answers and the validation cannot drift apart.

Why ``TypedDict`` and not ``msgspec.Struct`` (measured: a page of 50 ``PullRequest`` values,
each with its two repositories, their owners and labels, ~436 kB of JSON, on this project's
two-core machine; 50 ``Issue`` values, ~207 kB, in brackets):

  ================================  ===================  =================
  build + encode, per page          PullRequest          Issue
  ================================  ===================  =================
  dict literal + ``json.dumps``     5.99 ms              (2.17 ms)
  dict literal + msgspec encoder    1.35 ms              (0.63 ms)
  ``msgspec.Struct`` + its encoder  1.13 ms              (0.62 ms)
  building alone: dict / Struct     0.89 / 1.04 ms       (0.33 / 0.39 ms)
  ================================  ===================  =================

A Struct is slower to build than a dict literal, and the gain is the encoder's, which takes
plain dicts as well; so the shapes stay dictionaries, which the builders' callers (webhook
payloads, the tests, pyforgejo's models) read as they are, and no dependency is added.

The vocabulary: ``DateTime`` is a string in RFC 3339; ``Doc("...")`` in ``Annotated`` is a
field's description; ``X | None`` is a field that may be null (Swagger 2.0 cannot say so,
as Forgejo's own description does not); a body's array of ids ``list[int | str]`` takes
names too, as Forgejo's labels of an issue do, and is described as integers.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)


@dataclass(frozen=True)
class Doc:
    """A field's description, for the document: ``Annotated[str, Doc("the title")]``."""

    text: str


@dataclass(frozen=True)
class Format:
    """A string's format, for the document (``date-time``)."""

    name: str


DateTime = Annotated[str, Format("date-time")]


def fields(shape: type) -> dict[str, Any]:
    """A ``TypedDict``'s fields and their types, ``Annotated`` kept."""
    return get_type_hints(shape, include_extras=True)


def required(shape: type) -> frozenset[str]:
    """The fields a value of ``shape`` must hold: those marked ``Required`` (of a shape that
    is not ``total``), or all but those marked ``NotRequired``. Read from the hints, not
    ``__required_keys__``, which misses the marks under ``from __future__ import
    annotations`` (Python 3.11 cannot see into a string there)."""
    total = getattr(shape, "__total__", True)
    found = set()
    for name, kind in fields(shape).items():
        mark = get_origin(kind)
        if mark is Required or (total and mark is not NotRequired):
            found.add(name)
    return frozenset(found)


def unwrap(kind: Any) -> tuple[Any, str, str]:
    """A field's type without ``Annotated`` and ``None``: (type, description, format)."""
    doc = fmt = ""
    if get_origin(kind) in (NotRequired, Required):
        (kind,) = get_args(kind)
    if get_origin(kind) is Annotated:
        kind, *extras = get_args(kind)
        for extra in extras:
            if isinstance(extra, Doc):
                doc = extra.text
            elif isinstance(extra, Format):
                fmt = extra.name
    if get_origin(kind) in (Union, types.UnionType):
        rest = [arg for arg in get_args(kind) if arg is not type(None)]
        if len(rest) == 1:
            inner, inner_doc, inner_fmt = unwrap(rest[0])
            return inner, doc or inner_doc, fmt or inner_fmt
        kind = Union[tuple(rest)]  # noqa: UP007 (built from a list)
    return kind, doc, fmt


_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", bool: "boolean"}


def schema(kind: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI schema of ``kind``; each ``TypedDict`` it reaches is added to
    ``definitions`` (once, by its name) and referred to."""
    kind, _, fmt = unwrap(kind)
    if is_typeddict(kind):
        name = kind.__name__
        if name not in definitions:
            definitions[name] = {}  # taken before its fields: a shape may hold itself
            definitions[name] = object_schema(kind, definitions)
        return {"$ref": f"#/definitions/{name}"}
    origin = get_origin(kind)
    if origin is list:
        (item,) = get_args(kind)
        return {"type": "array", "items": schema(_first(item), definitions)}
    if origin is dict or kind is dict:
        return {"type": "object"}
    if kind in _PRIMITIVES:
        found = {"type": _PRIMITIVES[kind]}
        if fmt:
            found["format"] = fmt
        return found
    raise TypeError(f"no schema for {kind!r}")


def object_schema(
    shape: type, definitions: dict[str, Any], described: bool = False
) -> dict[str, Any]:
    """A ``TypedDict`` as an object schema; ``described`` adds each field's description and
    the required fields (as a request body is written)."""
    properties = {}
    for name, kind in fields(shape).items():
        properties[name] = schema(kind, definitions)
        if described:
            properties[name]["description"] = unwrap(kind)[1]
    found: dict[str, Any] = {"type": "object", "properties": properties}
    needed = [name for name in fields(shape) if name in required(shape)]
    if described and needed:
        found["required"] = needed
    return found


def _first(kind: Any) -> Any:
    """``int | str`` (an id or a name) is described as its first type, as Forgejo does."""
    if get_origin(kind) in (Union, types.UnionType):
        return get_args(kind)[0]
    return kind


def kind_name(kind: Any) -> str:
    """A field's type in a 422's words (``[labels]: must be of type integers``)."""
    kind = unwrap(kind)[0]
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if get_origin(kind) is dict or kind is dict:
        return "object"
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        item = unwrap(item)[0]
        if item is str:
            return "array"
        if item is int:
            return "integers"
        if get_origin(item) is dict or item is dict or is_typeddict(item):
            return "objects"
        return "ids"
    raise TypeError(f"no name for {kind!r}")


def python_type(kind: Any) -> type:
    """The Python type a field's JSON value is (``list`` for any array)."""
    kind = unwrap(kind)[0]
    if is_typeddict(kind):
        return dict
    found = get_origin(kind) or kind
    if not isinstance(found, type):
        raise TypeError(f"no Python type for {kind!r}")
    return found


def accepts(kind: Any, value: object) -> bool:
    """Whether a JSON ``value`` (not null) is of the field's type: a boolean is no integer,
    an array's items are checked, an object's are its operation's to check."""
    kind = unwrap(kind)[0]
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if get_origin(kind) is dict or kind is dict or is_typeddict(kind):
        return isinstance(value, dict)
    if get_origin(kind) is list:
        if not isinstance(value, list):
            return False
        (item,) = get_args(kind)
        item = unwrap(item)[0]
        if get_origin(item) in (Union, types.UnionType):
            return all(any(accepts(arg, one) for arg in get_args(item)) for one in value)
        return all(accepts(item, one) for one in value)
    raise TypeError(f"no check for {kind!r}")
