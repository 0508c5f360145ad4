"""The history index: each commit's parents, time and changed paths, built in the background.

After a ref changes (a push, or a change seen by the background ref check) the repository is
queued; the indexer adds the commits not yet indexed (only those: the work is proportional to
what arrived), stores them, and precomputes the answers the repository's home page needs
(the last commit of each root entry per branch tip, the commit count). Pages read the
in-memory ``CommitGraph`` and cached answers; they never wait for the indexer.

git does the reading (``git/changed.py``: one ``git rev-list`` for the commits, one ``git
diff-tree`` for the changed paths against each first parent), the interpreter parses and
packs, and asks a merge's other parents, in the two trees, only of the paths its first
parent's diff names (``git/treesame.py``: all git's simplification asks of them). The work is done
in slices: between two slices the indexer picks the next job, a repository a page is waiting
for first (``want``), else round robin, so that a small repository queued behind git.git is
ready after one slice of it. Changed paths are indexed newest commits first, so the recent
history (a path's first page, most last commits) answers long before the whole history is
done; ``progress`` says how far it is. What a page waits for that the index cannot answer
yet is asked of git in the background meanwhile, exactly as the index would answer it: a
path's first page (``git rev-list -n``), a directory's last commits (entry by entry before
the index knows the commits; after, the entries its recent history leaves, from the commits
that changed them; a wide root's at once, from every commit's diff of it), and the bulk
index pauses while that runs (``_paused``), its first slice included: its parsing would
take half the interpreter from it. Each slice is stored as it ends (``indexrows.py``): a
forge stopped half-way goes on from there when it starts again.

Nodes sharing a database build a repository's index once: a job takes the repository's
lease (``db/leases.py``) before its first slice, every slice it stores is fenced by the
lease, and it lets go when it is done. A node that finds the lease held follows instead: it
loads the slices the holder stores (``indexrows.load_more``) when told that more is stored
(``follow``, from the holder's notice) and, in case it is not told, when the lease would
expire; once the lease is free or expired, it takes it and goes on from what is stored.

What pages ask of the index is answered in ``answers.py``, which also asks git in the
background for what the index cannot answer yet.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from floorless.core import background, heap
from floorless.core.errors import DatabaseUnavailable, FloorlessError, RepositoryBroken
from floorless.db import Database
from floorless.db.leases import LEASE_SECONDS, LeaseLost, Leases, node_name
from floorless.git.changed import ChangeStream, topology
from floorless.git.env import GitEnvironment
from floorless.git.history import CommitGraph
from floorless.git.lenient import read_commit
from floorless.git.refs import RefSnapshot
from floorless.git.treesame import differing
from floorless.index import rows as indexrows
from floorless.index.reachability import Reachability, Reached
from floorless.index.rows import write_changes, write_commits
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)

SLICE_COMMITS = 5000  # commits whose changed paths one slice indexes ...
SLICE_PATHS = 500_000  # ... or changed paths it reads, before the next job is picked
WANTED = 30.0  # seconds a page's wait puts its repository first
VIEWED_PAUSE = 10.0  # seconds the bulk index waits, at most, for a page's answer from git
DATABASE_RETRY = 2.0  # seconds before a job the database failed is tried again
# commits an index adds, at least, for its repository's handle to be let go of (``_release``)
RELEASE_AFTER_COMMITS = 1000
MAKE_WAY_EVERY = 1024  # commits the index adds between two looks for a pause (``make_way``)


@dataclass(eq=False)
class IndexJob:
    """One repository's indexing, done a slice at a time."""

    repo: Repo
    snapshot: RefSnapshot
    # tips of snapshots queued before this one and never indexed: their commits are indexed
    # too, so that the reachability marks know them as unreachable (``reachability.py``)
    passed: frozenset[bytes] = frozenset()
    queued_at: float = field(default_factory=time.monotonic)
    turn: int = 0  # round robin: the job with the lowest turn goes next
    fresh: bool = True  # the snapshot's commits are not in the graph yet
    added: int = 0  # commits this job added to the graph
    slices: int = 0
    graph: CommitGraph | None = None
    stream: ChangeStream | None = None
    nodes: Iterator[int] | None = None  # the commits the stream answers for, in its order
    leased: bool = False  # this node holds the repository's lease for the job
    retry_at: float = 0.0  # (monotonic) another node holds the lease: try again then
    stored: bool = False  # rows were stored under the lease (other nodes are told at its end)


class Indexer:
    def __init__(
        self,
        db: Database,
        open_repo: Callable[[Repo], pygit2.Repository],
        reached: Reached | None = None,
        git: GitEnvironment | None = None,
        leases: Leases | None = None,
        slice_commits: int = SLICE_COMMITS,
        release_repos: Callable[[list[Repo]], None] | None = None,
    ) -> None:
        self.db = db
        # Lets go of repositories' handles after a large index and frees them, so what
        # libgit2 read for them goes (``_release``; ``Live.release_handles``).
        self.release_repos = release_repos
        self._read_much: dict[int, Repo] = {}  # repositories whose indexing read much
        self.slice_commits = slice_commits
        self.leases = leases or Leases(db, node_name(), LEASE_SECONDS)
        self.open_repo = open_repo
        self.git = git
        self.reach = Reachability(reached)
        self._graphs: dict[int, CommitGraph] = {}
        self._next_slice: dict[int, int] = {}  # repo id -> number of its next stored slice
        # repo id -> its job; a job queued again before it is done keeps its place and takes
        # the newer snapshot.
        self._pending: dict[int, IndexJob] = {}
        self._wanted: dict[int, float] = {}  # repo id -> when a page last waited for it
        self._turns = 0
        self._running = 0
        self._stopping = False
        self.failures: dict[int, str] = {}  # repo id -> why its latest indexing failed
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._viewed = 0  # answers a page waits for before the index (``page_waits``)
        self._viewed_since = -2 * VIEWED_PAUSE  # (monotonic) when the latest pause began
        self._thread: threading.Thread | None = None
        self.on_indexed: list[Callable[[Repo, int], None]] = []
        self.on_slice: list[Callable[[Repo, IndexJob], None]] = []  # after each slice
        self.on_stored: list[Callable[[int], None]] = []  # after a slice stored rows
        # once a repository's index is complete: the answers its home page needs are made
        self.precompute: Callable[[Repo, CommitGraph, RefSnapshot], None] | None = None
        self.followed = 0  # slices and batches of commits loaded as another node stored them
        self.commits_indexed = 0  # changed paths found by this process, in commits
        self.made_way = 0  # times other background work waited for a pause (``make_way``)

    # -- the background thread ---------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        self._thread = background.start(self._run, "index")

    def stop(self) -> None:
        """Stop after the slice running now (its work is kept: a restart goes on from it)."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        with self._lock:
            jobs = list(self._pending.values())
        for job in jobs:
            _close(job)

    def schedule(self, repo: Repo, snapshot: RefSnapshot) -> None:
        with self._wake:
            job = self._pending.get(repo.id)
            if job is None:
                self._turns += 1
                self._pending[repo.id] = IndexJob(repo, snapshot, turn=self._turns)
            else:
                job.repo = repo
                job.passed = (job.passed | job.snapshot.tip_set) - snapshot.tip_set
                job.snapshot = snapshot
                job.fresh = True
                job.retry_at = 0.0
            self._wake.notify()

    def follow(self, repo_id: int) -> None:
        """Another node stored more of the repository's index: a job waiting for its lease
        loads it now."""
        with self._wake:
            job = self._pending.get(repo_id)
            if job is not None:
                job.retry_at = 0.0
                self._wake.notify()

    def want(self, repo_id: int) -> None:
        """A page is waiting for the repository's index: its slices go first."""
        self._wanted[repo_id] = time.monotonic()

    def idle(self) -> bool:
        """True when nothing is queued or being indexed."""
        with self._lock:
            return not self._pending and not self._running

    def lag(self) -> float:
        """Seconds the oldest queued ref change has waited to be indexed (0 when idle)."""
        with self._lock:
            if not self._pending:
                return 0.0
            return time.monotonic() - min(j.queued_at for j in self._pending.values())

    def progress(self, repo_id: int) -> tuple[int, int] | None:
        """(commits whose changed paths are indexed, commits known); None before the
        repository's turn came."""
        graph = self._graphs.get(repo_id)
        return None if graph is None else (graph.indexed, len(graph))

    def _take(self) -> IndexJob | None:
        """The next job to give a slice: one a page waits for (the most recently wanted),
        else round robin, so a small repository queued behind a large one is done after a
        slice of it."""
        with self._wake:
            while True:
                if self._stopping:
                    return None
                now = time.monotonic()
                paused = self._paused(now)
                jobs = [j for j in self._pending.values() if j.retry_at <= now]
                if jobs and not paused:
                    break
                waits = [j.retry_at - now for j in self._pending.values()]
                if paused:  # ready jobs wait for the pause's end (or the answer's), not spin
                    waits = [w for w in waits if w > 0]
                    waits.append(self._viewed_since + VIEWED_PAUSE - now)
                self._wake.wait(max(min(waits), 0.0) if waits else None)
            wanted = [j for j in jobs if now - self._wanted.get(j.repo.id, -WANTED) < WANTED]
            if wanted:
                job = max(wanted, key=lambda j: self._wanted[j.repo.id])
            else:
                job = min(jobs, key=lambda j: j.turn)
            self._turns += 1
            job.turn = self._turns
            self._running += 1
            return job

    def make_way(self) -> bool:
        """Wait while the bulk index pauses for an answer a page waits for: other background
        work sharing the interpreter (code search's index) pauses with it, in the same bounded
        window (``_paused``), so it is never held for good. Whether it waited."""
        if not self._viewed:  # (the common case, without the lock)
            return False
        waited = False
        with self._wake:
            while not self._stopping:
                now = time.monotonic()
                if not self._paused(now):
                    break
                if not waited:
                    self.made_way += 1
                    waited = True
                self._wake.wait(self._viewed_since + VIEWED_PAUSE - now)
        return waited

    def _paused(self, now: float) -> bool:
        """Whether the bulk index waits for an answer a page is waiting for: for at most
        VIEWED_PAUSE seconds in any 2 * VIEWED_PAUSE, however many pages ask."""
        return self._viewed > 0 and now - self._viewed_since < VIEWED_PAUSE

    @property
    def stopping(self) -> bool:
        return self._stopping

    def page_waits(self) -> None:
        """A page waits for an answer that git gives before the index can: the bulk index
        pauses (``_paused``) until ``page_answered``, within the bounded window."""
        with self._lock:
            now = time.monotonic()
            if not self._viewed and now - self._viewed_since >= 2 * VIEWED_PAUSE:
                self._viewed_since = now  # a pause begins; the last was long enough ago
            self._viewed += 1

    def page_answered(self) -> None:
        with self._wake:
            self._viewed -= 1
            self._wake.notify_all()

    def _run(self) -> None:
        while True:
            job = self._take()
            if job is None:
                return
            done = True
            try:
                done = self.work(job)
                if done:
                    self.failures.pop(job.repo.id, None)
            except LeaseLost as exc:  # what this node did unstored goes: it loads the rest
                log.warning("indexing %s: %s", job.repo.full_name, exc)
                self._lost(job)
                done = False
            except DatabaseUnavailable as exc:  # not the repository's fault: later, from
                log.warning("indexing %s waits for the database: %s", job.repo.full_name, exc)
                self._lost(job)  # what was stored
                job.retry_at = time.monotonic() + DATABASE_RETRY
                done = False
            except (FloorlessError, pygit2.GitError, OSError, ValueError) as exc:
                log.warning("indexing %s failed: %s", job.repo.full_name, exc)
                self.failures[job.repo.id] = str(exc)
            except Exception as exc:  # a bug must not stop the indexing of every repository
                log.exception("indexing %s failed unexpectedly", job.repo.full_name)
                self.failures[job.repo.id] = repr(exc)
            finally:
                with self._lock:
                    self._running -= 1
                    if done and not job.fresh and self._pending.get(job.repo.id) is job:
                        del self._pending[job.repo.id]
                if done:
                    self._let_go(job)
                    if job.added >= RELEASE_AFTER_COMMITS:
                        self._read_much[job.repo.id] = job.repo
            for listener in self.on_slice:
                listener(job.repo, job)
            if done and self.idle():
                self._release()
                heap.give_back()  # what the index freed, to the system
                heap.settle()  # the graphs just built or loaded live on: never scan them again
            else:  # what the slice added to the graph lives on too: the collections the next
                heap.settle()  # slices start walk only what they make (a first index's 51 ms)

    def _release(self) -> None:
        """Let go of the handles of the repositories whose index just read much of their
        history. Walking 100,000 commits fills libgit2's object cache and its packs' delta
        caches with commits no page asks for again, in allocations mixed with the walk's
        own freed ones: the C heap kept 88 MB free in holes it could not give back, and an
        idle server held 186 MB of anonymous memory, against 113 MB once those handles went
        (the next page opens the repository again, a few milliseconds). The handles are
        freed before the heap is trimmed."""
        with self._lock:
            released, self._read_much = list(self._read_much.values()), {}
        if released and self.release_repos is not None:
            self.release_repos(released)

    # -- reading ------------------------------------------------------------------------------

    def graph(self, repo_id: int) -> CommitGraph | None:
        return self._graphs.get(repo_id)

    def ready(self, repo_id: int, commit: bytes) -> CommitGraph | None:
        """The graph, if it already holds ``commit`` (and is not stuck half-way: indexing
        failed)."""
        graph = self._graphs.get(repo_id)
        if graph is not None and commit in graph:
            if repo_id in self.failures and graph.indexed < len(graph):
                return None
            return graph
        self.want(repo_id)
        return None

    # -- writing ------------------------------------------------------------------------------

    def update(
        self, repo: Repo, snapshot: RefSnapshot, passed: frozenset[bytes] = frozenset()
    ) -> int:
        """Index, now and to the end, every commit reachable from the snapshot's tips (and
        from ``passed``) that is not indexed yet; return how many were added."""
        job = IndexJob(repo, snapshot, passed)
        try:
            while not self.work(job):
                pass
        finally:
            _close(job)
        return job.added

    def work(self, job: IndexJob) -> bool:
        """One slice of ``job``; True once the repository is indexed up to its snapshot.

        The first slice adds the commits the graph lacks (their ids, parents and times, from
        one ``git rev-list``) and marks what the tips reach; the next ones index changed
        paths, newest commits first, SLICE_COMMITS commits at a time, from one ``git
        diff-tree`` kept running between slices; the last precomputes the home page's
        answers. Every slice is stored before the next begins.
        """
        repo = job.repo
        job.slices += 1
        if not job.leased:
            if not self.leases.take(_lease(repo.id)):
                self._wait_for_lease(job)
                return False
            job.leased = True
            self._catch_up(repo.id)  # what the last holder stored
        graph = self._graphs.get(repo.id)
        if graph is None:
            graph, self._next_slice[repo.id] = self._load(repo.id)
            self._graphs[repo.id] = graph
        if job.graph is not graph:  # the repository was forgotten and loaded again
            _close(job)
            job.graph = graph
        handle = self.open_repo(repo)
        if job.fresh:
            job.fresh = False
            snapshot = job.snapshot
            added = self._add_commits(repo, graph, handle, snapshot.tips() | job.passed)
            job.added += added
            job.stored = job.stored or added > 0
            self.reach.update(repo.id, handle, graph, snapshot.tip_set)
            return False
        if graph.indexed < len(graph):
            if job.stream is None:
                self._open_stream(job, graph, handle)
            if not self._index_slice(job, graph, handle):
                return False
            _close(job)
            if graph.indexed < len(graph):
                return False
        self.reach.update(repo.id, handle, graph, job.snapshot.tip_set)
        graph.order_postings()
        if self.precompute is not None:
            self.precompute(repo, graph, job.snapshot)
        for listener in self.on_indexed:
            listener(repo, job.added)
        return True

    def _wait_for_lease(self, job: IndexJob) -> None:
        """Another node indexes the repository: load what it stored, and try again when it
        says it stored more, or when its lease would expire."""
        repo_id = job.repo.id
        graph = self._catch_up(repo_id)
        tips = job.snapshot.tip_set
        if graph is not None and all(t in graph for t in tips):
            self.reach.update(repo_id, self.open_repo(job.repo), graph, tips)
        name = _lease(repo_id)
        wait = min(max(self.leases.expires(name) - time.time(), 0.0), self.leases.seconds)
        job.retry_at = time.monotonic() + wait + 0.05

    def _catch_up(self, repo_id: int) -> CommitGraph | None:
        """Load into the repository's graph what other nodes stored after it."""
        graph = self._graphs.get(repo_id)
        if graph is None:
            graph, self._next_slice[repo_id] = self._load(repo_id, drop=False)
            self._graphs[repo_id] = graph
            return graph
        before = (len(graph), self._next_slice.get(repo_id, 0))
        try:
            self._next_slice[repo_id] = indexrows.load_more(self.db, repo_id, graph, before[1])
        except (RepositoryBroken, ValueError, IndexError) as exc:
            log.warning("loading the stored index of repository %d again: %s", repo_id, exc)
            self._graphs.pop(repo_id, None)
            return None
        if (len(graph), self._next_slice[repo_id]) != before:
            self.followed += 1
        return graph

    def _lost(self, job: IndexJob) -> None:
        """Another node took the lease while this one worked: its graph holds what was not
        stored, so it goes, and is loaded again from what was."""
        _close(job)
        job.leased = False
        job.fresh = True
        self._graphs.pop(job.repo.id, None)
        self._next_slice.pop(job.repo.id, None)
        job.graph = None

    def _let_go(self, job: IndexJob) -> None:
        _close(job)
        if job.leased:
            job.leased = False
            try:
                self.leases.release(_lease(job.repo.id))
            except FloorlessError as exc:  # it expires
                log.warning("releasing the lease of %s: %s", job.repo.full_name, exc)
            if job.stored:  # a node waiting for the lease need not wait for it to expire
                job.stored = False
                self._stored(job.repo.id)

    def _stored(self, repo_id: int) -> None:
        for listener in self.on_stored:
            listener(repo_id)

    def git_environment(self) -> GitEnvironment:
        if self.git is None:
            raise FloorlessError("the indexer has no git environment")
        return self.git

    def _add_commits(
        self, repo: Repo, graph: CommitGraph, handle: pygit2.Repository, tips: set[bytes]
    ) -> int:
        """Add the commits ``tips`` reach that the graph lacks (ids, parents, times)."""
        tips = {t for t in tips if t not in graph and _exists(handle, t)}
        if not tips:
            return 0
        # the graph holds every ancestor of its commits: its heads stand for all of it
        known = [graph.oids[n] for n in graph.heads()]
        known = [k for k in known if _exists(handle, k)]
        first = len(graph)
        seq = graph.seq
        for oid, when, parents in topology(self.git_environment(), Path(handle.path), tips, known):
            if oid in seq:
                continue
            with graph.lock:
                graph.add(oid, when, [seq[p] for p in parents])
            if not len(graph) % MAKE_WAY_EVERY:  # git's answer to a page needs none of them
                self.make_way()
        write_commits(self.db, repo.id, graph, first, self._guard(repo.id))
        if len(graph) > first:
            self._stored(repo.id)
        return len(graph) - first

    def _open_stream(self, job: IndexJob, graph: CommitGraph, handle: pygit2.Repository) -> None:
        nodes = graph.not_indexed()
        oids, parents = graph.oids, graph.parents

        def slots() -> Iterator[tuple[bytes, bytes | None]]:  # the first parent's diff alone
            for node in nodes:
                these = parents[node]
                yield oids[node], (oids[these[0]] if these else None)

        job.stream = ChangeStream(self.git_environment(), Path(handle.path), slots())
        job.nodes = iter(nodes)

    def _index_slice(self, job: IndexJob, graph: CommitGraph, handle: pygit2.Repository) -> bool:
        """Index the changed paths of up to ``slice_commits`` commits from the job's stream and
        store them; True when the stream is done. git diffs each commit against its first
        parent; a merge's other parents are asked, in process, of the paths that differ from
        the first (``git/treesame.py``)."""
        assert job.stream is not None and job.nodes is not None
        answers = job.stream.slots
        names = len(graph.path_names)
        done: list[int] = []
        paths = 0
        finished = True
        for node in job.nodes:
            answer = next(answers, None)
            if answer is None:
                raise FloorlessError("git diff-tree stopped early")
            header, changed = answer
            if header != graph.oids[node].hex().encode():
                raise FloorlessError("git diff-tree answered out of order")
            changes = [_with_directories(graph, changed)]
            paths += len(changed)
            for parent in graph.parents[node][1:]:
                changes.append(_also_differing(graph, handle, node, parent, changes[0]))
            if not graph.is_indexed(node):  # (a slice stored before a restart may hold it)
                with graph.lock:
                    graph.set_changes(node, changes, ordered=True)
                done.append(node)
            if (
                len(done) >= self.slice_commits
                or paths >= SLICE_PATHS
                or (self._viewed and self._paused(time.monotonic()))
            ):
                finished = False
                break
        number = self._next_slice.get(job.repo.id, 0)
        write_changes(self.db, job.repo.id, number, graph, done, names, self._guard(job.repo.id))
        self._next_slice[job.repo.id] = number + 1
        job.stored = True
        self._stored(job.repo.id)
        self.commits_indexed += len(done)
        return finished

    def _guard(self, repo_id: int) -> Callable[[], None]:
        name = _lease(repo_id)
        return lambda: self.leases.guard(name)

    def _load(self, repo_id: int, drop: bool = True) -> tuple[CommitGraph, int]:
        """The stored graph; one stored broken is dropped by the lease's holder (``drop``)
        and built again, and left to it by a node that follows."""
        try:
            graph, slices = indexrows.load(self.db, repo_id)
        except (RepositoryBroken, ValueError, IndexError) as exc:
            if not drop:
                return CommitGraph(), 0
            log.warning("the stored index of repository %d is dropped: %s", repo_id, exc)
            indexrows.drop(self.db, repo_id, self._guard(repo_id))
            graph, slices = CommitGraph(), 0
        return graph, slices

    def forget_repository(self, repo_id: int) -> None:
        """Drop what is kept about the repository: its graph, reachability marks and last
        failure. Called by its ``RepoState.forget`` alone."""
        self._graphs.pop(repo_id, None)
        self.reach.forget(repo_id)
        self.failures.pop(repo_id, None)


def _lease(repo_id: int) -> str:
    return f"index:{repo_id}"


def _exists(handle: pygit2.Repository, oid: bytes) -> bool:
    try:
        return read_commit(handle, pygit2.Oid(raw=oid)) is not None
    except (pygit2.GitError, KeyError, ValueError):
        return False


def _with_directories(graph: CommitGraph, paths: Sequence[bytes]) -> array[int]:
    """The sorted ids of ``paths`` and of every directory above them (new paths get ids)."""
    ids: set[int] = set()
    path_ids, above = graph.path_ids, graph.path_parent
    for path in paths:
        pid = path_ids.get(path)
        if pid is None:
            pid = graph.path_id(path, create=True)
            assert pid is not None
        while pid >= 0 and pid not in ids:
            ids.add(pid)
            pid = above[pid]
    return array("I", sorted(ids))


def _also_differing(
    graph: CommitGraph, handle: pygit2.Repository, node: int, parent: int, first: array[int]
) -> array[int]:
    """The sorted ids of ``first`` (what ``node`` changed against its first parent) that
    differ from ``parent`` too: all that git's simplification asks of a merge's other parent."""
    names = graph.path_names
    differ = differing(
        handle,
        pygit2.Oid(raw=graph.oids[node]),
        pygit2.Oid(raw=graph.oids[parent]),
        (names[pid] for pid in first),
    )
    ids = graph.path_ids
    return array("I", sorted(ids[path] for path in differ))


def _close(job: IndexJob) -> None:
    if job.stream is not None:
        job.stream.close()
    job.stream = None
    job.nodes = None
