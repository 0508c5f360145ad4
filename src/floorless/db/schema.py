"""The database schema, applied idempotently at start."""

from __future__ import annotations

SCHEMA_VERSION = 1

STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS repos (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        path TEXT NOT NULL UNIQUE,
        bare INTEGER NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        updated_at REAL,
        seen_at REAL NOT NULL,
        UNIQUE (owner, name)
    )""",
    "CREATE INDEX IF NOT EXISTS repos_updated ON repos (updated_at)",
    # One row per indexed commit: ``seq`` is a dense per-repository number; ``parents`` and
    # ``changes`` are JSON: parent seqs, and per parent the ids of the paths that differ.
    """CREATE TABLE IF NOT EXISTS index_commits (
        repo_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        oid BLOB NOT NULL,
        time INTEGER NOT NULL,
        parents TEXT NOT NULL,
        changes TEXT NOT NULL,
        PRIMARY KEY (repo_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS index_paths (
        repo_id INTEGER NOT NULL,
        id INTEGER NOT NULL,
        path BLOB NOT NULL,
        PRIMARY KEY (repo_id, id)
    )""",
    # Answers keyed by object ids never change: a tree's last commits, a commit count.
    """CREATE TABLE IF NOT EXISTS answers (
        repo_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key BLOB NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (repo_id, kind, key)
    )""",
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)
