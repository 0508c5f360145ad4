"""Merging without a work tree: libgit2's merge of trees, in memory, written as objects.

Every function here works on an open pygit2 handle and commit ids, reads objects, and at
most writes new ones (trees, commits) to the object database. None moves a ref: that is the
caller's compare-and-swap (``merging.py``), so that what is computed here is thrown away,
unreferenced, whenever the base moved meanwhile.

The merges are libgit2's (``merge_commits``: the recursive merge of several merge bases,
rename detection on), the same three-way merge ``git merge`` makes for the cases a pull
request meets; no process is spawned, so a check costs the objects it reads and nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pygit2
from pygit2.enums import SortMode

STYLES = ("merge", "rebase", "squash", "fast-forward-only")


class MergeRefused(Exception):
    """This pull request cannot be merged this way (conflicts, no common history, nothing
    to merge, or a fast-forward that is not one); the message says why."""


@dataclass(frozen=True)
class Analysis:
    """What merging ``head`` into ``base`` would give: ``state`` is one of ``mergeable``,
    ``conflict`` (``conflicts`` lists the files), ``empty`` (the head brings no change the
    base lacks) or ``unrelated`` (no common history)."""

    state: str
    merge_base: str = ""
    conflicts: tuple[str, ...] = ()
    fast_forward: bool = False  # the base is an ancestor of the head


def oid(text: str | bytes | pygit2.Oid) -> pygit2.Oid:
    if isinstance(text, pygit2.Oid):
        return text
    if isinstance(text, bytes):
        return pygit2.Oid(raw=text)
    return pygit2.Oid(hex=text)


def commit(handle: pygit2.Repository, ref: str | bytes | pygit2.Oid) -> pygit2.Commit:
    found = handle[oid(ref)]
    if not isinstance(found, pygit2.Commit):
        raise MergeRefused(f"{found.id} is not a commit")
    return found


def merge_base(handle: pygit2.Repository, a: str | pygit2.Oid, b: str | pygit2.Oid) -> str:
    """The best common ancestor of ``a`` and ``b``, hex; "" when they share no history."""
    found = handle.merge_base(oid(a), oid(b))
    return "" if found is None else str(found)


def is_ancestor(handle: pygit2.Repository, ancestor: str, of: str) -> bool:
    """Whether ``ancestor`` is ``of`` or reachable from it."""
    a, b = oid(ancestor), oid(of)
    return a == b or bool(handle.descendant_of(b, a))


def changed_paths(handle: pygit2.Repository, base: str, head: str) -> list[str]:
    """The paths ``head`` changes since its merge base with ``base`` (what merging it
    changes, as the pull request's files tab shows)."""
    try:
        since = merge_base(handle, base, head)
    except (KeyError, ValueError, pygit2.GitError):
        return []
    return paths_between(handle, since, head) if since else []


def paths_between(handle: pygit2.Repository, old: str, new: str) -> list[str]:
    """The paths that differ between the trees of ``old`` and ``new`` (commits, hex),
    sorted; none when either cannot be read."""
    try:
        before = commit(handle, old).tree
        after = commit(handle, new).tree
    except (KeyError, ValueError, pygit2.GitError, MergeRefused):
        return []
    paths: set[str] = set()
    for delta in before.diff_to_tree(after).deltas:
        paths.update(p for p in (delta.old_file.path, delta.new_file.path) if p)
    return sorted(paths)


def conflicts_of(index: pygit2.Index) -> tuple[str, ...]:
    """The paths a merged index holds in conflict, sorted, each once (as
    ``git merge-tree --write-tree --name-only`` lists them)."""
    if index.conflicts is None:
        return ()
    paths: set[str] = set()
    for sides in index.conflicts:
        for entry in sides:
            if entry is not None:
                paths.add(entry.path)
    return tuple(sorted(paths))


def analyse(handle: pygit2.Repository, base: str, head: str) -> Analysis:
    """Whether ``head`` merges cleanly into ``base``, and if not, which files conflict."""
    found = merge_base(handle, base, head)
    if not found:
        return Analysis("unrelated")
    if found == head:  # every commit of the head is in the base already
        return Analysis("empty", found)
    if found == base:
        empty = commit(handle, head).tree_id == commit(handle, base).tree_id
        return Analysis("empty" if empty else "mergeable", found, fast_forward=True)
    index = handle.merge_commits(oid(base), oid(head))
    conflicts = conflicts_of(index)
    if conflicts:
        return Analysis("conflict", found, conflicts)
    # compared in memory: a check writes no object (only a merge does)
    same = len(index.diff_to_tree(commit(handle, base).tree)) == 0
    return Analysis("empty" if same else "mergeable", found)


def _merged_tree(handle: pygit2.Repository, base: str, head: str) -> pygit2.Oid:
    index = handle.merge_commits(oid(base), oid(head))
    conflicts = conflicts_of(index)
    if conflicts:
        raise MergeRefused("these files conflict: " + ", ".join(conflicts))
    return index.write_tree(handle)


def _check_related(handle: pygit2.Repository, base: str, head: str) -> str:
    found = merge_base(handle, base, head)
    if not found:
        raise MergeRefused("the head and the base share no history")
    if found == head:
        raise MergeRefused("the base has every commit of the head already")
    return found


def make_merge(
    handle: pygit2.Repository, base: str, head: str, message: str, who: pygit2.Signature
) -> str:
    """A merge commit of ``head`` into ``base`` (parents base, head), as ``git merge
    --no-ff`` makes it; its id (hex)."""
    _check_related(handle, base, head)
    tree = _merged_tree(handle, base, head)
    made = handle.create_commit(None, who, who, message, tree, [oid(base), oid(head)])
    return str(made)


def make_squash(
    handle: pygit2.Repository, base: str, head: str, message: str, who: pygit2.Signature
) -> str:
    """One commit on ``base`` with the tree merging ``head`` gives (``git merge --squash``
    then a commit); its id (hex)."""
    _check_related(handle, base, head)
    tree = _merged_tree(handle, base, head)
    if tree == commit(handle, base).tree_id:
        raise MergeRefused("the head changes nothing the base lacks")
    return str(handle.create_commit(None, who, who, message, tree, [oid(base)]))


def fast_forward(handle: pygit2.Repository, base: str, head: str) -> str:
    """The head itself, when the base is an ancestor of it."""
    _check_related(handle, base, head)
    if not is_ancestor(handle, base, head):
        raise MergeRefused("the base has commits the head lacks: it cannot fast-forward")
    return head


def commits_between(handle: pygit2.Repository, base: str, head: str) -> Iterator[pygit2.Commit]:
    """The commits of ``head`` that ``base`` lacks, oldest first, parents before children."""
    walker = handle.walk(oid(head), SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(oid(base))
    yield from walker


def make_rebase(
    handle: pygit2.Repository, base: str, head: str, committer: pygit2.Signature
) -> str:
    """The head's commits replayed one by one onto ``base``, as ``git rebase`` replays them:
    each keeps its author and message, the committer is ``committer``; merge commits are
    left out, and so are commits that change nothing once replayed. The new tip (hex): the
    head itself when the base is an ancestor of it already (git's "up to date")."""
    _check_related(handle, base, head)
    if is_ancestor(handle, base, head):
        return head
    tip = commit(handle, base)
    for each in commits_between(handle, base, head):
        if len(each.parents) != 1:
            continue
        parent = each.parents[0]
        index = handle.merge_trees(parent.tree, tip.tree, each.tree)
        conflicts = conflicts_of(index)
        if conflicts:
            raise MergeRefused(
                f"commit {str(each.id)[:10]} does not apply: " + ", ".join(conflicts)
            )
        tree = index.write_tree(handle)
        if tree == tip.tree_id:
            continue
        made = handle.create_commit(None, each.author, committer, each.raw_message, tree, [tip.id])
        tip = commit(handle, made)
    if str(tip.id) == base:
        raise MergeRefused("the head changes nothing the base lacks")
    return str(tip.id)
