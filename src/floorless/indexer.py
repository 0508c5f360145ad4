"""The history index: each commit's parents, time and changed paths, built in the background.

After a ref changes (a push, or a change seen by the background ref check) the repository is
queued; the indexer adds the commits not yet indexed (only those: the work is proportional to
what arrived), persists them, and precomputes the answers the repository's home page needs
(the last commit of each root entry per branch tip, the commit count). Pages read the
in-memory ``CommitGraph`` and cached answers; they never wait for the indexer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pygit2

from floorless import background
from floorless.caches import Cache
from floorless.db import Database
from floorless.errors import FloorlessError, RepositoryBroken
from floorless.git.history import CommitGraph, Page
from floorless.git.lenient import AnyCommit, read_commit
from floorless.git.objects import MODE_TREE
from floorless.git.refs import RefSnapshot
from floorless.reachability import Reachability, Reached
from floorless.repos import Repo

log = logging.getLogger(__name__)

INLINE_BUDGET = 20_000  # commits a page may visit answering from the index before deferring
_BATCH = 2000
DEFERRED_WALKS = 2  # background last-commit walks running at once
ANSWER_MEMORY_BYTES = 32 * 1024 * 1024  # answers kept in memory, before the database
_ANSWER_KEY_BYTES = 200  # what an answer's key and bookkeeping take beside it


@dataclass(frozen=True)
class IndexJob:
    repo: Repo
    snapshot: RefSnapshot
    # tips of snapshots queued before this one and never indexed: their commits are indexed
    # too, so that the reachability marks know them as unreachable (``reachability.py``)
    passed: frozenset[bytes] = frozenset()


class AnswerCache:
    """Answers keyed by object ids: in memory (LRU, ``size_bytes`` of them), then the
    database. Never invalidated."""

    def __init__(self, db: Database, size_bytes: int = ANSWER_MEMORY_BYTES) -> None:
        self.db = db
        self._memory: Cache[tuple[int, str, bytes], str] = Cache.lru(
            size_bytes, getsizeof=lambda value: sys.getsizeof(value) + _ANSWER_KEY_BYTES
        )
        self.hits = 0
        self.misses = 0

    def get(self, repo_id: int, kind: str, key: bytes) -> str | None:
        value = self._memory.get((repo_id, kind, key))
        if value is not None:
            self.hits += 1
            return value
        row = self.db.one(
            "SELECT value FROM answers WHERE repo_id = ? AND kind = ? AND key = ?",
            (repo_id, kind, key),
        )
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        self._remember((repo_id, kind, key), row["value"])
        return str(row["value"])

    def put(self, repo_id: int, kind: str, key: bytes, value: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO answers (repo_id, kind, key, value) VALUES (?, ?, ?, ?)",
            (repo_id, kind, key, value),
        )
        self._remember((repo_id, kind, key), value)

    def _remember(self, key: tuple[int, str, bytes], value: str) -> None:
        self._memory.put(key, value)

    def forget_repository(self, repo_id: int) -> None:
        """Drop the repository's answers from memory (its rows go with its row id, in
        ``Registry._drop_row``, when it is gone from the database)."""
        self._memory.drop_where(lambda key: key[0] == repo_id)

    def held(self, repo_id: int) -> int:
        """How many of the repository's answers are in memory."""
        return self._memory.count_where(lambda key: key[0] == repo_id)


class Indexer:
    def __init__(
        self,
        db: Database,
        open_repo: Callable[[Repo], pygit2.Repository],
        reached: Reached | None = None,
    ) -> None:
        self.db = db
        self.open_repo = open_repo
        self.answers = AnswerCache(db)
        self.reach = Reachability(reached)
        self._graphs: dict[int, CommitGraph] = {}
        self._queue: queue.Queue[int | None] = queue.Queue()
        # repo id -> the newest job and when it was first queued; a job queued again before it
        # ran keeps its place but takes the newer snapshot.
        self._pending: dict[int, tuple[IndexJob, float]] = {}
        self._running = 0
        self.failures: dict[int, str] = {}  # repo id -> why its latest indexing failed
        self._lock = threading.Lock()
        self._deferred: set[tuple[object, ...]] = set()  # background walks running
        self._thread: threading.Thread | None = None
        self.on_indexed: list[Callable[[Repo, int], None]] = []

    # -- the background thread ---------------------------------------------------------------

    def start(self) -> None:
        self._thread = background.start(self._run, "index")

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None

    def schedule(self, repo: Repo, snapshot: RefSnapshot) -> None:
        with self._lock:
            queued = self._pending.get(repo.id)
            passed = queued[0].passed | queued[0].snapshot.tip_set if queued else frozenset()
            self._pending[repo.id] = (
                IndexJob(repo, snapshot, passed - snapshot.tip_set),
                queued[1] if queued else time.monotonic(),
            )
        if queued is None:
            self._queue.put(repo.id)

    def idle(self) -> bool:
        """True when nothing is queued or being indexed."""
        with self._lock:
            return not self._pending and not self._running

    def lag(self) -> float:
        """Seconds the oldest queued ref change has waited to be indexed (0 when idle)."""
        with self._lock:
            if not self._pending:
                return 0.0
            return time.monotonic() - min(t for _, t in self._pending.values())

    def _run(self) -> None:
        while True:
            repo_id = self._queue.get()
            if repo_id is None:
                return
            with self._lock:
                job, _ = self._pending.pop(repo_id)
                self._running += 1
            try:
                self.update(job.repo, job.snapshot, job.passed)
                self.failures.pop(repo_id, None)
            except (FloorlessError, pygit2.GitError, OSError, ValueError) as exc:
                log.warning("indexing %s failed: %s", job.repo.full_name, exc)
                self.failures[repo_id] = str(exc)
            except Exception as exc:  # a bug must not stop the indexing of every repository
                log.exception("indexing %s failed unexpectedly", job.repo.full_name)
                self.failures[repo_id] = repr(exc)
            finally:
                with self._lock:
                    self._running -= 1

    # -- reading ------------------------------------------------------------------------------

    def graph(self, repo_id: int) -> CommitGraph | None:
        return self._graphs.get(repo_id)

    def ready(self, repo_id: int, commit: bytes) -> CommitGraph | None:
        """The graph, if it already holds ``commit``."""
        graph = self._graphs.get(repo_id)
        if graph is not None and commit in graph:
            return graph
        return None

    def last_commits(
        self, repo: Repo, commit: bytes, directory: bytes, names: Sequence[bytes]
    ) -> dict[bytes, bytes | None] | None:
        """Entry name -> id of the last commit that changed it; None while not known yet."""
        key = commit + b"\0" + directory
        cached = self.answers.get(repo.id, "last", key)
        if cached is not None:
            table = json.loads(cached)
            return {n: _unhex(table.get(n.hex())) for n in names}
        graph = self.ready(repo.id, commit)
        if graph is None:
            return None
        found = self._compute_last(graph, repo.id, commit, directory, names, INLINE_BUDGET)
        if found is None:
            self._defer(
                ("last", repo.id, commit, directory),
                lambda: self._compute_last(graph, repo.id, commit, directory, names, None),
            )
        return found

    def path_history(
        self,
        repo_id: int,
        tip: bytes,
        path: bytes,
        cursor: tuple[Sequence[bytes], Sequence[bytes], Sequence[bytes]],
        limit: int,
    ) -> Page[bytes] | None:
        """One page of ``git log -- path``: ``cursor`` is (starts, seen, skewed) as raw ids.

        None while the answer is pending: the index does not hold ``tip`` yet, or the walk
        needs more than INLINE_BUDGET commits (a path changed rarely in a long history); that
        page is then computed in the background and kept, keyed by its commit ids.
        """
        graph = self.ready(repo_id, tip)
        if graph is None:
            return None
        starts, seen, skewed = cursor
        key = hashlib.sha256(
            b"\0".join(
                [path, str(limit).encode(), b"".join(starts), b"".join(seen), b"".join(skewed)]
            )
        ).digest()
        cached = self.answers.get(repo_id, "history", key)
        if cached is not None:
            return _page_from_json(cached)

        def walk(budget: int | None) -> Page[bytes] | None:
            page = graph.history(
                [graph.seq[c] for c in starts],
                path,
                limit,
                budget,
                exclude=[graph.seq[c] for c in seen if c in graph],
                skewed=[graph.seq[c] for c in skewed if c in graph],
            )
            if page is None:
                return None
            found = Page(
                *(
                    [graph.oids[s] for s in part]
                    for part in (page.commits, page.frontier, page.seen, page.skewed)
                )
            )
            if budget is None:
                self.answers.put(repo_id, "history", key, _page_to_json(found))
            return found

        page = walk(INLINE_BUDGET)
        if page is None:
            self._defer(("history", repo_id, key), lambda: walk(None))
        return page

    def _defer(self, key: tuple[object, ...], work: Callable[[], object]) -> None:
        """Run ``work`` in the background: once however often pages ask for it (each poll of a
        page would start another full walk), and at most DEFERRED_WALKS at a time (a page
        asking while they run asks again when it polls)."""
        with self._lock:
            if key in self._deferred or len(self._deferred) >= DEFERRED_WALKS:
                return
            self._deferred.add(key)

        def run() -> None:
            try:
                work()
            finally:
                with self._lock:
                    self._deferred.discard(key)

        background.start(run, "walk")

    def _compute_last(
        self,
        graph: CommitGraph,
        repo_id: int,
        commit: bytes,
        directory: bytes,
        names: Sequence[bytes],
        budget: int | None,
    ) -> dict[bytes, bytes | None] | None:
        paths = [directory + b"/" + n if directory else n for n in names]
        result = graph.last_changes(graph.seq[commit], paths, budget)
        if result is None:
            return None
        table = {
            n.hex(): (None if result[p] is None else graph.oids[result[p]].hex())  # type: ignore[index]
            for n, p in zip(names, paths, strict=True)
        }
        self.answers.put(repo_id, "last", commit + b"\0" + directory, json.dumps(table))
        return {n: _unhex(table[n.hex()]) for n in names}

    def known_commit_count(self, repo_id: int, commit: bytes) -> int | None:
        """The commit count if already computed (pages never count: it is O(history))."""
        cached = self.answers.get(repo_id, "count", commit)
        return None if cached is None else int(cached)

    def commit_count(self, repo_id: int, commit: bytes) -> int | None:
        cached = self.answers.get(repo_id, "count", commit)
        if cached is not None:
            return int(cached)
        graph = self.ready(repo_id, commit)
        if graph is None:
            return None
        count = graph.count_ancestors(graph.seq[commit])
        self.answers.put(repo_id, "count", commit, str(count))
        return count

    # -- writing ------------------------------------------------------------------------------

    def update(
        self, repo: Repo, snapshot: RefSnapshot, passed: frozenset[bytes] = frozenset()
    ) -> int:
        """Index every commit reachable from the snapshot's tips (and from ``passed``, tips
        of snapshots this one replaced in the queue) that is not indexed yet; then mark what
        the snapshot reaches."""
        graph = self._graphs.get(repo.id)
        if graph is None:
            graph = self._load(repo.id)
            self._graphs[repo.id] = graph
        handle = self.open_repo(repo)
        new = _missing_commits(handle, graph, snapshot.tips() | passed)
        rows: list[tuple[object, ...]] = []
        path_rows: list[tuple[object, ...]] = []
        for commit in new:
            known_paths = len(graph.path_names)
            parents = tuple(graph.seq[p.raw] for p in commit.parent_ids)
            changes = _changed_paths(handle, commit, graph)
            with graph.lock:
                seq = graph.add(commit.id.raw, commit.commit_time, parents, changes)
            rows.append(
                (
                    repo.id,
                    seq,
                    commit.id.raw,
                    commit.commit_time,
                    json.dumps(parents),
                    json.dumps([sorted(c) for c in changes]),
                )
            )
            path_rows.extend(
                (repo.id, i, graph.path_names[i]) for i in range(known_paths, len(graph.path_names))
            )
            if len(rows) >= _BATCH:
                self._persist(rows, path_rows)
                rows, path_rows = [], []
        self._persist(rows, path_rows)
        self.reach.update(repo.id, handle, graph, snapshot.tip_set)
        self._precompute(repo, graph, snapshot)
        for listener in self.on_indexed:
            listener(repo, len(new))
        return len(new)

    def _persist(self, rows: list[tuple[object, ...]], path_rows: list[tuple[object, ...]]) -> None:
        if not rows and not path_rows:
            return
        with self.db.transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO index_paths (repo_id, id, path) VALUES (?, ?, ?)", path_rows
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO index_commits (repo_id, seq, oid, time, parents, changes)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

    def _load(self, repo_id: int) -> CommitGraph:
        graph = CommitGraph()
        for row in self.db.query(
            "SELECT path FROM index_paths WHERE repo_id = ? ORDER BY id", (repo_id,)
        ):
            graph.path_id(bytes(row["path"]), create=True)
        for row in self.db.query(
            "SELECT oid, time, parents, changes FROM index_commits WHERE repo_id = ? ORDER BY seq",
            (repo_id,),
        ):
            graph.add(
                bytes(row["oid"]),
                row["time"],
                tuple(json.loads(row["parents"])),
                tuple(frozenset(c) for c in json.loads(row["changes"])),
            )
        return graph

    def _precompute(self, repo: Repo, graph: CommitGraph, snapshot: RefSnapshot) -> None:
        handle = self.open_repo(repo)
        for commit in set(snapshot.branches.values()):
            if commit not in graph:
                continue
            self.commit_count(repo.id, commit)
            obj = read_commit(handle, pygit2.Oid(raw=commit))
            if obj is not None:
                names = [e.raw_name or b"" for e in obj.tree]
                if self.answers.get(repo.id, "last", commit + b"\0") is None:
                    self._compute_last(graph, repo.id, commit, b"", names, None)

    def forget_repository(self, repo_id: int) -> None:
        """Drop what is kept about the repository: its graph, reachability marks, answers
        in memory and last failure. Called by its ``RepoState.forget`` alone."""
        self._graphs.pop(repo_id, None)
        self.reach.forget(repo_id)
        self.answers.forget_repository(repo_id)
        self.failures.pop(repo_id, None)


def _page_to_json(page: Page[bytes]) -> str:
    parts = (page.commits, page.frontier, page.seen, page.skewed)
    return json.dumps([[c.hex() for c in part] for part in parts])


def _page_from_json(value: str) -> Page[bytes]:
    return Page(*([bytes.fromhex(c) for c in part] for part in json.loads(value)))


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def _missing_commits(
    repo: pygit2.Repository, graph: CommitGraph, tips: set[bytes]
) -> list[AnyCommit]:
    """Commits reachable from ``tips`` that the graph lacks, parents before children."""
    ordered: list[AnyCommit] = []
    # Only commits already emitted are skipped: one merely pushed (by another child) may be
    # an ancestor of this commit's other parents (``merge --no-ff``), so it is pushed again
    # here to be emitted before them; its older stack entry is skipped when it comes up.
    emitted: set[bytes] = set()
    stack: list[tuple[AnyCommit, bool]] = []
    for tip in sorted(tips):
        if tip in graph or tip in emitted:
            continue
        obj = read_commit(repo, pygit2.Oid(raw=tip))
        if obj is None:
            continue
        stack.append((obj, False))
        while stack:
            commit, expanded = stack.pop()
            if expanded:
                emitted.add(commit.id.raw)
                ordered.append(commit)
                continue
            if commit.id.raw in emitted:
                continue
            stack.append((commit, True))
            for parent_id in commit.parent_ids:
                raw = parent_id.raw
                if raw in graph or raw in emitted:
                    continue
                parent = read_commit(repo, parent_id)
                if parent is not None:
                    stack.append((parent, False))
    return ordered


def _changed_paths(
    repo: pygit2.Repository, commit: AnyCommit, graph: CommitGraph
) -> tuple[frozenset[int], ...]:
    """Per parent (or against the empty tree for a root), the ids of every changed path and
    of each directory above a changed path.

    Trees are compared entry by entry, descending only into subtrees whose ids differ. This
    reads nothing but tree objects: libgit2's diff would also re-check the repository's
    config file for every commit, a round trip per commit on slow storage.
    """
    tree = commit.tree
    bases: list[pygit2.Tree | None] = [p.tree for p in commit.parents] or [None]
    result = []
    for base in bases:
        paths: set[bytes] = set()
        _compare_trees(repo, base, tree, b"", paths)
        ids: set[int] = set()
        for path in paths:
            while path:
                pid = graph.path_id(path, create=True)
                assert pid is not None
                if pid in ids:
                    break
                ids.add(pid)
                path = path.rpartition(b"/")[0]
        result.append(frozenset(ids))
    return tuple(result)


def _compare_trees(
    repo: pygit2.Repository,
    old: pygit2.Tree | None,
    new: pygit2.Tree | None,
    prefix: bytes,
    out: set[bytes],
) -> None:
    """Add to ``out`` every file path that differs between two trees (a tree that is absent
    on one side contributes all its files).

    The walk keeps its own stack: a pushed tree may nest thousands of levels deep, past
    Python's recursion limit, and indexing must still finish.
    """
    pending: list[tuple[pygit2.Tree | None, pygit2.Tree | None, bytes]] = [(old, new, prefix)]
    while pending:
        old, new, prefix = pending.pop()
        before = {e.raw_name: e for e in old} if old is not None else {}
        after = {e.raw_name: e for e in new} if new is not None else {}
        for name in before.keys() | after.keys():
            a, b = before.get(name), after.get(name)
            if a is not None and b is not None and a.id == b.id and a.filemode == b.filemode:
                continue
            path = prefix + (name or b"")
            a_tree = a is not None and a.filemode == MODE_TREE
            b_tree = b is not None and b.filemode == MODE_TREE
            if a_tree or b_tree:
                pending.append(
                    (
                        _tree(repo, a.id) if a is not None and a_tree else None,
                        _tree(repo, b.id) if b is not None and b_tree else None,
                        path + b"/",
                    )
                )
            if not (a_tree and b_tree):  # a file (or submodule, or link) on at least one side
                out.add(path)


def _tree(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
    found = repo.get(oid)
    if not isinstance(found, pygit2.Tree):
        raise RepositoryBroken(f"tree {oid} cannot be read")
    return found
