"""A commit's changes against its first parent (or the empty tree): files with stats and
rename detection, hunks with line numbers, truncated per file and in total."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import pygit2
from pygit2.enums import DeltaStatus, DiffFind, DiffOption

from floorless import dates, timing
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
    files: int
    lines_per_file: int
    lines_total: int


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
    shown: bool = True


@dataclass
class CommitDiff:
    files: list[FileDiff]
    additions: int
    deletions: int
    total_files: int
    truncated: bool


def _diff(repo: pygit2.Repository, commit: pygit2.Commit) -> pygit2.Diff:
    with timing.phase("git"):
        if commit.parents:
            diff = commit.parents[0].tree.diff_to_tree(commit.tree, flags=DiffOption.NORMAL)
        else:
            diff = commit.tree.diff_to_tree(swap=True)
        diff.find_similar(flags=DiffFind.FIND_RENAMES)
        return diff


def commit_diff(repo: pygit2.Repository, commit: pygit2.Commit, limits: Limits) -> CommitDiff:
    diff = _diff(repo, commit)
    files: list[FileDiff] = []
    total_lines = 0
    truncated = False
    with timing.phase("git"):
        stats = diff.stats
        additions, deletions = stats.insertions, stats.deletions
        for i, delta in enumerate(diff.deltas):
            fd = FileDiff(
                old_path=delta.old_file.raw_path,
                new_path=delta.new_file.raw_path,
                status=STATUS.get(delta.status, "modified"),
                additions=None,
                deletions=None,
                binary=bool(delta.is_binary),
                similarity=delta.similarity,
            )
            files.append(fd)
            if i >= limits.files or total_lines >= limits.lines_total:
                fd.shown = False
                truncated = True
                continue
            patch = diff[i]
            if patch is None:  # libgit2 found nothing to show for this delta
                continue
            _, fd.additions, fd.deletions = patch.line_stats
            fd.binary = bool(patch.delta.is_binary)
            if fd.binary:
                continue
            count = 0
            for hunk in patch.hunks:
                h = Hunk(hunk.header.rstrip("\n"))
                for line in hunk.lines:
                    if count >= limits.lines_per_file or total_lines >= limits.lines_total:
                        fd.truncated = True
                        break
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
                    total_lines += 1
                fd.hunks.append(h)
                if fd.truncated:
                    truncated = True
                    break
    return CommitDiff(files, additions, deletions, len(files), truncated)


def patch_text(repo: pygit2.Repository, commit: pygit2.Commit) -> bytes:
    """The unified diff, as ``git diff`` prints it."""
    diff = _diff(repo, commit)
    with timing.phase("git"):
        return _raw_patch(diff)


def _raw_patch(diff: pygit2.Diff) -> bytes:
    patch = diff.patch
    return (patch or "").encode("utf-8", "surrogateescape")


def format_patch(repo: pygit2.Repository, commit: pygit2.Commit) -> bytes:
    """The commit as ``git format-patch`` would mail it."""
    diff = _diff(repo, commit)
    info = commit_info(commit)
    author = info.author
    subject, _, body = info.message.partition("\n")
    date = dates.rfc2822(author.when)
    with timing.phase("git"):
        stats = diff.stats.format(
            pygit2.enums.DiffStatsFormat.FULL | pygit2.enums.DiffStatsFormat.INCLUDE_SUMMARY, 72
        )
        header = (
            f"From {commit.id} Mon Sep 17 00:00:00 2001\n"
            f"From: {author.name} <{author.email}>\n"
            f"Date: {date}\n"
            f"Subject: [PATCH] {subject}\n\n"
            f"{body.strip()}{chr(10) * 2 if body.strip() else ''}---\n{stats}\n"
        )
        return header.encode("utf-8", "replace") + _raw_patch(diff) + b"-- \nfloorless\n\n"
