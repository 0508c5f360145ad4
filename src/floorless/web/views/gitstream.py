"""Heavy work handed to a git child and streamed as a response body: a large blob's raw
bytes, a huge commit's ``.diff`` and ``.patch``.

libgit2 holds the interpreter while it inflates or diffs, so a 100 MB blob read in-process
stalls every other request for seconds; a git child does the same work in its own process,
and reading its output lets other threads run. Children share the forge's ``git_slots`` with
archives and blame (half the request threads): when they are all taken the answer is 503
with ``Retry-After``, never a queue.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import falcon

from floorless.errors import RepositoryBroken
from floorless.forge import Forge
from floorless.web.views.archive import ArchiveStream


def git_stream(forge: Forge, git_dir: Path, args: Sequence[str], what: str) -> ArchiveStream:
    """A started git child's output, holding one of the git slots until it is closed."""
    slots = forge.git_slots
    if not slots.acquire(blocking=False):
        raise falcon.HTTPServiceUnavailable(
            description=f"too many {what} are being sent; try again in a moment",
            retry_after=5,
        )
    try:
        proc = forge.git.popen(git_dir, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except BaseException:
        slots.release()
        raise
    stream = ArchiveStream(proc, slots.release)
    if not stream.start():
        raise RepositoryBroken(f"git {args[0]} cannot read this object")
    return stream


class Framed:
    """A git stream with bytes before and after it (a mail header and its signature), or
    only a slice of it (a byte range: the bytes before it are read and dropped). Closing it
    closes the stream, which stops git and frees its slot."""

    def __init__(
        self,
        stream: ArchiveStream,
        prefix: bytes = b"",
        suffix: bytes = b"",
        skip: int = 0,
        length: int | None = None,
    ) -> None:
        self.stream = stream
        self.prefix = prefix
        self.suffix = suffix
        self.skip = skip
        self.length = length
        self.reading = True

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self.prefix:
            chunk, self.prefix = self.prefix, b""
            return chunk
        while self.reading:
            chunk = next(self.stream, b"")
            if not chunk:
                self.reading = False
                break
            if self.skip:
                dropped = min(self.skip, len(chunk))
                chunk, self.skip = chunk[dropped:], self.skip - dropped
            if self.length is not None:
                chunk = chunk[: self.length]
                self.length -= len(chunk)
                if not self.length:  # the range is complete: git need not go on
                    self.reading = False
                    self.stream.close()
            if chunk:
                return chunk
        if self.suffix:
            chunk, self.suffix = self.suffix, b""
            return chunk
        self.close()
        raise StopIteration

    def close(self) -> None:
        self.reading = False
        self.stream.close()
