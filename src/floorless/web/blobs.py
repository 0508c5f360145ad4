"""A file's bytes as the forge sends them: the raw view's (``/raw/...``) and the API's raw
files alike, beside both so that neither imports the other.

Never served as HTML (so a repository cannot run script on the forge's origin), always with
``nosniff`` and a sandboxing CSP; ETag from the blob id; immutable when commit-addressed;
HEAD and single ``Range`` requests.

An SVG file is an image that may hold script. It is served as ``image/svg+xml`` only to an
image fetch (``Sec-Fetch-Dest: image``, a header the browser sets and a page cannot), which
is how ``<img>`` loads it: a browser runs no script in an image, and the answer carries a CSP
with no script source and a sandbox besides. Any other fetch (the file opened in a tab,
``<iframe>``, ``<object>``, ``<embed>``, a browser that sends no such header) gets it as plain
text. The two answers differ by ``Vary: Sec-Fetch-Dest, Accept`` and by ETag, so no cache hands one
for the other.
"""

from __future__ import annotations

from typing import BinaryIO
from urllib.parse import quote

import falcon
import pygit2

from floorless.core import timing
from floorless.core.errors import NotFound, RepositoryBroken
from floorless.forge import Forge
from floorless.git import objects, transport
from floorless.web.context import RepoView

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".ico": "image/x-icon",
    ".bmp": "image/bmp",
    ".avif": "image/avif",
}
SAFE_TYPES = {".json": "text/plain; charset=utf-8"}
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


def svg_as_image(req: falcon.Request, name: bytes) -> bool:
    """Whether to answer with an SVG image (see the module's docstring). A browser that
    sends no ``Sec-Fetch-Dest`` (one over plain HTTP to a host other than localhost) is
    judged by ``Accept``, whose first type is an image's only when it loads an image: a
    navigation, a frame or an object asks for HTML first."""
    if not name.lower().endswith(b".svg"):
        return False
    dest = req.get_header("Sec-Fetch-Dest")
    if dest is not None:
        return dest == "image"
    accept = (req.get_header("Accept") or "").split(",")[0].strip().lower()
    return accept.startswith("image/")


def content_type(name: bytes, data: bytes) -> str:
    image = image_type(name)
    if image:
        return image
    lowered = name.lower()
    for ext, mime in SAFE_TYPES.items():
        if lowered.endswith(ext.encode()):
            return mime
    if b"\0" in data[:8000]:
        return "application/octet-stream"
    try:
        data[:8000].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data[:8000]) - 4:  # not just a character cut at the sample's end
            return "text/plain; charset=iso-8859-1"
    return "text/plain; charset=utf-8"


def image_type(name: bytes) -> str | None:
    lowered = name.lower()
    for ext, mime in IMAGE_TYPES.items():
        if lowered.endswith(ext.encode()):
            return mime
    return None


def send_blob(
    forge: Forge,
    req: falcon.Request,
    resp: falcon.Response,
    view: RepoView,
    blob: pygit2.Blob,
    name: bytes,
    immutable: bool,
) -> None:
    """Answer with the file ``blob`` named ``name`` (the API's raw files come here too)."""
    blob_id, size = str(blob.id), objects.object_size(view.handle, blob.id)
    answer(forge, req, resp, view, blob, blob_id, size, name, immutable)


def answer(
    forge: Forge,
    req: falcon.Request,
    resp: falcon.Response,
    view: RepoView,
    blob: pygit2.Object | None,
    blob_id: str,
    size: int | None,
    name: bytes,
    immutable: bool,
) -> None:
    budget = forge.settings.max_raw_in_process_bytes
    svg = svg_as_image(req, name)
    etag = f"{blob_id}.svg" if svg else blob_id
    resp.etag = etag
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Content-Security-Policy", SVG_CSP if svg else "default-src 'none'; sandbox")
    if name.lower().endswith(b".svg"):
        resp.vary = ["Sec-Fetch-Dest", "Accept"]
    resp.set_header("Accept-Ranges", "bytes")
    resp.cache_control = ["public", "max-age=31536000", "immutable"] if immutable else ["no-cache"]
    if name:
        disposition = "inline"
        if _is_utf8(name):  # RFC 6266 names are UTF-8; otherwise the URL's name is used
            disposition += f"; filename*=UTF-8''{quote(name, safe='')}"
        resp.set_header("Content-Disposition", disposition)
    matches = req.if_none_match or []
    if any(tag in ("*", etag) for tag in matches):
        resp.status = falcon.HTTP_304
        return
    if size is not None and size > budget:
        _stream(forge, req, resp, view, blob_id, name, size, etag, svg)
        return
    if not isinstance(blob, pygit2.Blob):
        raise NotFound("not a file")
    with timing.phase("git"):
        content = memoryview(blob)  # copied once below: whole, or only the range asked for
    resp.content_type = "image/svg+xml" if svg else content_type(name, bytes(content[:8000]))
    window = _window(req, resp, etag, len(content))
    if window is None:
        return
    with timing.phase("git"):
        resp.data = bytes(content[window[0] : window[1]])


def _stream(
    forge: Forge,
    req: falcon.Request,
    resp: falcon.Response,
    view: RepoView,
    blob_id: str,
    name: bytes,
    size: int,
    etag: str,
    svg: bool,
) -> None:
    """A large blob from a ``git cat-file`` child, chunk by chunk: reading it in-process
    would hold the interpreter (and every other request) while libgit2 inflates it. A
    range is honoured by reading and dropping the bytes before it, in the child's pipe."""
    window = _window(req, resp, etag, size)
    if window is None:
        return
    stream = transport.start(
        forge.git,
        view.repo.path,
        ["cat-file", "blob", blob_id],
        forge.git_slots,
        "large files",
    )
    first_bytes = stream.first()
    if not first_bytes and size and not stream.succeeded():
        stream.close()
        raise RepositoryBroken("git cat-file cannot read this object")
    resp.content_type = "image/svg+xml" if svg else content_type(name, first_bytes[:8000])
    first, end = window
    resp.content_length = end - first  # a HEAD's body is closed unsent (BodylessMiddleware)
    whole = (first, end) == (0, size)
    resp.stream = stream if whole else transport.Framed(stream, skip=first, length=end - first)


def _window(
    req: falcon.Request, resp: falcon.Response, etag: str, size: int
) -> tuple[int, int] | None:
    """The bytes to send, as ``[start, end)``, with the status and ``Content-Range`` set;
    None when the answer is complete already (416, no body)."""
    byte_range = _byte_range(req, etag)
    if byte_range is None:
        return 0, size
    first, last = byte_range
    if first < 0:  # a suffix range: the last -first bytes
        first, last = max(0, size + first), size - 1
    elif last < 0 or last >= size:
        last = size - 1
    if first >= size or first > last:
        resp.status = falcon.HTTP_416
        resp.set_header("Content-Range", f"bytes */{size}")
        resp.data = b""
        return None
    resp.status = falcon.HTTP_206
    resp.set_header("Content-Range", f"bytes {first}-{last}/{size}")
    return first, last + 1


def _byte_range(req: falcon.Request, etag: str) -> tuple[int, int] | None:
    """The one byte range to send, or None to send the whole file: a Range that is not one
    byte range, or whose ``If-Range`` names another version, is ignored (RFC 9110 14.2, 13.1.5)."""
    if req.method not in ("GET", "HEAD"):
        return None
    if_range = req.get_header("If-Range")
    if if_range is not None and if_range.strip() != f'"{etag}"':
        return None  # the client holds another version (or only a date): send this one whole
    try:
        unit, found = req.range_unit, req.range
    except falcon.HTTPInvalidHeader:
        return None  # several ranges, or malformed: the whole file is a valid answer
    if unit is None or unit.strip().lower() != "bytes":
        return None
    return found


def _is_utf8(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


FILE_PIECE = 1 << 20  # bytes of a stored file read at a time


def send_file(
    req: falcon.Request,
    resp: falcon.Response,
    opened: BinaryIO,
    size: int,
    etag: str,
    name: str,
    private: bool,
    content_type: str = "application/octet-stream",
    immutable: bool = True,
) -> bool:
    """An uploaded file (an attachment, an LFS object) from the content store, streamed:
    downloaded under its ``name``, a single ``Range`` honoured. Immutable when its address
    names these bytes for ever (a uuid, an object id); otherwise (a release's file by tag
    and name, which another file may take) revalidated by its ETag each time. ``opened`` is
    closed once sent. Whether the answer carries the whole file from its first byte (what
    counts as a download)."""
    resp.etag = etag
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Content-Security-Policy", "default-src 'none'; sandbox")
    resp.set_header("Accept-Ranges", "bytes")
    scope = "private" if private else "public"
    kept = ["max-age=31536000", "immutable"] if immutable else ["no-cache"]
    resp.cache_control = [scope, *kept]
    resp.set_header("Content-Disposition", f"attachment; filename*=UTF-8''{quote(name, safe='')}")
    matches = req.if_none_match or []
    if any(tag in ("*", etag) for tag in matches):
        opened.close()
        resp.status = falcon.HTTP_304
        return False
    resp.content_type = content_type
    window = _window(req, resp, etag, size)
    if window is None:
        opened.close()
        return False
    first, end = window
    resp.content_length = end - first
    opened.seek(first)
    resp.stream = _Pieces(opened, end - first)
    return first == 0


class _Pieces:
    """A file's ``length`` bytes from where it stands, piece by piece; closed once read or
    when the server (or ``BodylessMiddleware``, for a body never sent) closes the body."""

    def __init__(self, opened: BinaryIO, length: int) -> None:
        self.opened = opened
        self.left = length

    def __iter__(self) -> _Pieces:
        return self

    def __next__(self) -> bytes:
        piece = self.opened.read(min(FILE_PIECE, self.left)) if self.left > 0 else b""
        if not piece:
            self.close()
            raise StopIteration
        self.left -= len(piece)
        return piece

    def close(self) -> None:
        self.opened.close()
