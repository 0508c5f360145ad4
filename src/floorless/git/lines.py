"""Lines of a file at a commit, and where lines of one version of a file are in another: what
review comments are anchored to.

A review comment names lines of one side of a pull request's diff: of the head (``new``) or
of the merge base (``old``). When the head moves, each comment is followed into the new
version of its file through the diff of the two versions, with no context lines: lines no
hunk touches keep their text and move by what was inserted or removed above them; a line a
hunk touches (or a range with lines inserted inside it) has changed, and its comment is
outdated. All of it is libgit2 in-process; blobs larger than ``MAX_BYTES`` or binary are not
commented on at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
from pygit2.enums import DeltaStatus, DiffOption, ObjectType

from floorless.git.objects import blob_bytes, entry_at

MAX_BYTES = 1 << 20  # a file larger than this takes no line comments (no page shows its diff)


@dataclass(frozen=True)
class FileText:
    data: bytes
    lines: tuple[str, ...]  # decoded with replacement, without their line ends


@dataclass(frozen=True)
class ChangedPaths:
    """The paths a diff of two commits changes, as each side names them (a renamed file's
    old name on the ``old`` side, its new one on the ``new`` side)."""

    old: frozenset[str]
    new: frozenset[str]

    def side(self, side: str) -> frozenset[str]:
        return self.old if side == "old" else self.new


def _commit(handle: pygit2.Repository, oid: str) -> pygit2.Commit | None:
    try:
        obj = handle.get(oid)
    except (ValueError, pygit2.GitError):
        return None
    if obj is None:
        return None
    try:
        peeled = obj.peel(pygit2.Commit)
    except (ValueError, pygit2.GitError):
        return None
    return peeled if isinstance(peeled, pygit2.Commit) else None


def file_text(handle: pygit2.Repository, commit_oid: str, path: str) -> FileText | None:
    """The text of ``path`` at the commit ``commit_oid``; None when the commit has no such
    file, or it is not a regular file, is binary or is larger than ``MAX_BYTES``."""
    commit = _commit(handle, commit_oid)
    if commit is None:
        return None
    try:
        entry = entry_at(commit.tree, path)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    if entry.type != ObjectType.BLOB:
        return None
    size = handle.odb.read_header(entry.id)[1]
    if size > MAX_BYTES:
        return None
    blob = handle[entry.id]
    if not isinstance(blob, pygit2.Blob):
        return None
    data = blob_bytes(blob)
    if b"\0" in data[:8000]:
        return None
    text = data.decode("utf-8", "replace").split("\n")
    if text and text[-1] == "":
        text.pop()
    return FileText(data, tuple(text))


def changed_paths(handle: pygit2.Repository, old_oid: str, new_oid: str) -> ChangedPaths:
    """The paths the diff of the commit ``old_oid`` to the commit ``new_oid`` changes (trees
    alone: no blob is read; renames need no finding, as a renamed file's two names are on
    their two sides either way)."""
    old, new = _commit(handle, old_oid), _commit(handle, new_oid)
    if old is None or new is None:
        return ChangedPaths(frozenset(), frozenset())
    diff = old.tree.diff_to_tree(new.tree, flags=DiffOption.NORMAL)
    olds: set[str] = set()
    news: set[str] = set()
    for delta in diff.deltas:
        if delta.status != DeltaStatus.ADDED:
            olds.add(delta.old_file.path)
        if delta.status != DeltaStatus.DELETED:
            news.add(delta.new_file.path)
    return ChangedPaths(frozenset(olds), frozenset(news))


def follow(old: FileText, new: FileText, start: int, end: int) -> tuple[int, int] | None:
    """Where lines ``start`` to ``end`` (1-based, inclusive) of ``old`` are in ``new``; None
    if any of them changed, or lines were inserted between them."""
    if old.data == new.data:
        return start, end
    patch = pygit2.Patch.create_from(old.data, new.data, context_lines=0)
    shift = 0
    for hunk in patch.hunks:
        if hunk.old_lines:
            first, last = hunk.old_start, hunk.old_start + hunk.old_lines - 1
            if first <= end and last >= start:
                return None
            if last < start:
                shift += hunk.new_lines - hunk.old_lines
        else:  # lines inserted after line ``old_start``
            if start <= hunk.old_start < end:
                return None
            if hunk.old_start < start:
                shift += hunk.new_lines
    moved = (start + shift, end + shift)
    if new.lines[moved[0] - 1 : moved[1]] != old.lines[start - 1 : end]:
        return None  # cannot happen for a correct diff; never anchor on other text
    return moved
