"""Remembered reads: an answer is kept until a write to one of its tables is committed here or
heard of from another node, and nothing is remembered while other nodes' writes could go
unheard. Runs on the suite's database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import database_for

from floorless.db import Database, open_database

SELECT = "SELECT name FROM accounts WHERE id = ?"
TABLES = ("accounts",)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    db = open_database(database_for(tmp_path / "data") or tmp_path / "data" / "db.sqlite3")
    db.migrate()
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


def test_writes_to_remembered_tables_are_told(db: Database) -> None:
    told: list[frozenset[str]] = []
    db.coherent = lambda: True
    db.on_write = told.append
    db.execute("UPDATE accounts SET email = 'x' WHERE id = 1")
    assert told == []  # nothing remembered of accounts yet
    name(db)
    db.execute("UPDATE accounts SET email = 'y' WHERE id = 1")
    db.execute("DELETE FROM answers")
    with db.transaction():
        db.execute("UPDATE accounts SET email = 'z' WHERE id = 1")
        assert len(told) == 1  # not before the commit
    assert told == [frozenset({"accounts"})] * 2


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
