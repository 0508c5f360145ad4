"""A node's own writes' notices, expected so as to be skipped (``Postgres.told``), never
silence another session's: a write that fails, a commit whose reply is lost and a
reconnection leave no expected echo behind, and what may have been written is read again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from support.forges import database_for

from floorless.core.errors import DatabaseUnavailable
from floorless.db import Database, IntegrityError, open_database
from floorless.db.migrations import migrate

pytestmark = pytest.mark.unit


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    db = open_database(database_for(tmp_path / "data") or tmp_path / "data" / "db.sqlite3", 1)
    if db.dialect != "postgresql":
        pytest.skip("PostgreSQL's notices")
    migrate(db)
    db.execute("INSERT INTO accounts (id, name, kind, created_at) VALUES (1, 'ann', 'user', 0)")
    db.changed()  # (no listener here: the set-up's echo would never come)
    yield db
    db.close()


def backend(db: Database) -> int:
    return int(db.one("SELECT pg_backend_pid() AS p")["p"])  # type: ignore[index]


def test_a_failed_write_leaves_no_echo_to_silence_another_sessions_notice(db: Database) -> None:
    pid = backend(db)  # one connection: the failing write's
    with pytest.raises(IntegrityError):
        db.execute("INSERT INTO accounts (id, name, kind, created_at) VALUES (2, 'ann', 'user', 0)")
    before = db.version("accounts")
    db.told("accounts", pid)  # another node's session, given the same backend id
    assert db.version("accounts") == before + 1


def test_a_commit_that_raises_counts_its_writes(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = db._finish  # type: ignore[attr-defined]

    def finish(conn: object, word: str) -> None:
        real(conn, word)
        if word == "COMMIT":
            raise psycopg.OperationalError("the reply was lost")

    monkeypatch.setattr(db, "_finish", finish)
    pid = backend(db)
    before = db.version("accounts")
    with pytest.raises(DatabaseUnavailable), db.transaction():
        db.execute("UPDATE accounts SET name = 'ben' WHERE id = 1")
    db.told("accounts", pid)  # its echo: committed after all
    assert db.version("accounts") > before


def test_a_reconnection_forgets_the_echoes_expected(db: Database) -> None:
    pid = backend(db)
    db.execute("UPDATE issues SET title = '' WHERE id = -1")  # repo_activity: no echo comes
    db.changed()  # the listener connected again (the server may have restarted)
    before = db.version("repo_activity")
    db.told("repo_activity", pid)
    assert db.version("repo_activity") == before + 1
