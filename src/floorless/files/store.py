"""The content store: uploaded files kept by the SHA-256 of their bytes.

One directory (``storage_dir``, ``<data>/storage`` by default, or a directory on shared
storage so that every node serves the same files) holds ``sha256/ab/cd/abcd…``: the same bytes
are kept once, whether they came as a release's attachment, an issue's, or a Git LFS object.

A file is written as it arrives, never held whole in memory: to a part file in ``tmp/``,
hashed and counted on the way, checked against the size and hash it was announced with and
the size limit, flushed to disk, then renamed into place. A write that fails or is cut short
(a client that goes away, a server killed mid-upload) leaves no object: its part file is
removed at once, or, once a day old, at a start (``sweep``: younger ones may be a running
upload's). Readers therefore only ever see whole, verified files.

Nothing here knows who refers to a file: the records that do (``attachments``, ``lfs_objects``)
decide when one may go (``remove``).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from floorless.core.errors import BadRequest, NotFound, TooLarge

CHUNK = 1 << 20  # bytes read and written at a time
OID = re.compile(r"\A[0-9a-f]{64}\Z")
PART_AGE = 24 * 3600.0  # seconds: a part file this old belongs to no running upload


class Truncated(BadRequest):
    """The body ended before the size it was announced with."""


class Mismatch(BadRequest):
    """The bytes written are not the ones announced (their size or their SHA-256)."""

    status = 422


@dataclass(frozen=True)
class Stored:
    oid: str  # the SHA-256 of the bytes, in lower-case hex
    size: int
    new: bool  # False when the store already held these bytes


def valid_oid(oid: str) -> bool:
    return bool(OID.match(oid))


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"

    def prepare(self) -> None:
        """Ready the store, and sweep the part files no upload can still be writing: every
        start prepares (a server worker's, each ``floorless admin`` command's, another
        node's on shared storage), while uploads of a running server may be under way."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.sweep(PART_AGE)

    def sweep(self, older_than: float = 0.0) -> int:
        """Remove part files older than ``older_than`` seconds (0: every one, for a store
        no process is writing to)."""
        removed = 0
        now = time.time()
        try:
            parts = list(self.tmp.iterdir())
        except FileNotFoundError:
            return 0
        for part in parts:
            try:
                if now - part.stat().st_mtime >= older_than:
                    part.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def path(self, oid: str) -> Path:
        if not valid_oid(oid):
            raise NotFound("no such file")
        return self.root / "sha256" / oid[:2] / oid[2:4] / oid

    def size(self, oid: str) -> int | None:
        """The size of the file ``oid``, or None when the store does not hold it."""
        try:
            return self.path(oid).stat().st_size
        except (FileNotFoundError, NotFound):
            return None

    def open(self, oid: str) -> BinaryIO:
        try:
            return self.path(oid).open("rb")
        except FileNotFoundError:
            raise NotFound("no such file") from None

    def write(
        self,
        read: Callable[[int], bytes],
        *,
        limit: int,
        size: int | None = None,
        oid: str | None = None,
    ) -> Stored:
        """Store what ``read`` gives until it gives b"" (or ``size`` bytes, when the size is
        announced): TooLarge past ``limit`` bytes (0: no limit), Truncated when fewer than
        ``size`` arrive, Mismatch when more arrive or the hash is not ``oid``."""
        if oid is not None and not valid_oid(oid):
            raise BadRequest("an object id is 64 lower-case hexadecimal digits")
        if size is not None and limit and size > limit:
            raise TooLarge(f"the file is larger than the limit of {limit} bytes")
        self.tmp.mkdir(parents=True, exist_ok=True)
        part = self.tmp / f"{secrets.token_hex(12)}.part"
        digest = hashlib.sha256()
        written = 0
        try:
            with part.open("xb") as out:
                while True:
                    want = CHUNK if size is None else min(CHUNK, size - written)
                    if want == 0:
                        break
                    chunk = read(want)
                    if not chunk:
                        break
                    written += len(chunk)
                    if limit and written > limit:
                        raise TooLarge(f"the file is larger than the limit of {limit} bytes")
                    digest.update(chunk)
                    out.write(chunk)
                if size is not None and written < size:
                    raise Truncated(f"the upload ended after {written} of {size} bytes")
                if size is not None and read(1):
                    raise Mismatch(f"more than the announced {size} bytes arrived")
                out.flush()
                os.fsync(out.fileno())
            found = digest.hexdigest()
            if oid is not None and found != oid:
                raise Mismatch(f"the bytes' SHA-256 is {found}, not {oid}")
            final = self.path(found)
            if final.exists():
                part.unlink()
                return Stored(found, written, False)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, final)
            return Stored(found, written, True)
        except BaseException:
            part.unlink(missing_ok=True)
            raise

    def every(self) -> Iterator[str]:
        """The id of every file the store holds."""
        base = self.root / "sha256"
        for first in sorted(base.glob("??")):
            for second in sorted(first.glob("??")):
                for held in sorted(second.iterdir()):
                    if valid_oid(held.name):
                        yield held.name

    def remove(self, oid: str) -> bool:
        """Forget the file ``oid`` (its records are gone); True when there was one."""
        try:
            self.path(oid).unlink()
            return True
        except (FileNotFoundError, NotFound):
            return False
