"""Shared fixtures: the fixture repositories (built once per session), a started forge over
them with its index complete, and an in-process test client."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from gitfixtures import build_all

from floorless.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # bench/ sits beside src/, outside the installed package
    sys.path.insert(0, str(ROOT))

_HOME_SAFE_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


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
