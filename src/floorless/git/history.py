"""Commit history as ``git log`` defines it, over any commit graph.

``log_page`` reproduces ``git log [-- path]``: commits come out newest committer date first
(ties in the order they were queued), and with a path, git's default history simplification
applies: a commit is shown when the path differs from every parent; at a merge that leaves the
path as one parent had it, only that (first such) parent is followed.

``CommitGraph`` is the in-memory form of the index: dense integer ids, parents, committer times
and, per parent, the ids of the paths that differ (every changed file and each directory above
it), packed in arrays. ``last_changes`` answers ``git log -1 -- dir/entry`` for every entry of
a directory in one walk.
"""

from __future__ import annotations

import heapq
import threading
from array import array
from bisect import bisect_left
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


class NotIndexed(Exception):
    """A walk reached a commit whose changed paths are not indexed yet."""


NOT_INDEXED = 0xFFFFFFFF  # a slot's length before its changed paths are known


class Parents:
    """A commit's parents by sequence number, read from the graph's packed arrays."""

    __slots__ = ("_ids", "_start")

    def __init__(self, start: array[int], ids: array[int]) -> None:
        self._start = start
        self._ids = ids

    def __getitem__(self, node: int) -> Sequence[int]:
        start = self._start
        return self._ids[start[node] : start[node + 1]]

    def __len__(self) -> int:
        return len(self._start) - 1


class CommitGraph:
    """The commit index of one repository, in memory, packed.

    Dense integer ids (sequence numbers) in the order commits were added; parents and times in
    flat ``array`` columns; per commit one slot per parent (one for a root), each the sorted ids
    of the paths that differ from that parent, stored back to back in one ``array('I')`` and
    searched with ``bisect``. No Python object per commit but its id (``oids``, shared with
    ``seq``'s keys): git.git's 9.8 million changed-path ids take 39 MB, and the collector has
    nothing per commit to traverse.

    The topology (ids, parents, times) of a commit is added before its changed paths
    (``add`` with ``changes=None``, ``set_changes`` later): reachability, counts and the
    walks' order are known at once, and a walk that needs the changed paths of a commit not
    indexed yet answers None (not yet) instead of a wrong answer.
    """

    def __init__(self) -> None:
        self.oids: list[bytes] = []
        self.seq: dict[bytes, int] = {}
        self.times = array("q")
        self._parent_start = array("I", [0])
        self._parent_ids = array("I")
        self.parents = Parents(self._parent_start, self._parent_ids)
        self._slot_start = array("I", [0])  # commit -> its first slot
        self._at = array("Q")  # slot -> offset of its path ids in ``_ids``
        self._len = array("I")  # slot -> how many, NOT_INDEXED until known
        self._ids = array("I")
        self.indexed = 0  # commits whose changed paths are known
        self.path_ids: dict[bytes, int] = {}
        self.path_names: list[bytes] = []
        self.path_parent = array("i")  # path id -> id of the directory above it, -1 at the root
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.oids)

    def __contains__(self, oid: bytes) -> bool:
        return oid in self.seq

    def path_id(self, path: bytes, create: bool = False) -> int | None:
        """The id of ``path``; with ``create``, a new one (and for each directory above it)."""
        found = self.path_ids.get(path)
        if found is not None or not create:
            return found
        missing = [path]  # a path may be thousands of directories deep: no recursion
        while True:
            head, slash, _ = missing[-1].rpartition(b"/")
            parent = self.path_ids.get(head, -1) if slash else -1
            if parent >= 0 or not slash:
                break
            missing.append(head)
        for name in reversed(missing):
            found = len(self.path_names)
            self.path_names.append(name)
            self.path_ids[name] = found
            self.path_parent.append(parent)
            parent = found
        return found

    def add(
        self,
        oid: bytes,
        time: int,
        parents: Sequence[int],
        changes: Sequence[Iterable[int]] | None = None,
    ) -> int:
        """Add a commit whose parents are in the graph; ``changes``, per parent (one for a
        root), the ids of the paths that differ (or None: ``set_changes`` later)."""
        seq = len(self.oids)
        self.times.append(time)
        self._parent_ids.extend(parents)
        self._parent_start.append(len(self._parent_ids))
        slots = max(1, len(parents))
        self._slot_start.append(self._slot_start[-1] + slots)
        self._at.extend([0] * slots)
        self._len.extend([NOT_INDEXED] * slots)
        if changes is not None:
            self.set_changes(seq, changes)
        # last: a reader that finds the id finds every column of it (one writer, the GIL)
        self.oids.append(oid)
        self.seq[oid] = seq
        return seq

    def set_changes(
        self, node: int, changes: Sequence[Iterable[int]], ordered: bool = False
    ) -> None:
        """The changed path ids of ``node``, per parent (``ordered``: each already sorted,
        without repeats)."""
        first = self._slot_start[node]
        if len(changes) != self._slot_start[node + 1] - first:
            raise ValueError("one set of changed paths per parent")
        done = self._len[first] != NOT_INDEXED
        for i, ids in enumerate(changes):
            before = len(self._ids)
            self._ids.extend(ids if ordered else sorted(set(ids)))
            self._at[first + i] = before
            self._len[first + i] = len(self._ids) - before
        if not done:
            self.indexed += 1

    def is_indexed(self, node: int) -> bool:
        return self._len[self._slot_start[node]] != NOT_INDEXED

    def changed(self, node: int, parent: int, path_id: int) -> bool:
        """Whether ``path_id`` differs between ``node`` and its ``parent``-th parent (the
        empty tree for a root). Raises NotIndexed while that is not known."""
        slot = self._slot_start[node] + parent
        length = self._len[slot]
        if length == NOT_INDEXED:
            raise NotIndexed(node)
        start = self._at[slot]
        end = start + length
        found = bisect_left(self._ids, path_id, start, end)
        return found < end and self._ids[found] == path_id

    def slot_ids(self, node: int) -> list[array[int]] | None:
        """The sorted changed path ids per parent, or None while not indexed."""
        if not self.is_indexed(node):
            return None
        first, end = self._slot_start[node], self._slot_start[node + 1]
        at, lengths, ids = self._at, self._len, self._ids
        return [ids[at[s] : at[s] + lengths[s]] for s in range(first, end)]

    def not_indexed(self) -> list[int]:
        """The commits whose changed paths are not known yet, newest first."""
        slot_start, lengths = self._slot_start, self._len
        pending = [n for n in range(len(self.oids)) if lengths[slot_start[n]] == NOT_INDEXED]
        times = self.times
        pending.sort(key=lambda n: -times[n])
        return pending

    def heads(self) -> list[int]:
        """The commits no commit of the graph names as a parent."""
        child = bytearray(len(self.oids))
        for parent in self._parent_ids:
            child[parent] = 1
        return [n for n, has in enumerate(child) if not has]

    def nbytes(self) -> int:
        """Roughly what the packed columns take (ids and dictionaries left out)."""
        columns = (self.times, self._parent_start, self._parent_ids, self._slot_start)
        return sum(a.itemsize * len(a) for a in (*columns, self._at, self._len, self._ids))

    def path_simplifier(self, path_id: int | None) -> Simplify[int]:
        """git's default history simplification for one path (None: a path never changed)."""
        changed = self.changed

        def simplify(node: int, parents: Sequence[int]) -> tuple[bool, Sequence[int]]:
            if not parents:  # a root commit: shown when the path exists in it
                return path_id is not None and changed(node, 0, path_id), parents
            for i, parent in enumerate(parents):
                if path_id is None or not changed(node, i, path_id):
                    return False, (parent,)  # TREESAME to this parent: follow it alone
            return True, parents

        return simplify

    def _simplifier(self, path: bytes) -> Simplify[int]:
        """``path_simplifier`` for a graph still being indexed: a path no indexed commit
        changed yet may be named by a commit indexed during the walk, so a commit is read
        only once indexed, and the path's id looked up again until it has one."""
        found = self.path_ids.get(path)
        if found is not None or self.indexed == len(self.oids):
            return self.path_simplifier(found)
        is_indexed, path_ids = self.is_indexed, self.path_ids

        def simplify(node: int, parents: Sequence[int]) -> tuple[bool, Sequence[int]]:
            if not is_indexed(node):
                raise NotIndexed(node)
            return self.path_simplifier(path_ids.get(path))(node, parents)

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
        """One page of ``git log [-- path]``; None when ``budget`` runs out or the walk
        reaches a commit whose changed paths are not indexed yet."""
        if path is not None and path not in self.path_ids and self.indexed == len(self.oids):
            return Page([], [])  # no commit ever changed it: walking to the root finds none
        simplify = None if path is None else self._simplifier(path)
        try:
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
        except NotIndexed:
            return None

    def last_changes(
        self, start: int, paths: Sequence[bytes], budget: int | None = None
    ) -> dict[bytes, int | None] | None:
        """For each path, the first commit ``git log -1 -- path`` shows from ``start``.

        Every path follows one chain (a merge TREESAME to a parent continues on that parent
        alone; one that differs from all parents is the answer), so paths that share a commit
        travel together and the walk visits each commit once. A commit costs what it changed,
        not how many paths travel through it: the paths a commit changed are found from the
        smaller of its changed ids and the travelling group, and a group nothing changed moves
        on to the parent whole. None if ``budget`` runs out, or the walk reaches a commit not
        indexed yet.
        """
        answer: dict[bytes, int | None] = {}
        complete = self.indexed == len(self.oids)
        first: dict[int | None, list[bytes]] = {}
        for path in paths:
            first.setdefault(self.path_ids.get(path), []).append(path)
        pending: dict[int, dict[int | None, list[bytes]]] = {start: first}
        queue = [(-self.times[start], start)]
        visited = 0
        try:
            while queue:
                visited += 1
                if budget is not None and visited > budget:
                    return None
                _, node = heapq.heappop(queue)
                group = pending.pop(node)
                if not complete and not self.is_indexed(node):
                    raise NotIndexed(node)
                unnamed = group.pop(None, None)
                if unnamed:
                    for path in unnamed:
                        pid = None if complete else self.path_ids.get(path)  # named since?
                        if pid is None and complete:
                            answer[path] = None
                        else:
                            group.setdefault(pid, []).append(path)
                parents = self.parents[node]
                if not parents:  # a root: what it has is what it changed
                    hit = self._changed_among(node, 0, group)
                    for pid, travelling in group.items():
                        for path in travelling:
                            answer[path] = node if pid in hit else None
                    continue
                for i, parent in enumerate(parents):
                    if not group:
                        break
                    hit = self._changed_among(node, i, group)
                    if hit:  # those go on to the next parent; the rest follow this one
                        moving = {pid: ps for pid, ps in group.items() if pid not in hit}
                        group = {pid: group[pid] for pid in hit}
                    else:
                        moving, group = group, {}
                    if not moving:
                        continue
                    waiting = pending.get(parent)
                    if waiting is None:
                        pending[parent] = moving
                        heapq.heappush(queue, (-self.times[parent], parent))
                    else:
                        for pid, ps in moving.items():
                            waiting.setdefault(pid, []).extend(ps)
                for travelling in group.values():  # changed against every parent
                    for path in travelling:
                        answer[path] = node
        except NotIndexed:
            return None
        return answer

    def _changed_among(
        self, node: int, parent: int, group: dict[int | None, list[bytes]]
    ) -> set[int]:
        """The path ids of ``group`` that differ between ``node`` and its ``parent``-th
        parent: from the commit's changed ids when they are fewer, else one lookup each."""
        slot = self._slot_start[node] + parent
        length = self._len[slot]
        if length == NOT_INDEXED:
            raise NotIndexed(node)
        start = self._at[slot]
        if length <= len(group):
            return {pid for pid in self._ids[start : start + length] if pid in group}
        ids, end = self._ids, start + length
        found = set()
        for pid in group:
            if pid is not None:
                at = bisect_left(ids, pid, start, end)
                if at < end and ids[at] == pid:
                    found.add(pid)
        return found

    def count_ancestors(self, start: int) -> int:
        """How many commits ``git rev-list --count`` finds from ``start``."""
        seen = bytearray(len(self.oids))
        seen[start] = 1
        stack = [start]
        parents = self.parents
        count = 1
        while stack:
            for parent in parents[stack.pop()]:
                if not seen[parent]:
                    seen[parent] = 1
                    count += 1
                    stack.append(parent)
        return count
