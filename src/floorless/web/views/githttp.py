"""git's smart HTTP protocol: ``info/refs``, ``git-upload-pack`` and ``git-receive-pack``.

- Access first, from the one policy: reading for clone and fetch, writing for push. Without
  credentials a private or unknown repository answers 401, so git asks for them; with
  credentials that may not read it, 404. Neither tells whether the repository exists.
- ``info/refs`` in protocol v2 is the capability advertisement git gave at start: no process.
  In v0 (and for pushes) git lists the refs: one process.
- A POST runs one ``git upload-pack`` or ``git receive-pack --stateless-rpc`` in floorless's
  isolated git environment. The body streams into it in 64 KiB pieces (gunzipped when the
  client compressed it), its pkt-line framing checked on the way and its size bounded; the
  answer streams back as git writes it. Nothing holds a whole pack in memory.
- A body that is cut off closes git's input: git then abandons the push itself (its quarantine
  keeps half a pack out of the repository), and no ref moves.
- After a push the ref cache and the index learn of it before the client reads the last byte.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import falcon
from falcon.typing import ReadableIO

from floorless.access import Level
from floorless.errors import (
    BadRequest,
    GitCommandError,
    NotFound,
    TooLarge,
    Unauthorized,
    Unsupported,
)
from floorless.git import protocol, reach
from floorless.repos import Repo
from floorless.web.auth import viewer_of
from floorless.web.context import find_repo
from floorless.web.views.base import View

log = logging.getLogger(__name__)

CHUNK = 65536
GIT_STALL_SECONDS = 120.0  # git neither reading nor writing this long: give up on it
_NO_CACHE = ["no-cache", "max-age=0", "must-revalidate"]


class GitView(View):
    def authorize(self, req: falcon.Request, owner: str, name: str, needed: Level) -> Repo:
        req.context.plain = True
        try:
            repo, _ = find_repo(self.forge, req, owner, name, needed)
        except NotFound as exc:
            if viewer_of(req).anonymous:
                raise Unauthorized("authentication required") from exc
            raise
        return repo

    def environment(self, req: falcon.Request) -> dict[str, str]:
        env: dict[str, str] = {}
        version = protocol.protocol_header(req.get_header("Git-Protocol"))
        if version is not None:
            env["GIT_PROTOCOL"] = version
        account = viewer_of(req).account
        if account is not None:
            env["GIT_COMMITTER_NAME"] = account.name
            env["GIT_COMMITTER_EMAIL"] = account.email or f"{account.name}@floorless"
        return env


def _needed(service: str) -> Level:
    return Level.WRITE if service == "git-receive-pack" else Level.READ


class InfoRefs(GitView):
    def __init__(self, *args: object, advertisement: Callable[[], bytes]) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.advertisement = advertisement

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        req.context.plain = True
        service = req.get_param("service")
        if service not in protocol.SERVICES:
            raise falcon.HTTPForbidden(
                title="Forbidden",
                description="floorless serves git's smart HTTP protocol only "
                "(info/refs?service=git-upload-pack or git-receive-pack)",
            )
        found = self.authorize(req, owner, repo, _needed(service))
        resp.content_type = f"application/x-{service}-advertisement"
        resp.cache_control = _NO_CACHE
        env = self.environment(req)
        if (
            service == "git-upload-pack"
            and protocol.wants_v2(env.get("GIT_PROTOCOL"))
            and not self.forge.handles.extended_format(found.path)
        ):
            resp.data = self.advertisement()
            return
        proc = self.forge.git.popen(
            found.path,
            protocol.advertise_args(service, found.path),
            extra_env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(timeout=GIT_STALL_SECONDS)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise GitCommandError("git took too long to list the refs") from exc
        if proc.returncode != 0:
            log.warning("%s: %s --advertise-refs: %s", found.full_name, service, err[-500:])
            raise GitCommandError("git could not list the refs")
        prefix = (
            b"" if out.startswith(b"000eversion 2\n") else protocol.service_announcement(service)
        )
        resp.data = prefix + out


class Service(GitView):
    """The POST of one service: the body into git, git's answer back."""

    def __init__(self, *args: object, service: str) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.service = service
        push = service == "git-receive-pack"
        self.limit = self.settings.max_push_bytes if push else self.settings.max_fetch_request_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        found = self.authorize(req, owner, repo, _needed(self.service))
        expected = f"application/x-{self.service}-request"
        if (req.content_type or "").split(";")[0].strip().lower() != expected:
            raise Unsupported(f"a {self.service} request has Content-Type {expected}")
        body = request_body(req, self.limit)  # checks the encoding and length before git starts
        if self.service == "git-upload-pack":  # nothing by id that no ref reaches
            allowed = self.forge.fetchable(found)
            body, refused = reach.screen_wants(body, allowed, self.forge.git.tmp)
            if refused is not None:
                resp.content_type = f"application/x-{self.service}-result"
                resp.data = refused
                return
        checker = protocol.PktChecker(commands_only=self.service == "git-receive-pack")
        errors = tempfile.TemporaryFile(dir=self.forge.git.tmp)  # noqa: SIM115 (closed by GitOutput)
        proc = self.forge.git.popen(
            found.path,
            protocol.service_args(self.service, found.path),
            extra_env=self.environment(req),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        output = GitOutput(proc, errors, found, self.service, self.forge.git.tmp)
        try:
            feed(proc, body, checker, output.spool)
        except BaseException:
            output.close()
            raise
        if output.first() is None:
            # Nothing to say is an answer when git agrees: a push of more than git's
            # http.postBuffer first probes with a bare flush.
            reason = output.reason() if output.proc.wait() != 0 else None
            output.close()
            if reason is not None:
                raise BadRequest(f"git refused the request: {reason}")
            resp.content_type = f"application/x-{self.service}-result"
            resp.cache_control = _NO_CACHE
            resp.data = b""
            return
        if self.service == "git-receive-pack":
            output.on_end = lambda: self.forge.after_push(found)
        resp.content_type = f"application/x-{self.service}-result"
        resp.cache_control = _NO_CACHE
        resp.stream = output


def request_body(req: falcon.Request, limit: int) -> Iterator[bytes]:
    """The request body in pieces, decompressed, at most ``limit`` bytes; errors are 4xx."""
    encoding = (req.get_header("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise Unsupported(f"Content-Encoding {encoding[:40]!r} is not supported: use gzip")
    length = req.content_length
    if encoding == "identity" and length is not None and length > limit:
        raise TooLarge(f"the request body is over the limit of {limit} bytes")
    return _body(req.stream, length, limit, encoding != "identity")


def _body(stream: ReadableIO, length: int | None, limit: int, gzipped: bool) -> Iterator[bytes]:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzipped else None
    remaining = length
    total = 0
    while remaining is None or remaining > 0:
        try:
            data = stream.read(CHUNK if remaining is None else min(CHUNK, remaining))
        except OSError as exc:
            raise BadRequest("the request body was cut off") from exc
        if not data:
            if remaining:
                raise BadRequest("the request body was cut off")
            break
        if remaining is not None:
            remaining -= len(data)
        pieces = [data] if inflater is None else _inflate(inflater, data)
        for piece in pieces:
            total += len(piece)
            if total > limit:
                raise TooLarge(f"the request body is over the limit of {limit} bytes")
            yield piece
    if inflater is not None and not inflater.eof:
        raise BadRequest("the gzip body ends early")


def _inflate(inflater: zlib._Decompress, data: bytes) -> Iterator[bytes]:
    try:
        yield inflater.decompress(data, CHUNK)
        while inflater.unconsumed_tail:
            yield inflater.decompress(inflater.unconsumed_tail, CHUNK)
    except zlib.error as exc:
        raise BadRequest("the body is not valid gzip") from exc


def feed(
    proc: subprocess.Popen[bytes],
    body: Iterator[bytes],
    checker: protocol.PktChecker,
    spool: IO[bytes],
) -> None:
    """Write the body to git's input, checking its framing; close the input at its end.

    git may answer while it reads (a v0 fetch acknowledges each ``have`` it knows): what it
    says meanwhile goes to ``spool``, a file, so neither side waits on the other and nothing
    is sent before the request is whole. Every error closes git's input first: git sees the
    request end early and stops cleanly.
    """
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    in_fd, out_fd = stdin.fileno(), stdout.fileno()
    os.set_blocking(in_fd, False)
    listening = True
    try:
        for piece in body:
            checker.feed(piece)
            pending = memoryview(piece)
            while pending:
                readable, writable, _ = select.select(
                    [out_fd] if listening else [], [in_fd], [], GIT_STALL_SECONDS
                )
                if not readable and not writable:
                    raise BadRequest("git stopped reading the request")
                if readable:
                    data = os.read(out_fd, CHUNK)
                    listening = bool(data)
                    spool.write(data)
                if writable:
                    try:
                        pending = pending[os.write(in_fd, pending) :]
                    except BrokenPipeError:
                        return  # git stopped reading: its answer says why
        checker.finish()
    finally:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()


class GitOutput:
    """git's answer as a WSGI body: streamed, and the process always reaped.

    The last piece is held back until git has exited and ``on_end`` has run, so a client
    that reads the end of a push's answer and asks again at once sees the new refs.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        errors: IO[bytes],
        repo: Repo,
        service: str,
        scratch: Path,
    ) -> None:
        self.proc = proc
        self.errors = errors
        # what git said while it was still reading the request (see ``feed``)
        self.spool: IO[bytes] = tempfile.TemporaryFile(dir=scratch)  # noqa: SIM115
        self.repo = repo
        self.service = service
        self.on_end: Callable[[], None] | None = None
        self._first: bytes | None = None
        self._closed = False

    def _read(self) -> bytes:
        """git's next output: first what the spool kept, then straight from git."""
        data = self.spool.read(CHUNK)
        if data:
            return data
        assert self.proc.stdout is not None
        return os.read(self.proc.stdout.fileno(), CHUNK)

    def first(self) -> bytes | None:
        """Wait for git's first output; None when git ended without a word."""
        self.spool.seek(0)
        data = self._read()
        self._first = data or None
        return self._first

    def reason(self) -> str:
        self.proc.wait()
        self.errors.seek(0)
        lines = self.errors.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        if lines:
            log.warning("%s %s: %s", self.repo.full_name, self.service, lines[-1])
        return "malformed or unexpected request"

    def __iter__(self) -> Iterator[bytes]:
        assert self._first is not None
        held = self._first
        while data := self._read():
            yield held
            held = data
        code = self.proc.wait()
        if code != 0:
            self.reason()
        if self.on_end is not None:
            try:
                self.on_end()
            finally:
                self.on_end = None
        yield held

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        proc = self.proc
        # Both pipes shut: git sees its input end, or its output go nowhere, and stops.
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.errors.close()
        self.spool.close()
        if self.on_end is not None:  # a push whose answer was never read to the end
            on_end, self.on_end = self.on_end, None
            on_end()
