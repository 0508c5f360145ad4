"""Compressed answers: gzip or brotli when the client accepts it, decided in one place.

A falcon middleware rather than the gateway, because here the answer is still falcon's: its
type, status, ETag and body (text, bytes or JSON not yet serialised) are attributes, the ETags
it must keep right are made beside it (``ConditionalMiddleware``, the page cache, raw files),
and the work runs on the request thread (on a streaming thread for a streamed body), never on
the gateway's event loop, where each millisecond of zlib would hold every connection. The
in-process test client sees exactly what a real client gets.

What is compressed: textual types (HTML, JSON, feeds, plain text such as diffs, patches and raw
text files, CSS, scripts) of at least ``MIN_BYTES``, whole, or streamed without a stated length
(a large ``.diff`` or ``.patch`` from git): piece by piece, each piece flushed, so the client
gets each piece as git writes it. What is not: other types (images, archives, git's smart HTTP
bodies: compressed already, or git's to compress), partial answers (206, 416), a stream whose
length the view states (a large raw file from ``git cat-file``: a download that keeps its
``Content-Length`` and byte ranges), and HTML that carries a CSRF token (a page for a signed-in
person): a secret beside text an attacker can choose (a repository's files, the URL) leaks,
under compression, through the answer's length (BREACH).

ETags: an encoded answer's ETag is the identity one with ``-gzip`` or ``-br`` inside the quotes:
other bytes, another tag. An ``If-None-Match`` naming either form is compared as the identity
tag (the suffix is removed before the views look), and a 304 repeats the form the client holds.
``If-Range`` is left alone: ranges are never encoded, so an encoded tag there rightly names
another version and the whole answer is sent.

Encoded bodies are kept by (ETag, encoding), bounded in bytes (``compressed_cache_bytes``): an
ETag names exact bytes, so a warm page costs a lookup instead of zlib.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

import brotli
import falcon

from floorless.core.caches import Cache
from floorless.web.auth import CSRF_FIELD

MIN_BYTES = 1024  # smaller bodies gain less than the header and the work cost
GZIP_LEVEL = 6
BROTLI_QUALITY = 4  # brotli's fast levels: a smaller answer than gzip's, in less time
PIECE = 1 << 16  # how much of a readable stream is compressed at a time
ENCODINGS = ("br", "gzip")  # preferred first when the client weighs them alike
_ALIASES = {"br": ("br",), "gzip": ("gzip", "x-gzip")}
_TEXT_TYPES = frozenset({"application/json", "application/javascript", "application/xml"})
_UNENCODED_STATUSES = frozenset({204, 206, 304, 416})
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")
_ENCODED_TAG = re.compile(r'-(gzip|br)"')
_CSRF_TOKEN = re.compile(f'name="{CSRF_FIELD}" value="[^"]')  # a form's token, not an empty one
_VALUE_OVERHEAD = 200  # a cache entry's key and bookkeeping, beside its bytes


class Choice(NamedTuple):
    encoding: str | None  # None: send the identity
    identity_refused: bool  # ``identity;q=0`` (or ``*;q=0``): encode even a small body


def choose(accept_encoding: str | None) -> Choice:
    """The encoding an ``Accept-Encoding`` header asks for (RFC 9110 12.5.3): the acceptable
    one (q above 0) of highest weight, brotli before gzip on a tie; the identity when the
    header is absent, accepts neither, or weighs the identity higher than both."""
    if accept_encoding is None:
        return Choice(None, False)
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        name, *params = item.split(";")
        name = name.strip().lower()
        if not name:
            continue
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if _QVALUE.fullmatch(value) else 0.0
        weights[name] = max(weight, weights.get(name, 0.0))
    anything = weights.get("*")
    identity = weights.get("identity", 1.0 if anything is None else anything)
    best, best_weight = None, 0.0
    for encoding in ENCODINGS:
        named = [weights[alias] for alias in _ALIASES[encoding] if alias in weights]
        weight = max(named) if named else (anything or 0.0)
        if weight > best_weight:
            best, best_weight = encoding, weight
    if "identity" in weights and identity > best_weight:
        best = None
    return Choice(best, identity <= 0.0)


def textual(content_type: str | None) -> bool:
    """Whether an answer of this type is text worth compressing."""
    if not content_type:
        return False
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


class _Encoder(Protocol):
    def piece(self, data: bytes) -> bytes: ...
    def end(self) -> bytes: ...


class _Gzip:
    def __init__(self) -> None:
        self._zlib = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: the gzip wrapper

    def piece(self, data: bytes) -> bytes:
        return self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH)

    def end(self) -> bytes:
        return self._zlib.flush()


class _Brotli:
    def __init__(self) -> None:
        self._brotli = brotli.Compressor(quality=BROTLI_QUALITY)

    def piece(self, data: bytes) -> bytes:
        return bytes(self._brotli.process(data) + self._brotli.flush())

    def end(self) -> bytes:
        return bytes(self._brotli.finish())


def encoder(encoding: str) -> _Encoder:
    return _Brotli() if encoding == "br" else _Gzip()


def compress(data: bytes, encoding: str) -> bytes:
    """``data`` whole, encoded."""
    if encoding == "br":
        return bytes(brotli.compress(data, quality=BROTLI_QUALITY))
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return deflate.compress(data) + deflate.flush()


class EncodedStream:
    """A streamed body, encoded piece by piece; closing it closes the body (and stops git)."""

    def __init__(self, body: object, encoding: str) -> None:
        self.body = body
        self.encoding = encoding

    def __iter__(self) -> Iterator[bytes]:
        encoding = encoder(self.encoding)
        for data in _pieces(self.body):
            if data and (encoded := encoding.piece(data)):
                yield encoded
        yield encoding.end()

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


def _pieces(body: object) -> Iterable[bytes]:
    read = getattr(body, "read", None)
    if read is not None:  # a file: read in pieces (iterating one would split it at newlines)
        return iter(lambda: bytes(read(PIECE)), b"")
    if isinstance(body, Iterable):
        return body
    raise TypeError(f"a response stream must be readable or iterable, not {type(body)!r}")


class CompressionMiddleware:
    """Encodes answers as the client accepts; see the module's docstring for what and why.

    Its ``process_response`` must run after ``ConditionalMiddleware``'s (which gives pages
    their ETag) and after the authentication middleware's (which sets ``Vary``), so it is
    listed before both.
    """

    def __init__(self, cache_bytes: int) -> None:
        self.cache: Cache[tuple[str, str], bytes] = Cache.lru(
            cache_bytes, getsizeof=lambda data: sys.getsizeof(data) + _VALUE_OVERHEAD
        )

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        header = req.env.get("HTTP_IF_NONE_MATCH")
        if header and _ENCODED_TAG.search(header):
            req.context.encoded_tags = frozenset(_ENCODED_TAG.findall(header))
            req.env["HTTP_IF_NONE_MATCH"] = _ENCODED_TAG.sub('"', header)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        status = resp.status_code
        if status == 304:
            resp.append_header("Vary", "Accept-Encoding")
            encoding = choose(req.get_header("Accept-Encoding")).encoding
            held: frozenset[str] = req.context.get("encoded_tags") or frozenset()
            if encoding is not None and encoding in held:
                _tag(resp, encoding)  # the form the client holds, as the 200 gave it
            return
        if status < 200 or status in _UNENCODED_STATUSES or resp.get_header("Content-Encoding"):
            return
        if not textual(resp.content_type):
            return
        resp.append_header("Vary", "Accept-Encoding")
        choice = choose(req.get_header("Accept-Encoding"))
        encoding = choice.encoding
        if encoding is None or resp.get_header("Content-Range"):
            return
        # a HEAD whose view made no body: its GET streams (falcon drops a HEAD's stream)
        head_of_stream = req.method == "HEAD" and status == 200 and resp.render_body() is None
        if resp.stream is None and not head_of_stream:
            self._encode_whole(resp, choice, encoding)
            return
        if resp.get_header("Content-Length") is not None:
            return  # a download of stated length keeps it, and its ranges
        if resp.stream is not None and req.method != "HEAD":
            resp.stream = EncodedStream(resp.stream, encoding)
        _encoded(resp, encoding)

    def _encode_whole(self, resp: falcon.Response, choice: Choice, encoding: str) -> None:
        tag = _opaque(resp.etag)
        strong = bool(tag) and not (resp.etag or "").startswith("W/")  # names exact bytes
        keep = strong and "no-store" not in (resp.get_header("Cache-Control") or "")
        data = self.cache.get((tag, encoding)) if keep else None
        if data is None:
            body = resp.render_body()
            if body is None or (len(body) < MIN_BYTES and not choice.identity_refused):
                return
            if _carries_csrf(resp, body):
                return
            data = compress(body, encoding)
            if len(data) >= len(body) and not choice.identity_refused:
                return  # nothing gained
            if keep:
                self.cache.put((tag, encoding), data)
        resp.text = None
        resp.data = data
        _encoded(resp, encoding)


def _carries_csrf(resp: falcon.Response, body: bytes) -> bool:
    """Whether an HTML body holds a form's CSRF token (never compressed: BREACH)."""
    if not (resp.content_type or "").startswith("text/html"):
        return False
    text = resp.text if isinstance(resp.text, str) else body.decode("utf-8", "replace")
    return _CSRF_TOKEN.search(text) is not None


def _encoded(resp: falcon.Response, encoding: str) -> None:
    resp.set_header("Content-Encoding", encoding)
    resp.delete_header("Content-Length")  # falcon counts the encoded body
    _tag(resp, encoding)


def _tag(resp: falcon.Response, encoding: str) -> None:
    tag = _opaque(resp.etag)
    if tag:
        weak = "W/" if (resp.etag or "").startswith("W/") else ""
        resp.etag = f'{weak}"{tag}-{encoding}"'


def _opaque(etag: str | None) -> str:
    """An ETag's value without its quotes and weakness mark ("" for none)."""
    if not etag:
        return ""
    return etag.removeprefix("W/").strip('"')
