"""The repository list: found by scanning the repositories directory, kept in the database.

Pages never scan directories: they look a repository up by owner and name in the database.
A scan runs at start, every ``rescan_interval`` seconds in the background, and on
``floorless admin rescan``.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from floorless.db import Database
from floorless.errors import BadRequest, Conflict, NotFound

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# First path segments that belong to the forge itself, never to an owner.
RESERVED = frozenset({"-", "raw", "explore", "static", "api", "assets", "user", "login", "admin"})
_DEFAULT_DESCRIPTION = "Unnamed repository"
# Every read of a repository row carries its visibility, kept apart in ``repo_access``.
_SELECT = (
    "SELECT repos.*, COALESCE(repo_access.private, 0) AS private FROM repos"
    " LEFT JOIN repo_access"
    " ON repo_access.owner = repos.owner AND repo_access.name = repos.name"
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

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


def valid_name(name: str) -> bool:
    return bool(NAME.fullmatch(name)) and name not in RESERVED and not name.endswith(".git")


def git_dir_of(path: Path) -> tuple[Path, bool] | None:
    """The git directory of a bare repository or a checkout at ``path``, and whether it is bare."""
    try:
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            return path, True
        dotgit = path / ".git"
        if dotgit.is_dir() and (dotgit / "HEAD").is_file():
            return dotgit, False
        if dotgit.is_file():
            line = dotgit.read_text(errors="replace").strip()
            if line.startswith("gitdir:"):
                target = (path / line[len("gitdir:") :].strip()).resolve()
                if (target / "HEAD").is_file():
                    return target, False
    except OSError:
        return None
    return None


def discover(root: Path, default_owner: str) -> list[tuple[str, str, Path, bool]]:
    """Every repository below ``root``: ``(owner, name, git_dir, bare)``, first found wins."""
    found: dict[tuple[str, str], tuple[Path, bool]] = {}

    def add(owner: str, directory: Path) -> None:
        name = directory.name.removesuffix(".git")
        if not valid_name(name) or (owner, name) in found:
            return
        located = git_dir_of(directory)
        if located is not None:
            found[(owner, name)] = located

    root_repo = git_dir_of(root)
    if root_repo is not None:
        name = root.resolve().name.removesuffix(".git")
        if valid_name(name):
            found[(default_owner, name)] = root_repo
    for entry in _subdirs(root):
        if git_dir_of(entry) is not None:
            add(default_owner, entry)
            continue
        if not valid_name(entry.name):
            continue
        for sub in _subdirs(entry):
            add(entry.name, sub)
    return [(owner, name, path, bare) for (owner, name), (path, bare) in sorted(found.items())]


def _subdirs(path: Path) -> list[Path]:
    try:
        entries = sorted(path.iterdir())
    except OSError:
        return []
    return [e for e in entries if not e.name.startswith(".") and _is_dir(e)]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _description(git_dir: Path) -> str:
    try:
        text = (git_dir / "description").read_text(errors="replace").strip()
    except OSError:
        return ""
    return "" if text.startswith(_DEFAULT_DESCRIPTION) else text[:500]


class Registry:
    """Repository rows in the database."""

    def __init__(self, db: Database, root: Path, default_owner: str) -> None:
        self.db = db
        self.root = root
        self.default_owner = default_owner
        # A scan and a create, rename or delete in this process do not interleave.
        self.lock = threading.RLock()

    def scan(self) -> tuple[int, int]:
        """Bring the database in line with the directory; return (added, removed)."""
        with self.lock:
            return self._scan()

    def _scan(self) -> tuple[int, int]:
        now = time.time()
        found = discover(self.root, self.default_owner)
        known = {row["path"]: row["id"] for row in self.db.query("SELECT id, path FROM repos")}
        added = 0
        with self.db.transaction():
            for owner, name, git_dir, bare in found:
                key = str(git_dir)
                if key in known:
                    self.db.execute(
                        "UPDATE repos SET seen_at = ?, description = ? WHERE id = ?",
                        (now, _description(git_dir), known.pop(key)),
                    )
                    continue
                # A name freed by a removed repository may be taken by a new path.
                for row in self.db.query(
                    "SELECT id FROM repos WHERE owner = ? AND name = ?", (owner, name)
                ):
                    self._drop_row(row["id"])
                self._insert(owner, name, git_dir, bare, _description(git_dir), now)
                added += 1
            for repo_id in known.values():
                self._drop_row(repo_id)
        return added, len(known)

    def _insert(
        self, owner: str, name: str, git_dir: Path, bare: bool, description: str, now: float
    ) -> None:
        """A new repository row, with an id never given before: whatever was stored under an
        old repository's id can never be taken for the new one's."""
        row = self.db.one(
            "SELECT MAX(COALESCE((SELECT MAX(id) FROM repos), 0),"
            " COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'repo_id_high'), 0))"
            " + 1 AS id"
        )
        repo_id = int(row["id"]) if row else 1
        self.db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('repo_id_high', ?)", (str(repo_id),)
        )
        self.db.execute(
            "INSERT INTO repos (id, owner, name, path, bare, description, seen_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (repo_id, owner, name, str(git_dir), int(bare), description, now),
        )

    def _drop_row(self, repo_id: int) -> None:
        """Remove a repository's row and everything indexed under it (visibility and
        collaborators stay with the name: a repository back after a moment is as it was)."""
        for table in ("index_commits", "index_paths", "answers"):
            self.db.execute(f"DELETE FROM {table} WHERE repo_id = ?", (repo_id,))  # noqa: S608
        self.db.execute("DELETE FROM repos WHERE id = ?", (repo_id,))

    def get(self, owner: str, name: str) -> Repo:
        name = name.removesuffix(".git")
        row = self.db.one(f"{_SELECT} WHERE repos.owner = ? AND repos.name = ?", (owner, name))
        if row is None:
            raise NotFound(f"no repository {owner}/{name}")
        return _repo(row)

    def by_id(self, repo_id: int) -> Repo | None:
        row = self.db.one(f"{_SELECT} WHERE repos.id = ?", (repo_id,))
        return None if row is None else _repo(row)

    def owner_exists(self, owner: str, visible: tuple[str, list[object]] = ("1", [])) -> bool:
        """Whether ``owner`` is an account or owns a repository that passes ``visible``."""
        clause, params = visible
        if self.db.one("SELECT 1 FROM accounts WHERE name = ?", (owner,)) is not None:
            return True
        row = self.db.one(
            f"SELECT 1 FROM ({_SELECT}) AS repos WHERE owner = ? AND {clause} LIMIT 1",  # noqa: S608
            [owner, *params],
        )
        return row is not None

    def listing(
        self,
        query: str = "",
        owner: str | None = None,
        sort: str = "recent",
        offset: int = 0,
        limit: int = 30,
        visible: tuple[str, list[object]] = ("1", []),
    ) -> tuple[list[Repo], int]:
        """One page of repositories matching ``query`` in their name and the ``visible``
        condition (the access policy's), and how many match."""
        where = ["(name LIKE ? ESCAPE '\\' OR owner LIKE ? ESCAPE '\\')", visible[0]]
        like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        params: list[object] = [like, like, *visible[1]]
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        order = {
            "name": "owner, name",
            "recent": "updated_at IS NULL, updated_at DESC, owner, name",
            "oldest": "updated_at IS NULL, updated_at ASC, owner, name",
        }.get(sort, "owner, name")
        clause = " AND ".join(where)
        source = f"({_SELECT}) AS repos"
        total = self.db.one(f"SELECT COUNT(*) AS n FROM {source} WHERE {clause}", params)  # noqa: S608
        rows = self.db.query(
            f"SELECT * FROM {source} WHERE {clause} ORDER BY {order} LIMIT ? OFFSET ?",  # noqa: S608
            [*params, limit, offset],
        )
        return [_repo(r) for r in rows], int(total["n"]) if total else 0

    def all(self) -> list[Repo]:
        return [_repo(r) for r in self.db.query(f"{_SELECT} ORDER BY repos.id")]

    # -- changes made through floorless -------------------------------------------------------

    def create(self, owner: str, name: str, private: bool = False, description: str = "") -> Repo:
        """A new, empty bare repository at ``<repos>/OWNER/NAME.git``."""
        check_name(name)
        description = _clean_description(description)
        with self.lock:
            path = self.root / owner / f"{name}.git"
            if self._taken(owner, name) or path.exists():
                raise Conflict(f"{owner}/{name} already exists")
            path.parent.mkdir(parents=True, exist_ok=True)
            pygit2.init_repository(str(path), bare=True, initial_head="main")
            (path / "description").write_text(description + "\n" if description else "")
            with self.db.transaction():
                # A new repository starts with no one's access from an old one of its name.
                self._clear_access(owner, name)
                self.set_private(owner, name, private)
                self._insert(owner, name, path, True, description, time.time())
        return self.get(owner, name)

    def rename(self, repo: Repo, new_name: str) -> Repo:
        """Give ``repo`` a new name within its owner, on disk and in every table.

        The directory moves inside the database transaction: if either fails, neither
        happens, and the repository keeps its name and who may see it.
        """
        check_name(new_name)
        if new_name == repo.name:
            return repo
        with self.lock:
            if self._taken(repo.owner, new_name, besides=repo.id):
                raise Conflict(f"{repo.owner}/{new_name} already exists")
            target = _renamed_path(repo, new_name)
            if target.exists() and not _same_file(target, repo):
                raise Conflict(f"{target.name} already exists in the repositories directory")
            old_dir = repo.path if repo.bare else repo.path.parent
            git_dir = target if repo.bare else target / ".git"
            with self.db.transaction():
                self._clear_access(repo.owner, new_name)
                for table in ("repo_access", "collaborators"):
                    self.db.execute(
                        f"UPDATE {table} SET name = ? WHERE owner = ? AND name = ?",  # noqa: S608
                        (new_name, repo.owner, repo.name),
                    )
                self.db.execute(
                    "UPDATE repos SET name = ?, path = ? WHERE id = ?",
                    (new_name, str(git_dir), repo.id),
                )
                old_dir.rename(target)
        return self.get(repo.owner, new_name)

    def delete(self, repo: Repo) -> None:
        """Remove ``repo``: its directory, its row, who may see it."""
        with self.lock:
            directory = repo.path if repo.bare else repo.path.parent
            # Move it aside first, so a scan in the meantime cannot find half a repository.
            trash = directory.with_name(f".deleting-{directory.name}-{time.time_ns()}")
            with self.db.transaction():  # the move fails: the rows stay, and so does it
                self._clear_access(repo.owner, repo.name)
                self._drop_row(repo.id)
                directory.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)

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

    def _taken(self, owner: str, name: str, besides: int | None = None) -> bool:
        row = self.db.one(
            "SELECT 1 FROM repos WHERE owner = ? AND name = ? COLLATE NOCASE AND id IS NOT ?",
            (owner, name, besides),
        )
        return row is not None

    def _clear_access(self, owner: str, name: str) -> None:
        for table in ("repo_access", "collaborators"):
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


def _clean_description(text: str) -> str:
    return " ".join(text.split())[:500]


def _same_file(target: Path, repo: Repo) -> bool:
    """Whether ``target`` is the repository's own directory (a rename that changes only case
    on a filesystem that ignores it)."""
    directory = repo.path if repo.bare else repo.path.parent
    try:
        return target.samefile(directory)
    except OSError:
        return False


def _renamed_path(repo: Repo, new_name: str) -> Path:
    directory = repo.path if repo.bare else repo.path.parent
    suffix = ".git" if directory.name.endswith(".git") else ""
    return directory.with_name(new_name + suffix)


def _repo(row: sqlite3.Row) -> Repo:
    return Repo(
        id=row["id"],
        owner=row["owner"],
        name=row["name"],
        path=Path(row["path"]),
        bare=bool(row["bare"]),
        description=row["description"],
        updated_at=row["updated_at"],
        private=bool(row["private"]),
    )
