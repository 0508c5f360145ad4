"""One data layer over SQLite or PostgreSQL, every query counted and timed.

Both databases read the same SQL: ``?`` placeholders and the subset the two agree on
(``ON CONFLICT`` upserts, ``RETURNING``, ``lower()``; no ``INSERT OR REPLACE``, no ``MAX(a, b)``,
no integer used as a boolean). SQLite keeps one connection per thread; PostgreSQL takes a
connection from a pool for each statement, and holds one for the length of a transaction.

Reads that every page repeats (a repository's row, a session, an access level) can be
remembered (``remembered``): an answer is kept until a write to one of its tables is known to
have been committed, here (every statement that writes names its table) or on another node
(``changed``, from what the nodes tell each other). It is used only while ``coherent()``
says that every other node's writes are heard; otherwise every read goes to the database.

A transaction is a write transaction on both: SQLite's ``BEGIN IMMEDIATE`` takes the database's
write lock, and PostgreSQL's takes one advisory lock, so that writers are serialized the same
way on one machine and on many.

A PostgreSQL server that goes away is noticed at the first statement that finds its
connection broken (or no connection within ``timeout`` seconds): from then on every
statement raises ``DatabaseUnavailable`` at once, rather than each holding a request thread
for the pool's timeout, and one statement at a time, at most every ``PROBE_INTERVAL``
seconds, tries a connection of its own. When one opens, the pool is made anew (the old
pool's connections are broken, and its reconnection attempts back off for minutes) and
statements go through again: no restart needed.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from floorless.core import background, timing
from floorless.core.caches import Cache, approximate_size
from floorless.core.errors import BadRequest, DatabaseUnavailable
from floorless.db.schema import REMEMBERED, TRIGGERED

log = logging.getLogger(__name__)

Params = Sequence[Any]

# What a visitor reads when the database is away; the details go to the log.
UNREACHABLE = "the database cannot be reached; try again shortly"
# Seconds between tries of a database found unreachable.
PROBE_INTERVAL = 0.5
# Seconds within which a write's own notice comes back from PostgreSQL, to be skipped.
ECHO_WAIT = 5.0

# What a violated constraint raises, whichever the database.
IntegrityError = (sqlite3.IntegrityError, psycopg.IntegrityError)

# A connection whose peer is gone (a host down, a network cut) is noticed within seconds
# rather than the kernel's hours: keepalives on an idle connection, and a bound on how long
# sent data may go unacknowledged.
ALIVE = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}

# Bytes of remembered answers of repeated reads, at most (``memo_size``).
MEMO_BYTES = 16 * 1024 * 1024

# The advisory lock every PostgreSQL write transaction takes ("floorles" in ASCII).
WRITE_LOCK = 0x666C6F6F726C6573


class Row(Protocol):
    """A row: its values by column name or by position."""

    def __getitem__(self, key: str | int, /) -> Any: ...

    def keys(self) -> list[str]: ...


def memo_size(memo: tuple[tuple[int, ...], list[Row]]) -> int:
    """Bytes a remembered answer holds: its rows' values (a row object's own fields are
    not followed by ``approximate_size``), and what its key, the statement, takes about."""
    stamp, rows = memo
    # by name: iterating a sqlite3.Row gives its values, a PostgreSQL row (a dict) its names
    values = [tuple(row[k] for k in row.keys()) for row in rows]  # noqa: SIM118
    return approximate_size(stamp) + approximate_size(values) + 512


class Database:
    """The common part: counting and timing; the dialects say how a statement runs."""

    dialect = ""
    # Whether other processes write to this database too: always for PostgreSQL; for SQLite
    # when several processes of one machine serve from it (the ``processes`` setting).
    shared = False

    def __init__(self, url: str) -> None:
        self.url = url
        # Whether every other node's committed writes are heard now (see ``changed``): on
        # PostgreSQL, while db/notices.py's listener is connected; never on SQLite.
        self.coherent: Callable[[], bool] = lambda: False
        self.memo: Cache[tuple[str, tuple[Any, ...]], tuple[tuple[int, ...], list[Row]]] = (
            Cache.lru(MEMO_BYTES, getsizeof=memo_size)
        )
        self._versions: dict[str, int] = {}
        self._watched: set[str] = set()
        self._versions_lock = threading.Lock()
        self._writing = threading.local()

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        _check_text(params)
        with timing.phase("db"):
            _count()
            rows = self._fetch(sql, params)
        self._wrote(sql)
        return rows

    def remembered(self, sql: str, params: Params, tables: tuple[str, ...]) -> list[Row]:
        """``query``, answered from memory while no write to ``tables`` (every table the
        statement reads) has been committed since, here or on another node."""
        if not self.coherent():
            return self.query(sql, params)
        assert REMEMBERED.issuperset(tables), tables  # only their writes are told to all
        with self._versions_lock:
            self._watched.update(tables)
            stamp = tuple(self._versions.get(table, 0) for table in tables)
        key = (sql, tuple(params))
        kept = self.memo.get(key, valid=lambda memo: memo[0] == stamp)
        if kept is not None:
            return kept[1]
        rows = self.query(sql, params)
        self.memo.put(key, (stamp, rows))  # a write meanwhile moved the versions past stamp
        return rows

    def changed(self, tables: Iterable[str] | None = None) -> None:
        """Writes to ``tables`` (None: to any table) were committed: what was remembered of
        them is read again."""
        with self._versions_lock:
            everything = self._versions.keys() | self._watched | REMEMBERED
            names = list(everything) if tables is None else tables
            for table in names:
                self._versions[table] = self._versions.get(table, 0) + 1

    def version(self, table: str) -> int:
        """A number that changes whenever a write to ``table`` is known to be committed."""
        with self._versions_lock:
            return self._versions.get(table, 0)

    def _wrote(self, sql: str) -> None:
        tables = _written_tables(sql)
        if not tables:
            return
        pending: set[str] | None = getattr(self._writing, "tables", None)
        if pending is not None:
            pending.update(tables)  # counts once committed
        else:
            self.changed(tables)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> int:
        _check_text(params)
        with timing.phase("db"):
            _count()
            count = self._execute(sql, params)
        self._wrote(sql)
        return count

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        rows = list(rows)
        if not rows:
            return  # writes nothing: no write to count, no notice to expect
        with timing.phase("db"):
            _count()
            self._executemany(sql, rows)
        self._wrote(sql)

    @property
    def shown(self) -> str:
        """The database for a person to read: its URL without a password."""
        return self.url

    # -- what each dialect provides -----------------------------------------------------------

    def _fetch(self, sql: str, params: Params) -> list[Row]:
        raise NotImplementedError

    def _execute(self, sql: str, params: Params) -> int:
        raise NotImplementedError

    def _executemany(self, sql: str, rows: Iterable[Params]) -> None:
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction, committed unless an exception leaves it. Inside another one
        on the same thread it is part of that one: committed or rolled back with it."""
        if getattr(self._writing, "tables", None) is not None:
            yield
            return
        with self._hold() as conn:
            self._begin(conn)
            written: set[str] = set()
            self._writing.tables = written
            try:
                yield
            except BaseException:
                self._writing.tables = None
                self._finish(conn, "ROLLBACK")
                raise
            self._writing.tables = None
            expected = self._committing(conn, written)
            try:
                self._finish(conn, "COMMIT")
            except BaseException:
                # committed or not, unknown: no echo is to be skipped, and what may have been
                # written is read again
                self._uncommitted(expected)
                raise
        if written:
            self.changed(written)

    def told(self, table: str, sender: int) -> None:
        """The database told of a committed write to ``table`` by the session ``sender``
        (on PostgreSQL, a backend's process id): read again what is remembered of it."""
        self.changed((table,))

    def _committing(self, conn: Any, tables: set[str]) -> Any:
        """``conn`` is about to commit its writes to ``tables``: what ``_uncommitted`` takes
        back should the commit fail."""
        return None

    def _uncommitted(self, expected: Any) -> None:
        """The commit ``_committing`` announced raised: it may or may not have happened."""

    def _finish(self, conn: Any, word: str) -> None:
        conn.execute(word)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only transaction: every query in it sees the database as one moment left it,
        while writers go on (SQLite in WAL mode reads from its snapshot without the write lock;
        PostgreSQL reads at REPEATABLE READ)."""
        with self._hold() as conn:
            self._begin_read(conn)
            try:
                yield
            finally:
                self._finish(conn, "ROLLBACK")

    def stream(self, sql: str, params: Params = (), batch: int = 1000) -> Iterator[list[Row]]:
        """A query's rows, ``batch`` at a time, never all in memory at once."""
        _check_text(params)
        _count()
        yield from self._stream(sql, params, batch)

    def _stream(self, sql: str, params: Params, batch: int) -> Iterator[list[Row]]:
        raise NotImplementedError

    def _begin_read(self, conn: Any) -> None:
        raise NotImplementedError

    def _hold(self) -> AbstractContextManager[Any]:
        """The connection a transaction keeps from its start to its end."""
        raise NotImplementedError

    def _begin(self, conn: Any) -> None:
        raise NotImplementedError

    def ping(self) -> None:
        """Raise ``DatabaseUnavailable`` unless the database answers a query now."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SQLite(Database):
    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__(f"sqlite:///{path}")
        self.path = path
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def _fetch(self, sql: str, params: Params) -> list[Row]:
        return self._connection().execute(sql, params).fetchall()

    def _execute(self, sql: str, params: Params) -> int:
        return self._connection().execute(sql, params).rowcount

    def _executemany(self, sql: str, rows: Iterable[Params]) -> None:
        self._connection().executemany(sql, rows)

    @contextmanager
    def _hold(self) -> Iterator[sqlite3.Connection]:
        yield self._connection()

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def _begin_read(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # the snapshot starts

    def _stream(self, sql: str, params: Params, batch: int) -> Iterator[list[Row]]:
        cursor = self._connection().execute(sql, params)
        try:
            while rows := cursor.fetchmany(batch):
                yield rows
        finally:
            cursor.close()

    def ping(self) -> None:
        try:
            self._connection().execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f"the database cannot be read: {exc}") from exc

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class Postgres(Database):
    dialect = "postgresql"
    shared = True

    def __init__(self, url: str, max_connections: int = 20, timeout: float = 5.0) -> None:
        super().__init__(url)
        self._local = threading.local()
        self._max_connections = max_connections
        self._timeout = timeout
        self.pool = self._pool()
        self._opened = False
        self._open_lock = threading.Lock()
        # Set while the database is unreachable: the monotonic time of the next try.
        self._retry_at: float | None = None
        self._probe_lock = threading.Lock()
        # This process's own writes, by backend and table: when each one's notice must have
        # come back (``told``). Every write is known here as it commits (``_wrote``); its
        # echo from the trigger would make what was read since it be read once more.
        self._echoes: dict[tuple[int, str], deque[float]] = {}
        self._echoes_lock = threading.Lock()
        self._echoes_swept = time.monotonic()

    def _pool(self) -> ConnectionPool[psycopg.Connection[Row]]:
        return ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._max_connections,
            kwargs={
                "autocommit": True,
                "row_factory": _pg_rows,
                "connect_timeout": max(2, round(self._timeout)),
                **ALIVE,
            },
            timeout=self._timeout,
            open=False,
            name="floorless",
        )

    def _lost(self, exc: BaseException) -> None:
        if self._retry_at is None:
            log.warning("database %s: unreachable: %s", self.shown, exc)
            self._retry_at = time.monotonic()  # the next statement tries at once

    def _try_again(self) -> None:
        """While the database is unreachable: raise ``DatabaseUnavailable`` at once, unless it
        is this statement's turn to try a connection of its own; when that opens, make the
        pool anew and let the statement through."""
        retry_at = self._retry_at
        if retry_at is None:
            return
        if time.monotonic() < retry_at or not self._probe_lock.acquire(blocking=False):
            raise DatabaseUnavailable(UNREACHABLE)
        try:
            if self._retry_at is None:  # another statement found it meanwhile
                return
            try:
                psycopg.connect(self.url, connect_timeout=max(2, round(self._timeout))).close()
            except psycopg.Error as exc:
                self._retry_at = time.monotonic() + PROBE_INTERVAL
                raise DatabaseUnavailable(UNREACHABLE) from exc
            with self._open_lock:
                old, self.pool = self.pool, self._pool()
                self.pool.open(wait=False)
                self._opened = True
            self._retry_at = None
            log.warning("database %s: reachable again", self.shown)
            # the old pool's connections are broken: let them go without holding this request
            background.start(old.close, "pool-close")
        finally:
            self._probe_lock.release()

    @property
    def shown(self) -> str:
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        host = parts.hostname or ""
        netloc = f"{unquote(parts.username or '')}@{host}" + (
            f":{parts.port}" if parts.port else ""
        )
        return urlunsplit(parts._replace(netloc=netloc))

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Row]]:
        held: psycopg.Connection[Row] | None = getattr(self._local, "conn", None)
        if held is not None:  # inside a transaction
            yield held
            return
        self._try_again()
        if not self._opened:
            with self._open_lock:
                if not self._opened:
                    self.pool.open(wait=False)
                    self._opened = True
        try:
            with self.pool.connection() as conn:
                try:
                    yield conn
                except psycopg.OperationalError as exc:
                    if conn.broken or conn.closed:
                        self._lost(exc)
                    raise
        except PoolTimeout as exc:
            self._lost(exc)
            raise DatabaseUnavailable(UNREACHABLE) from exc
        except psycopg.OperationalError as exc:
            log.warning("database %s: %s", self.shown, exc)
            raise DatabaseUnavailable(UNREACHABLE) from exc

    def _fetch(self, sql: str, params: Params) -> list[Row]:
        with self._connection() as conn, self._writing_alone(conn, sql):
            cursor = conn.execute(_pg_sql(sql), params)
            return cursor.fetchall() if cursor.description is not None else []

    def _execute(self, sql: str, params: Params) -> int:
        with self._connection() as conn, self._writing_alone(conn, sql):
            return conn.execute(_pg_sql(sql), params).rowcount

    def _executemany(self, sql: str, rows: Iterable[Params]) -> None:
        with self._connection() as conn, conn.cursor() as cursor, self._writing_alone(conn, sql):
            cursor.executemany(_pg_sql(sql), rows)

    @contextmanager
    def _writing_alone(self, conn: psycopg.Connection[Row], sql: str) -> Iterator[None]:
        """Around a statement outside a transaction: one that writes commits by itself."""
        tables = _written_tables(sql)
        if not tables or getattr(self._local, "conn", None) is not None:
            yield  # inside a transaction: its writes are expected when it commits
            return
        expected = self._committing(conn, set(tables))
        try:
            yield
        except BaseException:
            self._uncommitted(expected)
            raise

    def changed(self, tables: Iterable[str] | None = None) -> None:
        if tables is None:  # (re)connected: every backend id known before may be another's now
            with self._echoes_lock:
                self._echoes.clear()
        super().changed(tables)

    def _uncommitted(self, expected: tuple[int, set[str], float] | None) -> None:
        # An echo that will not come must not be left to silence another session's notice
        # (a backend id is used again, by another node's session, once a server restarts);
        # and a write whose commit raised may have been committed: read again, to be sure.
        if expected is None:
            return
        pid, tables, due = expected
        with self._echoes_lock:
            for table in tables:
                dues = self._echoes.get((pid, table))
                if dues and due in dues:
                    dues.remove(due)
        self.changed(tables)

    def _committing(
        self, conn: psycopg.Connection[Row], tables: set[str]
    ) -> tuple[int, set[str], float] | None:
        # Expected before the commit, so that an echo heard at once is known for one. An
        # echo that never comes (a trigger that wrote nothing) is forgotten once overdue.
        now = time.monotonic()
        due = now + ECHO_WAIT
        pid = conn.info.backend_pid
        expected = tables & REMEMBERED
        with self._echoes_lock:
            for table in expected:
                self._echoes.setdefault((pid, table), deque()).append(due)
            if now - self._echoes_swept > ECHO_WAIT:
                self._echoes_swept = now
                for key, dues in list(self._echoes.items()):
                    while dues and dues[0] < now:
                        dues.popleft()
                    if not dues:
                        del self._echoes[key]
        return (pid, expected, due) if expected else None

    def told(self, table: str, sender: int) -> None:
        # One of this process's own writes, coming back, is skipped: it was counted when it
        # committed. Expected echoes are consumed one each, and only while due, so that a
        # backend id taken over later by another node's session does not silence it.
        now = time.monotonic()
        with self._echoes_lock:
            dues = self._echoes.get((sender, table))
            while dues and dues[0] < now:
                dues.popleft()
            if dues:
                dues.popleft()
                return
        self.changed((table,))

    @contextmanager
    def _hold(self) -> Iterator[psycopg.Connection[Row]]:
        with self._connection() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def _begin(self, conn: psycopg.Connection[Row]) -> None:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))

    def _begin_read(self, conn: psycopg.Connection[Row]) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _stream(self, sql: str, params: Params, batch: int) -> Iterator[list[Row]]:
        # A server-side cursor inside a transaction; outside one it would need a transaction
        # of its own, so it takes one (a snapshot) for the length of the query.
        held = getattr(self._local, "conn", None)
        opened = self._connection() if held is not None else self._snapshot_connection()
        with opened as conn, conn.cursor(name="floorless_stream") as cursor:
            cursor.execute(_pg_sql(sql), params)
            while rows := cursor.fetchmany(batch):
                yield rows

    @contextmanager
    def _snapshot_connection(self) -> Iterator[psycopg.Connection[Row]]:
        with self.snapshot():
            yield self._local.conn

    def ping(self) -> None:
        with self._connection() as conn:
            conn.execute("SELECT 1").fetchall()

    def close(self) -> None:
        """Close the pool's connections; the next statement opens a new pool."""
        with self._open_lock:
            if self._opened:
                self.pool.close()
                self.pool = self._pool()
                self._opened = False


def open_database(target: str | Path, max_connections: int = 20, timeout: float = 5.0) -> Database:
    """The database a setting names: a ``postgresql://`` URL, a ``sqlite:///`` URL or a path
    to an SQLite file. ``timeout``: the seconds a statement waits for a PostgreSQL connection."""
    text = str(target)
    if text.startswith(("postgresql://", "postgres://")):
        return Postgres(text, max_connections=max_connections, timeout=timeout)
    if text.startswith("sqlite:///"):  # sqlite:///relative or sqlite:////absolute
        return SQLite(Path(text.removeprefix("sqlite:///")))
    if "://" in text:
        raise ValueError(f"unknown database {text!r}: use postgresql://… or sqlite:///…")
    return SQLite(Path(text))


_WRITE = re.compile(r"\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
@functools.lru_cache(maxsize=1024)
def _written_tables(sql: str) -> frozenset[str]:
    """The tables a statement writes (none for a read): the one it names, with those the
    database's triggers write in turn, so that this node knows of those writes as soon as of
    its own, not only once their notice comes back to it. Asked before and after each
    statement on PostgreSQL: kept, as the statements are the program's own few."""
    match = _WRITE.match(sql)
    if match is None:
        return frozenset()
    table = match.group(1).lower()
    return frozenset({table, *TRIGGERED.get(table, ())})


_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|[?%]")


@functools.lru_cache(maxsize=1024)
def _pg_sql(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s``, and every literal ``%`` doubled (psycopg reads
    placeholders inside quoted text too); a ``?`` in quoted text stays."""

    def swap(match: re.Match[str]) -> str:
        text = match.group()
        return "%s" if text == "?" else text.replace("%", "%%")

    return _PLACEHOLDER.sub(swap, sql)


class _PgRow:
    """A PostgreSQL row read like an ``sqlite3.Row``: by name or by position."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: dict[str, int], values: Sequence[Any]) -> None:
        self._names = names
        self._values = values

    def __getitem__(self, key: str | int, /) -> Any:
        return self._values[key if isinstance(key, int) else self._names[key]]

    def keys(self) -> list[str]:
        return list(self._names)

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)


def _pg_rows(cursor: Any) -> Any:
    description = cursor.description
    names = {column.name: i for i, column in enumerate(description or ())}

    def make(values: Sequence[Any]) -> Row:
        return _PgRow(names, values)

    return make


def _check_text(params: Params) -> None:
    """Text with a NUL character is nothing floorless stores, and PostgreSQL cannot take it:
    the same clear answer on both databases."""
    for value in params:
        if isinstance(value, str) and "\0" in value:
            raise BadRequest("text with a NUL character is not accepted")


def _count() -> None:
    timer = timing.current()
    if timer is not None:
        timer.queries += 1
