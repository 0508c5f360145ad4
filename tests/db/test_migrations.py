"""The schema's migrations: every schema floorless has shipped upgrades in place with its rows,
an interrupted migration leaves the database as it was, and a newer database is refused.

The shipped schemas are in ``tests/schemas`` (each the SQLite statements of one release, with
its version number); a database is built from one of them, filled, and migrated.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from falcon import testing
from support.forges import database_for, patience, start_forge

from floorless.core.errors import ConfigError
from floorless.db import Database, open_database
from floorless.db.migrations import migrate, version
from floorless.db.schema import MIGRATIONS, SCHEMA_VERSION, Migration
from floorless.web.app import create_app

SCHEMAS = Path(__file__).parent / "schemas"
SHIPPED = sorted(int(p.stem[1:]) for p in SCHEMAS.glob("v*.sql"))
PASSWORD = "correct horse battery staple"


def _database(tmp_path: Path) -> Database:
    """An empty database of the dialect the tests run on."""
    return open_database(database_for(tmp_path / "data") or tmp_path / "data" / "db.sqlite3")


def _shipped(path: Path, number: int) -> None:
    """An SQLite database as release ``number`` made it: its schema and version only."""
    conn = sqlite3.connect(path)
    conn.executescript((SCHEMAS / f"v{number}.sql").read_text())
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(number),))
    conn.commit()
    conn.close()


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _contents(
    conn: sqlite3.Connection, tables: set[str], columns: dict[str, list[str]] | None = None
) -> dict[str, list[tuple[object, ...]]]:
    """Every row of ``tables``: of the ``columns`` given for a table (those it had before a
    migration added more), else of all of them."""
    return {
        t: sorted(
            conn.execute(f"SELECT {', '.join((columns or {}).get(t, ['*']))} FROM {t}").fetchall()
        )
        for t in sorted(tables)
    }


def _sqlite_columns(conn: sqlite3.Connection, tables: set[str]) -> dict[str, list[str]]:
    return {t: [row[1] for row in conn.execute(f"PRAGMA table_info({t})")] for t in tables}


def test_every_shipped_schema_is_tested() -> None:
    assert list(range(1, len(SHIPPED) + 1)) == SHIPPED
    assert SHIPPED[-1] == MIGRATIONS[0].version  # the baseline is the last SQLite-only release


@pytest.mark.parametrize("number", SHIPPED)
def test_a_database_of_every_shipped_schema_upgrades_with_its_rows(
    tmp_path: Path, number: int, fixture_root: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "shipped.sqlite3"  # SQLite, also when the other tests use PostgreSQL
    _shipped(path, number)
    conn = sqlite3.connect(path)
    tables = _tables(conn)
    conn.execute(
        "INSERT INTO repos (id, owner, name, path, bare, description, updated_at, seen_at)"
        " VALUES (7, 'ann', 'plans', ?, 1, 'The plans', 1700000000.5, 1700000001.25)",
        (str(tmp_path / "repos" / "ann" / "plans.git"),),
    )
    conn.execute(
        "INSERT INTO answers (repo_id, kind, key, value) VALUES (7, 'count', ?, '12')",
        (b"\x01\x02",),
    )
    if "accounts" in tables:
        from argon2 import PasswordHasher

        hashed = PasswordHasher(time_cost=1, memory_cost=8192).hash(PASSWORD)
        conn.execute(
            "INSERT INTO accounts (id, name, kind, email, password_hash, is_admin, created_at)"
            " VALUES (3, 'Ann', 'user', 'ann@example.org', ?, 1, 1700000000)",
            (hashed,),
        )
        conn.execute("INSERT INTO repo_access (owner, name, private) VALUES ('ann', 'plans', 1)")
        conn.execute(
            "INSERT INTO tokens (id, user_id, name, hash, prefix, scope, created_at)"
            " VALUES (1, 3, 'laptop', ?, 'flt_abcd', 'write', 1700000000)",
            (b"\xaa" * 32,),
        )
    if "signin_places" in tables:
        conn.execute("INSERT INTO signin_places VALUES ('ann', '127.0.0.1', 1700000000)")
    if "repo_missing" in tables:
        conn.execute("INSERT INTO repo_missing (repo_id, scans) VALUES (7, 1)")
    conn.commit()
    # version 5 rebuilt the history index; meta holds the version number
    kept = tables - {"index_commits", "index_paths", "meta"}
    before = _contents(conn, kept)
    columns = _sqlite_columns(conn, kept)
    conn.close()

    database = open_database(path)
    assert version(database) == number
    assert migrate(database) == SCHEMA_VERSION
    database.close()

    conn = sqlite3.connect(path)
    assert _contents(conn, kept, columns) == before
    assert {"leases", "index_chunks", "index_changes", "signin_places"} <= _tables(conn)
    assert not {"index_commits", "index_paths"} & _tables(conn)
    conn.close()
    if "accounts" not in tables:
        return
    # the upgraded database in use: the account signs in, the repository stays private
    forge = start_forge(tmp_path / "repos", data, database=str(path))
    try:
        client = testing.TestClient(create_app(forge))
        assert forge.accounts.get("ann") is not None
        assert forge.accounts.check_password("ann", PASSWORD) is not None
        assert client.simulate_get("/ann/plans").status_code == 404
    finally:
        forge.stop()


# A row for every table of the schema, as every version since the table's first reads it:
# a database of each earlier version, filled with them, upgrades with each row intact.
SAMPLES: dict[str, tuple[str, tuple[object, ...]]] = {
    "repos": (
        "INSERT INTO repos (id, owner, name, path, bare, description, updated_at, seen_at)"
        " VALUES (7, 'ann', 'plans', '/srv/ann/plans.git', 1, 'The plans', 1.5, 2.25)",
        (),
    ),
    "repo_access": (
        "INSERT INTO repo_access (owner, name, private) VALUES ('ann', 'plans', 1)",
        (),
    ),
    "repo_missing": ("INSERT INTO repo_missing (repo_id, scans) VALUES (7, 1)", ()),
    "repo_intents": (
        "INSERT INTO repo_intents (id, action, repo_id, owner, name, target, bare, private,"
        " created_at) VALUES (2, 'rename', 7, 'ann', 'plans', '/srv/ann/x.git', 1, 1, 3.5)",
        (),
    ),
    "accounts": (
        "INSERT INTO accounts (id, name, kind, email, password_hash, is_admin, created_at)"
        " VALUES (3, 'Ann', 'user', 'ann@example.org', '$argon2id$x', 1, 1.25)",
        (),
    ),
    "org_members": ("INSERT INTO org_members (org_id, user_id, role) VALUES (3, 3, 'owner')", ()),
    "collaborators": (
        "INSERT INTO collaborators (owner, name, user_id, role) VALUES ('ann', 'plans', 3, 'read')",
        (),
    ),
    "tokens": (
        "INSERT INTO tokens (id, user_id, name, hash, prefix, scope, created_at)"
        " VALUES (1, 3, 'laptop', ?, 'flt_abcd', 'write', 4.5)",
        (b"\xaa" * 32,),
    ),
    "sessions": (
        "INSERT INTO sessions (hash, user_id, created_at, expires_at) VALUES (?, 3, 1.0, 9.0)",
        (b"\x01" * 32,),
    ),
    "signin_places": ("INSERT INTO signin_places VALUES ('ann', '127.0.0.1', 5.5)", ()),
    "signin_failures": ("INSERT INTO signin_failures (key, at) VALUES (?, 6.5)", (b"k",)),
    "answers": (
        "INSERT INTO answers (repo_id, kind, key, value) VALUES (7, 'count', ?, '12')",
        (b"\x00\xff",),
    ),
    "index_chunks": (
        "INSERT INTO index_chunks (repo_id, first, count, oids, times, counts, parents)"
        " VALUES (7, 0, 1, ?, ?, ?, ?)",
        (b"\x11" * 20, b"\x00" * 8, b"\x00" * 4, b""),
    ),
    "index_changes": (
        "INSERT INTO index_changes (repo_id, slice, first_path, paths, data)"
        " VALUES (7, 0, 0, ?, ?)",
        (b"README", b"\x00" * 8),
    ),
    "leases": ("INSERT INTO leases (name, holder, expires_at) VALUES ('index 7', 'a', 7.5)", ()),
    "issues": (
        "INSERT INTO issues (id, owner, name, number, is_pull, title, body, author_id, state,"
        " close_reason, created_at, updated_at, closed_at, comments, entries)"
        " VALUES (4, 'ann', 'plans', 1, 0, 'Crash', 'It *crashes*', 3, 'closed', 'completed',"
        " 1.5, 2.5, 2.5, 1, 2)",
        (),
    ),
    "issue_comments": (
        "INSERT INTO issue_comments (id, issue_id, seq, author_id, body, created_at, updated_at)"
        " VALUES (5, 4, 1, 3, 'Seen it too', 2.0, 2.0)",
        (),
    ),
    "issue_events": (
        "INSERT INTO issue_events (id, issue_id, seq, actor_id, kind, old_value, value,"
        " created_at) VALUES (6, 4, 2, 3, 'closed', '', 'completed', 2.5)",
        (),
    ),
    "repo_features": (
        "INSERT INTO repo_features (owner, name, issues, pulls, merge_styles, default_merge)"
        " VALUES ('ann', 'plans', 1, 0, 'merge,squash', 'squash')",
        (),
    ),
    "forks": (
        "INSERT INTO forks (owner, name, parent_owner, parent_name, created_at)"
        " VALUES ('ann', 'plans-fork', 'ann', 'plans', 3.5)",
        (),
    ),
    "pulls": (
        "INSERT INTO pulls (issue_id, base_branch, head_owner, head_name, head_branch,"
        " head_oid) VALUES (4, 'main', 'ann', 'plans', 'fix', 'a1b2')",
        (),
    ),
    "reviews": (
        "INSERT INTO reviews (id, issue_id, author_id, state, body, commit_oid, created_at,"
        " submitted_at) VALUES (9, 4, 3, 'approve', 'Good', 'a1b2', 3.5, 3.5)",
        (),
    ),
    "review_comments": (
        "INSERT INTO review_comments (id, review_id, issue_id, author_id, path, side,"
        " start_line, line, commit_oid, line_text, body, created_at, updated_at)"
        " VALUES (10, 9, 4, 3, 'a.py', 'new', 2, 3, 'a1b2', 'x = 1', 'Why?', 3.5, 3.5)",
        (),
    ),
    "review_views": (
        "INSERT INTO review_views (issue_id, account_id, head_oid, seen_at)"
        " VALUES (4, 3, 'a1b2', 3.5)",
        (),
    ),
    "labels": (
        "INSERT INTO labels (id, owner, name, label, color, description)"
        " VALUES (11, 'ann', 'plans', 'bug', '#d73a4a', 'Something is wrong')",
        (),
    ),
    "issue_labels": ("INSERT INTO issue_labels (issue_id, label_id) VALUES (4, 11)", ()),
    "milestones": (
        "INSERT INTO milestones (id, owner, name, title, description, due_at, state)"
        " VALUES (12, 'ann', 'plans', 'v1', 'First', 9.5, 'open')",
        (),
    ),
    "issue_totals": (
        "INSERT INTO issue_totals (owner, name, is_pull, state, total)"
        " VALUES ('ann', 'old', 0, 'open', 3)",
        (),
    ),
    "issue_assignees": (
        "INSERT INTO issue_assignees (issue_id, account_id) VALUES (4, 3)",
        (),
    ),
    "repo_activity": (
        "INSERT INTO repo_activity (owner, name, version) VALUES ('ann', 'old', 7)",
        (),
    ),
    "branch_marks": (
        "INSERT INTO branch_marks (owner, name, branch, oid) VALUES ('ann', 'plans', '6d61696e',"
        " 'a1b2')",
        (),
    ),
    "webhooks": (
        "INSERT INTO webhooks (id, repo_id, org_id, kind, url, http_method, content_type, secret,"
        " authorization_header, events, branch_filter, active, created_at, updated_at)"
        " VALUES (8, 7, NULL, 'forgejo', 'https://hooks.example.org/in', 'POST', 'json', 's3',"
        " '', 'push,create', 'main', 1, 1.5, 2.5)",
        (),
    ),
    "webhook_deliveries": (
        "INSERT INTO webhook_deliveries (id, hook_id, uuid, event, action, payload,"
        " request_headers, state, attempts, next_at, response_status, response_headers,"
        " response_body, duration, error, created_at, finished_at) VALUES (9, 8, 'u-1', 'push',"
        " '', '{}', '{}', 'delivered', 1, 3.5, 200, '{}', 'ok', 0.25, '', 3.0, 3.5)",
        (),
    ),
    "commit_statuses": (
        "INSERT INTO commit_statuses (id, owner, name, sha, seq, state, context, target_url,"
        " description, creator_id, created_at, updated_at) VALUES (13, 'ann', 'plans',"
        " 'a1b2c3', 1, 'success', 'ci/build', 'https://ci.example.org/1', 'Built', 3, 1.5, 1.5)",
        (),
    ),
    "branch_protections": (
        "INSERT INTO branch_protections (id, owner, name, rule, enable_status_check,"
        " status_check_contexts, apply_to_admins, created_at, updated_at)"
        " VALUES (14, 'ann', 'plans', 'main', 1, 'ci/*', 0, 1.5, 2.5)",
        (),
    ),
    "pull_automerges": (
        "INSERT INTO pull_automerges (issue_id, doer_id, style, message, delete_branch, url,"
        " created_at) VALUES (4, 3, 'squash', 'Ship it', 1, 'https://forge.example/ann/plans/pulls/1',"
        " 4.5)",
        (),
    ),
    "ssh_keys": (
        "INSERT INTO ssh_keys (id, user_id, repo_id, added_by, title, kind, content, fingerprint,"
        " read_only, created_at, last_used_at) VALUES (5, NULL, 7, 3, 'ci', 'ssh-ed25519',"
        " 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmk', 'SHA256:ci', 1, 5.5, 6.5)",
        (),
    ),
    "releases": (
        "INSERT INTO releases (id, repo_id, publisher_id, tag_name, target, commit_id, title,"
        " note, draft, prerelease, created_at, updated_at) VALUES (2, 7, 3, 'v1.0', 'main',"
        " 'ab12', 'One', 'The *first*', 0, 1, 7.5, 8.5)",
        (),
    ),
    "attachments": (
        "INSERT INTO attachments (id, uuid, repo_id, release_id, issue_id, comment_id,"
        " uploader_id, name, oid, size, download_count, created_at) VALUES (3, 'u-1', 7, 2, 4,"
        " 5, 3, 'build.tar.gz', 'cd34', 1024, 9, 7.75)",
        (),
    ),
    "lfs_objects": (
        "INSERT INTO lfs_objects (repo_id, oid, size, created_at) VALUES (7, 'ef56', 4096, 8.25)",
        (),
    ),
    "lfs_locks": (
        "INSERT INTO lfs_locks (id, repo_id, owner_id, path, created_at)"
        " VALUES (4, 7, 3, 'art/logo.psd', 8.75)",
        (),
    ),
    "search_blobs": (
        "INSERT INTO search_blobs (id, oid, kind, size) VALUES (3, ?, 'text', 120)",
        (b"\x22" * 20,),
    ),
    "search_segments": (
        "INSERT INTO search_segments (id, blobs, created_at) VALUES (1, 1, 1.5)",
        (),
    ),
    "search_postings": (
        "INSERT INTO search_postings (gram, segment, numbers) VALUES (6647396, 1, ?)",
        (b"x\x01\x03\x00\x00\x00",),
    ),
    "search_trees": (
        "INSERT INTO search_trees (tree, paths, oids, numbers) VALUES (?, ?, ?, ?)",
        (b"\x33" * 20, b"README.md", b"\x22" * 20, b"\x03\x00\x00\x00"),
    ),
    "search_repos": (
        "INSERT INTO search_repos (repo_id, kind, ref, commit_id, tree, indexed_at)"
        " VALUES (7, 'branch', ?, ?, ?, 2.5)",
        (b"main", b"\x44" * 20, b"\x33" * 20),
    ),
}


def _table_names(db: Database) -> set[str]:
    if db.dialect == "postgresql":
        rows = db.query(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    else:
        rows = db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(row[0]) for row in rows}


def _rows(db: Database, table: str, columns: list[str] | None = None) -> list[str]:
    """The table's rows, as text to compare; of ``columns`` alone when given (a later version
    may add columns to a table: the rows keep what they had)."""
    rows = db.query(f"SELECT * FROM {table}")
    return sorted(repr([(key, row[key]) for key in (columns or list(row.keys()))]) for row in rows)


def _columns(db: Database, table: str) -> list[str]:
    rows = db.query(f"SELECT * FROM {table} LIMIT 1")
    return list(rows[0].keys()) if rows else []


def test_every_table_has_a_sample_row(tmp_path: Path) -> None:
    db = _database(tmp_path)
    try:
        migrate(db)
        assert _table_names(db) - {"meta"} == set(SAMPLES)
    finally:
        db.close()


@pytest.mark.parametrize("number", [m.version for m in MIGRATIONS[:-1]])
def test_a_database_of_every_earlier_version_upgrades_with_its_rows(
    tmp_path: Path, number: int
) -> None:
    """On this database (SQLite or PostgreSQL): made at version ``number``, filled, then
    brought to the latest version, every row is as it was."""
    db = _database(tmp_path)
    try:
        assert migrate(db, tuple(m for m in MIGRATIONS if m.version <= number)) == number
        present = _table_names(db) & set(SAMPLES)
        for table in SAMPLES:  # in an order where a row's references come first
            if table in present:
                db.execute(*SAMPLES[table])
        before = {table: _rows(db, table) for table in present}
        columns = {table: _columns(db, table) for table in present}
        assert migrate(db) == SCHEMA_VERSION
        assert {table: _rows(db, table, columns[table]) for table in present} == before
        assert _table_names(db) - {"meta"} == set(SAMPLES)
    finally:
        db.close()


def test_a_fresh_database_gets_the_whole_schema(tmp_path: Path) -> None:
    db = _database(tmp_path)
    try:
        assert version(db) == 0
        assert migrate(db) == SCHEMA_VERSION
        assert version(db) == SCHEMA_VERSION
        assert migrate(db) == SCHEMA_VERSION  # again: nothing to do
        db.execute("INSERT INTO leases (name, holder, expires_at) VALUES ('x', 'node', 1.5)")
        assert db.one("SELECT holder FROM leases")["holder"] == "node"  # type: ignore[index]
    finally:
        db.close()


def test_the_baseline_upgrades_in_place_on_this_database(tmp_path: Path) -> None:
    """What was made at version 5 (on PostgreSQL too, when the tests run there) upgrades to
    the latest version with its rows."""
    db = _database(tmp_path)
    try:
        assert migrate(db, MIGRATIONS[:1]) == 5
        db.execute(
            "INSERT INTO accounts (name, kind, email, created_at) VALUES ('ann', 'user', '', 1.5)"
        )
        assert migrate(db) == SCHEMA_VERSION
        assert db.one("SELECT name FROM accounts WHERE name = 'ANN'")["name"] == "ann"  # type: ignore[index]
    finally:
        db.close()


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    db = _database(tmp_path)
    try:
        migrate(db)
        db.execute(
            "INSERT INTO accounts (name, kind, email, created_at) VALUES ('ann', 'user', '', 1.5)"
        )
        broken = Migration(
            SCHEMA_VERSION + 1,
            "half of it works",
            (
                "CREATE TABLE half_made (id INTEGER PRIMARY KEY)",
                "UPDATE accounts SET email = 'changed'",
                "THIS IS NOT SQL",
            ),
        )
        with pytest.raises(Exception, match=r"(?i)syntax"):
            migrate(db, (*MIGRATIONS, broken))
        assert version(db) == SCHEMA_VERSION
        assert db.one("SELECT email FROM accounts")["email"] == ""  # type: ignore[index]
        with pytest.raises(Exception):
            db.query("SELECT * FROM half_made")
    finally:
        db.close()


CHILD = """
import os, sys
from floorless.db import open_database, store
from floorless.db.migrations import migrate
from floorless.db.schema import MIGRATIONS

db = open_database(sys.argv[1])
count = 0
execute = store.Database.execute

def execute_then_die(self, sql, params=()):
    global count
    count += 1
    if count == int(sys.argv[2]):
        os._exit(9)  # killed half-way: no rollback, no goodbye
    return execute(self, sql, params)

store.Database.execute = execute_then_die
migrate(db, MIGRATIONS[1:])
"""


def test_a_migration_killed_half_way_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    db = _database(tmp_path)
    try:
        migrate(db, MIGRATIONS[:1])  # a database at the baseline, with a row
        db.execute(
            "INSERT INTO accounts (name, kind, email, created_at) VALUES ('ann', 'user', '', 1.5)"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        # killed at its first statement, at the statement that writes the new version
        for last in (1, 2):
            child = subprocess.run(
                [sys.executable, "-c", CHILD, db.url, str(last)],
                env=env,
                capture_output=True,
                text=True,
                timeout=patience(60),
                check=False,
            )
            assert child.returncode == 9, child.stderr
            assert version(db) == 5
            assert db.one("SELECT COUNT(*) AS n FROM accounts")["n"] == 1  # type: ignore[index]
            with pytest.raises(Exception):
                db.query("SELECT * FROM leases")
        assert migrate(db) == SCHEMA_VERSION  # and the next start does it all
    finally:
        db.close()


def test_a_database_made_by_a_newer_floorless_is_refused(tmp_path: Path) -> None:
    db = _database(tmp_path)
    try:
        migrate(db)
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(99),))
        with pytest.raises(ConfigError, match="newer floorless"):
            migrate(db)
    finally:
        db.close()


def test_nodes_starting_together_migrate_once(tmp_path: Path) -> None:
    url = _database(tmp_path).url
    errors: list[BaseException] = []

    def start() -> None:
        db = open_database(url)
        try:
            migrate(db)
        except BaseException as exc:
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    db = open_database(url)
    try:
        assert version(db) == SCHEMA_VERSION
    finally:
        db.close()
