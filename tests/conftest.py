"""Shared fixtures: the fixture repositories (built once per session), a started forge over
them with its index complete, and an in-process test client.

With ``FLOORLESS_TEST_POSTGRES`` set to a PostgreSQL server's URL (``./check`` starts one with
``scripts/test-postgres.sh``), every forge a test makes, in this process or in a server or
admin process, keeps its data in a database of its own on that server instead of SQLite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from gitfixtures import build_all

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # bench/ sits beside src/, outside the installed package
    sys.path.insert(0, str(ROOT))

_HOME_SAFE_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")

POSTGRES = os.environ.get("FLOORLESS_TEST_POSTGRES", "")


def database_for(data: Path) -> str | None:
    """The PostgreSQL database of a data directory when the tests run on PostgreSQL (made
    empty the first time it is asked for), or None on SQLite."""
    if not POSTGRES:
        return None
    import psycopg
    from psycopg import sql

    name = "t_" + hashlib.sha1(str(Path(data).absolute()).encode()).hexdigest()[:24]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return POSTGRES.rsplit("/", 1)[0] + "/" + name


def copy_test_database(source: Path, target: Path) -> None:
    """On PostgreSQL, make ``target`` data directory's database a copy of ``source``'s (what
    copying the data directory does on SQLite); nothing on SQLite."""
    if not POSTGRES:
        return
    import psycopg
    from psycopg import sql

    source_url, target_url = database_for(source), database_for(target)
    assert source_url and target_url
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        names = [sql.Identifier(url.rsplit("/", 1)[1]) for url in (source_url, target_url)]
        conn.execute(  # a template must have no one connected
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (source_url.rsplit("/", 1)[1],),
        )
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(names[1]))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(names[1], names[0]))


def stored_bytes(forge: Forge) -> bytes:
    """Everything the forge's database holds, as bytes to search: the SQLite file and its
    log, or every row of every table as PostgreSQL prints it."""
    if forge.db.dialect == "sqlite":
        path = Path(forge.settings.database)
        files = (path, path.with_name(path.name + "-wal"))
        return b"".join(p.read_bytes() for p in files if p.exists())
    tables = forge.db.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    return b"".join(
        str(row[0]).encode()
        for table in tables
        for row in forge.db.query(f'SELECT t::text FROM "{table[0]}" AS t')
    )


if POSTGRES:
    _load = Settings.load.__func__  # type: ignore[attr-defined]

    def _load_on_postgres(cls, config_file=None, environ=None, **overrides):
        settings = _load(cls, config_file, environ, **overrides)
        if settings.database == str(settings.data / "floorless.sqlite3"):
            settings = dataclasses.replace(settings, database=database_for(settings.data))
        return settings

    Settings.load = classmethod(_load_on_postgres)  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def fuse() -> None:
    """FUSE for the slow-storage simulator: skipped without it, except under CI, which must
    have it (scripts/install-test-deps.sh installs it)."""
    from bench import slowfs

    reason = slowfs.fuse_available()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to mount FUSE: {reason}")
        pytest.skip(f"FUSE unavailable: {reason}")


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fixture repository, built once; tests must not modify them (copy first)."""
    root = tmp_path_factory.mktemp("repos")
    build_all(root)
    return root


def patience(seconds: float) -> float:
    """A deadline for work whose duration depends on the machine: ``seconds`` on an idle one
    with cores to spare, longer in proportion to the load on a busy or small one. Deadlines
    only catch a hang; no test asserts how fast anything was."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] / cores
    return seconds * max(1.0, load) * (2.0 if cores <= 2 else 1.0)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until it is true, failing after ``timeout`` seconds (scaled by
    ``patience`` to the machine)."""
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def start_forge(repos: Path, data: Path, **overrides) -> Forge:
    settings = Settings.load(environ={}, data=data, repos=repos, **overrides)
    forge = Forge(settings)
    forge.start()
    return forge


def wait_indexed(forge: Forge) -> None:
    """Wait until every readable repository is fully indexed."""
    for repo in forge.registry.all():
        try:
            snapshot = forge.snapshot(repo)
        except Exception:  # a broken repository is never indexed
            continue
        tips = snapshot.tips()
        wait_for(
            lambda r=repo, t=tips: (
                r.id in forge.indexer.failures or all(forge.indexer.ready(r.id, c) for c in t)
            )
        )
    wait_for(forge.indexer.idle)


@pytest.fixture(scope="session")
def forge(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    """A forge over the fixture repositories, fully indexed."""
    forge = start_forge(fixture_root, tmp_path_factory.mktemp("data"))
    wait_indexed(forge)
    yield forge
    forge.stop()


@pytest.fixture(scope="session")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


@pytest.fixture
def repos_copy(fixture_root: Path, tmp_path: Path) -> Path:
    """A private, writable copy of the fixture repositories."""
    target = tmp_path / "repos"
    shutil.copytree(fixture_root, target, symlinks=True)
    return target


@pytest.fixture(autouse=True)
def _no_user_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never depend on the machine's git config."""
    for name in _HOME_SAFE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    os.makedirs(tmp_path / "home", exist_ok=True)
