"""What the refs reach: asked before any object is served by its id, on a page or to git.

A deleted (or rewound) branch leaves its commits, trees and blobs in the repository until
garbage collection; git's protocol v2 and an id in a URL would still reach them. Every object
named by id is therefore checked against the current ref snapshot first, and no request walks
the history to do so:

- **Commits** are served when the index marks them reachable. After each indexing the indexer
  hands the snapshot's tips to ``update``, which marks the index's commits those tips reach
  (a byte per commit; only new commits are walked when every previous tip is reached again,
  the whole graph when a branch was deleted or rewound). The marks answer for the snapshot
  they were made from, and for a later one that only adds tips. While they are behind a later
  snapshot (seconds, after a push), a commit is looked for from the current tips, reading at
  most ``budget`` commits; a page whose answer is still unknown says it is being prepared
  (503, retry) rather than guess.
- **Trees and blobs** cannot be marked one by one (that would be an index of every object).
  Instead, every tree and blob that an unreachable commit known to the index *introduced*
  (relative to its first parent) is a suspect, and suspects are not served: this covers every
  object the unreachable commits left behind (see ``git/unreachable.py``). A suspect that the tips
  reach all the same (a cherry-picked, rebased or squash-merged branch's files, once the
  branch is deleted) is cleared by ``reached``, one ``git rev-list --objects`` of the tips in
  the background, whenever there are suspects. Whatever survives ``git gc --prune=now`` is
  reachable, so garbage collection empties the suspects (``collected``). Trees and blobs are
  answered only while the marks are current (or current but for added tips); otherwise
  "not yet".
- **Tag objects** are served only when a current tag points at them.

The index knows the commits of every snapshot the indexer saw (snapshots queued while it was
busy are merged, not dropped). Objects that never were reachable from a snapshot floorless
saw, such as a branch pushed and deleted behind floorless's back within one ref check, or
dangling objects already there when the repository was adopted, are served by id only as
trees or blobs, and only until the next garbage collection (scheduled every
``gc_interval`` seconds).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from floorless.core.errors import FloorlessError
from floorless.git.history import CommitGraph
from floorless.git.lenient import read_commit
from floorless.git.unreachable import find_commit, introduced, mark_reachable

log = logging.getLogger(__name__)

PAGE_BUDGET = 2000  # commits a page may read looking for one while the marks are behind


@dataclass
class Reach:
    """The marks of one repository's index for one set of tips, and the suspects they leave."""

    graph: CommitGraph
    tips: frozenset[bytes]
    marks: bytearray  # by the graph's sequence number: 1 where ``tips`` reach the commit
    suspects: frozenset[bytes]
    # later tip sets -> whether they still reach every one of ``tips`` (then marks hold)
    still: dict[frozenset[bytes], bool] = field(default_factory=dict)

    def marked(self, commit: bytes) -> bool:
        seq = self.graph.seq.get(commit)
        return seq is not None and seq < len(self.marks) and self.marks[seq] == 1


# (git directory, tips, candidate ids) -> the candidates the tips reach
Reached = Callable[[Path, frozenset[bytes], frozenset[bytes]], frozenset[bytes]]


class Reachability:
    def __init__(self, reached: Reached | None = None) -> None:
        self._reached = reached
        self._reach: dict[int, Reach] = {}
        # repo id -> unreachable commit's sequence number -> the objects it introduced
        self._introduced: dict[int, dict[int, frozenset[bytes]]] = {}
        self._lock = threading.Lock()

    # -- answers ------------------------------------------------------------------------------

    def commit(
        self,
        repo_id: int,
        handle: pygit2.Repository,
        tips: frozenset[bytes],
        commit: bytes,
        budget: int | None,
    ) -> bool | None:
        """Whether ``tips`` reach ``commit``; None when that takes more than ``budget``
        commits to tell."""
        if commit in tips:
            return True
        reach = self._reach.get(repo_id)
        if reach is not None:
            if reach.tips == tips:
                return reach.marked(commit)
            if reach.marked(commit) and self._holds(reach, handle, tips, budget):
                return True
        return find_commit(handle, tips, commit, budget)

    def blob_or_tree(
        self,
        repo_id: int,
        handle: pygit2.Repository,
        tips: frozenset[bytes],
        oid: bytes,
        budget: int | None,
    ) -> bool | None:
        """Whether a tree or blob may be served by id; None while the marks are behind."""
        reach = self._reach.get(repo_id)
        if reach is None or not self._holds(reach, handle, tips, budget):
            return None
        return oid not in reach.suspects

    def _holds(
        self, reach: Reach, handle: pygit2.Repository, tips: frozenset[bytes], budget: int | None
    ) -> bool:
        """Whether ``tips`` still reach every commit the marks' tips did."""
        gone = reach.tips - tips
        if not gone:
            return True
        known = reach.still.get(tips)
        if known is not None:
            return known
        found = [find_commit(handle, tips, tip, budget) for tip in gone]
        if any(f is None for f in found):
            return False  # not known yet: not remembered either
        with self._lock:
            if len(reach.still) > 8:
                reach.still.clear()
            reach.still[tips] = all(found)
        return all(found)

    # -- building -----------------------------------------------------------------------------

    def update(
        self,
        repo_id: int,
        handle: pygit2.Repository,
        graph: CommitGraph,
        tips: frozenset[bytes],
    ) -> None:
        """Mark what ``tips`` reach (after the indexer added their commits to ``graph``)."""
        previous = self._reach.get(repo_id)
        if previous is not None and previous.graph is not graph:
            previous = None
        marks = mark_reachable(
            graph,
            tips,
            previous.marks if previous else None,
            previous.tips if previous else (),
        )
        suspects = self._suspects(repo_id, handle, graph, marks, tips)
        self._reach[repo_id] = Reach(graph, tips, marks, suspects)

    def collected(self, repo_id: int, handle: pygit2.Repository) -> None:
        """Garbage collection just ran: an unreachable commit it removed left nothing behind;
        ``handle`` must be freshly opened (an older one still reads the removed packs)."""
        reach = self._reach.get(repo_id)
        if reach is None:
            return
        with self._lock:
            self._introduced.pop(repo_id, None)
        suspects = self._suspects(repo_id, handle, reach.graph, reach.marks, reach.tips)
        self._reach[repo_id] = Reach(reach.graph, reach.tips, reach.marks, suspects)

    def holds(self, repo_id: int) -> bool:
        """Whether marks or suspects are kept for the repository."""
        with self._lock:
            return repo_id in self._reach or repo_id in self._introduced

    def forget(self, repo_id: int) -> None:
        with self._lock:
            self._reach.pop(repo_id, None)
            self._introduced.pop(repo_id, None)

    def _suspects(
        self,
        repo_id: int,
        handle: pygit2.Repository,
        graph: CommitGraph,
        marks: bytearray,
        tips: frozenset[bytes],
    ) -> frozenset[bytes]:
        with self._lock:
            known = dict(self._introduced.get(repo_id, {}))
        found: dict[int, frozenset[bytes]] = {}
        seq = marks.find(0)
        while seq != -1:
            ids = known.get(seq)
            if ids is None:
                ids = _introduced(handle, graph.oids[seq])
            found[seq] = ids
            seq = marks.find(0, seq + 1)
        with self._lock:
            self._introduced[repo_id] = found  # commits reachable again are dropped
        suspects: frozenset[bytes] = frozenset().union(*found.values())
        if suspects and self._reached is not None:
            try:
                suspects -= self._reached(Path(handle.path), tips, suspects)
            except (OSError, ValueError, FloorlessError) as exc:  # then every suspect stays one
                log.warning("%s: what the tips reach could not be listed: %s", handle.path, exc)
        return suspects


def _introduced(handle: pygit2.Repository, commit_id: bytes) -> frozenset[bytes]:
    """What an unreachable commit introduced; nothing once garbage collection removed it."""
    try:
        obj = read_commit(handle, pygit2.Oid(raw=commit_id))
        return introduced(handle, obj) if obj is not None else frozenset()
    except (pygit2.GitError, KeyError, ValueError) as exc:
        log.warning("unreachable commit %s cannot be read whole: %s", commit_id.hex(), exc)
        return frozenset()
