"""Which of a few paths differ between two commits, read in process: what git's history
simplification asks of a merge's other parents.

At a merge, ``git log -- path`` asks the first parent whether the path differs (TREESAME, in
git's words); only when it does are the other parents asked. So the index needs, for a merge's
second parent, only the paths that differ from the first parent and from it both. Diffing a
merge against its second parent in full is most of a merge-heavy history's changed paths: on
git.git, 8.8 million paths against the first parents' 0.28 million (every topic merged
differs from the topic's tip in everything the main line did meanwhile). Asking the few
paths the first parent's diff names, in the two trees, costs what those paths cost.

A path differs when its entry's mode or object differs, or when one side has it and the
other has not, as ``git diff-tree`` sees it; a directory whose tree is the same object on
both sides differs in nothing below it, so what lies below is not looked at. Two trees that
differ only in a file mode git writes differently and reads the same (``100664`` for
``100644``, which fsck calls a bad file mode) are taken to differ here, where git sees none.
"""

from __future__ import annotations

from collections.abc import Iterable

import pygit2

from floorless.core.errors import RepositoryBroken
from floorless.git.lenient import read_commit
from floorless.git.objects import child

_TREE = pygit2.GIT_FILEMODE_TREE


class Trees:
    """One commit's tree, its subtrees looked up once each however many paths pass them."""

    __slots__ = ("_dirs",)

    def __init__(self, tree: pygit2.Tree) -> None:
        self._dirs: dict[bytes, pygit2.Tree | None] = {b"": tree}

    def entry(self, path: bytes) -> pygit2.Object | None:
        """The entry at ``path`` (a ``/``-separated path of exact bytes), None if none."""
        head, slash, name = path.rpartition(b"/")
        directory = self._directory(head) if slash else self._dirs[b""]
        return None if directory is None else child(directory, name)

    def _directory(self, path: bytes) -> pygit2.Tree | None:
        if path in self._dirs:
            return self._dirs[path]
        found = self.entry(path)  # (a tree's entry is the tree, read when first asked)
        tree = found if isinstance(found, pygit2.Tree) else None
        self._dirs[path] = tree
        return tree


def differing(
    repo: pygit2.Repository, commit: pygit2.Oid, parent: pygit2.Oid, paths: Iterable[bytes]
) -> set[bytes]:
    """Those of ``paths`` whose entry differs between the trees of ``commit`` and ``parent``.
    ``paths`` holds every directory above each of its paths (as the index keeps them)."""
    ours, theirs = (Trees(_tree(repo, oid)) for oid in (commit, parent))
    same: set[bytes] = set()  # directories that are one tree on both sides
    found: set[bytes] = set()
    for path in sorted(paths):  # a directory before what lies below it
        if same and _below(path, same):
            continue
        mine, other = ours.entry(path), theirs.entry(path)
        if mine is None and other is None:
            continue
        if (
            mine is not None
            and other is not None
            and mine.id == other.id
            and mine.filemode == other.filemode
        ):
            if mine.filemode == _TREE:
                same.add(path)
            continue
        found.add(path)
    return found


def _tree(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
    commit = read_commit(repo, oid)  # (one libgit2 refuses to parse, read as git does)
    if commit is None:
        raise RepositoryBroken(f"commit {oid} is missing or not a commit")
    return commit.tree


def _below(path: bytes, directories: set[bytes]) -> bool:
    head = path
    while True:
        head, slash, _ = head.rpartition(b"/")
        if not slash:
            return False
        if head in directories:
            return True
