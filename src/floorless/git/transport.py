"""git children whose bytes are HTTP bodies: a request body into git, git's output back.

Work proportional to the data moved runs in a git child (a clone, a push, an archive, a large
blob's bytes, a huge diff), never in-process where libgit2 would hold the interpreter. Two
pieces carry the bytes, and nothing else in floorless touches a child's pipes:

- ``read_body`` and ``feed``: a request body, gunzipped and bounded, written to git's input
  while what git says meanwhile is kept in a spool file, so neither side waits on the other
  (a v0 fetch acknowledges ``have`` lines while it still reads them).
- ``GitBody``: a running child as a response body. It yields what git wrote, holds one of
  the forge's git slots while it lives, and has one ``close()`` that always stops git, reaps
  it, frees the slot and runs ``on_end`` once, whether the answer was read to the end, the
  client went away, or the server gave up on it. Nothing depends on the garbage collector.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Protocol

from floorless.core.errors import BadRequest, Busy, TooLarge
from floorless.git.env import GitEnvironment
from floorless.git.protocol import PktChecker

log = logging.getLogger(__name__)

CHUNK = 65536
STALL_SECONDS = 120.0  # git neither reading nor writing this long: give up on it
STOP_SECONDS = 30.0  # after its pipes close, git gets this long to end before it is killed


class Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


# -- the request body ------------------------------------------------------------------------


def read_body(stream: Readable, length: int | None, limit: int, gzipped: bool) -> Iterator[bytes]:
    """The request body in pieces, gunzipped when ``gzipped``, at most ``limit`` bytes after
    decompression; a cut-off or malformed body is a ``BadRequest``, an oversize one
    ``TooLarge``, raised as the pieces are read."""
    if not gzipped and length is not None and length > limit:
        raise TooLarge(f"the request body is over the limit of {limit} bytes")
    return _pieces(stream, length, limit, gzipped)


def _pieces(stream: Readable, length: int | None, limit: int, gzipped: bool) -> Iterator[bytes]:
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
        for piece in [data] if inflater is None else _inflate(inflater, data):
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
    proc: subprocess.Popen[bytes], body: Iterator[bytes], checker: PktChecker, spool: IO[bytes]
) -> None:
    """Write the body to git's input, checking its framing; close the input at its end.

    What git says meanwhile goes to ``spool``, so nothing is sent to the client before the
    request is whole. Every error closes git's input first: git sees the request end early
    and stops cleanly (a push's quarantine keeps a half pack out, and no ref moves).
    """
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    in_fd, out_fd = stdin.fileno(), stdout.fileno()
    os.set_blocking(in_fd, False)
    with selectors.DefaultSelector() as selector:
        selector.register(in_fd, selectors.EVENT_WRITE)
        selector.register(out_fd, selectors.EVENT_READ)
        listening = True
        try:
            for piece in body:
                checker.feed(piece)
                pending = memoryview(piece)
                while pending:
                    ready = {key.fd for key, _ in selector.select(STALL_SECONDS)}
                    if not ready:
                        raise BadRequest("git stopped reading the request")
                    if out_fd in ready:
                        data = os.read(out_fd, CHUNK)
                        spool.write(data)
                        if not data and listening:  # git closed its output: stop watching it
                            listening = False
                            selector.unregister(out_fd)
                    if in_fd in ready:
                        try:
                            pending = pending[os.write(in_fd, pending) :]
                        except BrokenPipeError:
                            return  # git stopped reading: its answer says why
            checker.finish()
        finally:
            with contextlib.suppress(BrokenPipeError):
                stdin.close()


# -- git's output ----------------------------------------------------------------------------


def start(
    git: GitEnvironment,
    git_dir: Path,
    args: Sequence[str],
    slots: threading.BoundedSemaphore,
    what: str,
) -> GitBody:
    """Start a git child whose output is a response body, holding one of ``slots`` until it
    is closed; when every slot is taken, ``Busy`` (503 with Retry-After) at once, never a
    queue. ``what`` names the kind of download in that answer."""
    if not slots.acquire(blocking=False):
        raise Busy(f"too many {what} are being sent; try again in a moment", retry_after=5)
    try:
        proc = git.popen(git_dir, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except BaseException:
        slots.release()
        raise
    return GitBody(proc, release=slots.release)


class GitBody:
    """A running git child as a response body: its output, piece by piece.

    ``first()`` waits for git's first output (what ``feed`` spooled comes first). The last
    piece is held back until git has exited and ``on_end`` has run, so a client that reads the
    end of a push's answer and asks again at once sees the new refs.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        release: Callable[[], None] | None = None,
        errors: IO[bytes] | None = None,
        scratch: Path | None = None,
    ) -> None:
        self.proc = proc
        self.errors = errors  # git's standard error, when the caller keeps it
        # what git said while it was still reading the request (see ``feed``)
        self.spool: IO[bytes] = tempfile.TemporaryFile(dir=scratch)  # noqa: SIM115 (close())
        self.on_end: Callable[[], None] | None = None
        self._release = release
        self._held: bytes | None = None
        self._closed = False

    def _read(self) -> bytes:
        data = self.spool.read(CHUNK)
        if data:
            return data
        stdout = self.proc.stdout
        if stdout is None or stdout.closed:
            return b""
        return os.read(stdout.fileno(), CHUNK)

    def first(self) -> bytes:
        """git's first output; empty when git ended without a word."""
        self.spool.seek(0)
        self._held = self._read()
        return self._held

    def succeeded(self) -> bool:
        """Wait for git to end; True when it exited 0."""
        return self.proc.wait() == 0

    def reason(self) -> str:
        """The last line git wrote to its standard error (logged), for a failed child."""
        self.proc.wait()
        if self.errors is None:
            return "git failed"
        self.errors.seek(0)
        lines = self.errors.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "git failed"

    def __iter__(self) -> Iterator[bytes]:
        held = self.first() if self._held is None else self._held
        while data := self._read():
            yield held
            held = data
        if not self.succeeded():
            log.warning("git %s: %s", self.proc.args, self.reason())
        self._end()
        if held:
            yield held

    def _end(self) -> None:
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            on_end()

    def close(self) -> None:
        """Stop git (both pipes shut: it sees its input end or its output go nowhere), reap
        it, free its slot, run ``on_end``: once, however the answer ended."""
        if self._closed:
            return
        self._closed = True
        proc = self.proc
        try:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None and not pipe.closed:
                    with contextlib.suppress(BrokenPipeError):
                        pipe.close()
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            self.spool.close()
            if self.errors is not None:
                self.errors.close()
            release, self._release = self._release, None
            if release is not None:
                release()
            self._end()  # a push whose answer was never read to the end still counts


class Framed:
    """A git body with bytes before and after it (a mail header and its signature), or only
    a slice of it (a byte range: the bytes before it are read and dropped). Closing it closes
    the body, which stops git and frees its slot."""

    def __init__(
        self,
        body: GitBody,
        prefix: bytes = b"",
        suffix: bytes = b"",
        skip: int = 0,
        length: int | None = None,
    ) -> None:
        self.body = body
        self.prefix = prefix
        self.suffix = suffix
        self.skip = skip
        self.length = length

    def __iter__(self) -> Iterator[bytes]:
        if self.prefix:
            yield self.prefix
        for chunk in self.body:
            if self.skip:
                dropped = min(self.skip, len(chunk))
                chunk, self.skip = chunk[dropped:], self.skip - dropped
            if self.length is not None:
                chunk = chunk[: self.length]
                self.length -= len(chunk)
            if chunk:
                yield chunk
            if self.length == 0:  # the range is complete: git need not go on
                break
        self.body.close()
        if self.suffix:
            yield self.suffix

    def close(self) -> None:
        self.body.close()
