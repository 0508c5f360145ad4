"""Commit statuses: what CI and other programs say about a commit (pending, success, error,
failure, warning), each under a context of theirs ("ci/build"), as Forgejo keeps them.

A status is never changed: a newer one of the same context takes its place, and the one that
counts is the latest of each context. A commit's combined state is the worst of those
(error, then failure, warning, pending, success, as Forgejo ranks them). Pages read the
latest statuses of all the commits they show in one statement (``latest_of``), never one
per commit; what keeps a cached page that shows them right is ``stamp``.

Statuses are kept by the repository's owner and name, as issues are (``repos.py`` moves them
with a rename and drops them with the repository), and by the commit's full hex id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, FloorlessError
from floorless.db import Database, Row
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)

# Forgejo's states, the worst first: a combination is as bad as its worst part.
STATES = ("error", "failure", "warning", "pending", "success")
_RANK = {state: rank for rank, state in enumerate(STATES)}
CONTEXT_MAX = 255
DESCRIPTION_MAX = 1000
TARGET_MAX = 2048
# Forgejo's ``sort`` of a list of statuses (its names, inverted as they are there for the two
# about the index), and its default: newest first.
_T = "commit_statuses."
SORTS = {
    "oldest": f"{_T}created_at ASC, {_T}id ASC",
    "recentupdate": f"{_T}updated_at DESC, {_T}id DESC",
    "leastupdate": f"{_T}updated_at ASC, {_T}id ASC",
    "leastindex": f"{_T}seq DESC",
    "highestindex": f"{_T}seq ASC",
}
NEWEST = f"{_T}created_at DESC, {_T}id DESC"
_SHA_BATCH = 500  # commit ids in one statement's IN list


@dataclass(frozen=True)
class Status:
    id: int
    sha: str
    seq: int
    state: str
    context: str
    target_url: str
    description: str
    creator: str | None  # the account's name; None once it is deleted
    created_at: float
    updated_at: float


def worst(states: Iterable[str]) -> str:
    """The combined state of ``states``: the worst of them ("" for none)."""
    found = [s for s in states if s in _RANK]
    return min(found, key=_RANK.__getitem__) if found else ""


def combined(statuses: Sequence[Status]) -> str:
    return worst(s.state for s in statuses)


def clean_target(url: str) -> str:
    """An http(s) address, or "": a page links to it, so ``javascript:`` and the like are
    refused rather than stored."""
    url = url.strip()
    if not url:
        return ""
    if len(url) > TARGET_MAX:
        raise BadRequest(f"target_url is longer than {TARGET_MAX} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BadRequest(f"target_url is not an address: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise BadRequest("target_url must be an http or https address")
    if any(ord(c) < 0x21 for c in url):
        raise BadRequest("target_url must not hold spaces or control characters")
    return url


_SELECT = (
    "SELECT commit_statuses.*, accounts.name AS creator FROM commit_statuses"
    " LEFT JOIN accounts ON accounts.id = commit_statuses.creator_id"
)


def _status(row: Row) -> Status:
    return Status(
        id=int(row["id"]),
        sha=row["sha"],
        seq=int(row["seq"]),
        state=row["state"],
        context=row["context"],
        target_url=row["target_url"],
        description=row["description"],
        creator=row["creator"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


class Statuses:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._posted: dict[tuple[str, str], int] = {}  # statuses posted here, by repository
        # by repository: whether it has any status, at the table's version then (``any``)
        self._any: dict[tuple[str, str], tuple[int, bool]] = {}
        self._lock = threading.Lock()
        # Called with (repository, status) once a status is recorded (committed): scheduled
        # merges waiting for it are tried from here (``automerge.py``); each only queues.
        self.on_posted: list[Callable[[Repo, Status], None]] = []

    def version(self, repo: Repo) -> tuple[object, ...]:
        """What a cached page that shows ``repo``'s statuses is kept with: it changes with
        every status posted. On SQLite every process counts them per repository, its own and
        those the others tell on the board (``heard``); on PostgreSQL, while every node's
        writes to the table are heard (``Database.coherent``), the table's version (any
        repository's new status changes it); when they may not be, the repository's newest
        status, read (one statement)."""
        key = (repo.owner, repo.name)
        if self.db.dialect == "sqlite":
            with self._lock:
                return ("posted", self._posted.get(key, 0))
        if self.db.coherent():
            return ("heard", self.db.version("commit_statuses"))
        return ("newest", self.stamp(repo))

    def heard(self, repo: Repo) -> None:
        """A status of ``repo`` was posted, here or by another process sharing the SQLite
        database (its ``statuses`` notice): what was kept of the repository's statuses goes."""
        with self._lock:
            key = (repo.owner, repo.name)
            self._posted[key] = self._posted.get(key, 0) + 1
        self.db.changed(("commit_statuses",))

    def post(
        self,
        repo: Repo,
        sha: str,
        state: str,
        context: str,
        target_url: str,
        description: str,
        creator: Account | None,
    ) -> Status:
        """Record a status of the commit ``sha`` (full hex, known to be the repository's:
        the caller checked) and return it; ``BadRequest`` for a state, address or text that
        cannot be stored, before anything is written."""
        if state not in _RANK:
            raise BadRequest(f"state must be one of {', '.join(STATES)}")
        target = clean_target(target_url)
        if len(context) > CONTEXT_MAX:
            raise BadRequest(f"context is longer than {CONTEXT_MAX} characters")
        description = description[:DESCRIPTION_MAX]
        now = time.time()
        with self.db.transaction():
            top = self.db.one(
                "SELECT MAX(seq) AS top FROM commit_statuses"
                " WHERE owner = ? AND name = ? AND sha = ?",
                (repo.owner, repo.name, sha),
            )
            seq = int(top["top"] or 0) + 1 if top is not None else 1
            row = self.db.one(
                "INSERT INTO commit_statuses (owner, name, sha, seq, state, context, target_url,"
                " description, creator_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    repo.owner,
                    repo.name,
                    sha,
                    seq,
                    state,
                    context,
                    target,
                    description,
                    None if creator is None else creator.id,
                    now,
                    now,
                ),
            )
        assert row is not None
        self.heard(repo)
        status = Status(
            int(row["id"]),
            sha,
            seq,
            state,
            context,
            target,
            description,
            None if creator is None else creator.name,
            now,
            now,
        )
        for listener in self.on_posted:
            try:
                listener(repo, status)
            except FloorlessError as exc:  # the status is recorded: a listener's failure is logged
                log.warning("%s: after a status of %s: %s", repo.full_name, sha[:12], exc)
        return status

    def page(
        self, repo: Repo, sha: str, sort: str, state: str, offset: int, limit: int
    ) -> tuple[list[Status], int]:
        """Every status of ``sha`` (of ``state`` alone, when given), a page of them in
        Forgejo's ``sort``, and how many there are."""
        where = f"{_T}owner = ? AND {_T}name = ? AND {_T}sha = ?"
        params: list[object] = [repo.owner, repo.name, sha]
        if state:
            where += f" AND {_T}state = ?"
            params.append(state)
        order = SORTS.get(sort, NEWEST)
        rows = self.db.query(
            f"{_SELECT} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        total = self.db.one(
            f"SELECT COUNT(*) AS n FROM commit_statuses WHERE {where}",  # noqa: S608
            params,
        )
        return [_status(r) for r in rows], int(total["n"]) if total is not None else 0

    def latest(self, repo: Repo, sha: str) -> list[Status]:
        """The latest status of each context of ``sha``, by context."""
        return self.latest_of(repo, [sha]).get(sha, [])

    def latest_of(self, repo: Repo, shas: Iterable[str]) -> dict[str, list[Status]]:
        """The latest status of each context of each of ``shas``, by commit then context:
        one statement for a page of commits (a few for thousands), none for a repository
        that has no status at all (``any``)."""
        if not self.any(repo):
            return {}
        wanted = sorted(set(shas))
        found: dict[str, list[Status]] = {}
        for start in range(0, len(wanted), _SHA_BATCH):
            batch = wanted[start : start + _SHA_BATCH]
            marks = ", ".join("?" for _ in batch)
            rows = self.db.query(
                f"{_SELECT} WHERE commit_statuses.id IN ("  # noqa: S608
                " SELECT MAX(id) FROM commit_statuses"
                f" WHERE owner = ? AND name = ? AND sha IN ({marks}) GROUP BY sha, context"
                ") ORDER BY commit_statuses.context, commit_statuses.id",
                [repo.owner, repo.name, *batch],
            )
            for row in rows:
                status = _status(row)
                found.setdefault(status.sha, []).append(status)
        return found

    def any(self, repo: Repo) -> bool:
        """Whether ``repo`` has any status, known without a statement while no status was
        written since it was last asked (the table's version: on SQLite moved by this process's
        writes and the others' notices; on PostgreSQL while every node's writes are heard), so
        the pages of a repository no CI reports to ask nothing more. True when that cannot be
        known."""
        if self.db.dialect != "sqlite" and not self.db.coherent():
            return True
        version = self.db.version("commit_statuses")  # before the statement: a write
        key = (repo.owner, repo.name)  # meanwhile leaves the answer outdated, asked again
        with self._lock:
            known = self._any.get(key)
        if known is not None and known[0] == version:
            return known[1]
        found = self.stamp(repo) > 0
        with self._lock:
            self._any[key] = (version, found)
        return found

    def stamp(self, repo: Repo) -> int:
        """The id of the repository's newest status (0 for none): it changes with every
        status posted, so a page kept with it shows them all."""
        row = self.db.one(
            "SELECT MAX(id) AS top FROM commit_statuses WHERE owner = ? AND name = ?",
            (repo.owner, repo.name),
        )
        return int(row["top"] or 0) if row is not None else 0
