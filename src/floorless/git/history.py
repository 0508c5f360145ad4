"""Commit history as ``git log`` defines it, over any commit graph.

``log_page`` reproduces ``git log [-- path]``: commits come out newest committer date first
(ties in the order they were queued), and with a path, git's default history simplification
applies: a commit is shown when the path differs from every parent; at a merge that leaves the
path as one parent had it, only that (first such) parent is followed.

``CommitGraph`` is the in-memory form of the index: dense integer ids, parents, committer times
and, per parent, the set of path ids that differ (every changed file and each directory above
it). ``last_changes`` answers ``git log -1 -- dir/entry`` for every entry of a directory in one
walk.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

N = TypeVar("N")

# shown(node, parents) -> (is the node shown, the parents to follow)
Simplify = Callable[[N, Sequence[N]], tuple[bool, Sequence[N]]]


@dataclass
class Page(Generic[N]):
    """One page of a walk, and what the next page needs to continue it exactly."""

    commits: list[N]
    frontier: list[N]  # where the next page starts; empty when the history is done
    # Walked commits the next page could reach again: those not newer than the newest frontier
    # commit (timestamp ties at the page boundary) ...
    seen: list[N] = field(default_factory=list)
    # ... and commits dated after a child (a clock running ahead), carried from page to page.
    skewed: list[N] = field(default_factory=list)


def log_page(
    starts: Iterable[N],
    parents: Callable[[N], Sequence[N]],
    time: Callable[[N], int],
    limit: int,
    simplify: Simplify[N] | None = None,
    budget: int | None = None,
    exclude: Iterable[N] = (),
    skewed: Iterable[N] = (),
) -> Page[N] | None:
    """The next ``limit`` commits of the walk from ``starts``; ``exclude`` and ``skewed`` are
    the previous page's ``seen`` and ``skewed``. None when ``budget`` (commits visited) runs
    out first."""
    starts = list(starts)
    skew = set(skewed)
    walked = set(exclude) | (skew - set(starts))
    seen: set[N] = set(walked)
    queue: list[tuple[int, int, N]] = []
    counter = 0
    for node in starts:
        if node not in seen:
            seen.add(node)
            heapq.heappush(queue, (-time(node), counter, node))
            counter += 1
    shown: list[N] = []
    visited = 0
    last: int | None = None
    while queue and len(shown) < limit:
        visited += 1
        if budget is not None and visited > budget:
            return None
        when, _, node = heapq.heappop(queue)
        if last is not None and -when > last:
            skew.add(node)  # it entered the queue after an older commit was walked
        last = -when
        walked.add(node)
        follow = parents(node)
        show = True
        if simplify is not None:
            show, follow = simplify(node, follow)
        for parent in follow:
            if parent not in seen:
                seen.add(parent)
                heapq.heappush(queue, (-time(parent), counter, parent))
                counter += 1
        if show:
            shown.append(node)
    frontier = [node for _, _, node in sorted(queue)]
    if not frontier:
        return Page(shown, [])
    if last is not None:
        skew.update(node for node in frontier if time(node) > last)
    newest = max(time(node) for node in frontier)
    pending = set(frontier)
    return Page(
        shown,
        frontier,
        [node for node in walked if time(node) <= newest and node not in skew],
        [node for node in skew if node in walked or node in pending],
    )


@dataclass
class CommitGraph:
    """The commit index of one repository, in memory."""

    oids: list[bytes] = field(default_factory=list)
    seq: dict[bytes, int] = field(default_factory=dict)
    times: list[int] = field(default_factory=list)
    parents: list[tuple[int, ...]] = field(default_factory=list)
    changes: list[tuple[frozenset[int], ...]] = field(default_factory=list)
    path_ids: dict[bytes, int] = field(default_factory=dict)
    path_names: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def path_id(self, path: bytes, create: bool = False) -> int | None:
        found = self.path_ids.get(path)
        if found is None and create:
            found = len(self.path_names)
            self.path_names.append(path)
            self.path_ids[path] = found
        return found

    def add(
        self, oid: bytes, time: int, parents: tuple[int, ...], changes: tuple[frozenset[int], ...]
    ) -> int:
        seq = len(self.oids)
        self.oids.append(oid)
        self.times.append(time)
        self.parents.append(parents)
        self.changes.append(changes)
        self.seq[oid] = seq
        return seq

    def __contains__(self, oid: bytes) -> bool:
        return oid in self.seq

    def path_simplifier(self, path_id: int | None) -> Simplify[int]:
        """git's default history simplification for one path (None: a path never changed)."""
        changes = self.changes

        def simplify(node: int, parents: Sequence[int]) -> tuple[bool, Sequence[int]]:
            per_parent = changes[node]
            if not parents:  # a root commit: shown when the path exists in it
                return path_id is not None and path_id in per_parent[0], parents
            for i, parent in enumerate(parents):
                if path_id is None or path_id not in per_parent[i]:
                    return False, (parent,)  # TREESAME to this parent: follow it alone
            return True, parents

        return simplify

    def history(
        self,
        starts: Sequence[int],
        path: bytes | None,
        limit: int,
        budget: int | None = None,
        exclude: Iterable[int] = (),
        skewed: Iterable[int] = (),
    ) -> Page[int] | None:
        if path is not None and path not in self.path_ids:
            return Page([], [])  # no commit ever changed it: walking to the root finds none
        simplify = None if path is None else self.path_simplifier(self.path_ids.get(path))
        return log_page(
            starts,
            self.parents.__getitem__,
            self.times.__getitem__,
            limit,
            simplify,
            budget,
            exclude,
            skewed,
        )

    def last_changes(
        self, start: int, paths: Sequence[bytes], budget: int | None = None
    ) -> dict[bytes, int | None] | None:
        """For each path, the first commit ``git log -1 -- path`` shows from ``start``.

        Every path follows one chain (a merge TREESAME to a parent continues on that parent
        alone; one that differs from all parents is the answer), so paths that share a commit
        travel together and the walk visits each commit once. None if ``budget`` runs out.
        """
        answer: dict[bytes, int | None] = {}
        pending: dict[int, list[tuple[bytes, int | None]]] = {
            start: [(p, self.path_ids.get(p)) for p in paths]
        }
        queue = [(-self.times[start], start)]
        visited = 0
        while queue:
            visited += 1
            if budget is not None and visited > budget:
                return None
            _, node = heapq.heappop(queue)
            group = pending.pop(node)
            per_parent = self.changes[node]
            parents = self.parents[node]
            for path, pid in group:
                if pid is None:
                    answer[path] = None
                    continue
                if not parents:
                    answer[path] = node if pid in per_parent[0] else None
                    continue
                for i, parent in enumerate(parents):
                    if pid not in per_parent[i]:
                        if parent in pending:
                            pending[parent].append((path, pid))
                        else:
                            pending[parent] = [(path, pid)]
                            heapq.heappush(queue, (-self.times[parent], parent))
                        break
                else:
                    answer[path] = node
        return answer

    def count_ancestors(self, start: int) -> int:
        """How many commits ``git rev-list --count`` finds from ``start``."""
        seen = {start}
        stack = [start]
        parents = self.parents
        while stack:
            for parent in parents[stack.pop()]:
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        return len(seen)
