"""Committing files without a work tree (``floorless.git.write``), checked with git itself:
the commit's tree, author and message as ``git`` reads them; a stale blob id refused with
nothing written; writers racing on one branch never lose a commit."""

from __future__ import annotations

import threading
from pathlib import Path

import pygit2
import pytest
from support.gitfixtures import build_empty, build_one, git, git_text

from floorless.core.errors import Conflict, NotFound
from floorless.git.env import GitEnvironment
from floorless.git.write import (
    Change,
    StaleFile,
    Unprocessable,
    check_branch_name,
    check_write_path,
    commit_files,
)

WHO = pygit2.Signature("Api Writer", "writer@example.org", 1_700_000_000, 60)


@pytest.fixture
def env(tmp_path: Path) -> GitEnvironment:
    found = GitEnvironment(tmp_path / "run")
    found.prepare()
    return found


def write(
    repo: Path,
    env: GitEnvironment,
    *changes: Change,
    branch: str = "main",
    new_branch: str | None = None,
    message: str = "Change files\n",
) -> str:
    handle = pygit2.Repository(str(repo))
    written = commit_files(
        handle,
        env,
        repo,
        branch,
        new_branch,
        changes,
        message,
        WHO,
        WHO,
        empty_ok=handle.head_is_unborn,
    )
    return str(written.commit.id)


def blob_of(repo: Path, spec: str) -> str:
    return git_text(repo, "rev-parse", spec)


def test_create_update_move_and_delete(tmp_path: Path, env: GitEnvironment) -> None:
    repo = build_one(tmp_path / "one.git")
    first = blob_of(repo, "main")
    made = write(
        repo,
        env,
        Change("create", b"docs/deep/new.txt", b"new\n"),
        Change("create", b"bin/run", b"#!/bin/sh\n"),
    )
    assert blob_of(repo, "main") == made
    assert git_text(repo, "log", "--format=%H %P %an <%ae> %s", "-1") == (
        f"{made} {first} Api Writer <writer@example.org> Change files"
    )
    assert git(repo, "show", "main:docs/deep/new.txt") == b"new\n"
    git(repo, "fsck", "--strict")

    readme = blob_of(repo, "main:README.md")
    write(repo, env, Change("update", b"README.md", b"changed\n", sha=readme))
    assert git(repo, "show", "main:README.md") == b"changed\n"

    moved = blob_of(repo, "main:docs/deep/new.txt")
    write(
        repo, env, Change("update", b"moved.txt", None, sha=moved, from_path=b"docs/deep/new.txt")
    )
    assert git(repo, "show", "main:moved.txt") == b"new\n"
    # the emptied directories are gone with the file, as git leaves no empty tree
    assert git_text(repo, "ls-tree", "-r", "--name-only", "main").split() == [
        "README.md",
        "bin/run",
        "moved.txt",
    ]
    write(repo, env, Change("delete", b"bin/run", sha=blob_of(repo, "main:bin/run")))
    assert "bin" not in git_text(repo, "ls-tree", "--name-only", "main").split()
    git(repo, "fsck", "--strict")
    assert git_text(repo, "rev-list", "--count", "main") == "5"


def test_a_stale_sha_is_refused_and_nothing_is_written(tmp_path: Path, env: GitEnvironment) -> None:
    repo = build_one(tmp_path / "one.git")
    before = blob_of(repo, "main")
    objects_before = git_text(repo, "count-objects")
    wrong = "1" * 40
    with pytest.raises(StaleFile) as caught:
        write(repo, env, Change("update", b"README.md", b"x\n", sha=wrong))
    assert caught.value.status == 409
    with pytest.raises(StaleFile):
        write(repo, env, Change("delete", b"README.md", sha=wrong))
    with pytest.raises(Unprocessable):  # no sha at all
        write(repo, env, Change("delete", b"README.md"))
    with pytest.raises(Unprocessable):  # already there
        write(repo, env, Change("create", b"README.md", b"x\n"))
    with pytest.raises(NotFound):
        write(repo, env, Change("delete", b"missing.txt", sha=wrong))
    with pytest.raises(NotFound):
        write(repo, env, Change("create", b"x.txt", b"x\n"), branch="nope")
    with pytest.raises(Unprocessable):
        write(repo, env, Change("create", b"README.md/inside", b"x\n"))
    assert blob_of(repo, "main") == before
    assert git_text(repo, "count-objects") == objects_before  # not even a blob was written


def test_new_branch_and_first_commit(tmp_path: Path, env: GitEnvironment) -> None:
    repo = build_one(tmp_path / "one.git")
    main = blob_of(repo, "main")
    made = write(repo, env, Change("create", b"a.txt", b"a\n"), new_branch="topic/a")
    assert blob_of(repo, "topic/a") == made and blob_of(repo, "main") == main
    assert git_text(repo, "rev-parse", f"{made}^") == main
    with pytest.raises(Unprocessable):
        write(repo, env, Change("create", b"b.txt", b"b\n"), new_branch="topic/a")

    empty = build_empty(tmp_path / "empty.git")
    root = write(empty, env, Change("create", b"README.md", b"hi\n"))
    assert git_text(empty, "rev-list", "main") == root
    assert git_text(empty, "log", "--format=%P", "main") == ""


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/abs",
        "a//b",
        "a/./b",
        "../up",
        "a/..",
        "x\0y",
        ".git/config",
        "a/.GIT/x",
        "a\\b",
        "x" * 5000,
    ],
)
def test_paths_that_are_refused(path: str) -> None:
    with pytest.raises(Unprocessable):
        check_write_path(path)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a..b",
        "a b",
        "x.lock",
        "-x",
        "HEAD",
        "a~1",
        "a:b",
        "/a",
        "a/",
        "a@{1}",
        "a\\b",
        "a\x7fb",
    ],
)
def test_branch_names_git_would_reject(name: str) -> None:
    with pytest.raises(Unprocessable):
        check_branch_name(name)
    assert check_branch_name("feature/x-1") == "feature/x-1"


def test_racing_writers_never_lose_a_commit(tmp_path: Path, env: GitEnvironment) -> None:
    """Eight writers on one branch: each either lands or is told (409); every one that
    landed is in the branch's history, and the branch's history is exactly them."""
    repo = build_one(tmp_path / "one.git")
    start = threading.Barrier(8)
    landed: list[str] = []
    refused: list[Exception] = []

    def writer(number: int) -> None:
        start.wait()
        try:
            landed.append(write(repo, env, Change("create", f"w{number}.txt".encode(), b"x\n")))
        except Conflict as exc:
            refused.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(landed) + len(refused) == 8 and landed
    history = git_text(repo, "rev-list", "main").split()
    assert set(landed) <= set(history)
    assert len(history) == 1 + len(landed)
    names = git_text(repo, "ls-tree", "--name-only", "main").split()
    assert len(names) == 1 + len(landed)


def test_same_file_racing_one_gets_409(tmp_path: Path, env: GitEnvironment) -> None:
    """Two updates of one file from the same sha: one lands, the other's sha is then stale."""
    repo = build_one(tmp_path / "one.git")
    sha = blob_of(repo, "main:README.md")
    write(repo, env, Change("update", b"README.md", b"first\n", sha=sha))
    with pytest.raises(StaleFile):
        write(repo, env, Change("update", b"README.md", b"second\n", sha=sha))
    assert git(repo, "show", "main:README.md") == b"first\n"
