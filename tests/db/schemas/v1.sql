-- The SQLite schema floorless shipped as version 1 (applied with its version number).
CREATE TABLE IF NOT EXISTS repos (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        path TEXT NOT NULL UNIQUE,
        bare INTEGER NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        updated_at REAL,
        seen_at REAL NOT NULL,
        UNIQUE (owner, name)
    );
CREATE INDEX IF NOT EXISTS repos_updated ON repos (updated_at);
CREATE TABLE IF NOT EXISTS index_commits (
        repo_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        oid BLOB NOT NULL,
        time INTEGER NOT NULL,
        parents TEXT NOT NULL,
        changes TEXT NOT NULL,
        PRIMARY KEY (repo_id, seq)
    );
CREATE TABLE IF NOT EXISTS index_paths (
        repo_id INTEGER NOT NULL,
        id INTEGER NOT NULL,
        path BLOB NOT NULL,
        PRIMARY KEY (repo_id, id)
    );
CREATE TABLE IF NOT EXISTS answers (
        repo_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key BLOB NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (repo_id, kind, key)
    );
CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
