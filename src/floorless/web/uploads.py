"""Files sent in a request body, read in one place for the API's uploads (a release's file, an
issue's or a comment's) and the web's (the issue pages' upload and their forms).

A file is never held whole here: its part of a ``multipart/form-data`` body, or the body
itself, is handed on as a ``read`` function that the content store streams from
(``files/store.py``), which counts it against the size limit as it arrives. The parts of a
multipart body come in the order the client wrote them, each read before the next: a form's
fields before a file (a browser sends them in the order of the page, its hidden fields
first) are known when the file arrives, so that its CSRF token and what it is for are
checked before a byte of the file is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import falcon
import falcon.media

from floorless.core.errors import BadRequest, FloorlessError, TooLarge
from floorless.files.attachments import Attachment, Attachments

_MULTIPART = falcon.media.MultipartFormHandler()


@dataclass(frozen=True)
class Sent:
    """A file in a request: its name as the client gave it ("" for none), its bytes to be
    read (``read(n)``), and their size when announced. (The media type it says it is goes
    for nothing: ``files/attachments.allowed`` judges by the name.)"""

    name: str
    read: Callable[[int], bytes]
    size: int | None


def multipart(req: falcon.Request) -> bool:
    return (req.content_type or "").lower().startswith("multipart/form-data")


def _parts(req: falcon.Request) -> Iterator[Any]:
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


def _sent(part: Any) -> Sent:
    return Sent(part.filename or "", part.stream.read, None)


def file_of(req: falcon.Request, field: str, refuse: type[FloorlessError]) -> Sent:
    """The file an upload sends, as Forgejo's clients send it: the part ``field`` of a
    multipart body, or the whole body as ``application/octet-stream``. ``refuse`` (the
    caller's error, with its status) for any other body, or a multipart one without it."""
    if multipart(req):
        for part in _parts(req):
            if part.name == field:
                return _sent(part)
        raise refuse(f"the multipart body has no {field} field")
    if (req.content_type or "").lower().startswith("application/octet-stream"):
        return Sent("", req.bounded_stream.read, req.content_length)
    raise refuse(f"send the file as multipart/form-data (field {field})")


def attach_sent(
    req: falcon.Request,
    attachments: Attachments,
    repo_id: int,
    uploader_id: int,
    refuse: type[FloorlessError],
    **where: int | None,
) -> Attachment:
    """The file an API upload sends (``file_of``, field ``attachment``), named by ``?name=``
    or the name it was sent with, stored as an attachment of ``where`` (``release_id``, or
    ``issue_id`` and ``comment_id``)."""
    sent = file_of(req, "attachment", refuse)
    name = req.get_param("name") or sent.name
    if not name:
        raise refuse("the file has no name: give ?name=")
    return attachments.upload(
        repo_id,
        uploader_id,
        name,
        sent.read,
        size=sent.size,
        **where,
    )


def form_of(
    req: falcon.Request,
    field: str,
    on_file: Callable[[dict[str, list[str]], Sent], None],
    limit: int,
) -> dict[str, list[str]]:
    """The text fields of a multipart form, each name's values in order; each file of the
    part ``field`` is handed to ``on_file`` with the fields before it, to be read (or
    refused) before the next part is. A file input left empty sends a part with no file
    name and no bytes: it is no file. 413 when the text fields are over ``limit`` bytes."""
    fields: dict[str, list[str]] = {}
    total = 0
    for part in _parts(req):
        if part.name == field and part.filename is not None:
            if part.filename:
                on_file(fields, _sent(part))
            continue
        try:
            text = part.get_text() or ""
        except falcon.MediaMalformedError as exc:  # a part past falcon's buffer
            raise TooLarge("the form is too large") from exc
        total += len(text.encode())
        if total > limit:
            raise TooLarge("the form is too large")
        fields.setdefault(part.name or "", []).append(text)
    return fields
