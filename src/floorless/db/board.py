"""Telling the other processes of this machine what one changed, when they share an SQLite
database: a notice board in shared memory.

Processes on one machine may share an SQLite database: the workers of ``floorless serve``
(``processes`` above 1), two serve commands given one ``--database``, a command line
deleting a repository that a server shows. Each keeps its own memory of the repositories,
as nodes on PostgreSQL do (``notices.py``), and has no ``NOTIFY`` to hear the others with.
They have memory in common instead: the board, a file beside the database (as SQLite's own
``-shm`` file is, with the same needs: one machine, a filesystem that maps it), mapped by
every process: a count of the notices ever posted, then the last ``SLOTS`` of them in a
ring, each the poster's node, a repository's id and an event. Posting takes an exclusive
``flock`` of the file, reading a shared one; seeing whether anything was posted reads the
count alone, a few bytes of memory and no system call, so a request can ask on its way in
(``Notices.catch_up``).

A process that fell more than ``SLOTS`` notices behind has lost some: it is told so
(``overrun``), and forgets what it remembers of every repository, as a node does that
was not listening.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
from pathlib import Path

from floorless.core.errors import FloorlessError

MAGIC = b"flboard1"
SLOTS = 4096
_HEADER = struct.Struct("<8sQ")  # the magic, then how many notices were ever posted
_NOTICE = struct.Struct("<QqB7x")  # the poster's node, a repository's id, an event's code
SIZE = _HEADER.size + SLOTS * _NOTICE.size
Notice = tuple[int, int, int]  # node, repository id, event code


def board_of(database: Path) -> Path:
    """The board of the processes sharing the SQLite file ``database``: beside it."""
    return database.with_name(database.name + "-board")


class Board:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            status = os.fstat(self._fd)
            if status.st_uid != os.geteuid() or status.st_mode & 0o077:
                raise FloorlessError(
                    f"{path}: the processes' notice board belongs to another user or is open "
                    "to others; remove it (only floorless's own user may post notices)"
                )
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if os.fstat(self._fd).st_size < SIZE:  # new: zeros (never shrunk under
                    os.ftruncate(self._fd, SIZE)  # another process's mapping)
                self._map = mmap.mmap(self._fd, SIZE)
                if self._map[: len(MAGIC)] != MAGIC:  # new, or another version's: begun
                    self._map[: _HEADER.size] = _HEADER.pack(MAGIC, 0)  # anew
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(self._fd)
            raise

    def count(self) -> int:
        """How many notices were ever posted: read without a lock (a count read while it is
        being written is one of the two, and the next look sees the other)."""
        return int(_HEADER.unpack_from(self._map)[1])

    def post(self, node: int, repo_id: int, event: int) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            posted = self.count()
            _NOTICE.pack_into(self._map, _slot(posted), node, repo_id, event)
            _HEADER.pack_into(self._map, 0, MAGIC, posted + 1)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def since(self, seen: int) -> tuple[list[Notice], int, bool]:
        """The notices posted after the first ``seen``, how many there are now, and whether
        some were lost to the ring (more than ``SLOTS`` since)."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            posted = self.count()
            if posted < seen or posted - seen > SLOTS:  # overwritten, or a board made anew
                return [], posted, True
            notices = [_NOTICE.unpack_from(self._map, _slot(n)) for n in range(seen, posted)]
            return notices, posted, False
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _slot(number: int) -> int:
    return _HEADER.size + (number % SLOTS) * _NOTICE.size


def node_number(node: str) -> int:
    """A node's name as the board's 64 bits."""
    return int.from_bytes(hashlib.blake2b(node.encode(), digest_size=8).digest(), "little")
