"""git's own client against a real ``floorless serve``: a site with its people and tokens,
and ``git`` run with the environment the tests give it."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.forges import patience
from support.serving import Server, serving

PASSWORD = "correct horse battery"


def git_environment() -> dict[str, str]:
    """The environment of the tests' git client: it never prompts, and commits as Tester."""
    return {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.org",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.org",
    }


def git(
    *args: str, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The real git client; never prompts (a missing credential is an error, not a hang)."""
    env = git_environment()
    result = subprocess.run(
        ["git", "-c", "credential.helper=", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=patience(120),
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def rev(repo: Path, ref: str) -> str:
    return git("--git-dir", str(repo), "rev-parse", ref).stdout.strip()


def commit(work: Path, name: str, text: str, message: str) -> str:
    (work / name).write_text(text)
    git("add", name, cwd=work)
    git("commit", "-q", "-m", message, cwd=work)
    return git("rev-parse", "HEAD", cwd=work).stdout.strip()


class Site:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.tokens: dict[tuple[str, str], str] = {}

    def url(self, repo: str, user: str | None = None, scope: str = "write") -> str:
        host = self.server.url.removeprefix("http://")
        if user is None:
            return f"http://{host}/{repo}.git"
        return f"http://{user}:{self.token(user, scope)}@{host}/{repo}.git"

    def token(self, user: str, scope: str = "write") -> str:
        key = (user, scope)
        if key not in self.tokens:
            self.tokens[key] = self.server.admin("token", "create", user, "--scope", scope)
        return self.tokens[key]

    def page(self, path: str, user: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.server.url + path)
        if user is not None:
            request.add_header("Authorization", f"token {self.token(user, 'read')}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")

    def metric(self, name: str, route: str) -> float:
        _, text = self.page("/-/metrics")
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and f'route="{route}"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("git-http")
    with serving(root / "repos", root / "data") as server:
        for name, extra in (("alice", ["--admin"]), ("bob", []), ("dave", [])):
            server.admin(
                "user",
                "create",
                name,
                "--email",
                f"{name}@example.org",
                *extra,
                "--password-stdin",
                stdin=PASSWORD + "\n",
            )
        site = Site(server)
        seed = root / "seed"
        git("init", "-q", str(seed))
        for n in range(3):
            commit(seed, "README.md", f"# project\n\nversion {n}\n", f"version {n}")
        (seed / "big.bin").write_bytes(os.urandom(200_000))
        git("add", "big.bin", cwd=seed)
        git("commit", "-q", "-m", "add a binary", cwd=seed)
        for name, private in (("alice/pub", False), ("alice/priv", True)):
            server.admin("repo", "create", name, *(["--private"] if private else []))
            git("push", "-q", site.url(name, "alice"), "main", cwd=seed)
        yield site


def bare(site: Site, repo: str) -> Path:
    owner, name = repo.split("/")
    return site.server.repos / owner / f"{name}.git"
