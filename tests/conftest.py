"""Shared fixtures: the fixture repositories (built once per session), a started forge over
them with its index complete, and an in-process test client.

With ``FLOORLESS_TEST_POSTGRES`` set to a PostgreSQL server's URL (``./check`` starts one with
``scripts/test-postgres.sh``), every forge a test makes, in this process or in a server or
admin process, keeps its data in a database of its own on that server instead of SQLite;
under pytest-xdist each worker has its own suite database there too (``support.forges``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import argon2
import pytest
from falcon import testing
from support.forges import (
    POSTGRES,
    database_for,
    make_suite_database,
    start_forge,
    wait_indexed,
)
from support.gitfixtures import build_all

from floorless.accounts import accounts
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

_HOME_SAFE_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


pytest_plugins = ["support.lanes"]  # the unit lane's guard


# Markers of the modules that start processes (a server, a browser, the benchmark): the longest.
_SLOW = ("bench", "browser", "network")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the modules that start processes first: each worker takes a whole
    module at a time, in this order, so a long one taken last would leave the other worker
    idle while it runs. Each module's tests keep their order; the run is otherwise as
    collected (and every worker orders alike, as xdist requires)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow = {item.path for item in items if any(item.get_closest_marker(m) for m in _SLOW)}
    items.sort(key=lambda item: item.path not in slow)  # a stable sort


@pytest.fixture(scope="session", autouse=True)
def _databases_on_postgresql() -> Iterator[None]:
    """On PostgreSQL, every forge this process starts keeps its data in a database of its data
    directory's own instead of its SQLite file: ``Settings.load`` answers that database for the
    default. (Server and admin processes are given ``--database`` by ``support.serving``.)
    A fixture, not a patch made on import, so that it is undone when the session ends and
    shows in ``--setup-plan``."""
    if not POSTGRES:
        yield
        return
    make_suite_database()
    load = Settings.load.__func__  # type: ignore[attr-defined]

    def load_on_postgresql(cls, config_file=None, environ=None, **overrides):
        settings = load(cls, config_file, environ, **overrides)
        if settings.database == str(settings.data / "floorless.sqlite3"):
            settings = dataclasses.replace(settings, database=database_for(settings.data))
        return settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Settings, "load", classmethod(load_on_postgresql))
        yield


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashes() -> Iterator[None]:
    """argon2 at a test's cost in this process: one pass over 8 KiB instead of three over
    64 MiB. Every sign-in and every account a test makes hashes or checks a password, and at
    the real cost that was most of the suite's time (36 of 56 s of tests/collab/test_issues.py);
    the hashes are argon2id all the same and are checked by the same code. The real cost is
    still what the servers the tests start (support.serving) pay, and what the hardening tests'
    own hasher counts and holds."""
    quick = functools.partial(argon2.PasswordHasher, time_cost=1, memory_cost=8, parallelism=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(accounts, "PasswordHasher", quick)
        yield


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
