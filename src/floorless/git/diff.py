"""A commit's changes against its first parent (or the empty tree): files with stats and
rename detection, hunks with line numbers, truncated per file and in total.

libgit2 holds the interpreter while it reads and diffs blobs, so the work a page does is
budgeted before it starts: the list of changed files is cheap (tree against tree), but a
file's patch is made only when its blobs, by their headers, are small enough, and only until
a page's budget of files and bytes is spent. Of the files with a patch, those that fit the
page's budget of lines keep their lines (they are shown on the page); the others keep their
counts only, and their lines are made one file at a time on request (``file_diff``). Rename
detection compares contents only when the added and deleted files are few and small;
otherwise it matches identical files alone. A commit too large for the budget has its
``.diff`` and ``.patch`` made by git.

A commit page's list of changes is found by reading only the trees that differ between the
commit and its parent, as ``git diff-tree`` does (``_changed_pairs``): libgit2's tree diff
reads every tree of both sides, identical or not (1.5 ms for a 2,000-file tree diffed with
itself), where a commit changing one file 7 directories deep differs in 14. Each changed file
is then a pair of blobs, its patch made from the two (``Patch.create_from``, the same
patch libgit2's diff makes); a compare's changes, from its merge base to its head, alike.
The pairs stand for libgit2's diff only where they are sure to give its answer: blobs
modified in place, or only added, or only deleted (no rename to find); anything else (a
rename candidate, a type or mode change, a submodule, a name that is not UTF-8, ``?w=1``, a
root commit) takes libgit2's diff, as before."""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import pygit2
from pygit2.enums import DeltaStatus, DiffFind, DiffOption

from floorless.core import dates, timing
from floorless.core.errors import NotFound
from floorless.git import objects
from floorless.git.lenient import AnyCommit
from floorless.git.objects import commit_info

STATUS = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.RENAMED: "renamed",
    DeltaStatus.COPIED: "copied",
    DeltaStatus.TYPECHANGE: "type changed",
}


class Limits(NamedTuple):
    files: int  # files whose patch may be made
    lines_per_file: int
    lines_total: int  # lines shown on a page in all (files past it load on request)
    listed: int = 3000  # files listed at all
    file_bytes: int = 1 << 20  # a file larger than this (either side) gets no patch
    total_bytes: int = 8 << 20  # bytes of blobs diffed in all
    # ``git diff -w``: changes in whitespace alone are no changes (a page's ``?w=1``); part of
    # the limits so that every cache keyed by them keeps the two diffs apart
    ignore_whitespace: bool = False


@dataclass
class Line:
    kind: str  # "+", "-", " " or "\\"
    old: int | None
    new: int | None
    text: str


@dataclass
class Hunk:
    header: str
    lines: list[Line] = field(default_factory=list)
    old_start: int = 0  # its first line on each side (what more context is counted from)
    new_start: int = 0
    old_lines: int = 0
    new_lines: int = 0


@dataclass
class FileDiff:
    old_path: bytes
    new_path: bytes
    status: str
    additions: int | None  # None for files past the limit: their patch is never made
    deletions: int | None
    binary: bool
    similarity: int
    hunks: list[Hunk] = field(default_factory=list)
    truncated: bool = False
    shown: bool = True  # False: listed only, its lines made on request (``file_diff``)
    too_large: bool = False  # a blob past ``Limits.file_bytes``: no patch was made


@dataclass
class CommitDiff:
    files: list[FileDiff]
    additions: int
    deletions: int
    total_files: int
    truncated: bool  # a listed file is not shown, or shown cut short
    complete_stats: bool = True  # additions and deletions count every file's patch


@dataclass(frozen=True)
class _Side:
    """One side of a changed file, as ``pygit2.DiffFile`` gives what ``_changes`` reads."""

    raw_path: bytes
    id: pygit2.Oid
    mode: int


@dataclass(frozen=True)
class _Delta:
    """A changed file, as ``pygit2.DiffDelta`` gives what ``_changes`` reads."""

    status: DeltaStatus
    old_file: _Side
    new_file: _Side
    similarity: int = 0


_ZERO = pygit2.Oid(raw=b"\0" * 20)
_BLOB_MODES = frozenset({objects.MODE_EXEC, 0o100644, objects.MODE_LINK})
TREES_READ = [0]  # trees the pruned walk has read since the process started (for tests)


class _Pairs:
    """A commit's changed files as pairs of blobs, standing for its ``pygit2.Diff`` in
    ``_changes`` and ``file_diff``: ``len``, ``deltas`` and a file's patch by its place."""

    def __init__(self, repo: pygit2.Repository, deltas: list[_Delta]) -> None:
        self.repo = repo
        self.deltas = deltas
        # a patch made from blobs points into their data without holding them: they are
        # kept here while the patches are read
        self._blobs: list[pygit2.Blob | None] = []

    def __len__(self) -> int:
        return len(self.deltas)

    def __getitem__(self, i: int) -> pygit2.Patch:
        delta = self.deltas[i]
        old = _read(self.repo, delta.old_file.id) if delta.status != DeltaStatus.ADDED else None
        new = _read(self.repo, delta.new_file.id) if delta.status != DeltaStatus.DELETED else None
        self._blobs += (old, new)
        return pygit2.Patch.create_from(
            old,
            new,
            old_as_path=delta.old_file.raw_path.decode(),
            new_as_path=delta.new_file.raw_path.decode(),
        )


def _read(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Blob:
    blob = repo[oid]
    if not isinstance(blob, pygit2.Blob):
        raise NotFound("a changed file is not a blob")
    return blob


_TREE_ENTRY: dict[int, re.Pattern[bytes]] = {}  # a raw tree's entries, by the ids' length


def _entries(
    repo: pygit2.Repository, tree_id: pygit2.Oid | None
) -> set[tuple[bytes, bytes, bytes]]:
    """A tree's entries as read from its bytes: the mode, name and raw id of each. Iterating
    a ``pygit2.Tree`` makes an object per entry, and each of their ``filemode`` an enum
    (1-2 us): a commit page's walk read ~240 of them."""
    if tree_id is None:
        return set()
    kind, data = repo.odb.read(tree_id)
    if kind != pygit2.enums.ObjectType.TREE:
        raise NotFound("a directory is not a tree")
    size = len(tree_id.raw)
    entry = _TREE_ENTRY.get(size)
    if entry is None:
        entry = _TREE_ENTRY[size] = re.compile(rb"([0-7]+) ([^\0]*)\0(.{%d})" % size, re.S)
    return set(entry.findall(data))


@functools.lru_cache(maxsize=64)
def _mode(raw: bytes) -> int:
    """A tree entry's mode as libgit2 reads it (``git_tree_entry_filemode``): old spellings
    of a file's (``100664``) are a file's."""
    mode = int(raw, 8)
    if mode & ~0o777 == objects.MODE_TREE:
        return objects.MODE_TREE
    if mode & 0o100:
        return objects.MODE_EXEC
    if mode & ~0o777 in (objects.MODE_SUBMODULE, objects.MODE_LINK):
        return mode & ~0o777
    return 0o100644


def _changed_pairs(
    repo: pygit2.Repository, commit: AnyCommit, base: AnyCommit | None = None
) -> _Pairs | None:
    """The commit's changes against ``base`` (by default its first parent), reading only the
    trees that differ; None where libgit2's diff must answer (see the module's docstring)."""
    if base is None and not commit.parents:
        return None
    found: list[_Delta] = []
    added = deleted = False
    with timing.phase("git"):
        old_root = (base if base is not None else commit.parents[0]).tree_id
        stack: list[tuple[bytes, pygit2.Oid | None, pygit2.Oid | None]] = [
            (b"", old_root, commit.tree_id)
        ]
        while stack:
            prefix, old_tree, new_tree = stack.pop()
            TREES_READ[0] += (old_tree is not None) + (new_tree is not None)
            olds_raw, news_raw = _entries(repo, old_tree), _entries(repo, new_tree)
            # the entries that differ, by name, with their modes as libgit2 gives them
            olds = {name: (_mode(mode), oid) for mode, name, oid in olds_raw - news_raw}
            news = {name: (_mode(mode), oid) for mode, name, oid in news_raw - olds_raw}
            for name in olds.keys() | news.keys():
                old, new = olds.get(name), news.get(name)
                if old is not None and new is not None and old[1] == new[1]:
                    if old[0] != new[0]:
                        return None  # a mode change alone
                    continue
                path = prefix + name
                old_mode = old[0] if old is not None else 0
                new_mode = new[0] if new is not None else 0
                old_id = pygit2.Oid(raw=old[1]) if old is not None else None
                new_id = pygit2.Oid(raw=new[1]) if new is not None else None
                if objects.MODE_TREE in (old_mode, new_mode):
                    if old_mode not in (0, objects.MODE_TREE):
                        return None  # a file became a directory, or the reverse
                    if new_mode not in (0, objects.MODE_TREE):
                        return None
                    stack.append((path + b"/", old_id, new_id))
                    continue
                if not {old_mode, new_mode} <= _BLOB_MODES | {0}:
                    return None  # a submodule
                if old_mode and new_mode and old_mode != new_mode:
                    return None  # a type or mode change
                try:
                    path.decode()
                except UnicodeDecodeError:
                    return None
                added = added or not old_mode
                deleted = deleted or not new_mode
                if added and deleted:
                    return None  # renames to look for
                found.append(
                    _Delta(
                        DeltaStatus.MODIFIED
                        if old_mode and new_mode
                        else DeltaStatus.ADDED
                        if new_mode
                        else DeltaStatus.DELETED,
                        _Side(path, old_id or _ZERO, old_mode),
                        _Side(path, new_id or _ZERO, new_mode),
                    )
                )
    found.sort(key=lambda d: d.new_file.raw_path)
    return _Pairs(repo, found)


def _tree_diff(commit: AnyCommit, whitespace: bool = False) -> pygit2.Diff:
    """The commit against its first parent (or the empty tree), renames not looked for."""
    return _between(commit.parents[0] if commit.parents else None, commit, whitespace)


def _between(old: AnyCommit | None, new: AnyCommit, whitespace: bool = False) -> pygit2.Diff:
    """Commit ``new``'s tree against ``old``'s (or the empty tree), renames not looked for;
    with ``whitespace``, lines that differ in whitespace alone are the same line."""
    flags = DiffOption.IGNORE_WHITESPACE if whitespace else DiffOption.NORMAL
    with timing.phase("git"):
        if old is not None:
            return old.tree.diff_to_tree(new.tree, flags=flags)
        return new.tree.diff_to_tree(flags=flags, swap=True)


def _diff(
    repo: pygit2.Repository, commit: AnyCommit, limits: Limits, diff: pygit2.Diff | None = None
) -> pygit2.Diff:
    """The commit's diff with renames found within the budget; ``diff`` is its
    ``_tree_diff`` when the caller has it already."""
    if diff is None:
        diff = _tree_diff(commit, limits.ignore_whitespace)
    return _renames(repo, diff, limits)


def _renames(repo: pygit2.Repository, diff: pygit2.Diff, limits: Limits) -> pygit2.Diff:
    """``diff`` with renames found within the budget."""
    if _small_renames(repo, diff, limits):
        flags, rename_limit = DiffFind.FIND_RENAMES, 1000
    else:  # comparing contents would read every added and deleted blob: identical ones only
        flags, rename_limit = DiffFind.FIND_RENAMES | DiffFind.FIND_EXACT_MATCH_ONLY, limits.files
    with timing.phase("git"):
        diff.find_similar(flags=flags, rename_limit=rename_limit)
    return diff


def _small_renames(repo: pygit2.Repository, diff: pygit2.Diff, limits: Limits) -> bool:
    """Whether the files that may be renames (added and deleted) are few and small enough
    to compare their contents within the budget."""
    with timing.phase("git"):
        sides = [
            d.new_file if d.status == DeltaStatus.ADDED else d.old_file
            for d in diff.deltas
            if d.status in (DeltaStatus.ADDED, DeltaStatus.DELETED)
        ]
    if len(sides) > limits.files:
        return False
    total = 0
    for side in sides:
        size = objects.object_size(repo, side.id) or 0
        if size > limits.file_bytes:
            return False
        total += size
    return total <= limits.total_bytes


def _sizes(repo: pygit2.Repository, delta: pygit2.DiffDelta | _Delta) -> int:
    """The larger of a change's two blobs, from their headers (0 for none, or a submodule)."""
    return max(
        objects.object_size(repo, f.id) or 0 if f.mode != objects.MODE_SUBMODULE else 0
        for f in (delta.old_file, delta.new_file)
    )


def fits_in_process(
    repo: pygit2.Repository, commit: AnyCommit, limits: Limits
) -> pygit2.Diff | None:
    """The commit's tree diff when the whole diff (``.diff``, ``.patch``) is small enough to
    make in-process (no more files than a page diffs, and no more bytes of blobs than its
    budget), for ``patch_text`` or ``format_patch`` to go on from; None when it is not."""
    return _fits(repo, _tree_diff(commit), limits)


def range_fits_in_process(
    repo: pygit2.Repository, old: AnyCommit, new: AnyCommit, limits: Limits
) -> pygit2.Diff | None:
    """As ``fits_in_process``, for the diff of ``old``'s tree to ``new``'s (a compare's or a
    pull request's, from the merge base to the head), for ``range_patch_text``."""
    return _fits(repo, _between(old, new), limits)


def _fits(repo: pygit2.Repository, diff: pygit2.Diff, limits: Limits) -> pygit2.Diff | None:
    with timing.phase("git"):
        deltas = list(diff.deltas) if len(diff) <= limits.files else None
    if deltas is None:
        return None
    total = 0
    for delta in deltas:
        for side in (delta.old_file, delta.new_file):
            if side.mode != objects.MODE_SUBMODULE:
                total += objects.object_size(repo, side.id) or 0
    return diff if total <= limits.total_bytes else None


def git_diff_args(commit: AnyCommit, stat: bool = False) -> list[str]:
    """``git diff-tree`` arguments printing what ``patch_text`` does (with ``stat``, the
    diffstat and summary ``format_patch`` puts before it), for commits past the budget."""
    args = ["diff-tree", "--no-commit-id", "-p", "-M", "--no-color", "--no-ext-diff"]
    if stat:
        args += ["--stat=72", "--summary"]
    if commit.parents:
        return [*args, str(commit.parent_ids[0]), str(commit.id)]
    return [*args, "--root", str(commit.id)]


def commit_diff(repo: pygit2.Repository, commit: AnyCommit, limits: Limits) -> CommitDiff:
    """The commit's changed files, each with its counts while the budgets of files and bytes
    last, and with its lines while the page's budget of lines lasts (a file that does not fit
    whole is not shown, and one after it that fits is)."""
    pairs = None if limits.ignore_whitespace else _changed_pairs(repo, commit)
    return _changes(repo, pairs if pairs is not None else _diff(repo, commit, limits), limits)


def range_diff(
    repo: pygit2.Repository, old: AnyCommit, new: AnyCommit, limits: Limits
) -> CommitDiff:
    """What ``new`` changes against ``old`` (a compare's merge base and head), within the same
    budgets as a commit's diff and shown the same way."""
    pairs = None if limits.ignore_whitespace else _changed_pairs(repo, new, old)
    if pairs is not None:
        return _changes(repo, pairs, limits)
    diff = _between(old, new, limits.ignore_whitespace)
    return _changes(repo, _renames(repo, diff, limits), limits)


def _changes(repo: pygit2.Repository, diff: pygit2.Diff | _Pairs, limits: Limits) -> CommitDiff:
    files: list[FileDiff] = []
    total_lines = total_bytes = additions = deletions = 0
    truncated = False
    complete = True
    with timing.phase("git"):
        total_files = len(diff)
        deltas: list[pygit2.DiffDelta | _Delta] = list(itertools.islice(diff.deltas, limits.listed))
    for i, delta in enumerate(deltas):
        fd = _listed(delta)
        files.append(fd)
        if i >= limits.files:
            fd.shown = False
            truncated = True
            complete = False
            continue
        size = _sizes(repo, delta)
        if size > limits.file_bytes:
            fd.too_large = True
            complete = False
            continue
        if total_bytes + size > limits.total_bytes:
            fd.shown = False
            truncated = True
            complete = False
            continue
        total_bytes += size
        with timing.phase("git"):
            patch = diff[i]
        if patch is None:  # libgit2 found nothing to show for this delta
            continue
        context, fd.additions, fd.deletions = patch.line_stats
        additions += fd.additions
        deletions += fd.deletions
        fd.binary = bool(patch.delta.is_binary)
        if fd.binary:
            continue
        lines = min(context + fd.additions + fd.deletions, limits.lines_per_file)
        if total_lines + lines > limits.lines_total:
            fd.shown = False
            truncated = True
            continue
        fd.truncated = _hunks(
            fd, patch, min(limits.lines_per_file, limits.lines_total - total_lines)
        )
        total_lines += sum(len(h.lines) for h in fd.hunks)
        truncated = truncated or fd.truncated
    complete = complete and total_files == len(files)
    return CommitDiff(files, additions, deletions, total_files, truncated, complete)


def file_diff(
    repo: pygit2.Repository,
    commit: AnyCommit,
    path: bytes,
    limits: Limits,
    base: AnyCommit | None = None,
) -> FileDiff | None:
    """One changed file of the commit with its lines, for loading on its own: ``path`` is its
    path after the commit (before it, for a deleted file), paired with the same rename
    detection as the commit's page. With ``base``, the change is from ``base`` to ``commit``
    (a compare's or a pull request's merge base and head) rather than from the first parent.
    None if the commit does not change ``path``."""
    pairs = None if limits.ignore_whitespace else _changed_pairs(repo, commit, base)
    diff: pygit2.Diff | _Pairs
    if pairs is not None:
        diff = pairs
    elif base is None:
        diff = _diff(repo, commit, limits)
    else:
        diff = _renames(repo, _between(base, commit, limits.ignore_whitespace), limits)
    with timing.phase("git"):
        deltas: list[pygit2.DiffDelta | _Delta] = list(diff.deltas)
        found = next(
            ((i, delta) for i, delta in enumerate(deltas) if delta.new_file.raw_path == path),
            None,
        )
    if found is None:
        return None
    index, delta = found
    fd = _listed(delta)
    if _sizes(repo, delta) > limits.file_bytes:
        fd.too_large = True
        return fd
    with timing.phase("git"):
        patch = diff[index]
    if patch is None:
        return fd
    _, fd.additions, fd.deletions = patch.line_stats
    fd.binary = bool(patch.delta.is_binary)
    if not fd.binary:
        fd.truncated = _hunks(fd, patch, limits.lines_per_file)
    return fd


def renamed_from(
    repo: pygit2.Repository, commit: AnyCommit, path: bytes, limits: Limits
) -> bytes | None:
    """The path file ``path`` had before ``commit`` renamed it to ``path``, when ``commit``
    did (the file is not in its first parent, and the commit's diff, with rename detection
    as its page does it, pairs it with a file deleted): where a file's history goes on. One
    commit's diff, whatever the history's length; None when the commit did not rename it."""
    if not commit.parents:
        return None
    try:
        objects.lookup(repo, commit.parents[0], path)
    except NotFound:
        pass
    else:
        return None  # the parent has it: not renamed here
    with timing.phase("git"):
        diff = _tree_diff(commit)
        if not any(d.new_file.raw_path == path for d in diff.deltas):
            return None
    diff = _renames(repo, diff, limits)
    with timing.phase("git"):
        for delta in diff.deltas:
            if delta.status == DeltaStatus.RENAMED and delta.new_file.raw_path == path:
                return bytes(delta.old_file.raw_path)
    return None


def _listed(delta: pygit2.DiffDelta | _Delta) -> FileDiff:
    return FileDiff(
        old_path=delta.old_file.raw_path,
        new_path=delta.new_file.raw_path,
        status=STATUS.get(delta.status, "modified"),
        additions=None,
        deletions=None,
        binary=False,  # known once its patch is made: asking the delta reads both blobs
        similarity=delta.similarity,
    )


def _hunks(fd: FileDiff, patch: pygit2.Patch, cap: int) -> bool:
    """Fill ``fd.hunks`` from ``patch``, at most ``cap`` lines; True if it was cut short."""
    count = 0
    with timing.phase("git"):
        for hunk in patch.hunks:
            h = Hunk(
                hunk.header.rstrip("\n"),
                old_start=hunk.old_start,
                new_start=hunk.new_start,
                old_lines=hunk.old_lines,
                new_lines=hunk.new_lines,
            )
            fd.hunks.append(h)
            for line in hunk.lines:
                if count >= cap:
                    return True
                content = line.raw_content.decode("utf-8", "replace").rstrip("\n")
                h.lines.append(
                    Line(
                        line.origin if line.origin in "+- " else "\\",
                        line.old_lineno if line.old_lineno > 0 else None,
                        line.new_lineno if line.new_lineno > 0 else None,
                        content,
                    )
                )
                count += 1
    return False


def patch_text(
    repo: pygit2.Repository, commit: AnyCommit, limits: Limits, diff: pygit2.Diff | None = None
) -> bytes:
    """The unified diff, as ``git diff`` prints it (from ``fits_in_process``'s ``diff``)."""
    diff = _diff(repo, commit, limits, diff)
    with timing.phase("git"):
        return _raw_patch(diff)


def range_patch_text(
    repo: pygit2.Repository, old: AnyCommit, new: AnyCommit, limits: Limits, diff: pygit2.Diff
) -> bytes:
    """The unified diff of ``old`` to ``new`` (from ``range_fits_in_process``'s ``diff``)."""
    diff = _renames(repo, diff, limits)
    with timing.phase("git"):
        return _raw_patch(diff)


def git_range_args(old: str, new: str) -> list[str]:
    """``git diff`` arguments printing what ``range_patch_text`` does, past the budget."""
    return ["diff-tree", "-p", "-M", "--no-color", "--no-ext-diff", old, new]


def _raw_patch(diff: pygit2.Diff) -> bytes:
    patch = diff.patch
    return (patch or "").encode("utf-8", "surrogateescape")


MAIL_END = b"-- \nfloorless\n\n"


def format_patch(
    repo: pygit2.Repository, commit: AnyCommit, limits: Limits, diff: pygit2.Diff | None = None
) -> bytes:
    """The commit as ``git format-patch`` would mail it (from ``fits_in_process``'s
    ``diff``)."""
    diff = _diff(repo, commit, limits, diff)
    with timing.phase("git"):
        stats = diff.stats.format(
            pygit2.enums.DiffStatsFormat.FULL | pygit2.enums.DiffStatsFormat.INCLUDE_SUMMARY, 72
        )
        return (
            mail_header(commit)
            + f"{stats}\n".encode("utf-8", "replace")
            + _raw_patch(diff)
            + MAIL_END
        )


def mail_header(commit: AnyCommit) -> bytes:
    """A mailed patch up to its ``---`` line: what comes after is the diffstat and the diff."""
    info = commit_info(commit)
    author = info.author
    subject, _, body = info.message.partition("\n")
    date = dates.rfc2822(author.when)
    header = (
        f"From {commit.id} Mon Sep 17 00:00:00 2001\n"
        f"From: {author.name} <{author.email}>\n"
        f"Date: {date}\n"
        f"Subject: [PATCH] {subject}\n\n"
        f"{body.strip()}{chr(10) * 2 if body.strip() else ''}---\n"
    )
    return header.encode("utf-8", "replace")
