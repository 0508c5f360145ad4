-- The SQLite schema floorless shipped as version 2 (applied with its version number).
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
CREATE TABLE IF NOT EXISTS accounts (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'org')),
        email TEXT NOT NULL DEFAULT '',
        password_hash TEXT,
        is_admin INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
CREATE TABLE IF NOT EXISTS org_members (
        org_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
        PRIMARY KEY (org_id, user_id)
    );
CREATE TABLE IF NOT EXISTS tokens (
        id INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        hash BLOB NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
        created_at REAL NOT NULL,
        expires_at REAL,
        last_used_at REAL,
        revoked_at REAL
    );
CREATE TABLE IF NOT EXISTS sessions (
        hash BLOB PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
CREATE TABLE IF NOT EXISTS repo_access (
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        private INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (owner, name)
    );
CREATE TABLE IF NOT EXISTS collaborators (
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('read', 'write', 'admin')),
        PRIMARY KEY (owner, name, user_id)
    );
CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
