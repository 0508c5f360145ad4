"""Commit history as ``git log`` defines it, over any commit graph.

``LogWalk`` is ``git log [-- path]``'s own walk: commits come out newest committer date first
(ties in the order they were queued), each commit queued once however many of its children
the walk reaches (git's SEEN mark), so a parent dated after its child comes out as soon as
it is queued, as in git. With a path, git's default history simplification applies: a commit
is shown when the path differs from every parent; at a merge that leaves the path as one
parent had it, only that (first such) parent is followed.

Pages of a walk. The walk is exact only because its SEEN set is global: a page boundary
cuts it, and the next page must know, for every parent it meets, whether an earlier page
queued it already. Dates do not bound which of the walked commits that may be: a parent dated
after one child is walked with that child, and its other child, older than it, may come up
any number of pages later (flask's ``78b56dbf`` and ``a22d143f``); in a run of commits that
share one timestamp every walked commit may be. Telling which walked commits some commit yet
to be walked still names would take the children of every commit, the whole history. So no
cursor of bounded size can carry the walk's state and be exact (the ``seen``/``skew`` lists
this replaced were neither bounded nor exact). A walk is kept instead, and ``extend``\\ ed
page by page: it holds the commits shown so far, in order, and git's queue and SEEN set, and
the next page goes on from where the last stopped, visiting what that page shows (and what
the simplification passes over), as a single walk would. The walk is defined by its start
commits and path alone, so a page is named by those and a count of the commits before it,
and a walk no longer kept is walked again, deterministically, from its start: see
``floorless.index.indexer`` (where walks are kept) and ``floorless.web.views.commits`` (the cursor).

``CommitGraph`` is the in-memory form of the index: dense integer ids, parents, committer times
and, per parent, the ids of the paths that differ (every changed file and each directory above
it), packed in arrays. ``last_changes`` answers ``git log -1 -- dir/entry`` for every entry of
a directory in one walk.

Both walks cross a long history by a path's postings: the commits that changed the path against
their first parent. A commit that did not (most commits, for most paths) is TREESAME to its
first parent, so git's simplification shows nothing there and follows that parent alone. The
walks take such a commit, and the ones after it on its first-parent line, in a tight loop with
no queue work, for as long as each is the commit the queue would give next anyway (newer than
everything queued): order, SEEN marks and answers are those of the full walk. Where a
first-parent line is a run of consecutive ids (as ``git rev-list --topo-order`` numbers a line
of history), the commits up to the next one in the postings are taken in one step, checked
with set operations rather than commit by commit.
"""

from __future__ import annotations

import heapq
import sys
import threading
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Generic, TypeVar

from floorless.core.caches import Cache

N = TypeVar("N")

# shown(node, parents) -> (is the node shown, the parents to follow)
Simplify = Callable[[N, Sequence[N]], tuple[bool, Sequence[N]]]

TOUCHING_MEMORY_BYTES = 8 * 1024 * 1024  # postings kept ready for walks (``Touching``)

# What a walk holds per commit it queued: set and list slots (37 bytes measured on CPython
# 3.11) and, over object ids, the id (53 bytes for SHA-1); rounded up
_BYTES_PER_SEEN = 100


@dataclass
class Page(Generic[N]):
    """Commits of a walk, and whether the walk goes on past them (with a path, the rest of
    the walk may still show nothing)."""

    commits: list[N]
    more: bool


class LogWalk(Generic[N]):
    """``git log``'s walk from ``starts``, kept between pages (see the module docstring).

    ``parents`` and ``time`` are given to each ``extend`` rather than kept, so that a walk
    over a repository's objects holds no handle; ``simplify`` (the path's) is part of what
    the walk is, and ``over`` what its ids are numbers in (a ``CommitGraph``), if they are
    not object ids. ``lock`` is for its keeper: one thread at a time extends a walk.
    """

    def __init__(
        self,
        starts: Iterable[N],
        time: Callable[[N], int],
        simplify: Simplify[N] | None = None,
        over: object = None,
    ) -> None:
        self.simplify = simplify
        self.over = over
        self.shown: list[N] = []
        self.visited = 0  # commits walked so far
        self.stepped = 0  # of those, commits taken one at a time (the others in runs)
        self.lock = threading.Lock()
        self._seen: set[N] = set()
        self._queue: list[tuple[int, int, N]] = []
        self._queued = 0  # git's queue keeps ties in the order they were queued
        for node in starts:
            if node not in self._seen:
                self._push(node, time(node))

    def _push(self, node: N, when: int) -> None:
        self._seen.add(node)
        heapq.heappush(self._queue, (-when, self._queued, node))
        self._queued += 1

    @property
    def done(self) -> bool:
        return not self._queue

    def extend(
        self,
        until: int,
        parents: Callable[[N], Sequence[N]],
        time: Callable[[N], int],
        budget: int | None = None,
    ) -> bool:
        """Walk on until ``until`` commits are shown or the history ends. False when
        ``budget`` commits were walked first: the walk keeps its place, and the next call
        goes on from there. A commit is taken off the queue only once everything about it
        was read, so an error reading one (raised to the caller) leaves the walk as it was."""
        queue, seen, shown, simplify = self._queue, self._seen, self.shown, self.simplify
        walked = 0
        while queue and len(shown) < until:
            if budget is not None and walked >= budget:
                return False
            node = queue[0][2]
            follow = parents(node)
            show = True
            if simplify is not None:
                show, follow = simplify(node, follow)
            new = [(p, time(p)) for p in dict.fromkeys(follow) if p not in seen]
            heapq.heappop(queue)
            walked += 1
            self.visited += 1
            self.stepped += 1
            for parent, when in new:
                self._push(parent, when)
            if show:
                shown.append(node)
        return True

    def page(self, skip: int, limit: int) -> Page[N]:
        """The ``limit`` commits shown after the first ``skip``, once ``extend``\\ ed to
        ``skip + limit``."""
        end = skip + limit
        return Page(self.shown[skip:end], len(self.shown) > end or not self.done)

    def nbytes(self) -> int:
        """Roughly the memory the walk holds (for a cache bounded in bytes)."""
        shown = sys.getsizeof(self.shown)
        return shown + _BYTES_PER_SEEN * len(self._seen) + sys.getsizeof(self._queue)


def log_page(
    starts: Iterable[N],
    parents: Callable[[N], Sequence[N]],
    time: Callable[[N], int],
    limit: int,
    simplify: Simplify[N] | None = None,
    budget: int | None = None,
) -> Page[N] | None:
    """The first ``limit`` commits of the walk from ``starts`` (one page, with no walk kept);
    None when ``budget`` (commits walked) runs out first."""
    walk = LogWalk(starts, time, simplify)
    if not walk.extend(limit, parents, time, budget):
        return None
    return walk.page(0, limit)


class PathWalk(LogWalk[int]):
    """``git log -- path``'s walk over a complete ``CommitGraph`` (see the module docstring):
    a commit outside ``touching`` (the path's postings) passes to its first parent."""

    def __init__(
        self, graph: CommitGraph, starts: Iterable[int], path_id: int, touching: Touching
    ) -> None:
        super().__init__(starts, graph.times.__getitem__, graph.path_simplifier(path_id), graph)
        self._graph = graph
        self._touching = touching

    def extend(
        self,
        until: int,
        parents: Callable[[int], Sequence[int]],
        time: Callable[[int], int],
        budget: int | None = None,
    ) -> bool:
        queue, seen, shown, simplify = self._queue, self._seen, self.shown, self.simplify
        graph, postings = self._graph, self._touching
        touching, first, times = postings.nodes, graph.first_parent, graph.times
        assert simplify is not None
        walked = 0
        while queue and len(shown) < until:
            if budget is not None and walked >= budget:
                return False
            node = queue[0][2]
            if node in touching:  # as ``LogWalk.extend``
                show, follow = simplify(node, parents(node))
                new = [(p, time(p)) for p in dict.fromkeys(follow) if p not in seen]
                heapq.heappop(queue)
                walked += 1
                self.visited += 1
                self.stepped += 1
                for parent, when in new:
                    self._push(parent, when)
                if show:
                    shown.append(node)
                continue
            heapq.heappop(queue)
            walked += 1
            self.visited += 1
            self.stepped += 1
            while True:  # TREESAME to its first parent: not shown, that parent followed alone
                room = None if budget is None else budget - walked
                newest = -queue[0][0] if queue else None
                taken = graph.passing(node, postings, newest, seen, room)
                if taken:  # each the first parent of the one before, and next out of the queue
                    seen.update(range(node - taken, node))
                    self._queued += taken
                    walked += taken
                    self.visited += taken
                    node -= taken
                parent = first[node]
                if parent < 0 or parent in seen:
                    break
                when = times[parent]
                if (
                    parent in touching
                    or (queue and -when >= queue[0][0])  # not the next one out of the queue
                    or (budget is not None and walked >= budget)
                ):
                    self._push(parent, when)
                    break
                seen.add(parent)  # queued and taken out at once
                self._queued += 1
                walked += 1
                self.visited += 1
                self.stepped += 1
                node = parent
        return True

    def nbytes(self) -> int:
        return super().nbytes() + self._touching.nbytes()


class BranchWalk(LogWalk[int]):
    """``git log``'s walk without a path over a ``CommitGraph``: every commit is shown. A
    commit of one parent whose parent is the next out of the queue anyway (newer than
    everything queued) hands on to it in a tight loop, with no queue work: order and SEEN
    marks are the full walk's. git.git's commits page 40,000 deep walked 40,000 commits
    through the queue one by one."""

    def __init__(self, graph: CommitGraph, starts: Iterable[int]) -> None:
        super().__init__(starts, graph.times.__getitem__, None, graph)
        self._graph = graph

    def extend(
        self,
        until: int,
        parents: Callable[[int], Sequence[int]],
        time: Callable[[int], int],
        budget: int | None = None,
    ) -> bool:
        queue, seen, shown = self._queue, self._seen, self.shown
        graph = self._graph
        times, first, starts = graph.times, graph.first_parent, graph._parent_start
        walked = 0
        while queue and len(shown) < until:
            if budget is not None and walked >= budget:
                return False
            node = heapq.heappop(queue)[2]
            walked += 1
            self.visited += 1
            self.stepped += 1
            shown.append(node)
            while starts[node + 1] - starts[node] == 1:  # one parent
                parent = first[node]
                if parent in seen:
                    break
                when = times[parent]
                if (
                    (queue and -when >= queue[0][0])  # not the next one out of the queue
                    or len(shown) >= until
                    or (budget is not None and walked >= budget)
                ):
                    self._push(parent, when)
                    break
                seen.add(parent)  # queued and taken out at once
                self._queued += 1
                walked += 1
                self.visited += 1
                shown.append(parent)
                node = parent
            else:
                for parent in dict.fromkeys(parents(node)):
                    if parent not in seen:
                        self._push(parent, times[parent])
        return True


class Touching:
    """A path's postings, ready for a walk: in ascending order, searched by ``bisect``
    (``has``), and as a set (``nodes``) made when first asked for: a directory's column asks
    a few hundred times where a history page asks at every commit it walks, and a set of a
    busy directory's 50,000 postings costs milliseconds to make."""

    __slots__ = ("_nodes", "ordered")

    def __init__(self, ordered: array[int]) -> None:
        self.ordered = ordered
        self._nodes: frozenset[int] | None = None

    @property
    def nodes(self) -> frozenset[int]:
        if self._nodes is None:
            self._nodes = frozenset(self.ordered)
        return self._nodes

    def has_set(self) -> bool:
        return self._nodes is not None

    def has(self, node: int) -> bool:
        ordered = self.ordered
        at = bisect_left(ordered, node)
        return at < len(ordered) and ordered[at] == node

    def nbytes(self) -> int:
        made = 0 if self._nodes is None else sys.getsizeof(self._nodes)
        return made + 4 * len(self.ordered)


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
    ``seq``'s keys), and the collector has nothing per commit to traverse.

    A merge's slot for another parent may hold only the paths of its first slot that differ
    from that parent too (the indexer keeps no more): git's simplification asks another
    parent only of a path that differs from the first, and so do the walks here. On git.git
    that is 0.43 million changed-path ids instead of 9.8 million, most of which were second
    parents differing from their merge in everything the main line did while a topic was
    out (the whole graph: 6 MB instead of 42).

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
        self.first_parent = array("i")  # commit -> its first parent, -1 for a root
        # path id -> the commits that changed it against their first parent (a root: that
        # have it), in the order they were indexed
        self.postings: dict[int, array[int]] = {}
        # by path id, 1 where its postings are not ascending (flags: no object per path)
        self._unordered = bytearray()
        # commit -> the lowest id down to which its first-parent line runs through consecutive
        # ids (each commit's first parent the id before it)
        self.run = array("I")
        self._touching: Cache[int, Touching] = Cache.lru(
            TOUCHING_MEMORY_BYTES, getsizeof=lambda t: t.nbytes()
        )
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
        self.first_parent.append(parents[0] if parents else -1)
        self.run.append(self.run[seq - 1] if parents and parents[0] == seq - 1 else seq)
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
            postings, unordered = self.postings, self._unordered
            for pid in self._ids[self._at[first] : self._at[first] + self._len[first]]:
                found = postings.get(pid)
                if found is None:
                    postings[pid] = array("I", (node,))
                else:
                    if found[-1] > node:
                        if pid >= len(unordered):
                            unordered.extend(bytes(pid + 1 - len(unordered)))
                        unordered[pid] = 1
                    found.append(node)

    def touching(self, path_id: int, as_set: bool = False) -> Touching:
        """The commits that changed ``path_id`` against their first parent (``as_set``: with
        their set made, for a walk that asks at every commit)."""
        with self.lock:
            nodes = self.postings.get(path_id, array("I"))
            flags = self._unordered
            size, unordered = len(nodes), path_id < len(flags) and flags[path_id] == 1
        kept = self._touching.get(path_id, lambda t: len(t.ordered) == size)
        if kept is None:  # a copy of what was there: the index only appends, meanwhile
            kept = Touching(array("I", sorted(nodes[:size])) if unordered else nodes[:size])
        elif not as_set or kept.has_set():
            return kept
        if as_set:
            kept.nodes  # noqa: B018 (made now, and counted in the cache's size)
        self._touching.put(path_id, kept)
        return kept

    def order_postings(self) -> None:
        """Sort the postings indexed out of order (the index goes newest slices first), once
        the history is all indexed: a walk then copies a path's postings rather than sorting
        them (a busy directory has tens of thousands)."""
        with self.lock:
            flags = self._unordered
            pid = flags.find(1)
            while pid >= 0:
                self.postings[pid] = array("I", sorted(self.postings[pid]))
                pid = flags.find(1, pid + 1)
            self._unordered = bytearray()

    def passing(
        self,
        node: int,
        touching: Touching,
        newest: int | None,
        avoid: AbstractSet[int] | None = None,
        room: int | None = None,
    ) -> int:
        """How many commits below ``node`` a walk that follows first parents past commits
        outside ``touching`` takes at once: ``node - 1``, ``node - 2``, ... while each is
        the first parent of the one before (``run``), outside ``touching`` and ``avoid``,
        and newer than ``newest`` (the newest commit queued); at most ``room``."""
        low = self.run[node]
        if low >= node:
            return 0
        ordered = touching.ordered
        at = bisect_left(ordered, node) - 1
        if at >= 0 and ordered[at] >= low:
            low = ordered[at] + 1
        if room is not None:
            low = max(low, node - room)
        if low >= node:
            return 0
        if newest is not None and min(self.times[low:node]) <= newest:
            return 0
        if avoid is not None and not avoid.isdisjoint(range(low, node)):
            return 0
        return node - low

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
        packed = sum(a.itemsize * len(a) for a in (*columns, self._at, self._len, self._ids))
        postings = sum(4 * len(nodes) for nodes in self.postings.values())
        return packed + 4 * len(self.first_parent) + postings

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

    def walk(self, starts: Sequence[int], path: bytes | None) -> LogWalk[int]:
        """``git log [-- path]``'s walk from ``starts``, not started yet (``history``)."""
        if path is not None and path not in self.path_ids and self.indexed == len(self.oids):
            # no commit ever changed it: none is shown
            return LogWalk([], self.times.__getitem__, over=self)
        if path is not None and self.indexed == len(self.oids):
            # complete: every commit it will walk is indexed, whatever is added later
            pid = self.path_ids[path]
            return PathWalk(self, starts, pid, self.touching(pid, as_set=True))
        if path is None:
            return BranchWalk(self, starts)
        return LogWalk(starts, self.times.__getitem__, self._simplifier(path), self)

    def history(self, walk: LogWalk[int], until: int, budget: int | None = None) -> bool | None:
        """Extend ``walk`` (made by ``walk``) until it shows ``until`` commits or ends; False
        when ``budget`` commits were walked first, None when it reached a commit whose
        changed paths are not indexed yet (either way it keeps its place)."""
        try:
            return walk.extend(until, self.parents.__getitem__, self.times.__getitem__, budget)
        except NotIndexed:
            return None

    def last_changes(
        self,
        start: int,
        paths: Sequence[bytes],
        budget: int | None = None,
        within: bytes | None = None,
        partial: bool = False,
    ) -> dict[bytes, int | None] | None:
        """For each path, the first commit ``git log -1 -- path`` shows from ``start``.

        Every path follows one chain (a merge TREESAME to a parent continues on that parent
        alone; one that differs from all parents is the answer), so paths that share a commit
        travel together and the walk visits each commit once. A commit costs what it changed,
        not how many paths travel through it: the paths a commit changed are found from the
        smaller of its changed ids and the travelling group, and a group nothing changed moves
        on to the parent whole. ``within``, a directory every path is in: a commit that did
        not change it against its first parent hands the group on to that parent at once (see
        the module docstring). None if ``budget`` runs out, or the walk reaches a commit not
        indexed yet; with ``partial``, the walk reaching a commit not indexed yet answers for
        the paths it answered before it (each path follows its own chain: those are exact).
        """
        answer: dict[bytes, int | None] = {}
        complete = self.indexed == len(self.oids)
        within_id = self.path_ids.get(within) if complete and within else None
        postings = None if within_id is None else self.touching(within_id)
        first_parent, times = self.first_parent, self.times
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
                while postings is not None and not postings.has(node) and group:
                    newest = -queue[0][0] if queue else None
                    room = None if budget is None else budget - visited
                    taken = self.passing(node, postings, newest, pending.keys(), room)
                    visited += taken
                    node -= taken
                    parent = first_parent[node]  # the group goes on to it whole
                    if parent < 0:  # a root without the directory: without the paths
                        for travelling in group.values():
                            answer.update(dict.fromkeys(travelling))
                        group = {}
                        break
                    waiting = pending.get(parent)
                    if waiting is not None:
                        for pid, ps in group.items():
                            waiting.setdefault(pid, []).extend(ps)
                        group = {}
                        break
                    key = (-times[parent], parent)
                    if (queue and key > queue[0]) or (budget is not None and visited >= budget):
                        pending[parent] = group
                        heapq.heappush(queue, key)
                        group = {}
                        break
                    visited += 1  # the next commit out of the queue: taken at once
                    node = parent
                if not group:
                    continue
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
            return answer if partial else None
        return answer

    def last_changes_among(
        self, start: int, paths: Sequence[bytes], changed: dict[int, list[frozenset[bytes]]]
    ) -> dict[bytes, int | None]:
        """``last_changes`` of ``paths`` over the graph's commits alone (their changed paths
        need not be indexed), from ``changed``: per commit, per parent, which of ``paths``
        differ (``ChangeStream`` limited to them); a commit it leaves out changed none of
        them against any parent. The commits outside it are crossed by their first-parent
        runs as over a directory's postings."""
        nodes = array("I", sorted(changed))
        touching = Touching(nodes)
        first_parent, times = self.first_parent, self.times
        answer: dict[bytes, int | None] = {}
        pending: dict[int, list[bytes]] = {start: list(paths)}
        queue = [(-times[start], start)]

        def move(group: list[bytes], parent: int) -> None:
            waiting = pending.get(parent)
            if waiting is None:
                pending[parent] = group
                heapq.heappush(queue, (-times[parent], parent))
            else:
                waiting.extend(group)

        while queue:
            _, node = heapq.heappop(queue)
            group = pending.pop(node)
            while node not in changed:  # none of the paths differ: on to the first parent
                newest = -queue[0][0] if queue else None
                node -= self.passing(node, touching, newest, pending.keys())
                if node in changed:
                    break
                parent = first_parent[node]
                if parent < 0:  # a root without any of them
                    answer.update(dict.fromkeys(group))
                    group = []
                    break
                if parent in pending or (queue and (-times[parent], parent) > queue[0]):
                    move(group, parent)
                    group = []
                    break
                node = parent  # the next commit out of the queue: taken at once
            if not group:
                continue
            slots = changed[node]
            parents = self.parents[node]
            if not parents:  # a root: what it has is what it changed
                answer.update({p: node if p in slots[0] else None for p in group})
                continue
            for parent, differ in zip(parents, slots, strict=True):
                same = [p for p in group if p not in differ]
                if same:  # TREESAME to this parent: those follow it alone
                    move(same, parent)
                    group = [p for p in group if p in differ]
                if not group:
                    break
            answer.update(dict.fromkeys(group, node))  # changed against every parent
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
