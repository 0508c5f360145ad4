"""The gateway between the network and the WSGI app: no client can hold a request thread.

Behind granian's WSGI interface a request thread read the request body and wrote a streamed
answer itself, with no deadline: a client that announced a body and sent nothing (or a byte a
minute), or a download that was never read, kept one of the few threads for as long as it
liked, and four of them froze every page. Here granian speaks ASGI to one event loop, and:

- the request body is read on the event loop, with a deadline for each piece
  (``client_timeout``), into memory or, past ``SPOOL_MEMORY`` bytes, a file in the runtime
  directory; bodies past the route's limit are refused (413) before the app sees them;
- only a whole request is handed to a request thread to run the app, in one of two lanes:
  pages that can cost seconds when nothing is cached (blame, a commit and its diff, a
  compare, an archive: ``EXPENSIVE``) run on ``expensive_threads`` threads of their own, every other
  page on ``threads`` threads, so a cheap page never waits for a thread behind expensive ones;
- a streamed answer is written from the event loop, with a deadline for each piece; its next
  piece is made on a streaming thread, so a client that stops reading holds a coroutine, not a
  thread, and is cut off after ``client_timeout``. The body is closed (and git stopped) then.

The WSGI environ is the one granian's WSGI interface builds: ``PATH_INFO`` is the
percent-decoded path as latin-1, so views still get the exact bytes of the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote_to_bytes

from floorless.core.background import name_this_thread

log = logging.getLogger(__name__)

SPOOL_MEMORY = 1 << 20  # request bodies up to this size stay in memory
PIECE = 1 << 16

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """How long a client may dawdle and how much it may send."""

    client_timeout: float
    push_bytes: int
    fetch_bytes: int
    form_bytes: int
    upload_bytes: int = 0  # an attachment with its form's framing (0: forms')
    lfs_bytes: int = 0  # a Git LFS object (0: forms')

    def body_limit(self, path: str) -> int:
        if path.endswith("/git-receive-pack"):
            return self.push_bytes
        if path.endswith("/git-upload-pack"):
            return self.fetch_bytes
        if self.lfs_bytes and LFS_OBJECTS.search(path):
            return max(self.lfs_bytes, self.form_bytes)
        if self.upload_bytes and UPLOADS.search(path):
            return max(self.upload_bytes, self.form_bytes)
        return self.form_bytes


# The paths a file is uploaded to (spooled to disk past SPOOL_MEMORY, as a push is), each
# kind with its own limit: a release's or an issue's attachment through the API and the web's
# upload forms (an issue's files ahead at /issues/attachments, or with a new issue or a
# comment; ``attachment_max_bytes``), and a Git LFS object (``lfs_max_bytes``), which must not
# lend its larger limit, or none, to the others.
UPLOADS = re.compile(
    r"/assets$|/attachments$|/releases/new$|/releases/edit/.+$|/issues/new$|/issues/[0-9]{1,9}$"
)
LFS_OBJECTS = re.compile(r"/info/lfs/objects/[0-9a-f]{64}$")


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Answer:
    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    first: bytes = b""
    rest: Iterator[bytes] | None = None  # more pieces to come from a streaming thread
    body: Iterable[bytes] | None = None  # what to close at the end


# /{owner}/{repo}/ then a page that may take seconds on a cache miss
EXPENSIVE = re.compile(r"^/+[^/]+/[^/]+/+(blame|commit|compare|archive)(/|$)")


class Gateway:
    """An ASGI application that runs a WSGI application on request threads."""

    def __init__(
        self,
        app: WSGIApp,
        limits: Limits,
        threads: int,
        spool_dir: Path,
        on_shutdown: Callable[[], None] | None = None,
        expensive_threads: int = 2,
        on_request: Callable[[], None] = lambda: None,
        admit: Callable[[dict[str, Any]], bool] = lambda environ: True,
    ) -> None:
        self.app = app
        # Asked, from a request's headers alone, before a body larger than a form's is read:
        # whether someone known sends it (``Authenticator.may_send``). Nobody's is refused
        # (401) unread, so that nobody may fill the disk with bodies spooled for nothing.
        self.admit = admit
        self.on_request = on_request  # told of each request as it comes
        self.limits = limits
        self.spool_dir = spool_dir
        self.on_shutdown = on_shutdown
        self.requests = ThreadPoolExecutor(
            threads,
            thread_name_prefix="fl-request",
            initializer=name_this_thread,
            initargs=("fl-request",),
        )
        self.expensive = ThreadPoolExecutor(
            expensive_threads,
            thread_name_prefix="fl-expensive",
            initializer=name_this_thread,
            initargs=("fl-expensive",),
        )
        # pieces of streamed answers (git's output, archives): never on a request thread
        self.streams = ThreadPoolExecutor(
            max(4, 2 * threads),
            thread_name_prefix="fl-stream",
            initializer=name_this_thread,
            initargs=("fl-stream",),
        )

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def close(self) -> None:
        self.requests.shutdown(wait=False, cancel_futures=True)
        self.expensive.shutdown(wait=False, cancel_futures=True)
        self.streams.shutdown(wait=False, cancel_futures=True)
        if self.on_shutdown is not None:
            self.on_shutdown()

    async def _http(self, scope: Message, receive: Receive, send: Send) -> None:
        self.on_request()
        loop = asyncio.get_running_loop()
        if self._large(scope) and not self._too_large(scope):  # (that is refused unread)
            bare = wsgi_environ(scope, io.BytesIO(), 0)
            if not await loop.run_in_executor(self.requests, self.admit, bare):
                await _plain(send, 401, "sign in (or send a token) to upload", challenge=True)
                return
        try:
            body, length = await self._read_body(scope, receive)
        except _Refused as refused:
            await _plain(send, refused.status, refused.message)
            return
        try:
            environ = wsgi_environ(scope, body, length)
            lane = self.expensive if EXPENSIVE.match(scope["path"]) else self.requests
            answer = await loop.run_in_executor(lane, self._run, environ)
        finally:
            body.close()
        if answer.rest is None:  # a whole answer: handed over at once, nothing to wait for
            with contextlib.suppress(OSError, RuntimeError):  # unless the client has gone
                await _start(send, answer, more=False)
            return
        try:
            async with asyncio.timeout(self.limits.client_timeout):
                await _start(send, answer, more=True)
            while (
                piece := await loop.run_in_executor(self.streams, next, answer.rest, None)
            ) is not None:
                if piece:
                    async with asyncio.timeout(self.limits.client_timeout):
                        await _piece(send, piece, more=True)
            async with asyncio.timeout(self.limits.client_timeout):
                await _piece(send, b"", more=False)
        except (TimeoutError, OSError, RuntimeError) as exc:
            # the client stopped reading, or went away: drop it (granian closes the connection)
            reason = str(exc) or "timed out"
            log.info("%s %s: answer abandoned: %s", scope["method"], scope["path"], reason)
        finally:
            if answer.body is not None:
                await loop.run_in_executor(self.streams, _close, answer.body)

    def _large(self, scope: Message) -> bool:
        """Whether the request may send a body larger than a form's (its route takes one,
        and its length is not known to be smaller) that only someone known may send: a
        fetch's negotiation is anyone's (a public repository's clone)."""
        path = scope["path"]
        if path.endswith("/git-upload-pack"):
            return False
        if self.limits.body_limit(path) <= self.limits.form_bytes:
            return False
        declared = _header(scope, b"content-length")
        if declared is None:
            return _header(scope, b"transfer-encoding") is not None
        return (
            not (declared.isascii() and declared.isdigit())
            or int(declared) > self.limits.form_bytes
        )

    def _too_large(self, scope: Message) -> bool:
        declared = _header(scope, b"content-length")
        limit = self.limits.body_limit(scope["path"])
        return (
            declared is not None
            and (declared.isascii() and declared.isdigit())
            and int(declared) > limit
        )

    async def _read_body(self, scope: Message, receive: Receive) -> tuple[IO[bytes], int]:
        """The whole request body, read on the event loop with a deadline for each piece."""
        declared = _header(scope, b"content-length")
        if declared is None and _header(scope, b"transfer-encoding") is None:
            return io.BytesIO(), 0  # no body: nothing to wait for
        limit = self.limits.body_limit(scope["path"])
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                raise _Refused(400, "Content-Length is not a number")
            if int(declared) > limit:
                raise _Refused(413, f"the request body is over the limit of {limit} bytes")
        spool: IO[bytes] = io.BytesIO()
        total = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(self.limits.client_timeout):
                        message = await receive()
                except TimeoutError as exc:
                    raise _Refused(408, "the request body did not arrive in time") from exc
                if message["type"] == "http.disconnect":
                    raise _Refused(400, "the client went away")
                piece = message.get("body", b"")
                total += len(piece)
                if total > limit:
                    raise _Refused(413, f"the request body is over the limit of {limit} bytes")
                if total > SPOOL_MEMORY and isinstance(spool, io.BytesIO):
                    spool = self._to_disk(spool)
                spool.write(piece)
                if not message.get("more_body", False):
                    break
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool, total

    def _to_disk(self, memory: io.BytesIO) -> IO[bytes]:
        """A body past ``SPOOL_MEMORY`` goes on in a file of the runtime directory."""
        disk = tempfile.TemporaryFile(dir=self.spool_dir)  # noqa: SIM115 (the caller closes it)
        disk.write(memory.getbuffer())
        memory.close()
        return disk

    def _run(self, environ: dict[str, Any]) -> _Answer:
        """On a request thread: call the app, and take the first piece of its answer."""
        answer = _Answer()

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: object = None
        ) -> Callable[[bytes], None]:
            answer.status = int(status.split(" ", 1)[0])
            answer.headers = headers
            return _no_write

        body = self.app(environ, start_response)
        try:
            if isinstance(body, list | tuple):
                answer.first = b"".join(body)
                _close(body)
                return answer
            answer.body = body
            rest = iter(body)
            answer.first = next(rest, b"")  # start_response may come with the first piece
            answer.rest = rest
            return answer
        except BaseException:
            _close(body)
            raise


def wsgi_environ(scope: Message, body: IO[bytes], length: int) -> dict[str, Any]:
    """PEP 3333's environ for an ASGI request whose body has been read whole."""
    server = scope.get("server") or ("127.0.0.1", 80)
    client = scope.get("client") or ("", 0)
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote_to_bytes(raw_path.split(b"?", 1)[0]).decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in scope["headers"]:
        if b"_" in name:
            # ``X_Forwarded_For`` would become ``HTTP_X_FORWARDED_FOR`` too, beside the
            # proxy's own header: dropped, as nginx, Apache and gunicorn do
            continue
        key = name.decode("latin-1").upper().replace("-", "_")
        text = value.decode("latin-1")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = text
            continue
        if key == "TRANSFER_ENCODING":
            continue  # the body is whole now, and its length known
        key = "HTTP_" + key
        if key in environ:
            text = environ[key] + ("; " if key == "HTTP_COOKIE" else ",") + text
        environ[key] = text
    if length or "CONTENT_LENGTH" in environ:
        environ["CONTENT_LENGTH"] = str(length)
    return environ


def _header(scope: Message, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1").strip())
    return None


async def _start(send: Send, answer: _Answer, more: bool) -> None:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await _piece(send, answer.first, more)


async def _piece(send: Send, data: bytes, more: bool) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def _plain(send: Send, status: int, message: str, challenge: bool = False) -> None:
    data = (message + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(data)).encode()),
        (b"connection", b"close"),
    ]
    if challenge:  # git and git lfs then ask for credentials and try again
        headers.append((b"www-authenticate", b'Basic realm="floorless", charset="UTF-8"'))
    with contextlib.suppress(OSError, RuntimeError):
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await _piece(send, data, more=False)


def _close(body: Iterable[bytes]) -> None:
    close = getattr(body, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # a body that fails to close must not take the server with it
            log.exception("closing a response body")


def _no_write(data: bytes) -> None:
    raise NotImplementedError("floorless's views return their bodies; write() is not offered")
