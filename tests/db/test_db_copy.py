"""``floorless admin db copy``: an installation moved from SQLite to PostgreSQL (or to another
SQLite file, or back) arrives whole, serves the same pages to the same people, refuses to
overwrite data, catches a difference, and copies a running installation consistently."""

from __future__ import annotations

import base64
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import POSTGRES, database_for, patience, start_forge, wait_for, wait_indexed
from support.serving import clean_env, floorless_command

from floorless.cli.admin import admin
from floorless.db import Database, open_database
from floorless.db import copy as dbcopy
from floorless.db.migrations import migrate
from floorless.db.schema import SCHEMA_VERSION
from floorless.forge import Forge
from floorless.web.app import create_app

PAGES = (
    "/",
    "/alice/demo",
    "/alice/history/commits/branch/main",
    "/alice/demo/src/branch/main/",
    "/ann/secret",
    "/ann",
)
TARGETS = (
    "sqlite",
    pytest.param(
        "postgresql",
        marks=pytest.mark.skipif(
            not POSTGRES, reason="FLOORLESS_TEST_POSTGRES is not set: no PostgreSQL to copy to"
        ),
    ),
)


@dataclass
class Installation:
    """A single-machine forge's data: its SQLite database, repositories and what a person
    holds (a session cookie, a token)."""

    repos: Path
    data: Path
    database: Path
    token: str
    cookie: str
    pages: dict[tuple[str, str], tuple[int, str]]  # (who, path) -> status, body
    highest_ids: dict[str, int]


def _basic(name: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{secret}".encode()).decode()}


def _pages(forge: Forge, token: str) -> dict[tuple[str, str], tuple[int, str]]:
    """What anyone, ann (by token) and ben see of each page."""
    client = testing.TestClient(create_app(forge))
    people = {"anyone": {}, "ann": _basic("ann", token), "ben": _basic("ben", PASSWORD)}
    seen = {}
    for who, headers in people.items():
        for path in PAGES:
            result = client.simulate_get(path, headers=headers)
            seen[who, path] = (result.status_code, result.text)
    return seen


@pytest.fixture(scope="module")
def installation(
    fixture_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    root = tmp_path_factory.mktemp("installation")
    repos = root / "repos"
    shutil.copytree(fixture_root, repos, symlinks=True)
    database = root / "floorless.sqlite3"
    forge = start_forge(repos, root / "data", database=str(database))
    try:
        ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD, admin=True)
        ben = forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
        org = forge.accounts.create_org("team", ann)
        forge.accounts.add_member(org, ben)
        token, _ = forge.accounts.create_token(ann, "write", "laptop")
        forge.accounts.create_token(ben, "read", "revoked")
        cookie = forge.accounts.start_session(ann)
        secret = forge.registry.create("ann", "secret", private=True, description="hidden")
        forge.policy.set_collaborator(secret, ben, "read")
        forge.accounts.remember_place("ann", "127.0.0.1", keep=5)
        wait_indexed(forge)
        pages = _pages(forge, token)
        highest = {
            table: int(forge.db.one(f"SELECT max(id) AS n FROM {table}")["n"] or 0)
            for table in ("accounts", "tokens")
        }
    finally:
        forge.stop()
    yield Installation(repos, root / "data", database, token, cookie, pages, highest)


def _empty_target(kind: str, where: Path) -> str:
    if kind == "postgresql":
        url = database_for(where)
        assert url is not None
        return url
    return f"sqlite:///{where / 'target.sqlite3'}"


def _floorless_db(*args: str) -> subprocess.CompletedProcess[str]:
    """``floorless admin db ARGS`` as a person runs it."""
    return subprocess.run(
        [floorless_command(), "admin", "db", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=patience(120),
        check=False,
    )


def _rows(db: Database) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, by name and sorted: compared without the copy's own code."""
    found = {}
    for table in dbcopy.tables(db):
        columns = ", ".join(table.columns)
        rows = [
            tuple(r[c] for c in table.columns)
            for r in db.query(f"SELECT {columns} FROM {table.name}")
        ]
        found[table.name] = sorted(rows, key=repr)
    return found


@pytest.mark.parametrize("kind", TARGETS)
def test_an_installation_moves_whole_and_serves_the_same(
    installation: Installation, kind: str, tmp_path: Path
) -> None:
    target = _empty_target(kind, tmp_path)
    result = _floorless_db(
        "copy", "--from", f"sqlite:///{installation.database}", "--to", target, "--batch", "7"
    )
    assert result.returncode == 0, result.stderr
    assert "every table's rows and checksum equal" in result.stdout
    assert "DIFFERS" not in result.stdout

    source, copied = open_database(installation.database), open_database(target)
    try:
        before, after = _rows(source), _rows(copied)
        assert before == after
        for table in (
            "accounts",
            "org_members",
            "tokens",
            "sessions",
            "collaborators",
            "repo_access",
            "repos",
            "index_chunks",
            "index_changes",
            "answers",
            "signin_places",
        ):
            assert before[table], f"the installation has no {table} to copy"
            line = next(ln for ln in result.stdout.splitlines() if ln.startswith(table + " "))
            assert line.split()[1] == str(len(before[table]))
        assert any(isinstance(v, bytes) for row in after["index_chunks"] for v in row)
    finally:
        source.close()
        copied.close()

    # the same installation, now on the target database
    forge = start_forge(installation.repos, installation.data, database=target)
    try:
        statuses = {key: status for key, (status, _) in installation.pages.items()}
        assert statuses.pop(("anyone", "/ann/secret")) == 404  # still private
        assert set(statuses.values()) == {200}
        assert _pages(forge, installation.token) == installation.pages
        client = testing.TestClient(create_app(forge))
        browser = Browser(client)
        assert browser.sign_in("ann").status_code == 303
        assert browser.get("/ann/secret").status_code == 200
        kept = Browser(client)  # the session begun before the move
        kept.cookies["floorless_session"] = installation.cookie
        assert "Sign out" in kept.get("/").text
        found = forge.accounts.check_token(installation.token)
        assert found is not None and found[0].name == "ann" and found[1] == "write"
        # new rows get ids past the copied ones
        cat = forge.accounts.create_user("cat", "cat@example.org", PASSWORD)
        _, token = forge.accounts.create_token(cat, "read")
        assert cat.id == installation.highest_ids["accounts"] + 1
        assert token.id == installation.highest_ids["tokens"] + 1
    finally:
        forge.stop()

    if kind == "postgresql":  # and back again, to SQLite
        back = f"sqlite:///{tmp_path / 'back.sqlite3'}"
        result = _floorless_db("copy", "--from", target, "--to", back)
        assert result.returncode == 0, result.stderr
        result = _floorless_db("copy", "--from", back, "--to", target, "--verify-only")
        assert result.returncode == 0, result.stderr
        assert "every table's rows and checksum equal" in result.stdout


def test_a_target_holding_data_is_refused_untouched(
    installation: Installation, tmp_path: Path
) -> None:
    target = _empty_target("postgresql" if POSTGRES else "sqlite", tmp_path)
    db = open_database(target)
    try:
        migrate(db)
        db.execute("INSERT INTO signin_places (name, place, seen_at) VALUES ('zed', 'x', 1.0)")
        before = _rows(db)
    finally:
        db.close()
    runner = CliRunner()
    result = runner.invoke(
        admin, ["db", "copy", "--from", str(installation.database), "--to", target]
    )
    assert result.exit_code == 1
    assert "already holds data (signin_places: 1 row)" in result.output
    assert "copy into an empty database" in result.output
    db = open_database(target)
    try:
        assert _rows(db) == before
    finally:
        db.close()


def test_verification_catches_a_row_changed_after_the_copy(
    installation: Installation, tmp_path: Path
) -> None:
    target = _empty_target("postgresql" if POSTGRES else "sqlite", tmp_path)
    source = f"sqlite:///{installation.database}"
    runner = CliRunner()
    assert runner.invoke(admin, ["db", "copy", "--from", source, "--to", target]).exit_code == 0
    verified = runner.invoke(
        admin, ["db", "copy", "--from", source, "--to", target, "--verify-only"]
    )
    assert verified.exit_code == 0, verified.output
    assert "compared" in verified.output

    db = open_database(target)
    try:  # one byte of one blob, and one email address
        row = db.one("SELECT repo_id, first, oids FROM index_chunks ORDER BY repo_id, first")
        flipped = bytes([row["oids"][0] ^ 1]) + bytes(row["oids"][1:])
        with db.transaction():
            db.execute(
                "UPDATE index_chunks SET oids = ? WHERE repo_id = ? AND first = ?",
                (flipped, row["repo_id"], row["first"]),
            )
            db.execute("UPDATE accounts SET email = 'BEN@example.org' WHERE name = 'ben'")
    finally:
        db.close()
    verified = runner.invoke(
        admin, ["db", "copy", "--from", source, "--to", target, "--verify-only"]
    )
    assert verified.exit_code == 1
    differing = [ln.split()[0] for ln in verified.output.splitlines() if ln.endswith("DIFFERS")]
    assert differing == ["accounts", "index_chunks"]
    assert "2 of " in verified.output


def test_a_running_installation_is_copied_as_one_moment(tmp_path: Path) -> None:
    """A forge keeps writing to its SQLite database during the copy (each write an account
    and its token together); the copy holds exactly the pairs of one moment, and the
    writes go on while it reads."""
    database = tmp_path / "live.sqlite3"
    forge = start_forge(tmp_path / "repos", tmp_path / "data", database=str(database))
    written = [0]
    failures: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        try:
            for i in range(100_000):
                if stop.is_set():
                    return
                with forge.db.transaction():
                    forge.db.execute(
                        "INSERT INTO accounts (name, kind, created_at) VALUES (?, 'user', 1.0)",
                        (f"w{i}",),
                    )
                    user = forge.db.one("SELECT id FROM accounts WHERE name = ?", (f"w{i}",))
                    forge.db.execute(
                        "INSERT INTO tokens (user_id, name, hash, prefix, scope, created_at)"
                        " VALUES (?, '', ?, '', 'read', 1.0)",
                        (user["id"], f"h{i}".encode()),
                    )
                written[0] = i + 1
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    target = _empty_target("postgresql" if POSTGRES else "sqlite", tmp_path)
    source, copied = dbcopy.open_source(str(database)), open_database(target)
    try:
        wait_for(lambda: written[0] >= 3)

        def one_more_write(table: str, rows: int) -> None:
            # between tables, the forge writes again: the copy does not hold its write lock
            seen = written[0]
            wait_for(lambda: written[0] > seen or bool(failures))

        report = dbcopy.copy(source, copied, batch=2, progress=one_more_write)
        assert report.ok and not failures
        stop.set()
        writer.join(timeout=patience(30))
        assert not failures
        pairs = copied.query(
            "SELECT a.name, t.hash FROM accounts a JOIN tokens t ON t.user_id = a.id"
        )
        names = copied.query("SELECT name FROM accounts")
        count = len(names)
        assert sorted(r["name"] for r in names) == sorted(f"w{i}" for i in range(count))
        assert sorted((r["name"], bytes(r["hash"])) for r in pairs) == sorted(
            (f"w{i}", f"h{i}".encode()) for i in range(count)
        )
        assert 3 <= count < written[0]  # writes went on during the copy, and none leaked in
    finally:
        stop.set()
        writer.join(timeout=patience(30))
        source.close()
        copied.close()
        forge.stop()


def test_an_older_source_is_brought_up_to_date_and_a_newer_one_refused(tmp_path: Path) -> None:
    older = tmp_path / "v5.sqlite3"
    conn = sqlite3.connect(older)
    conn.executescript((Path(__file__).parent / "schemas" / "v5.sql").read_text())
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '5')")
    conn.execute("INSERT INTO accounts (name, kind, created_at) VALUES ('old', 'user', 1.0)")
    conn.commit()
    conn.close()
    runner = CliRunner()
    target = tmp_path / "target.sqlite3"
    result = runner.invoke(admin, ["db", "copy", "--from", str(older), "--to", str(target)])
    assert result.exit_code == 0, result.output
    assert "leases" in result.output  # the source was migrated to the current schema first

    newer = tmp_path / "newer.sqlite3"
    shutil.copy(older, newer)
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    result = runner.invoke(
        admin, ["db", "copy", "--from", str(newer), "--to", str(tmp_path / "t2.sqlite3")]
    )
    assert result.exit_code == 1 and "made by a newer floorless" in result.output
    result = runner.invoke(
        admin,
        [
            "db",
            "copy",
            "--from",
            str(tmp_path / "none.sqlite3"),
            "--to",
            str(tmp_path / "t3.sqlite3"),
        ],
    )
    assert result.exit_code == 1 and "there is no database at" in result.output
    assert not (tmp_path / "none.sqlite3").exists()


def test_db_info_shows_the_database_its_version_and_rows(installation: Installation) -> None:
    result = CliRunner().invoke(admin, ["db", "info", "--database", str(installation.database)])
    assert result.exit_code == 0, result.output
    assert f"schema version: {SCHEMA_VERSION} (this floorless: {SCHEMA_VERSION})" in result.output
    assert f"database: sqlite:///{installation.database}" in result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("accounts "))
    assert line.split()[1] == "3"
