"""Operations on both the disk and the database, written down before they start.

A create, rename or delete changes a directory and database rows, which cannot change
together. The registry (``repos.py``) commits an ``Intent`` row first, then changes the
disk, then finishes in the database and removes the row. A row still there means the
operation was interrupted: whether its directory moved (or appeared) says which way to
settle it, forward or back, and the registry does so when the forge starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from floorless.db import Database, Row
from floorless.repos.discovery import exists


@dataclass(frozen=True)
class Intent:
    """A create, rename or delete, recorded before it touches the disk."""

    id: int
    action: str  # "create", "rename" or "delete"
    repo_id: int | None  # the row renamed or deleted
    owner: str
    name: str  # the repository's name: the new one of a rename
    old_name: str  # the name a rename leaves
    source: str  # the directory before a rename or delete ("" for a create)
    target: str  # the directory after a create or rename; the trash a deletion moves it to
    bare: bool
    private: bool
    description: str

    def moved(self) -> bool:
        """Whether the disk step happened; raises OSError when the storage cannot tell."""
        if exists(Path(self.target)):
            return True
        return bool(self.source) and not exists(Path(self.source))

    @property
    def git_dir(self) -> Path:
        return Path(self.target) if self.bare else Path(self.target) / ".git"


def record(
    db: Database,
    action: str,
    owner: str,
    name: str,
    *,
    repo_id: int | None,
    old_name: str,
    source: str,
    target: str,
    bare: bool,
    private: bool,
    description: str,
) -> Intent:
    """Write an intent (inside the caller's transaction) and return it."""
    row = db.one(
        "INSERT INTO repo_intents (action, repo_id, owner, name, old_name, source, target,"
        " bare, private, description, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
        (
            action,
            repo_id,
            owner,
            name,
            old_name,
            source,
            target,
            int(bare),
            int(private),
            description,
            time.time(),
        ),
    )
    assert row is not None  # RETURNING answers the row it inserted
    return _intent(row)


def pending(db: Database) -> list[Intent]:
    """The intents not done, oldest first."""
    return [_intent(row) for row in db.query("SELECT * FROM repo_intents ORDER BY id")]


def done(db: Database, intent: Intent) -> None:
    db.execute("DELETE FROM repo_intents WHERE id = ?", (intent.id,))


def initialise(path: Path, description: str) -> None:
    """Make ``path`` an empty bare repository whose first branch will be ``main``; complete
    one a crash left half made (git keeps the HEAD it finds)."""
    pygit2.init_repository(str(path), bare=True, initial_head="main")
    (path / "description").write_text(description + "\n" if description else "")


def _intent(row: Row) -> Intent:
    return Intent(
        id=row["id"],
        action=row["action"],
        repo_id=row["repo_id"],
        owner=row["owner"],
        name=row["name"],
        old_name=row["old_name"],
        source=row["source"],
        target=row["target"],
        bare=bool(row["bare"]),
        private=bool(row["private"]),
        description=row["description"],
    )
