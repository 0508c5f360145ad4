"""Self-checks for the deterministic git fixtures in ``gitfixtures``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitfixtures import (
    BUILDERS,
    DEMO_INVALID_UTF8_PATH,
    HISTORY_COMMITS,
    HISTORY_RARE_COMMITS,
    GitError,
    build_all,
    git,
    git_text,
)

CORRUPT = "alice/corrupt.git"


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_all(tmp_path_factory.mktemp("forge"))


def _refs(repo: Path) -> bytes:
    heads = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    head = git(repo, "symbolic-ref", "HEAD")
    return head + heads


def test_layout(repos: dict[str, Path]) -> None:
    assert set(repos) == set(BUILDERS)
    root = repos["solo.git"].parent
    for name, path in repos.items():
        assert path == root / name
        assert git_text(path, "symbolic-ref", "HEAD") == "refs/heads/main"
        bare = git_text(path, "rev-parse", "--is-bare-repository")
        assert bare == ("false" if name == "carol/checkout" else "true")
    assert git_text(repos["carol/checkout"], "status", "--porcelain") == ""
    assert git(repos["alice/empty.git"], "for-each-ref") == b""


def test_deterministic(repos: dict[str, Path], tmp_path: Path) -> None:
    again = build_all(tmp_path)
    for name, path in repos.items():
        assert _refs(again[name]) == _refs(path), name


def test_fsck_clean(repos: dict[str, Path]) -> None:
    for name, path in repos.items():
        if name != CORRUPT:
            git(path, "fsck", "--full", "--strict", "--no-dangling")


def test_corrupt_is_broken(repos: dict[str, Path]) -> None:
    corrupt = repos[CORRUPT]
    git(corrupt, "rev-parse", "--verify", "main^{commit}")
    for args in (["fsck", "--full"], ["ls-tree", "-r", "main"]):
        with pytest.raises(GitError):
            git(corrupt, *args)


def test_history(repos: dict[str, Path]) -> None:
    history = repos["alice/history.git"]
    assert int(git_text(history, "rev-list", "--count", "main")) >= 10_000
    first_parent = git_text(history, "rev-list", "--count", "--first-parent", "main")
    assert int(first_parent) == HISTORY_COMMITS
    rare = git_text(history, "log", "--format=%s", "--", "rare.txt").splitlines()
    assert rare == [f"commit {n}" for n in reversed(HISTORY_RARE_COMMITS)]


def test_demo_paths_and_modes(repos: dict[str, Path]) -> None:
    demo = repos["alice/demo.git"]
    entries = git(demo, "ls-tree", "-r", "-z", "main").split(b"\0")
    by_path = {entry.split(b"\t", 1)[1]: entry.split(b" ", 2) for entry in entries if entry}
    assert DEMO_INVALID_UTF8_PATH in by_path
    assert by_path[b"link-to-readme"][0] == b"120000"
    assert by_path[b"vendor/lib"][:2] == [b"160000", b"commit"]
    assert git(demo, "cat-file", "-p", "main:link-to-readme") == b"README.md"


def test_demo_refs_and_merge(repos: dict[str, Path]) -> None:
    demo = repos["alice/demo.git"]
    assert git_text(demo, "cat-file", "-t", "refs/tags/release") == "tag"
    tagged = git_text(demo, "rev-parse", "refs/tags/release^{commit}")
    assert tagged != git_text(demo, "rev-parse", "refs/heads/release")
    assert git_text(demo, "cat-file", "-t", "refs/tags/v1.0") == "commit"
    merge = git_text(demo, "rev-list", "--merges", "main")
    assert len(merge.split()) == 1
    clean = git_text(demo, "merge-tree", "--write-tree", f"{merge}^1", f"{merge}^2")
    assert clean == git_text(demo, "rev-parse", f"{merge}^{{tree}}")
    renames = git_text(
        demo, "log", "--follow", "--format=", "--name-status", "--", "docs/renamed.txt"
    )
    assert "R100\told_name.txt\tdocs/renamed.txt" in renames


def test_merges_shape(repos: dict[str, Path]) -> None:
    merges = repos["bob/merges.git"]
    assert 30 <= int(git_text(merges, "rev-list", "--count", "--all")) <= 40
    assert len(git_text(merges, "merge-base", "--all", "cross-x", "cross-y").split()) == 2
    stamps = git_text(merges, "log", "--all", "--format=%ct").split()
    assert len(stamps) > len(set(stamps))
    follow = git_text(merges, "log", "--follow", "--format=%s", "--", "lib/b.txt")
    assert "topic-a: change lib/a.txt" in follow
