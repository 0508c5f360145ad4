"""Every path of a tree, for the file finder.

One pass in libgit2: an index read from the tree lists every file, symlink and submodule below
it, recursively, without a Python call per directory. The answer depends on the tree alone, so
callers keep it by tree id and never need to forget it.
"""

from __future__ import annotations

import pygit2

from floorless.errors import RepositoryBroken


def tree_paths(tree: pygit2.Tree, limit: int) -> tuple[list[bytes], bool]:
    """The paths of the files, symlinks and submodules below ``tree``, sorted by their bytes,
    at most ``limit`` of them; and whether some were left out."""
    index = pygit2.Index()
    try:
        index.read_tree(tree)
    except pygit2.GitError as exc:  # a missing or corrupt subtree: the tree cannot be listed
        raise RepositoryBroken(f"cannot list tree {tree.id}: {exc}") from exc
    # libgit2 hands paths over decoded with surrogate escapes: encoding them back the same
    # way gives the exact bytes, whatever encoding a name is in.
    found = sorted(entry.path.encode("utf-8", "surrogateescape") for entry in index)
    return found[:limit], len(found) > limit
