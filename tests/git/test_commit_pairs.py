"""A commit page's changes are found by reading only the trees that differ from the parent's
(as ``git diff-tree`` does), each changed file a pair of blobs: the same files, counts and
lines as libgit2's diff of the whole trees, wherever the pairs stand for it, and libgit2's
diff wherever they cannot be sure (renames to find, type and mode changes, submodules)."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from support.gitfixtures import git

from floorless.git import diff as gitdiff

LIMITS = gitdiff.Limits(300, 1500, 3000, 1000, 1 << 20, 8 << 20)
WHEN = 1_700_000_000


def _bare_repositories(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.git") if (p / "HEAD").is_file())


def test_the_pairs_give_libgit2s_answer_on_every_fixture_commit(fixture_root: Path) -> None:
    by_pairs = by_libgit2 = 0
    for path in _bare_repositories(fixture_root):
        repo = pygit2.Repository(str(path))
        try:
            ids = git(path, "rev-list", "--all", "--max-count=150").decode().split()
        except Exception:  # an empty or corrupt fixture has no history to diff
            continue
        for sha in ids:
            commit = repo[sha]
            try:
                whole = gitdiff._changes(repo, gitdiff._diff(repo, commit, LIMITS), LIMITS)
            except pygit2.GitError:  # the corrupt fixture: a tree is missing
                continue
            pairs = gitdiff._changed_pairs(repo, commit)
            if pairs is None:
                by_libgit2 += 1
                assert gitdiff.commit_diff(repo, commit, LIMITS) == whole, (path, sha)
                continue
            by_pairs += 1
            assert gitdiff._changes(repo, pairs, LIMITS) == whole, (path, sha)
            assert gitdiff.commit_diff(repo, commit, LIMITS) == whole, (path, sha)
            for f in whole.files[:3]:
                one = gitdiff.file_diff(repo, commit, f.new_path, LIMITS)
                assert one is not None and one.new_path == f.new_path, (path, sha)
    assert by_pairs > 20 and by_libgit2 > 5, (by_pairs, by_libgit2)


def test_a_compares_pairs_give_libgit2s_answer(fixture_root: Path) -> None:
    """A compare's changes (merge base to head: here each commit against the one three
    before it) are found the same way, with the same answer."""
    compared = 0
    for path in _bare_repositories(fixture_root):
        repo = pygit2.Repository(str(path))
        try:
            ids = git(path, "rev-list", "--first-parent", "--max-count=60", "HEAD").decode().split()
        except Exception:  # an empty or corrupt fixture has no history to compare
            continue
        for new_id, old_id in zip(ids, ids[3:], strict=False):
            new, old = repo[new_id], repo[old_id]
            try:
                whole = gitdiff._changes(
                    repo, gitdiff._renames(repo, gitdiff._between(old, new), LIMITS), LIMITS
                )
            except pygit2.GitError:  # the corrupt fixture
                continue
            assert gitdiff.range_diff(repo, old, new, LIMITS) == whole, (path, new_id)
            for f in whole.files[:2]:
                one = gitdiff.file_diff(repo, new, f.new_path, LIMITS, old)
                assert one is not None and one.new_path == f.new_path
            compared += gitdiff._changed_pairs(repo, new, old) is not None
    assert compared > 10


def _deep(repo: pygit2.Repository, changed: bytes) -> pygit2.Oid:
    """A tree of 20 directories of 10 directories of 10 directories of 3 files (6,000
    files), the file ``x/y/z/f0.c`` of ``x/y/z`` = ``d3/d4/d5`` holding ``changed``."""

    def level(depth: int, at: tuple[int, ...]) -> pygit2.Oid:
        builder = repo.TreeBuilder()
        if depth == 3:
            for n in range(3):
                data = changed if at == (3, 4, 5) and n == 0 else f"{at} {n}\n".encode()
                builder.insert(f"f{n}.c", repo.create_blob(data), pygit2.enums.FileMode.BLOB)
        else:
            for n in range(20 if depth == 0 else 10):
                sub = level(depth + 1, (*at, n))
                builder.insert(f"d{n}", sub, pygit2.enums.FileMode.TREE)
        return builder.write()

    return level(0, ())


def test_a_change_deep_in_a_wide_tree_reads_only_the_trees_on_its_path(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "deep.git"), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)
    first = repo.create_commit("refs/heads/main", sig, sig, "one\n", _deep(repo, b"a\n"), [])
    tip = repo.create_commit("refs/heads/main", sig, sig, "two\n", _deep(repo, b"a\nb\n"), [first])
    commit = repo[tip]
    before = gitdiff.TREES_READ[0]
    changes = gitdiff.commit_diff(repo, commit, LIMITS)
    assert gitdiff.TREES_READ[0] - before == 8  # the root, d3, d3/d4 and d3/d4/d5, both sides
    assert [(f.new_path, f.status, f.additions, f.deletions) for f in changes.files] == [
        (b"d3/d4/d5/f0.c", "modified", 1, 0)
    ]
    assert changes == gitdiff._changes(repo, gitdiff._diff(repo, commit, LIMITS), LIMITS)
    before = gitdiff.TREES_READ[0]
    assert gitdiff.range_diff(repo, repo[first], commit, LIMITS) == changes  # a compare's
    assert gitdiff.TREES_READ[0] - before == 8


@pytest.mark.parametrize(
    ("change", "pairs"),
    [
        ("modify", True),
        ("add", True),
        ("delete", True),
        ("rename", False),  # an added and a deleted file: renames to look for
        ("chmod", False),
        ("to-link", False),
    ],
)
def test_what_the_pairs_leave_to_libgit2(tmp_path: Path, change: str, pairs: bool) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)
    blob, other = repo.create_blob(b"one\ntwo\n"), repo.create_blob(b"one\nthree\n")
    mode = pygit2.enums.FileMode

    def tree(entries: dict[str, tuple[pygit2.Oid, int]]) -> pygit2.Oid:
        builder = repo.TreeBuilder()
        for name, (oid, filemode) in entries.items():
            builder.insert(name, oid, filemode)
        return builder.write()

    base = {"a.txt": (blob, mode.BLOB), "b.txt": (other, mode.BLOB)}
    after = dict(base)
    if change == "modify":
        after["a.txt"] = (other, mode.BLOB)
    elif change == "add":
        after["c.txt"] = (blob, mode.BLOB)
    elif change == "delete":
        del after["b.txt"]
    elif change == "rename":
        after["c.txt"] = after.pop("a.txt")
    elif change == "chmod":
        after["a.txt"] = (blob, mode.BLOB_EXECUTABLE)
    else:
        after["a.txt"] = (blob, mode.LINK)
    first = repo.create_commit("refs/heads/main", sig, sig, "one\n", tree(base), [])
    tip = repo.create_commit("refs/heads/main", sig, sig, "two\n", tree(after), [first])
    commit = repo[tip]
    assert (gitdiff._changed_pairs(repo, commit) is not None) is pairs
    whole = gitdiff._changes(repo, gitdiff._diff(repo, commit, LIMITS), LIMITS)
    assert gitdiff.commit_diff(repo, commit, LIMITS) == whole
