"""Git LFS file locks (``git lfs lock``): one lock per path of a repository, held by the
person who took it until they or, with ``force``, an administrator of the repository let it
go. A lock does not stop a push here (as on Forgejo): ``git lfs`` itself refuses to push a
change to a file someone else locked, from the ``verify`` answer's ``theirs``."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass

from floorless.core.errors import BadRequest, Conflict, Forbidden, NotFound
from floorless.db import Database, IntegrityError, Row

MAX_PATH = 4096  # bytes
MAX_PAGE = 100  # locks one list answer holds
NOT_A_PATH = "a lock's path is a file's path in the repository"


@dataclass(frozen=True)
class Lock:
    id: int
    repo_id: int
    owner_id: int
    owner: str  # the account's name
    path: str
    created_at: float


def clean_path(path: object) -> str:
    """A lock's path as the repository names it: relative, with ``/`` between parts, no
    ``.`` or ``..`` parts; BadRequest for anything that cannot be one (NUL, a lone surrogate
    as JSON's ``"\\ud800"`` gives, which no database takes)."""
    encoded = path.encode("utf-8", "replace") if isinstance(path, str) else b""
    if not isinstance(path, str) or "\0" in path or len(encoded) > MAX_PATH:
        raise BadRequest(NOT_A_PATH)
    if encoded.decode() != path:
        raise BadRequest(NOT_A_PATH)
    slashed = path.replace("\\", "/")
    cleaned = posixpath.normpath("/" + slashed).lstrip("/")
    if not cleaned or ".." in slashed.split("/"):
        raise BadRequest(NOT_A_PATH)
    return cleaned


_SELECT = (
    "SELECT l.id, l.repo_id, l.owner_id, l.path, l.created_at, a.name AS owner"
    " FROM lfs_locks l JOIN accounts a ON a.id = l.owner_id"
)


class Locks:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, repo_id: int, owner_id: int, path: object) -> Lock:
        """Lock ``path`` for ``owner_id``; Conflict (with the lock that holds it) when it is
        locked already."""
        cleaned = clean_path(path)
        try:
            self.db.execute(
                "INSERT INTO lfs_locks (repo_id, owner_id, path, created_at) VALUES (?, ?, ?, ?)",
                (repo_id, owner_id, cleaned, time.time()),
            )
        except IntegrityError:
            raise Held(self.by_path(repo_id, cleaned)) from None
        made = self.by_path(repo_id, cleaned)
        assert made is not None
        return made

    def by_path(self, repo_id: int, path: str) -> Lock | None:
        row = self.db.one(_SELECT + " WHERE l.repo_id = ? AND l.path = ?", (repo_id, path))
        return _lock(row) if row is not None else None

    def by_id(self, repo_id: int, lock_id: int) -> Lock | None:
        row = self.db.one(_SELECT + " WHERE l.repo_id = ? AND l.id = ?", (repo_id, lock_id))
        return _lock(row) if row is not None else None

    def list(
        self,
        repo_id: int,
        *,
        path: str | None = None,
        lock_id: int | None = None,
        after: int = 0,
        limit: int = MAX_PAGE,
    ) -> tuple[list[Lock], int | None]:
        """A page of the repository's locks in the order they were taken, from the one after
        the id ``after``; and the cursor of the next page (None when this is the last)."""
        where: list[str] = ["l.repo_id = ?", "l.id > ?"]
        params: list[object] = [repo_id, after]
        if path is not None:
            where.append("l.path = ?")
            params.append(clean_path(path))
        if lock_id is not None:
            where.append("l.id = ?")
            params.append(lock_id)
        limit = max(1, min(limit, MAX_PAGE))
        rows = self.db.query(
            _SELECT + " WHERE " + " AND ".join(where) + " ORDER BY l.id LIMIT ?",
            (*params, limit + 1),
        )
        found = [_lock(r) for r in rows[:limit]]
        return found, (found[-1].id if len(rows) > limit else None)

    def unlock(self, lock: Lock, by_id: int, *, force: bool, may_force: bool) -> None:
        """Let go of ``lock``: its owner may, anyone else only with ``force`` and the right
        to (an administrator of the repository)."""
        if lock.owner_id != by_id:
            if not force:
                raise Forbidden("the lock is someone else's: only its owner may unlock it")
            if not may_force:
                raise Forbidden("only the repository's administrators may force an unlock")
        if not self.db.execute("DELETE FROM lfs_locks WHERE id = ?", (lock.id,)):
            raise NotFound("no such lock")


class Held(Conflict):
    """The path is locked already, by ``lock``."""

    def __init__(self, lock: Lock | None) -> None:
        super().__init__("the file is locked already")
        self.lock = lock


def _lock(row: Row) -> Lock:
    return Lock(
        id=int(row["id"]),
        repo_id=int(row["repo_id"]),
        owner_id=int(row["owner_id"]),
        owner=row["owner"],
        path=row["path"],
        created_at=float(row["created_at"]),
    )
