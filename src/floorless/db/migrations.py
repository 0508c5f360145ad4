"""Bring a database to the schema this floorless knows, forward only, all or nothing.

The missing migrations run in one write transaction together with the new version number: a
migration interrupted half-way (a crash, a killed process, a statement that fails) leaves the
database exactly as it was, and the next start tries again. Nodes starting at once take turns
(the transaction's write lock), and the second finds nothing left to do.
"""

from __future__ import annotations

import logging

from floorless.core.errors import ConfigError
from floorless.db.schema import MIGRATIONS, SCHEMA_VERSION, Migration, render
from floorless.db.store import Database

log = logging.getLogger(__name__)


def version(db: Database) -> int:
    """The schema version the database says it has; 0 for an empty database."""
    if not _has_table(db, "meta"):
        return 0
    row = db.one("SELECT value FROM meta WHERE key = 'schema_version'")
    return int(row["value"]) if row is not None else 0


def migrate(db: Database, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Apply what is missing; return the version the database has now."""
    latest = migrations[-1].version if migrations else 0
    with db.transaction():
        found = version(db)
        if found > latest:
            raise ConfigError(
                f"the database {db.shown} has schema version {found}, made by a newer floorless"
                f" (this one knows up to {latest}): run the newer release"
            )
        pending = [m for m in migrations if m.version > found]
        for migration in pending:
            log.info("database: migrating to version %d (%s)", migration.version, migration.summary)
            for statement in migration.statements:
                sql = render(statement, db.dialect)
                if sql is not None:
                    db.execute(sql)
        if pending:
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(latest),),
            )
    return max(found, latest)


def _has_table(db: Database, name: str) -> bool:
    if db.dialect == "postgresql":
        row = db.one("SELECT to_regclass(?) IS NOT NULL AS found", (name,))
        return bool(row is not None and row["found"])
    row = db.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row is not None


__all__ = ["SCHEMA_VERSION", "migrate", "version"]
