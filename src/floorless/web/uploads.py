"""Files sent as ``multipart/form-data``, read part by part: what the API's uploads and the
web's upload forms both use, beside both so that neither imports the other.

A part's bytes are never read whole: a file part's ``stream.read`` is handed to the content
store, which writes it as it comes (``files/store.py``); the small text fields beside the
files are read into memory, at most ``MAX_FIELDS`` bytes of them in all. The parts come in
the order the client sent them (a browser sends a form's fields in their order on the page).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import falcon
import falcon.media

from floorless.core.errors import BadRequest, TooLarge

MAX_FIELDS = 64 * 1024  # bytes of text fields a form may carry beside its files

_MULTIPART = falcon.media.MultipartFormHandler()


def is_multipart(req: falcon.Request) -> bool:
    return (req.content_type or "").lower().startswith("multipart/form-data")


def parts(req: falcon.Request) -> Iterator[Any]:
    """The parts of a ``multipart/form-data`` body, each read (or skipped) before the next;
    a malformed body is a 400, as is a part whose headers are not text (falcon decodes a
    part's name, file name and type when first asked: here, before the caller asks)."""
    try:
        form = _MULTIPART.deserialize(req.bounded_stream, req.content_type, req.content_length)
        for part in form:
            _ = part.name, part.filename, part.content_type
            yield part
    except falcon.MediaMalformedError as exc:
        raise BadRequest("the multipart body is malformed") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest("a part's headers are not UTF-8") from exc


def file_part(req: falcon.Request, field: str) -> Any | None:
    """The first part named ``field`` of a multipart body, its stream not yet read; None when
    it has none."""
    for part in parts(req):
        if part.name == field:
            return part
    return None


def file_name(part: Any) -> str:
    """The name a file part was sent with ("" for none: an empty file input); the caller's
    store cleans it (``files/attachments.clean_name``)."""
    return str(part.filename or "")


class Fields:
    """The text fields of a form read so far, counted against ``MAX_FIELDS``: a repeated
    name keeps its last value in ``values`` and every value in ``lists``."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.lists: dict[str, list[str]] = {}
        self.size = 0

    def read(self, part: Any) -> None:
        data = part.stream.read(MAX_FIELDS - self.size + 1)
        self.size += len(data)
        if self.size > MAX_FIELDS:
            raise TooLarge("the form's fields are too large")
        value = data.decode("utf-8", "replace")
        name = str(part.name or "")
        self.values[name] = value
        self.lists.setdefault(name, []).append(value)
