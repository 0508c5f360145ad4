"""What one commit has that another has not: their merge base and the commits between, for the
compare page and a pull request's commits, read in-process through libgit2.

Both are bounded by what the pair of commits holds, never by the repository's history: the
walk from the head stops at the merge base (hidden, so libgit2 marks what is below it as
seen) and after ``limit`` commits, and is sorted by time alone, which libgit2 can hand out as
it goes (a topological order would read every commit of the range before the first). Callers
keep the answers by the pair of commit ids, which never change meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
from pygit2.enums import SortMode

from floorless.core import timing
from floorless.git.lenient import read_commit
from floorless.git.objects import CommitInfo, commit_info

COMMITS_LIMIT = 250  # commits a compare lists (GitHub lists 250 too)


@dataclass(frozen=True)
class Range:
    """The commits ``head`` has that ``base`` has not, oldest first (at most the limit:
    ``more`` says there are others, left out at the old end)."""

    base: str
    head: str
    merge_base: str  # "" when the two have no history in common
    commits: tuple[CommitInfo, ...]
    more: bool

    @property
    def unrelated(self) -> bool:
        return not self.merge_base

    @property
    def count(self) -> str:
        """How many commits, as a reader sees it: ``250+`` past the limit."""
        return f"{len(self.commits)}{'+' if self.more else ''}"


def merge_base(handle: pygit2.Repository, base: str, head: str) -> str:
    """The best common ancestor of the two commits (hex), or "" if they have none."""
    with timing.phase("git"):
        found = handle.merge_base(pygit2.Oid(hex=base), pygit2.Oid(hex=head))
    return "" if found is None else str(found)


def commits_between(
    handle: pygit2.Repository, hide: str, head: str, limit: int = COMMITS_LIMIT
) -> tuple[list[CommitInfo], bool]:
    """The commits reachable from ``head`` and not from ``hide`` (hex; "" hides nothing),
    newest first, at most ``limit``, and whether there are more."""
    found: list[CommitInfo] = []
    with timing.phase("git"):
        walker = handle.walk(pygit2.Oid(hex=head), SortMode.TIME)
        if hide:
            walker.hide(pygit2.Oid(hex=hide))
        for oid in (commit.id for commit in walker):
            if len(found) == limit:
                return found, True
            commit = read_commit(handle, oid)
            if commit is not None:
                found.append(commit_info(commit))
    return found, False


def commit_range(
    handle: pygit2.Repository, base: str, head: str, limit: int = COMMITS_LIMIT
) -> Range:
    """What ``head`` has that ``base`` has not, against their merge base; no commits at all
    for unrelated histories (there is nothing to stop the walk, and nothing to merge)."""
    found = merge_base(handle, base, head)
    if not found:
        return Range(base, head, "", (), False)
    commits, more = commits_between(handle, found, head, limit)
    return Range(base, head, found, tuple(reversed(commits)), more)
