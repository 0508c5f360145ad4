"""Git's environment is private: no system, global or XDG config, and nothing inherited from
the server's environment but PATH, for libgit2 in-process and for every git child."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from pygit2.enums import ConfigLevel
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git_text

from floorless.git.env import GitEnvironment
from floorless.web.app import create_app

POISON = "[broken\n"  # a config file neither git nor libgit2 can parse

# Variables a careless forge would pass on to git; each of them changes what git does.
HOSTILE_ENV = {
    "GIT_DIR": "/nonexistent/git-dir",
    "GIT_WORK_TREE": "/nonexistent/work-tree",
    "GIT_OBJECT_DIRECTORY": "/nonexistent/objects",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/nonexistent/alternates",
    "GIT_CONFIG_PARAMETERS": "'core.bare'='maybe'",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "blame.ignoreRevsFile",
    "GIT_CONFIG_VALUE_0": "/nonexistent/ignore-revs",
    "GIT_CEILING_DIRECTORIES": "/",
    "GIT_NAMESPACE": "poison",
    "GIT_TRACE": "/nonexistent/trace",
    "LD_PRELOAD": "/nonexistent/preload.so",
    "LANG": "de_DE.UTF-8",
}


# ------------------------------------------------------------------ (a) the environment itself


def test_child_environment_is_private(tmp_path, monkeypatch):
    for name, value in HOSTILE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", "/nonexistent/home")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent/xdg")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/nonexistent/gitconfig")
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", "/nonexistent/system")
    runtime = tmp_path / "run"
    git_env = GitEnvironment(runtime)
    env = git_env.environ()

    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["LC_ALL"] == "C"
    for name in ("GIT_CONFIG_GLOBAL", "HOME", "XDG_CONFIG_HOME"):
        assert Path(env[name]).is_relative_to(runtime), name
    assert env["PATH"] == os.environ["PATH"]
    # nothing else comes from the server's environment: every value is ours
    assert env["FLOORLESS_THREAD"] == threading.current_thread().name  # who started it
    for name, value in env.items():
        if name in ("PATH", "FLOORLESS_THREAD"):
            continue
        assert value in ("0", "1", "C") or Path(value).is_relative_to(runtime), (name, value)
    for name in (*HOSTILE_ENV, "GIT_CONFIG_SYSTEM"):
        assert name not in env, name

    command = git_env.command(Path("/srv/git/a.git"), "blame", "x")
    assert command[1] == "--git-dir=/srv/git/a.git"
    assert command[2:] == ["blame", "x"]


def test_prepare_creates_an_empty_config_and_isolates_libgit2(tmp_path):
    git_env = GitEnvironment(tmp_path / "run")
    git_env.prepare()
    assert Path(git_env.environ()["GIT_CONFIG_GLOBAL"]).read_text() == ""
    assert Path(git_env.environ()["TMPDIR"]).is_dir()
    for level in (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL, ConfigLevel.PROGRAMDATA):
        assert pygit2.settings.search_path[level] == "", level


# ----------------------------------------------------------- (b) a poisoned home and system


@pytest.fixture
def poisoned(tmp_path, monkeypatch) -> dict[str, Path]:
    """A HOME, an XDG config and a system config that git cannot parse, plus hostile
    variables, all in this process's environment."""
    home = tmp_path / "poison-home"
    xdg = tmp_path / "poison-xdg"
    (xdg / "git").mkdir(parents=True)
    home.mkdir()
    (home / ".gitconfig").write_text(POISON)
    (xdg / "git" / "config").write_text(POISON)
    system = tmp_path / "poison-system"
    system.write_text(POISON)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    for name, value in HOSTILE_ENV.items():
        monkeypatch.setenv(name, value)
    return {"home": home, "xdg": xdg, "system": system}


def _plain_git(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args],
        env={"PATH": os.environ["PATH"], "LC_ALL": "C", **env},
        capture_output=True,
        check=False,
    )


_OPEN = """
import sys
from pathlib import Path
from floorless.git.env import GitEnvironment
from floorless.git.repo import open_repository
if sys.argv[2] != "default":
    GitEnvironment(Path(sys.argv[2])).prepare()
repo = open_repository(Path(sys.argv[1]))
print(repo.head.target, repo.config["core.bare"])
"""


def _libgit2_open(repo: Path, runtime: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """Open ``repo`` in a fresh interpreter (libgit2's search paths are process-wide)."""
    return subprocess.run(
        [sys.executable, "-c", _OPEN, str(repo), runtime],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        check=False,
    )


def test_the_poison_would_break_git_and_libgit2(fixture_root, poisoned, tmp_path):
    """Without isolation each poisoned file breaks git and libgit2, so the forge test below
    cannot pass by accident."""
    demo = fixture_root / "alice" / "demo.git"
    assert _plain_git(demo, "log", "-1").returncode == 0  # the repository itself is fine
    for name, env in (
        ("home", {"HOME": str(poisoned["home"])}),
        ("xdg", {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(poisoned["xdg"])}),
        ("system", {"HOME": str(tmp_path), "GIT_CONFIG_SYSTEM": str(poisoned["system"])}),
    ):
        broken = _plain_git(demo, "log", "-1", **env)
        assert broken.returncode != 0, name
        assert b"bad config" in broken.stderr, (name, broken.stderr)
    blame = _plain_git(
        demo,
        "blame",
        "main",
        "--",
        "README.md",
        HOME=str(tmp_path),
        **{k: v for k, v in HOSTILE_ENV.items() if k.startswith("GIT_CONFIG")},
    )
    assert blame.returncode != 0, "the inherited config variables would break blame"

    default = _libgit2_open(demo, "default", HOME=str(poisoned["home"]))
    assert default.returncode != 0
    assert b"failed to parse config file" in default.stderr, default.stderr
    isolated = _libgit2_open(
        demo,
        str(tmp_path / "run"),
        HOME=str(poisoned["home"]),
        XDG_CONFIG_HOME=str(poisoned["xdg"]),
    )
    assert isolated.returncode == 0, isolated.stderr
    assert isolated.stdout.split()[0].decode() == git_text(demo, "rev-parse", "main")


class _Children:
    """Records ``subprocess.Popen`` calls made on one thread while active (module-wide hook,
    since audit hooks cannot be removed)."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.calls: list[tuple] = []

    def __call__(self, event: str, args: tuple) -> None:
        if event == "subprocess.Popen" and self.thread == threading.get_ident():
            self.calls.append(args)  # (executable, args, cwd, env)


_CHILDREN = _Children()
sys.addaudithook(_CHILDREN)


def _capture(client: testing.TestClient, url: str) -> tuple[testing.Result, list[tuple]]:
    _CHILDREN.calls = []
    _CHILDREN.thread = threading.get_ident()
    try:
        result = client.simulate_get(url)
    finally:
        _CHILDREN.thread = None
    return result, list(_CHILDREN.calls)


@pytest.fixture
def poisoned_forge(fixture_root, tmp_path, poisoned):
    repos = tmp_path / "repos"
    for name in ("alice/demo.git", "alice/one.git", "carol/checkout"):
        shutil.copytree(fixture_root / name, repos / name, symlinks=True)
    forge = start_forge(repos, tmp_path / "data", runtime_dir=tmp_path / "run")
    try:
        wait_indexed(forge)
        yield forge
    finally:
        forge.stop()


def test_forge_works_under_a_poisoned_home(poisoned_forge, tmp_path):
    forge = poisoned_forge
    client = testing.TestClient(create_app(forge))
    for url in (
        "/",
        "/alice/demo",
        "/alice/demo/src/branch/main/src/app.py",
        "/alice/demo/commits/branch/main/src/app.py",
        "/carol/checkout",
        "/alice/demo/raw/branch/main/README.md",
    ):
        result = client.simulate_get(url)
        assert result.status_code == 200, (url, result.status_code, result.text[:300])
    assert "Update README" in client.simulate_get("/alice/demo").text

    # (c) the children: blame and archive, with the environment they were given
    runtime = tmp_path / "run"
    for url, subcommand in (
        ("/alice/demo/blame/branch/main/src/app.py", "blame"),
        ("/alice/demo/archive/main.tar.gz", "archive"),
        ("/carol/checkout/blame/branch/main/notes.txt", "blame"),
    ):
        result, calls = _capture(client, url)
        assert result.status_code == 200, (url, result.status_code, result.text[:300])
        assert len(calls) == 1, url
        _executable, args, cwd, env = calls[0]
        args = [os.fsdecode(a) for a in args]
        repo = forge.registry.get(*url.split("/")[1:3])
        assert args[1] == f"--git-dir={repo.path}", args
        assert args[2] == subcommand, args
        assert env is not None, "a git child must not inherit the server's environment"
        env = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        assert env["GIT_CONFIG_NOSYSTEM"] == "1"
        for name in ("GIT_CONFIG_GLOBAL", "HOME", "XDG_CONFIG_HOME"):
            assert Path(env[name]).is_relative_to(runtime), (name, env[name])
        assert Path(env["GIT_CONFIG_GLOBAL"]).read_text() == ""
        for name in (*HOSTILE_ENV, "GIT_CONFIG_SYSTEM"):
            assert name not in env, name
        assert cwd is not None and Path(os.fsdecode(cwd)).is_relative_to(runtime)

    blame = client.simulate_get("/alice/demo/blame/branch/main/src/app.py").text
    assert '<span class="nf">shout</span>' in blame
    for level in (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL):
        assert pygit2.settings.search_path[level] == ""
