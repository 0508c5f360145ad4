"""The database schema, applied idempotently at start."""

from __future__ import annotations

SCHEMA_VERSION = 5

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
    # The history index (``floorless/indexrows.py``): packed binary rows, one per batch of
    # commits and one per slice of indexing. Version 4 kept a row of JSON per commit: those
    # tables are dropped, and the index is built again (at git's speed, in the background).
    "DROP TABLE IF EXISTS index_commits",
    "DROP TABLE IF EXISTS index_paths",
    """CREATE TABLE IF NOT EXISTS index_chunks (
        repo_id INTEGER NOT NULL,
        first INTEGER NOT NULL,
        count INTEGER NOT NULL,
        oids BLOB NOT NULL,
        times BLOB NOT NULL,
        counts BLOB NOT NULL,
        parents BLOB NOT NULL,
        PRIMARY KEY (repo_id, first)
    )""",
    """CREATE TABLE IF NOT EXISTS index_changes (
        repo_id INTEGER NOT NULL,
        slice INTEGER NOT NULL,
        first_path INTEGER NOT NULL,
        paths BLOB NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (repo_id, slice)
    )""",
    # Answers keyed by object ids never change: a tree's last commits, a commit count.
    """CREATE TABLE IF NOT EXISTS answers (
        repo_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key BLOB NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (repo_id, kind, key)
    )""",
    # Accounts: people and organisations share one namespace of owner names.
    """CREATE TABLE IF NOT EXISTS accounts (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'org')),
        email TEXT NOT NULL DEFAULT '',
        password_hash TEXT,
        is_admin INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS org_members (
        org_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
        PRIMARY KEY (org_id, user_id)
    )""",
    # Personal access tokens, stored as a SHA-256 of the token (tokens are random, so a fast
    # hash is enough); ``prefix`` is the token's first characters, to tell tokens apart.
    """CREATE TABLE IF NOT EXISTS tokens (
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
    )""",
    """CREATE TABLE IF NOT EXISTS sessions (
        hash BLOB PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    # Who may do what to a repository, kept by owner and name rather than by the repository
    # row: a repository directory that vanishes for a moment (a network share remounting)
    # must not come back public.
    """CREATE TABLE IF NOT EXISTS repo_access (
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        private INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (owner, name)
    )""",
    """CREATE TABLE IF NOT EXISTS collaborators (
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        user_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('read', 'write', 'admin')),
        PRIMARY KEY (owner, name, user_id)
    )""",
    # Repositories a scan did not find, and how many scans in a row have seen them missing.
    """CREATE TABLE IF NOT EXISTS repo_missing (
        repo_id INTEGER PRIMARY KEY,
        scans INTEGER NOT NULL
    )""",
    # A create, rename or delete, written before it touches the disk and removed once it is
    # done in both places; one left by a crash is rolled forward or back at start.
    """CREATE TABLE IF NOT EXISTS repo_intents (
        id INTEGER PRIMARY KEY,
        action TEXT NOT NULL CHECK (action IN ('create', 'rename', 'delete')),
        repo_id INTEGER,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        old_name TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        target TEXT NOT NULL,
        bare INTEGER NOT NULL,
        private INTEGER NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    # The places (an address, or an IPv6 /64) a person has signed in from: sign-in throttling
    # never slows them there, also after a restart.
    """CREATE TABLE IF NOT EXISTS signin_places (
        name TEXT NOT NULL COLLATE NOCASE,
        place TEXT NOT NULL,
        seen_at REAL NOT NULL,
        PRIMARY KEY (name, place)
    )""",
)
