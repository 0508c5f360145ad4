"""Remembered reads: an answer is kept until a write to one of its tables is committed here or
heard of from another node, and nothing is remembered while other nodes' writes could go
unheard. Runs on the suite's database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.forges import database_for, wait_for

from floorless.db import Database, open_database
from floorless.db.migrations import migrate
from floorless.db.notices import Notices

pytestmark = pytest.mark.unit

SELECT = "SELECT name FROM accounts WHERE id = ?"
TABLES = ("accounts",)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    db = open_database(database_for(tmp_path / "data") or tmp_path / "data" / "db.sqlite3")
    migrate(db)
    db.execute(
        "INSERT INTO accounts (id, name, kind, email, created_at) VALUES (1, 'ann', 'user', '', 0)"
    )
    yield db
    db.close()


def name(db: Database) -> str:
    (row,) = db.remembered(SELECT, (1,), TABLES)
    return str(row["name"])


def test_nothing_is_remembered_unless_every_write_is_heard(db: Database) -> None:
    assert name(db) == "ann" and name(db) == "ann"
    assert db.memo.hits == 0 and len(db.memo) == 0


def test_an_answer_is_kept_until_its_table_is_written(db: Database) -> None:
    db.coherent = lambda: True
    assert name(db) == "ann"
    assert name(db) == "ann"
    assert db.memo.hits == 1
    db.execute("UPDATE accounts SET name = 'ben' WHERE id = 1")
    assert name(db) == "ben"
    db.execute("INSERT INTO answers (repo_id, kind, key, value) VALUES (1, 'x', ?, '')", (b"k",))
    assert name(db) == "ben" and db.memo.hits == 2  # another table's write changes nothing


def test_a_transactions_writes_count_when_it_commits(db: Database) -> None:
    db.coherent = lambda: True
    assert name(db) == "ann"
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("UPDATE accounts SET name = 'ben' WHERE id = 1")
        raise RuntimeError
    assert name(db) == "ann"
    with db.transaction():
        db.execute("UPDATE accounts SET name = 'cat' WHERE id = 1")
    assert name(db) == "cat"


def test_a_write_heard_from_another_node_is_read_again(db: Database, tmp_path: Path) -> None:
    db.coherent = lambda: True
    assert name(db) == "ann"
    other = open_database(db.url)
    try:
        other.execute("UPDATE accounts SET name = 'dan' WHERE id = 1")
    finally:
        other.close()
    assert name(db) == "ann"  # not heard yet: what a node hears is what it knows
    db.changed(["accounts"])
    assert name(db) == "dan"
    other_table_only = db.memo.hits
    db.changed()  # everything, as after the listener reconnects
    assert name(db) == "dan" and db.memo.hits == other_table_only


def test_another_nodes_writes_are_heard_through_the_database(db: Database) -> None:
    """On PostgreSQL the writing transaction itself tells every listening node (a trigger),
    so a write made anywhere, by any program, is read again here."""
    if db.dialect != "postgresql":
        pytest.skip("one SQLite file has one process: nothing to hear")
    notices = Notices(db, "here", heard=lambda repo_id, event: None)
    assert not db.coherent()  # not listening yet: nothing is remembered
    notices.start()
    try:
        wait_for(db.coherent)
        assert name(db) == "ann" and name(db) == "ann"
        hits = db.memo.hits
        assert hits == 1
        other = open_database(db.url)
        try:
            other.execute("UPDATE accounts SET name = 'fay' WHERE id = 1")
        finally:
            other.close()
        wait_for(lambda: name(db) == "fay")
        notices.stop()
        assert not db.coherent()
    finally:
        notices.stop()


def test_a_nodes_own_write_is_read_again_once_not_again_when_its_notice_returns(
    db: Database,
) -> None:
    """The trigger tells every listener of a write, the writer too: the writer knew of it as
    it committed, and skips its echo, while a write by another program is still heard."""
    if db.dialect != "postgresql":
        pytest.skip("one SQLite file has one process: nothing to hear")
    notices = Notices(db, "here", heard=lambda repo_id, event: None)
    notices.start()
    other = open_database(db.url)
    marks = 0

    def settled() -> None:
        """Wait until every notice committed so far is taken in: they come in commit order."""
        nonlocal marks
        marks += 1
        other.query("SELECT pg_notify('floorless_tables', 'mark')")
        wait_for(lambda: db.version("mark") == marks)

    try:
        wait_for(db.coherent)
        settled()
        for write in (
            lambda: db.execute("UPDATE accounts SET name = 'gus' WHERE id = 1"),
            lambda: db.query("UPDATE accounts SET name = 'gus' WHERE id = 1 RETURNING id"),
        ):
            before = db.version("accounts")
            write()
            assert db.version("accounts") == before + 1
            settled()
            assert db.version("accounts") == before + 1
        with db.transaction():
            db.execute("UPDATE accounts SET name = 'hal' WHERE id = 1")
            db.execute("UPDATE accounts SET email = 'hal@example.com' WHERE id = 1")
        settled()
        assert name(db) == "hal"
        hits = db.memo.hits
        assert name(db) == "hal" and db.memo.hits == hits + 1  # kept: the echo was skipped
        other.execute("UPDATE accounts SET name = 'ivy' WHERE id = 1")
        settled()
        assert name(db) == "ivy"
    finally:
        other.close()
        notices.stop()


def test_a_read_that_races_a_write_is_not_kept_stale(db: Database) -> None:
    """A write committed while a read is on its way makes that read's answer stale at once."""
    db.coherent = lambda: True
    started, release = threading.Event(), threading.Event()
    query = db.query

    def slow_query(sql: str, params: object = ()) -> object:
        rows = query(sql, params)  # type: ignore[arg-type]
        if sql == SELECT:
            started.set()
            release.wait(10)
        return rows

    db.query = slow_query  # type: ignore[method-assign]
    reader = threading.Thread(target=name, args=(db,))
    reader.start()
    assert started.wait(10)
    db.query = query  # type: ignore[method-assign]
    db.execute("UPDATE accounts SET name = 'eve' WHERE id = 1")
    release.set()
    reader.join(10)
    assert name(db) == "eve"


def test_percent_and_question_marks_in_quoted_text(db: Database) -> None:
    """Quoted text keeps its ``?`` (not a placeholder) and its ``%`` (on PostgreSQL too)."""
    (row,) = db.query("SELECT '100%' AS text, 'why?' AS asked, 'a%' LIKE ? AS matched", ("a%",))
    assert (row["text"], row["asked"], bool(row["matched"])) == ("100%", "why?", True)
