"""Storage that fails, and processes that die.

A listing or a stat that fails (``ESTALE`` from a network share, an I/O error) is not an
absence: a scan keeps every row, id, index and answer below the directory it could not read,
and drops a repository only once two scans in a row have seen it missing. A create, rename or
delete killed at any step never leaves a private repository readable, and the next start
finishes or undoes it with nothing lost.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pygit2
import pytest
from falcon import testing
from support.forges import copy_test_database, start_forge, wait_indexed
from support.gitfixtures import (
    EPOCH_START,
    build_checkout,
    build_one,
    build_solo,
    git,
    git_text_input,
)

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

# -- a scan over storage that fails ------------------------------------------------------------


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[tuple[Forge, Path]]:
    repos = tmp_path / "repos"
    build_one(repos / "alice" / "one.git")
    build_solo(repos / "alice" / "two.git")
    build_checkout(repos / "bob" / "work")
    build_solo(repos / "solo.git")
    # background rescans would race the scans the tests make
    forge = start_forge(repos, tmp_path / "data", rescan_interval=3600)
    try:
        wait_indexed(forge)
        yield forge, repos
    finally:
        forge.stop()


def _state(forge: Forge) -> dict[str, tuple[int, int, int]]:
    """Every repository's id, and how many index rows and stored answers it has."""
    state = {}
    for repo in forge.registry.all():
        counts = [
            forge.db.one(f"SELECT COUNT(*) AS n FROM {table} WHERE repo_id = ?", (repo.id,))
            for table in ("index_chunks", "answers")
        ]
        state[repo.full_name] = (repo.id, *(int(c["n"]) if c else 0 for c in counts))
    return state


def _fail(monkeypatch: pytest.MonkeyPatch, method: str, when: Callable[[Path], bool]) -> None:
    """Make ``Path.<method>`` raise ESTALE for the paths ``when`` picks."""
    real = getattr(Path, method)

    def failing(self: Path, *args: object, **kwargs: object) -> object:
        if when(self):
            raise OSError(errno.ESTALE, os.strerror(errno.ESTALE), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, method, failing)


FAULTS = {
    "the root's listing": ("iterdir", lambda repos, p: p == repos),
    "an owner's listing": ("iterdir", lambda repos, p: p == repos / "alice"),
    "a stat of an owner's directory": ("is_dir", lambda repos, p: p == repos / "alice"),
    "a stat in a repository": ("is_file", lambda repos, p: p.parent.name == "one.git"),
    "a checkout's .git": ("is_dir", lambda repos, p: p == repos / "bob" / "work" / ".git"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_scan_that_cannot_read_a_directory_drops_nothing(
    faulty: tuple[Forge, Path], monkeypatch: pytest.MonkeyPatch, caplog, fault: str
) -> None:
    forge, repos = faulty
    client = testing.TestClient(create_app(forge))
    before = _state(forge)
    assert len(before) == 4 and all(index and answers for _, index, answers in before.values())
    graphs = {repo.id: forge.indexer.graph(repo.id) for repo in forge.registry.all()}
    assert all(graphs.values())
    method, when = FAULTS[fault]
    caplog.set_level(logging.WARNING)
    for _ in range(3):  # however often it happens
        with monkeypatch.context() as patch:
            _fail(patch, method, lambda p: when(repos, p))
            result = forge.maintenance.rescan()
        assert _state(forge) == before
        assert result.unreadable, fault
        assert (result.added, result.removed, result.missing) == (0, 0, 0)
    assert "cannot read" in caplog.text and "Stale file handle" in caplog.text
    assert forge.registry.incomplete_scans == 3
    # the index in memory and every page stay
    assert {repo.id: forge.indexer.graph(repo.id) for repo in forge.registry.all()} == graphs
    for name in before:
        assert client.simulate_get(f"/{name}").status_code == 200, name
    clean = forge.maintenance.rescan()
    assert (clean.added, clean.removed, clean.missing, clean.unreadable) == (0, 0, 0, ())
    assert _state(forge) == before


def test_a_missing_repositories_directory_is_an_error_not_an_empty_forge(
    faulty: tuple[Forge, Path], tmp_path: Path
) -> None:
    forge, repos = faulty
    before = _state(forge)
    repos.rename(tmp_path / "unmounted")  # a share not mounted (yet)
    for _ in range(3):
        result = forge.maintenance.rescan()
        assert _state(forge) == before
        assert result.unreadable and result.removed == 0
    (tmp_path / "unmounted").rename(repos)
    forge.maintenance.rescan()
    assert _state(forge) == before


def test_a_repository_is_dropped_only_when_two_scans_in_a_row_miss_it(
    faulty: tuple[Forge, Path], tmp_path: Path
) -> None:
    forge, repos = faulty
    before = _state(forge)
    two = repos / "alice" / "two.git"
    aside = tmp_path / "aside.git"
    # gone for one scan (a remount), back for the next: as it was
    two.rename(aside)
    first = forge.maintenance.rescan()
    assert _state(forge) == before
    assert first.missing == 1
    aside.rename(two)
    assert forge.maintenance.rescan().missing == 0
    two.rename(aside)
    assert forge.maintenance.rescan().missing == 1  # the count started again
    aside.rename(two)
    forge.maintenance.rescan()
    assert _state(forge) == before
    # gone for good: dropped, with its index and answers, at the second scan in a row
    two.rename(aside)
    first = forge.maintenance.rescan()
    assert (first.missing, first.removed) == (1, 0) and _state(forge) == before
    second = forge.maintenance.rescan()
    assert (second.missing, second.removed) == (0, 1)
    repo_id = before["alice/two"][0]
    assert "alice/two" not in _state(forge)
    for table in ("index_chunks", "answers", "repo_missing"):
        row = forge.db.one(f"SELECT COUNT(*) AS n FROM {table} WHERE repo_id = ?", (repo_id,))
        assert row is not None and row["n"] == 0, table
    assert forge.indexer.graph(repo_id) is None
    others = {k: v for k, v in before.items() if k != "alice/two"}
    assert _state(forge) == others


def test_adoption_of_an_unknown_directory_follows_the_setting(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    build_one(repos / "alice" / "found.git")
    for policy, status in (("public", 200), ("private", 404)):
        forge = start_forge(repos, tmp_path / f"data-{policy}", adopt_visibility=policy)
        try:
            client = testing.TestClient(create_app(forge))
            assert forge.registry.get("alice", "found").private == (policy == "private")
            assert client.simulate_get("/alice/found").status_code == status
            # a name whose visibility is recorded keeps it, whatever the policy
            forge.registry.set_private("alice", "recorded", policy == "public")
            build_one(repos / "alice" / "recorded.git")
            forge.maintenance.rescan()
            assert forge.registry.get("alice", "recorded").private == (policy == "public")
        finally:
            forge.stop()
            shutil.rmtree(repos / "alice" / "recorded.git")


# -- a process killed at each step of a create, rename or delete ---------------------------------

# Run in a child process: every step that changes the disk or commits to the database counts,
# and the process dies (as by SIGKILL: no clean-up, no rollback but SQLite's own) before the
# step numbered by the last argument.
CHILD = textwrap.dedent(
    """
    import os, pathlib, shutil, sys
    import pygit2
    from floorless.core.config import Settings
    from floorless.db import store
    from floorless.forge import Forge

    data, repos, operation, last, database = sys.argv[1:6]
    forge = Forge(
        Settings.load(
            environ={}, data=pathlib.Path(data), repos=pathlib.Path(repos), database=database
        )
    )
    forge.prepare()
    steps = 0

    def step(func):
        def counted(*args, **kwargs):
            global steps
            if steps == int(last):
                os._exit(9)
            steps += 1
            return func(*args, **kwargs)
        return counted

    store.Database._finish = step(store.Database._finish)
    for name in ("rename", "mkdir", "write_text"):
        setattr(pathlib.Path, name, step(getattr(pathlib.Path, name)))
    pygit2.init_repository = step(pygit2.init_repository)
    shutil.rmtree = step(shutil.rmtree)
    if operation == "create":
        forge.registry.create("ann", "secret", private=True, description="Plans")
    elif operation == "rename":
        forge.lifecycle.rename(forge.registry.get("ann", "secret"), "renamed")
    else:
        forge.lifecycle.delete(forge.registry.get("ann", "secret"))
    print(steps)
    """
)


def _run_child(
    data: Path, repos: Path, operation: str, last: int
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    database = _settings(data, repos).database
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(data), str(repos), operation, str(last), database],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _settings(data: Path, repos: Path) -> Settings:
    return Settings.load(environ={}, data=data, repos=repos)


def _template(base: Path, operation: str) -> tuple[str | None, int | None]:
    """The data before the operation: an account ann (with a collaborator, ben) and, but for
    a create, her private repository ann/secret with one commit. Returns its commit and id."""
    forge = Forge(_settings(base / "data", base / "repos"))
    forge.prepare()
    ann = forge.accounts.create_user("ann", "ann@example.org", "a long password")
    ben = forge.accounts.create_user("ben", "ben@example.org", "a long password")
    assert ann and ben
    if operation == "create":
        # a stale visibility left by a vanished public repository of the same name
        forge.registry.set_private("ann", "secret", False)
        forge.db.close()  # now, not whenever the collector gets to it (mid-copy of its files)
        return None, None
    repo = forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(repo, ben, "read")
    blob = git_text_input(repo.path, b"the plans\n", "hash-object", "-w", "--stdin")
    tree = git_text_input(repo.path, f"100644 blob {blob}\tPLANS\n".encode(), "mktree")
    commit = git(repo.path, "commit-tree", tree, "-m", "Plans", when=EPOCH_START).decode().strip()
    git(repo.path, "update-ref", "refs/heads/main", commit)
    forge.db.close()
    return commit, repo.id


def _assert_nothing_exposed(forge: Forge, stage: str) -> None:
    client = testing.TestClient(create_app(forge))
    for name in ("secret", "renamed"):
        for url in (
            f"/ann/{name}",
            f"/ann/{name}/commits",
            f"/ann/{name}.git/info/refs?service=git-upload-pack",
        ):
            assert client.simulate_get(url).status_code in (401, 404), (stage, url)
    for page in ("/", "/ann"):
        text = client.simulate_get(page).text
        assert "ann/secret" not in text and "ann/renamed" not in text, (stage, page)
    for repo in forge.registry.all():
        assert repo.private, (stage, repo.full_name)


def _count(forge: Forge, sql: str, params: tuple[object, ...] = ()) -> int:
    row = forge.db.one(f"SELECT COUNT(*) AS n FROM ({sql}) AS q", params)
    return int(row["n"]) if row else 0


def _check_after_crash(
    data: Path, repos: Path, operation: str, commit: str | None, repo_id: int | None
) -> str:
    """What a scan before any recovery (a server still running, ``admin rescan``) and then a
    fresh start make of the data a killed process left; returns the outcome."""
    scanning = Forge(_settings(data, repos))
    scanning.prepare()
    scanning.registry.scan()
    _assert_nothing_exposed(scanning, "a scan before recovery")
    scanning.db.close()

    forge = Forge(_settings(data, repos))
    forge.start(background=False)
    try:
        _assert_nothing_exposed(forge, "after recovery")
        outcome = _outcome(forge, repos, operation, commit, repo_id)
        assert not forge.db.query("SELECT 1 FROM repo_intents"), "an operation left pending"
        return outcome
    finally:
        forge.stop()
        forge.db.close()


def _outcome(
    forge: Forge, repos: Path, operation: str, commit: str | None, repo_id: int | None
) -> str:
    """Where the repository is, checking that nothing of it is lost or left behind."""
    rows = forge.registry.all()
    owner_dir = repos / "ann"
    on_disk = sorted(p.name for p in owner_dir.iterdir()) if owner_dir.exists() else []
    if not rows:
        assert on_disk == [], on_disk  # nothing half made or half removed is left
        assert operation in ("create", "delete")
        if operation == "delete":
            assert _count(forge, "SELECT 1 FROM repo_access WHERE name = 'secret'") == 0
            assert _count(forge, "SELECT 1 FROM collaborators") == 0
        return "not there"
    (repo,) = rows
    assert repo.private and repo.owner == "ann"
    assert on_disk == [repo.path.name], on_disk
    assert Path(repo.path, "HEAD").is_file()
    if operation == "create":
        assert repo.description == "Plans"
        return "created"
    # the repository, its id (and so its index), its collaborator: under one name, intact
    assert repo.id == repo_id
    assert git(repo.path, "rev-parse", "main").decode().strip() == commit
    collaborators = forge.db.query("SELECT name FROM collaborators")
    assert [row["name"] for row in collaborators] == [repo.name]
    return repo.name


class Killed(BaseException):
    """Stands for the process dying: nothing catches it on the way out."""


def test_a_create_killed_inside_gits_init_is_finished_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path / "data", tmp_path / "repos")
    forge = Forge(settings)
    forge.prepare()

    def half_way(path: str, **kwargs: object) -> None:
        Path(path, "HEAD").write_text("ref: refs/heads/main\n")
        Path(path, "objects").mkdir()
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(pygit2, "init_repository", half_way)
        with pytest.raises(Killed):
            forge.registry.create("ann", "secret", private=True, description="Plans")
    _assert_nothing_exposed(forge, "killed")
    forge.registry.scan()  # a scan in the meantime takes the half-made repository as private
    _assert_nothing_exposed(forge, "scanned")
    fresh = Forge(settings)
    fresh.start(background=False)
    try:
        _assert_nothing_exposed(fresh, "started")
        repo = fresh.registry.get("ann", "secret")
        assert repo.private and repo.description == "Plans"
        assert (repo.path / "config").is_file() and (repo.path / "refs" / "heads").is_dir()
        assert pygit2.Repository(str(repo.path)).head_is_unborn
        assert not fresh.db.query("SELECT 1 FROM repo_intents")
    finally:
        fresh.stop()


@pytest.mark.parametrize("operation", ["create", "rename", "delete"])
def test_a_kill_at_any_step_never_exposes_a_private_repository(
    tmp_path: Path, operation: str
) -> None:
    # the database keeps absolute paths: every run uses the same place, restored each time
    site, pristine = tmp_path / "site", tmp_path / "pristine"
    commit, repo_id = _template(site, operation)
    shutil.copytree(site, pristine, symlinks=True)
    copy_test_database(site / "data", pristine / "data")

    def run(last: int) -> subprocess.CompletedProcess[str]:
        shutil.rmtree(site)
        shutil.copytree(pristine, site, symlinks=True)
        copy_test_database(pristine / "data", site / "data")
        return _run_child(site / "data", site / "repos", operation, last)

    done = run(10**6)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout.split()[-1])
    assert steps >= 2
    outcomes: dict[int, str] = {}
    failures: dict[int, str] = {}  # every crash point checked, each failure shown
    for last in range(steps + 1):
        child = run(last)
        assert child.returncode == (9 if last < steps else 0), child.stderr
        try:
            outcomes[last] = _check_after_crash(
                site / "data", site / "repos", operation, commit, repo_id
            )
        except (AssertionError, sqlite3.Error, psycopg.Error) as exc:
            failures[last] = f"{type(exc).__name__}: {exc}"
    assert not failures, "\n".join(f"killed before step {k}: {why}" for k, why in failures.items())
    assert (
        outcomes[steps]
        == {"create": "created", "rename": "renamed", "delete": "not there"}[operation]
    )
    assert outcomes[0] == {"create": "not there", "rename": "secret", "delete": "secret"}[operation]
