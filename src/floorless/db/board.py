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
import time
from pathlib import Path

from floorless.core.errors import FloorlessError

MAGIC = b"flboard1"
SLOTS = 4096
_HEADER = struct.Struct("<8sQ")  # the magic, then how many notices were ever posted
_NOTICE = struct.Struct("<QqB7x")  # the poster's node, a repository's id, an event's code
SIZE = _HEADER.size + SLOTS * _NOTICE.size
POST_WAIT = 2.0  # seconds a post waits for the board another process holds
READ_WAIT = 0.05  # ... and a reading (on a request's way in)
Notice = tuple[int, int, int]  # node, repository id, event code


def board_of(database: Path) -> Path:
    """The board of the processes sharing the SQLite file ``database``: beside it, as SQLite
    puts its own files (beside the file a link leads to)."""
    real = Path(os.path.realpath(database))
    return real.with_name(real.name + "-board")


class Board:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            status = os.fstat(self._fd)
            if status.st_uid != os.geteuid() or status.st_mode & 0o022:
                raise FloorlessError(
                    f"{path}: the processes' notice board belongs to another user or others may "
                    "write to it; remove it (only floorless's own user may post notices)"
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

    def current(self) -> bool:
        """Whether the file at the board's path is still the one mapped here."""
        try:
            there = os.stat(self.path)
        except OSError:
            return False
        here = os.fstat(self._fd)
        return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)

    def post(self, node: int, repo_id: int, event: int) -> None:
        """Post a notice; raises TimeoutError when another process has held the board for
        ``POST_WAIT`` seconds (stopped while posting): the notice is lost, not the push."""
        self._take(fcntl.LOCK_EX, POST_WAIT)
        try:
            posted = self.count()
            _NOTICE.pack_into(self._map, _slot(posted), node, repo_id, event)
            _HEADER.pack_into(self._map, 0, MAGIC, posted + 1)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def since(self, seen: int) -> tuple[list[Notice], int, bool]:
        """The notices posted after the first ``seen``, how many there are now, and whether
        some were lost to the ring (more than ``SLOTS`` since). Raises TimeoutError when
        another process holds the board for ``READ_WAIT`` seconds: a request waits no longer."""
        self._take(fcntl.LOCK_SH, READ_WAIT)
        try:
            posted = self.count()
            if posted < seen or posted - seen > SLOTS:  # overwritten, or a board made anew
                return [], posted, True
            notices = [_NOTICE.unpack_from(self._map, _slot(n)) for n in range(seen, posted)]
            return notices, posted, False
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _take(self, kind: int, wait: float) -> None:
        """The board's ``flock`` of ``kind``, waited for at most ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self._fd, kind | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.path}: held by another process") from None
                time.sleep(0.002)

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _slot(number: int) -> int:
    return _HEADER.size + (number % SLOTS) * _NOTICE.size


def node_number(node: str) -> int:
    """A node's name as the board's 64 bits."""
    return int.from_bytes(hashlib.blake2b(node.encode(), digest_size=8).digest(), "little")
