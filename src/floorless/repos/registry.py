"""The repository list: found by scanning the repositories directory, kept in the database.

Pages never scan directories: they look a repository up by owner and name in the database.
A scan runs at start, every ``rescan_interval`` seconds in the background, and on
``floorless admin rescan``. A scan drops a repository's row, index and answers only when the
repository is positively gone: missing in ``MISSING_SCANS`` scans in a row. A directory a
scan cannot read keeps everything below it as it was (see ``floorless.repos.discovery``).

Creating, renaming and deleting change both the disk and the database, which cannot change
together. Each first commits who may see the repository under the name it is getting and
what it is about to do (a row of ``repo_intents``), then changes the disk, then finishes in
the database. A directory never appears or moves before its visibility is recorded, so no
crash point leaves a private repository readable; ``recover`` rolls an operation a crash
interrupted forward (its directory moved) or back (it did not) when the forge starts.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.db import Database, Row
from floorless.repos import intents
from floorless.repos.discovery import RESERVED as RESERVED
from floorless.repos.discovery import Discovery, discover, exists, read_description
from floorless.repos.discovery import valid_name as valid_name
from floorless.repos.intents import Intent

log = logging.getLogger(__name__)

# A repository that scans no longer find is dropped once this many scans in a row saw it
# missing: a network share remounting for a moment must not cost its ids and indexes.
MISSING_SCANS = 2
# Every read of a repository row carries its visibility, kept apart in ``repo_access``.
# What a repository's row is read from (and, remembered, forgotten when either changes), and
# what a list of them is, filtered by the access policy's ``visible`` condition.
# What it offers besides its code (``repo_features``: issues, pull requests) comes along, so
# that every page's header knows its tabs without another statement.
_TABLES = ("repos", "repo_access", "repo_features", "forks")
# What is kept by a repository's owner and name rather than by its row: moved by a rename,
# removed by a deletion (an issue's comments and events go with it, by foreign key; the
# totals of issues follow them by trigger).
_BY_NAME = (
    "repo_access",
    "collaborators",
    "issues",
    "labels",
    "milestones",
    "repo_features",
    "forks",
    "branch_marks",
    "commit_statuses",
    "branch_protections",
)
_LISTED = (*_TABLES, "accounts", "org_members", "collaborators")
_SELECT = (
    "SELECT repos.*, COALESCE(repo_access.private, 0) AS private,"
    " COALESCE(repo_features.issues, 1) AS has_issues,"
    " COALESCE(repo_features.pulls, 1) AS has_pulls,"
    " forks.parent_owner AS parent_owner, forks.parent_name AS parent_name FROM repos"
    " LEFT JOIN repo_access"
    " ON repo_access.owner = repos.owner AND repo_access.name = repos.name"
    " LEFT JOIN repo_features"
    " ON repo_features.owner = repos.owner AND repo_features.name = repos.name"
    " LEFT JOIN forks ON forks.owner = repos.owner AND forks.name = repos.name"
)


@dataclass(frozen=True)
class Repo:
    id: int
    owner: str
    name: str
    path: Path  # the git directory
    bare: bool
    description: str
    updated_at: float | None
    private: bool = False
    has_issues: bool = True  # issues are on (the repository's settings)
    has_pulls: bool = True  # and pull requests
    parent: tuple[str, str] | None = None  # (owner, name) of what it was forked from
    website: str = ""  # an http(s) URL, shown in the about panel
    topics: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def directory(self) -> Path:
        """What a create, rename or delete moves: the git directory, or the checkout."""
        return self.path if self.bare else self.path.parent


@dataclass(frozen=True)
class ScanResult:
    added: int
    removed: int
    # missing in this scan, kept until enough scans in a row have seen them missing
    missing: int = 0
    # directories this scan could not read, and why: what lies below them was kept as it was
    unreadable: tuple[tuple[Path, str], ...] = ()


class Registry:
    """Repository rows in the database."""

    def __init__(
        self, db: Database, root: Path, default_owner: str, adopt_private: bool = False
    ) -> None:
        self.db = db
        self.root = root
        self.default_owner = default_owner
        # whether a directory found by a scan, with no recorded visibility, starts private
        self.adopt_private = adopt_private
        # A scan and a create, rename or delete in this process do not interleave.
        self.lock = threading.RLock()
        self.incomplete_scans = 0  # scans that could not read every directory

    # -- scanning -----------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        """Bring the database in line with the directory."""
        with self.lock:
            result = self._scan()
        if result.unreadable:
            self.incomplete_scans += 1
        for path, why in result.unreadable:
            log.warning(
                "scan: cannot read %s (%s); what lies below it is kept as it was until a scan"
                " can read it",
                path,
                why,
            )
        return result

    def _scan(self) -> ScanResult:
        now = time.time()
        found = discover(self.root, self.default_owner)
        # The rest of the slow part, on the storage, before the database is locked for writing:
        # the descriptions, and which repositories no longer found are positively missing.
        descriptions = {str(git_dir): read_description(git_dir) for *_, git_dir, _ in found.repos}
        gone = {
            row["path"]
            for row in self.db.query("SELECT path FROM repos")
            if row["path"] not in descriptions and self._seen_missing(Path(row["path"]), found)
        }
        added = removed = missing = 0
        with self.db.transaction():  # the rows as they are now
            rows = self.db.query("SELECT id, path, owner, name FROM repos")
            known = {r["path"]: int(r["id"]) for r in rows}
            taken = {(r["owner"], r["name"]): r["path"] for r in rows}
            misses = {
                int(row["repo_id"]): int(row["scans"])
                for row in self.db.query("SELECT repo_id, scans FROM repo_missing")
            }
            for path, description in descriptions.items():
                repo_id = known.get(path)
                if repo_id is not None:
                    self.db.execute(
                        "UPDATE repos SET seen_at = ?, description = COALESCE(?, description)"
                        " WHERE id = ?",
                        (now, description, repo_id),
                    )
                    if repo_id in misses:
                        self.db.execute("DELETE FROM repo_missing WHERE repo_id = ?", (repo_id,))
            for path, repo_id in known.items():
                if path in descriptions:
                    continue
                if path not in gone:
                    # not seen, not seen missing: the count of scans in a row starts again
                    if repo_id in misses:
                        self.db.execute("DELETE FROM repo_missing WHERE repo_id = ?", (repo_id,))
                    continue
                scans = misses.get(repo_id, 0) + 1
                if scans >= MISSING_SCANS:
                    self._drop_row(repo_id)
                    taken = {key: p for key, p in taken.items() if p != path}
                    removed += 1
                else:
                    self.db.execute(
                        "INSERT INTO repo_missing (repo_id, scans) VALUES (?, ?)"
                        " ON CONFLICT (repo_id) DO UPDATE SET scans = excluded.scans",
                        (repo_id, scans),
                    )
                    missing += 1
            for owner, name, git_dir, bare in found.repos:
                if str(git_dir) in known:
                    continue
                if (owner, name) in taken:
                    continue  # its name's repository elsewhere is not known to be gone yet
                self._adopt(owner, name, git_dir, bare, descriptions[str(git_dir)], now)
                taken[(owner, name)] = str(git_dir)
                added += 1
        return ScanResult(added, removed, missing, tuple(found.unreadable.items()))

    def _seen_missing(self, git_dir: Path, found: Discovery) -> bool:
        """Whether a repository the scan did not find is positively missing, rather than in (or
        outside the repositories directory, behind) a directory the scan could not read."""
        inside = git_dir == self.root or self.root in git_dir.parents
        if found.unknown(git_dir) or (found.unreadable and not inside):
            return False
        try:
            exists(git_dir)  # there or not, it is not a repository where the scan looks
        except OSError:
            return False
        return True

    def _adopt(
        self, owner: str, name: str, git_dir: Path, bare: bool, description: str | None, now: float
    ) -> None:
        """A repository new to the database: who may see it is what ``repo_access`` says of
        its name (written by a create or rename before its directory appeared, or left by a
        repository of that name), and otherwise the adoption policy."""
        if self.adopt_private:
            self.db.execute(
                "INSERT INTO repo_access (owner, name, private) VALUES (?, ?, 1)"
                " ON CONFLICT (owner, name) DO NOTHING",
                (owner, name),
            )
        self._insert(owner, name, git_dir, bare, description or "", now)

    def _insert(
        self, owner: str, name: str, git_dir: Path, bare: bool, description: str, now: float
    ) -> None:
        """A new repository row, with an id never given before: whatever was stored under an
        old repository's id can never be taken for the new one's."""
        row = self.db.one(
            "SELECT (SELECT MAX(id) FROM repos) AS used,"
            " (SELECT value FROM meta WHERE key = 'repo_id_high') AS given"
        )
        repo_id = 1 + max(int(row["used"] or 0), int(row["given"] or 0)) if row else 1
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES ('repo_id_high', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(repo_id),),
        )
        self.db.execute(
            "INSERT INTO repos (id, owner, name, path, bare, description, seen_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (repo_id, owner, name, str(git_dir), int(bare), description, now),
        )

    def _drop_row(self, repo_id: int) -> None:
        """Remove a repository's row and everything indexed under it (visibility and
        collaborators and issues stay with the name: a repository back after a moment is as it
        was)."""
        for table in ("index_chunks", "index_changes", "answers", "repo_missing", "search_repos"):
            self.db.execute(f"DELETE FROM {table} WHERE repo_id = ?", (repo_id,))  # noqa: S608
        self.db.execute("DELETE FROM repos WHERE id = ?", (repo_id,))

    # -- reading ------------------------------------------------------------------------------

    def get(self, owner: str, name: str) -> Repo:
        name = name.removesuffix(".git")
        rows = self.db.remembered(
            f"{_SELECT} WHERE repos.owner = ? AND repos.name = ?", (owner, name), _TABLES
        )
        if not rows:
            raise NotFound(f"no repository {owner}/{name}")
        return _repo(rows[0])

    def by_id(self, repo_id: int) -> Repo | None:
        rows = self.db.remembered(f"{_SELECT} WHERE repos.id = ?", (repo_id,), _TABLES)
        return _repo(rows[0]) if rows else None

    def readable(
        self, visible: tuple[str, list[object]], ids: list[int] | None = None
    ) -> list[Repo]:
        """The repositories that pass ``visible`` (the access policy's condition), by name;
        only those of ``ids`` when given (code search across repositories)."""
        clause, params = visible
        if ids is not None:
            if not ids:
                return []
            clause += f" AND id IN ({', '.join('?' * len(ids))})"
            params = [*params, *ids]
        rows = self.db.query(
            f"SELECT * FROM ({_SELECT}) AS repos WHERE {clause} ORDER BY owner, name",  # noqa: S608
            params,
        )
        return [_repo(r) for r in rows]

    def owner_exists(self, owner: str, visible: tuple[str, list[object]] = ("1 = 1", [])) -> bool:
        """Whether ``owner`` is an account or owns a repository that passes ``visible``."""
        clause, params = visible
        repos = f"SELECT 1 FROM ({_SELECT}) AS repos WHERE owner = ? AND {clause}"  # noqa: S608
        sql = f"SELECT EXISTS (SELECT 1 FROM accounts WHERE name = ?) OR EXISTS ({repos}) AS found"  # noqa: S608
        rows = self.db.remembered(sql, [owner, owner, *params], _LISTED)
        return bool(rows[0]["found"])

    def listing(
        self,
        query: str = "",
        owner: str | None = None,
        sort: str = "recent",
        offset: int = 0,
        limit: int = 30,
        visible: tuple[str, list[object]] = ("1 = 1", []),
        parent: tuple[str, str] | None = None,
    ) -> tuple[list[Repo], int]:
        """One page of repositories matching ``query`` in their name and the ``visible``
        condition (the access policy's), and how many match; ``parent``: only its forks."""
        where = ["(lower(name) LIKE ? ESCAPE '\\' OR lower(owner) LIKE ? ESCAPE '\\')", visible[0]]
        escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = "%" + escaped + "%"
        params: list[object] = [like, like, *visible[1]]
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if parent is not None:
            where.append("parent_owner = ? AND parent_name = ?")
            params += [*parent]
        order = {
            "name": "owner, name",
            "recent": "updated_at IS NULL, updated_at DESC, owner, name",
            "oldest": "updated_at IS NULL, updated_at ASC, owner, name",
        }.get(sort, "owner, name")
        clause = " AND ".join(where)
        source = f"({_SELECT}) AS repos"
        rows = self.db.remembered(
            f"SELECT *, COUNT(*) OVER () AS listed FROM {source} WHERE {clause}"  # noqa: S608
            f" ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, limit, offset],
            _LISTED,
        )
        if rows:
            return [_repo(r) for r in rows], int(rows[0]["listed"])
        if offset == 0:
            return [], 0
        count = f"SELECT COUNT(*) AS n FROM {source} WHERE {clause}"  # noqa: S608
        total = self.db.remembered(count, params, _LISTED)  # a page past the end: how many
        return [], int(total[0]["n"])

    def all(self) -> list[Repo]:
        return [_repo(r) for r in self.db.query(f"{_SELECT} ORDER BY repos.id")]

    # -- changes made through floorless -------------------------------------------------------

    def create(self, owner: str, name: str, private: bool = False, description: str = "") -> Repo:
        """A new, empty bare repository at ``<repos>/OWNER/NAME.git``."""
        check_name(name)
        description = _clean_description(description)
        with self.lock:
            path = self.root / owner / f"{name}.git"
            if self._taken(owner, name) or exists(path):
                raise Conflict(f"{owner}/{name} already exists")
            intent = self._intend(
                "create", owner, name, target=path, private=private, description=description
            )
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.mkdir()  # not exist_ok: a directory someone else just made is not ours
            except OSError as exc:
                self._back(intent)
                if isinstance(exc, FileExistsError):
                    raise Conflict(f"{owner}/{name} already exists") from exc
                raise
            try:
                intents.initialise(path, description)
            except (OSError, pygit2.GitError):
                shutil.rmtree(path, ignore_errors=True)
                if not exists(path):
                    self._back(intent)
                raise  # what is left stays private, and the next start finishes or undoes it
            self._forward(intent)
        return self.get(owner, name)

    def rename(self, repo: Repo, new_name: str) -> Repo:
        """Give ``repo`` a new name within its owner, on disk and in every table.

        The new name is given the repository's visibility before the directory moves: if
        the move fails, or the process dies, the repository is under one of its names,
        as visible as it was.
        """
        check_name(new_name)
        if new_name == repo.name:
            return repo
        with self.lock:
            if self._taken(repo.owner, new_name, besides=repo.id):
                raise Conflict(f"{repo.owner}/{new_name} already exists")
            target = _renamed_path(repo, new_name)
            if exists(target) and not _same_file(target, repo):
                raise Conflict(f"{target.name} already exists in the repositories directory")
            old_dir = repo.directory
            intent = self._intend(
                "rename",
                repo.owner,
                new_name,
                repo_id=repo.id,
                old_name=repo.name,
                source=old_dir,
                target=target,
                bare=repo.bare,
                private=repo.private,
            )
            self._carry_out(intent, lambda: old_dir.rename(target))
        return self.get(repo.owner, new_name)

    def delete(self, repo: Repo) -> None:
        """Remove ``repo``: its directory, its row, who may see it."""
        with self.lock:
            directory = repo.directory
            # Moved aside first (a hidden name no scan reads), so that no scan in the meantime
            # finds half a repository.
            trash = directory.with_name(f".deleting-{directory.name}-{time.time_ns()}")
            intent = self._intend(
                "delete",
                repo.owner,
                repo.name,
                repo_id=repo.id,
                source=directory,
                target=trash,
                bare=repo.bare,
                private=repo.private,
            )
            self._carry_out(intent, lambda: directory.rename(trash))

    def recover(self) -> int:
        """Roll every create, rename and delete a crash interrupted forward (its directory
        moved or appeared) or back (it did not); return how many were settled. Run at start,
        before the first scan; one the storage cannot tell about waits for the next start."""
        settled = 0
        with self.lock:
            for intent in intents.pending(self.db):
                try:
                    if intent.moved():
                        if intent.action == "create":  # complete what a crash left half made
                            intents.initialise(Path(intent.target), intent.description)
                        self._forward(intent)
                    else:
                        self._back(intent)
                except (OSError, pygit2.GitError) as exc:
                    log.warning(
                        "cannot settle the interrupted %s of %s/%s now (%s); trying again at"
                        " the next start",
                        intent.action,
                        intent.owner,
                        intent.name,
                        exc,
                    )
                    continue
                log.info(
                    "settled the interrupted %s of %s/%s", intent.action, intent.owner, intent.name
                )
                settled += 1
        return settled

    def _intend(
        self,
        action: str,
        owner: str,
        name: str,
        *,
        target: Path,
        private: bool,
        repo_id: int | None = None,
        old_name: str = "",
        source: Path | None = None,
        bare: bool = True,
        description: str = "",
    ) -> Intent:
        """Commit what is about to happen, and (but for a deletion) who may see the repository
        under the name it is getting: the directory does not exist there yet, so no one's
        access from an old repository of that name carries over."""
        with self.db.transaction():
            if action != "delete":
                self._clear_access(owner, name)
                self.set_private(owner, name, private)
            return intents.record(
                self.db,
                action,
                owner,
                name,
                repo_id=repo_id,
                old_name=old_name,
                source="" if source is None else str(source),
                target=str(target),
                bare=bare,
                private=private,
                description=description,
            )

    def _carry_out(self, intent: Intent, step: Callable[[], object]) -> None:
        """Move ``intent``'s directory, then finish it if the disk shows the move done (even
        when the move reported an error: over a network it can have happened), or roll it back
        and raise the move's error if not."""
        error: OSError | None = None
        try:
            step()
        except OSError as exc:
            error = exc
        if error is not None and not intent.moved():  # cannot tell: left to the next start
            self._back(intent)
            raise error
        self._forward(intent)

    def _forward(self, intent: Intent) -> None:
        """Finish ``intent`` in the database, its directory being where it was going."""
        with self.db.transaction():
            if intent.action == "create":
                self._finish_create(intent)
            elif intent.action == "rename":
                self._finish_rename(intent)
            else:
                self._finish_delete(intent)
            if intent.action != "delete":
                intents.done(self.db, intent)
        if intent.action == "delete":
            trash = Path(intent.target)
            try:
                if exists(trash):
                    shutil.rmtree(trash)
            except OSError as exc:  # hidden from every scan; removed at the next start
                log.warning("%s: cannot remove it now: %s", trash, exc)
                return
            with self.db.transaction():
                intents.done(self.db, intent)

    def _back(self, intent: Intent) -> None:
        """Forget ``intent``, whose directory never moved. A public visibility it recorded for
        a name no repository has is dropped too (a directory appearing there later is then
        adopted by the policy); a private one stays, as the safe side of a race with a
        process still carrying the operation out."""
        with self.db.transaction():
            if intent.action != "delete":
                self.db.execute(
                    "DELETE FROM repo_access WHERE owner = ? AND name = ? AND private = 0"
                    " AND NOT EXISTS (SELECT 1 FROM repos WHERE owner = ? AND name = ?)",
                    (intent.owner, intent.name, intent.owner, intent.name),
                )
            intents.done(self.db, intent)

    def _finish_create(self, intent: Intent) -> None:
        git_dir = intent.git_dir
        if self.db.one("SELECT 1 FROM repos WHERE path = ?", (str(git_dir),)) is not None:
            return  # a scan found it first, with the visibility recorded for it
        if self._taken(intent.owner, intent.name):
            log.warning("%s: its name was taken meanwhile; it is not served", git_dir)
            return
        self._insert(intent.owner, intent.name, git_dir, True, intent.description, time.time())

    def _finish_rename(self, intent: Intent) -> None:
        owner, name, old_name = intent.owner, intent.name, intent.old_name
        git_dir = intent.git_dir
        if self.by_id(intent.repo_id or 0) is not None:
            # a scan in between may have found the moved directory: one repository, one row
            for other in self.db.query(
                "SELECT id FROM repos WHERE id != ? AND (path = ? OR (owner = ? AND name = ?))",
                (intent.repo_id, str(git_dir), owner, name),
            ):
                self._drop_row(int(other["id"]))
            self.db.execute(
                "UPDATE repos SET name = ?, path = ? WHERE id = ?",
                (name, str(git_dir), intent.repo_id),
            )
            self.db.execute("DELETE FROM repo_missing WHERE repo_id = ?", (intent.repo_id,))
        for table in _BY_NAME:
            moving = self.db.one(
                f"SELECT 1 FROM {table} WHERE owner = ? AND name = ?",  # noqa: S608
                (owner, old_name),
            )
            if moving is None:
                continue  # moved already (finishing twice is finishing once)
            self.db.execute(
                f"DELETE FROM {table} WHERE owner = ? AND name = ?",  # noqa: S608
                (owner, name),
            )
            self.db.execute(
                f"UPDATE {table} SET name = ? WHERE owner = ? AND name = ?",  # noqa: S608
                (name, owner, old_name),
            )
        # what names the repository from elsewhere: its forks, pull requests from it
        self.db.execute(
            "UPDATE forks SET parent_name = ? WHERE parent_owner = ? AND parent_name = ?",
            (name, owner, old_name),
        )
        self.db.execute(
            "UPDATE pulls SET head_name = ? WHERE head_owner = ? AND head_name = ?",
            (name, owner, old_name),
        )

    def _finish_delete(self, intent: Intent) -> None:
        if intent.repo_id is not None:
            self._drop_row(intent.repo_id)
        others = self.db.one(
            "SELECT 1 FROM repos WHERE owner = ? AND name = ?", (intent.owner, intent.name)
        )
        if others is None:
            self._clear_access(intent.owner, intent.name)

    def set_private(self, owner: str, name: str, private: bool) -> None:
        self.db.execute(
            "INSERT INTO repo_access (owner, name, private) VALUES (?, ?, ?)"
            " ON CONFLICT (owner, name) DO UPDATE SET private = excluded.private",
            (owner, name, int(private)),
        )

    def set_description(self, repo: Repo, description: str) -> None:
        description = _clean_description(description)
        (repo.path / "description").write_text(description + "\n" if description else "")
        self.db.execute("UPDATE repos SET description = ? WHERE id = ?", (description, repo.id))

    def set_about(self, repo: Repo, website: str, topics: str) -> None:
        """The about panel's website (an http or https URL, or nothing) and topics (words of
        lower-case letters, digits and ``-``, separated by spaces or commas)."""
        website = website.strip()
        if website and (len(website) > 300 or not _WEBSITE.fullmatch(website)):
            raise BadRequest("the website is an http:// or https:// address (300 characters)")
        words = topics.replace(",", " ").lower().split()
        if len(words) > MAX_TOPICS or not all(_TOPIC.fullmatch(w) for w in words):
            raise BadRequest(
                f"topics are at most {MAX_TOPICS} words of letters, digits and '-' (35 each)"
            )
        unique = " ".join(dict.fromkeys(words))
        self.db.execute(
            "UPDATE repos SET website = ?, topics = ? WHERE id = ?", (website, unique, repo.id)
        )

    def _taken(self, owner: str, name: str, besides: int | None = None) -> bool:
        sql = "SELECT 1 FROM repos WHERE owner = ? AND lower(name) = lower(?)"
        params: list[object] = [owner, name]
        if besides is not None:
            sql += " AND id <> ?"
            params.append(besides)
        row = self.db.one(sql, params)
        return row is not None

    def _clear_access(self, owner: str, name: str) -> None:
        for table in _BY_NAME:
            self.db.execute(
                f"DELETE FROM {table} WHERE owner = ? AND name = ?",  # noqa: S608
                (owner, name),
            )

    def set_updated(self, repo_id: int, updated_at: float | None) -> None:
        self.db.execute("UPDATE repos SET updated_at = ? WHERE id = ?", (updated_at, repo_id))


def check_name(name: str) -> None:
    if not valid_name(name):
        raise BadRequest(
            f"{name!r} is not a valid repository name: letters, digits, '.', '-' and '_',"
            " starting with a letter or digit, at most 100 characters, not ending in .git"
        )


MAX_TOPICS = 20
_TOPIC = re.compile(r"[a-z0-9][a-z0-9-]{0,34}")
_WEBSITE = re.compile(r"https?://[^\s<>\"'\x00-\x1f\x7f]+")


def _clean_description(text: str) -> str:
    return " ".join(text.split())[:500]


def _same_file(target: Path, repo: Repo) -> bool:
    """Whether ``target`` is the repository's own directory (a rename that changes only case
    on a filesystem that ignores it)."""
    directory = repo.directory
    try:
        return target.samefile(directory)
    except OSError:
        return False


def _renamed_path(repo: Repo, new_name: str) -> Path:
    directory = repo.directory
    suffix = ".git" if directory.name.endswith(".git") else ""
    return directory.with_name(new_name + suffix)


def _repo(row: Row) -> Repo:
    return Repo(
        id=row["id"],
        owner=row["owner"],
        name=row["name"],
        path=Path(row["path"]),
        bare=bool(row["bare"]),
        description=row["description"],
        updated_at=row["updated_at"],
        private=bool(row["private"]),
        has_issues=bool(row["has_issues"]),
        has_pulls=bool(row["has_pulls"]),
        parent=(row["parent_owner"], row["parent_name"]) if row["parent_owner"] else None,
        website=row["website"],
        topics=tuple(row["topics"].split()),
    )
