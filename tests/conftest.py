"""Shared fixtures: the fixture repositories (built once per session), a started forge over
them with its index complete, and an in-process test client.

With ``FLOORLESS_TEST_POSTGRES`` set to a PostgreSQL server's URL (``./check`` starts one with
``scripts/test-postgres.sh``), every forge a test makes, in this process or in a server or
admin process, keeps its data in a database of its own on that server instead of SQLite.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.forges import POSTGRES, database_for, start_forge, wait_indexed
from support.gitfixtures import build_all

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

_HOME_SAFE_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


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
