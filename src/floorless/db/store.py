"""A thin, counted layer over SQLite: one connection per thread, every query timed."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from floorless import timing
from floorless.db.schema import SCHEMA_VERSION, STATEMENTS

Params = Sequence[Any]


class Database:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def migrate(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connection()
        with conn:
            for statement in STATEMENTS:
                conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        with timing.phase("db"):
            _count()
            return self._connection().execute(sql, params).fetchall()

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> int:
        with timing.phase("db"):
            _count()
            return self._connection().execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        with timing.phase("db"):
            _count()
            self._connection().executemany(sql, rows)

    def transaction(self) -> _Transaction:
        return _Transaction(self._connection())

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _count() -> None:
    timer = timing.current()
    if timer is not None:
        timer.queries += 1
