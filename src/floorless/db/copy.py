"""Moving an installation's data to another database, and proving that it arrived whole.

``copy`` brings the target to the current schema, refuses a target that already holds data,
brings the source up to date if it is behind, and copies every table in dependency order
(parents before the rows that refer to them) in one write transaction on the target: it
either arrives whole or not at all. The source is read as one snapshot in a read transaction,
so a running single-machine installation keeps serving and writing while it is copied (SQLite
in WAL mode lets a reader and a writer work at once), and what arrives is the installation as
it was at one moment. Explicit ids are kept; on PostgreSQL each identity sequence is moved past
the highest copied id, so that new accounts, tokens and intents get fresh ones.

``verify`` compares two databases table by table: the number of rows and a checksum over the
rows in primary-key order. Both are computed in Python over values normalized the same way on
either database (integers, floats, text, bytes, NULL), with keys ordered bytewise on both
(SQLite's binary collation; PostgreSQL's "C" collation over the text, CITEXT included), so
equal data gives equal checksums whichever the database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floorless.core.errors import ConfigError
from floorless.db.migrations import SCHEMA_VERSION, migrate, version
from floorless.db.store import Database, Row, open_database

BATCH = 500


@dataclass(frozen=True)
class Table:
    """A table as the database describes it."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the primary key's columns, in order (every column if none)
    text: frozenset[str]  # the columns holding text
    parents: frozenset[str]  # the tables its foreign keys refer to
    identity: str | None = None  # a column whose values a PostgreSQL sequence hands out


@dataclass(frozen=True)
class Summary:
    rows: int
    checksum: str


@dataclass
class Report:
    """Each table's rows and checksum in the source and in the target."""

    tables: list[str]
    source: dict[str, Summary]
    target: dict[str, Summary]
    copied: bool = False

    def differing(self) -> list[str]:
        return [t for t in self.tables if self.source.get(t) != self.target.get(t)]

    @property
    def ok(self) -> bool:
        return not self.differing()

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.source.values())


@dataclass
class Tally:
    """A running row count and checksum over normalized values."""

    rows: int = 0
    _hash: Any = field(default_factory=hashlib.sha256)

    def add(self, values: tuple[Any, ...]) -> None:
        self.rows += 1
        self._hash.update(b"R%d:" % len(values))
        for value in values:
            self._hash.update(_normalized(value))

    def summary(self) -> Summary:
        return Summary(self.rows, self._hash.hexdigest()[:16])


def _normalized(value: Any) -> bytes:
    """A value as bytes that say its kind, the same whichever database it came from."""
    if value is None:
        return b"N;"
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return b"I%d;" % value
    if isinstance(value, float):
        return b"F" + value.hex().encode() + b";"
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return b"S%d:" % len(data) + data
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return b"B%d:" % len(data) + data
    raise TypeError(f"a value of type {type(value).__name__} in a floorless table")


# -- what a database holds ----------------------------------------------------------------------


def open_source(url: str) -> Database:
    """The database to copy from; an SQLite file must exist (opening would create it)."""
    db = open_database(url)
    path = getattr(db, "path", None)
    if isinstance(path, Path) and not path.is_file():
        raise ConfigError(f"there is no database at {db.shown}")
    return db


# Tables the database keeps itself, by triggers on others (schema versions 11 and 17): copied
# last, over what the triggers made of the rows copied before them.
DERIVED = frozenset({"issue_totals", "repo_activity"})


def tables(db: Database) -> list[Table]:
    """The database's tables, each after the tables it refers to (then by name)."""
    found = _pg_tables(db) if db.dialect == "postgresql" else _sqlite_tables(db)
    by_name = {t.name: t for t in found}
    ordered: list[Table] = []
    placed: set[str] = set()
    waiting = sorted(by_name)
    while waiting:
        ready = [
            n
            for n in waiting
            if all(p in placed or p == n or p not in by_name for p in by_name[n].parents)
        ]
        if not ready:  # a cycle: floorless's schema has none, but never loop forever
            ready = waiting[:1]
        for name in ready:
            ordered.append(by_name[name])
            placed.add(name)
        waiting = [n for n in waiting if n not in placed]
    return ordered


def _sqlite_tables(db: Database) -> list[Table]:
    names = [
        r["name"]
        for r in db.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    found = []
    for name in names:
        info = db.query(f"PRAGMA table_info({_quoted(name)})")
        columns = tuple(r["name"] for r in info)
        keyed = sorted((r["pk"], r["name"]) for r in info if r["pk"])
        text = frozenset(r["name"] for r in info if "TEXT" in str(r["type"]).upper())
        parents = frozenset(
            r["table"] for r in db.query(f"PRAGMA foreign_key_list({_quoted(name)})")
        )
        key = tuple(n for _, n in keyed) or columns
        found.append(Table(name, columns, key, text, parents))
    return found


def _pg_tables(db: Database) -> list[Table]:
    columns: dict[str, list[Row]] = {}
    for row in db.query(
        "SELECT c.table_name, c.column_name, c.udt_name, c.is_identity"
        " FROM information_schema.columns c JOIN information_schema.tables t"
        " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
        " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
        " ORDER BY c.table_name, c.ordinal_position"
    ):
        columns.setdefault(row["table_name"], []).append(row)
    keys: dict[str, list[str]] = {}
    for row in db.query(
        "SELECT tc.table_name, k.column_name FROM information_schema.table_constraints tc"
        " JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name"
        " AND k.table_schema = tc.table_schema"
        " WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = current_schema()"
        " ORDER BY tc.table_name, k.ordinal_position"
    ):
        keys.setdefault(row["table_name"], []).append(row["column_name"])
    parents: dict[str, set[str]] = {}
    for row in db.query(
        "SELECT tc.table_name, u.table_name AS parent"
        " FROM information_schema.table_constraints tc"
        " JOIN information_schema.constraint_column_usage u"
        " ON u.constraint_name = tc.constraint_name AND u.table_schema = tc.table_schema"
        " WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = current_schema()"
    ):
        parents.setdefault(row["table_name"], set()).add(row["parent"])
    found = []
    for name, rows in columns.items():
        names = tuple(r["column_name"] for r in rows)
        text = frozenset(
            r["column_name"] for r in rows if r["udt_name"] in ("text", "citext", "varchar")
        )
        identity = next((r["column_name"] for r in rows if r["is_identity"] == "YES"), None)
        key = tuple(keys.get(name, ())) or names
        found.append(Table(name, names, key, text, frozenset(parents.get(name, ())), identity))
    return found


def _values(row: Row, width: int) -> tuple[Any, ...]:
    return tuple(row[i] for i in range(width))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _select(db: Database, table: Table) -> str:
    """Every row of ``table`` in primary-key order, text compared bytewise on both databases."""

    def ordered(column: str) -> str:
        if column not in table.text:
            return _quoted(column)
        if db.dialect == "postgresql":
            return f'CAST({_quoted(column)} AS TEXT) COLLATE "C"'
        return f"{_quoted(column)} COLLATE BINARY"

    columns = ", ".join(_quoted(c) for c in table.columns)
    order = ", ".join(ordered(c) for c in table.key)
    return f"SELECT {columns} FROM {_quoted(table.name)} ORDER BY {order}"  # noqa: S608


def summarize(db: Database, table: Table, batch: int = BATCH) -> Summary:
    """The table's row count and checksum (call inside ``db.snapshot()`` for a consistent
    view of several tables)."""
    tally = Tally()
    for rows in db.stream(_select(db, table), batch=batch):
        for row in rows:
            tally.add(_values(row, len(table.columns)))
    return tally.summary()


def counts(db: Database) -> dict[str, int]:
    """Rows per table, as one snapshot."""
    with db.snapshot():
        return {t.name: _row_count(db, t.name) for t in tables(db)}


def _row_count(db: Database, name: str) -> int:
    # Table and column names here come from the database's own catalogue, always quoted.
    row = db.one(f"SELECT count(*) AS n FROM {_quoted(name)}")  # noqa: S608
    return int(row["n"]) if row is not None else 0


# -- copying and verifying ----------------------------------------------------------------------


def copy(
    source: Database,
    target: Database,
    batch: int = BATCH,
    progress: Callable[[str, int], None] | None = None,
) -> Report:
    """Copy every table of ``source`` into the empty ``target``; then read the target back
    and report both sides (``Report.ok`` says whether they agree)."""
    if _same(source, target):
        raise ConfigError(f"{source.shown} is both the source and the target")
    found = version(source)
    if found == 0:
        raise ConfigError(f"{source.shown} holds no floorless database")
    if found > SCHEMA_VERSION:
        raise ConfigError(
            f"the source {source.shown} has schema version {found}, made by a newer floorless"
            f" (this one knows up to {SCHEMA_VERSION}): copy it with the newer release"
        )
    _refuse_filled(target)
    migrate(target)
    if found < SCHEMA_VERSION:
        migrate(source)
    schema = tables(target)
    missing = sorted({t.name for t in schema} - {t.name for t in tables(source)})
    if missing:
        raise ConfigError(f"the source {source.shown} has no table {', '.join(missing)}")
    copied: dict[str, Summary] = {}
    with target.transaction():
        _refuse_filled(target)  # again, now that no one else can write to it
        target.execute("DELETE FROM meta")  # the source's, at the same version, replaces it
        with source.snapshot():
            for table in sorted(schema, key=lambda t: t.name in DERIVED):
                if table.name in DERIVED:  # filled by triggers as its sources arrived
                    target.execute(f"DELETE FROM {_quoted(table.name)}")  # noqa: S608
                copied[table.name] = _copy_table(source, target, table, batch)
                if progress is not None:
                    progress(table.name, copied[table.name].rows)
        if target.dialect == "postgresql":
            _advance_identities(target, schema)
    with target.snapshot():
        arrived = {t.name: summarize(target, t, batch) for t in schema}
    return Report([t.name for t in schema], copied, arrived, copied=True)


def verify(source: Database, target: Database, batch: int = BATCH) -> Report:
    """Compare every table of the two databases, each read as one snapshot."""
    names: list[str] = []
    sides: list[dict[str, Summary]] = []
    for db in (source, target):
        with db.snapshot():
            schema = tables(db)
            sides.append({t.name: summarize(db, t, batch) for t in schema})
        names += [t.name for t in schema if t.name not in names]
    return Report(names, sides[0], sides[1])


def _copy_table(source: Database, target: Database, table: Table, batch: int) -> Summary:
    columns = ", ".join(_quoted(c) for c in table.columns)
    marks = ", ".join("?" for _ in table.columns)
    insert = f"INSERT INTO {_quoted(table.name)} ({columns}) VALUES ({marks})"  # noqa: S608
    tally = Tally()
    for rows in source.stream(_select(source, table), batch=batch):
        values = [_values(row, len(table.columns)) for row in rows]
        for row_values in values:
            tally.add(row_values)
        target.executemany(insert, values)
    return tally.summary()


def _same(a: Database, b: Database) -> bool:
    paths = getattr(a, "path", None), getattr(b, "path", None)
    if isinstance(paths[0], Path) and isinstance(paths[1], Path):
        return paths[1].exists() and paths[0].samefile(paths[1])
    return a.url == b.url


def _refuse_filled(target: Database) -> None:
    """Nothing is copied over data: a target may hold the schema, and nothing else."""
    filled = []
    for table in tables(target):
        if table.name == "meta":
            continue
        rows = _row_count(target, table.name)
        if rows:
            filled.append(f"{table.name}: {rows} row{'s' if rows > 1 else ''}")
    if filled:
        raise ConfigError(
            f"the target {target.shown} already holds data ({'; '.join(filled)}):"
            " copy into an empty database"
        )


def _advance_identities(target: Database, schema: list[Table]) -> None:
    """Move each identity sequence past the highest copied id."""
    for table in schema:
        if table.identity is None:
            continue
        highest = f"SELECT max({_quoted(table.identity)}) FROM {_quoted(table.name)}"  # noqa: S608
        target.execute(
            f"SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(({highest}), 0) + 1, false)",
            (_quoted(table.name), table.identity),
        )


__all__ = ["Report", "Summary", "Table", "copy", "counts", "open_source", "tables", "verify"]
