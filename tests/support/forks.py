"""A forge with a repository to fork and the git helpers that push into forks, shared by the
fork tests and the fork privacy tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing

from floorless.forge import Forge
from floorless.web.app import create_app
from support.accounts import PASSWORD, Browser
from support.forges import start_forge


def git(
    *args: str, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.org",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.org",
    }
    result = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def commit(work: Path, name: str, text: str, message: str) -> str:
    (work / name).write_text(text)
    git("add", name, cwd=work)
    git("commit", "-q", "-m", message, cwd=work)
    return git("rev-parse", "HEAD", cwd=work).stdout.strip()


def rev(git_dir: Path, ref: str) -> str:
    return git("--git-dir", str(git_dir), "rev-parse", ref).stdout.strip()


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "cat", "dan", "eve"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    work = tmp_path / "work"
    git("init", "-q", str(work))
    for n in range(3):
        commit(work, "README.md", f"# plans\n\nversion {n}\n", f"version {n}")
    git("tag", "-a", "-m", "First", "v1", cwd=work)
    for name, private in (("plans", False), ("secret", True)):
        repo = forge.registry.create("ann", name, private=private)
        git("push", "-q", str(repo.path), "main", "v1", cwd=work)
        forge.moves.after_push(repo)
    dan = forge.accounts.get("dan")
    assert dan is not None
    forge.policy.set_collaborator(forge.registry.get("ann", "secret"), dan, "read")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def person(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser
