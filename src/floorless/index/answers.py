"""What pages ask of the history, answered from the index or, before it is built, from git
in the background: a directory's last commits, pages of a branch's or a path's ``git log``,
commit counts.

Answers are keyed by object ids, so they never change: they are kept in memory and in the
database (``AnswerCache``) and never invalidated. The index itself (``indexer.py``) is built
by another thread; a page never waits for it. What it cannot answer yet is asked of git
meanwhile, exactly as the index would answer it (see ``indexer.py``'s docstring), and the
bulk index pauses while a page waits for such an answer (``Indexer.page_waits``).

Commit lists are pages of ``git log`` walks (``floorless.git.history``), kept here between
pages: a branch's walk over the repository's objects, a path's over the index. A walk is
named by its start commit and path, and a page by a count of the commits before it, so a
page is the same whoever asks and whenever: a walk kept (``WALK_MEMORY_BYTES`` of them, least
recently used first out) goes on from where its last page stopped, and one no longer kept is
walked again from its start, ``INLINE_BUDGET`` commits on the request and the rest in the
background while the page waits, as for any long walk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pygit2

from floorless.core import background
from floorless.core.caches import Cache
from floorless.core.errors import FloorlessError
from floorless.db import Database
from floorless.git.changed import path_log
from floorless.git.history import CommitGraph, LogWalk, Page
from floorless.git.lastchanged import each_last, last_among, root_last
from floorless.git.lenient import read_commit
from floorless.git.objects import commit_links, get_commit
from floorless.git.refs import RefSnapshot
from floorless.index.indexer import Indexer
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)

N = TypeVar("N")

INLINE_BUDGET = 20_000  # commits a page may visit answering from the index before deferring
# ... a branch's page over the index's graph, which walks no object (git.git: 40,000 commits
# in 25 ms, where the objects' walk took half a second): a page as deep as git.git's history
# answers on its request, with no placeholder
GRAPH_BRANCH_BUDGET = 100_000
DEFERRED_WALKS = 2  # background last-commit walks running at once
ANSWER_MEMORY_BYTES = 32 * 1024 * 1024  # answers kept in memory, before the database
WALK_MEMORY_BYTES = 32 * 1024 * 1024  # history walks kept between pages (``LogWalk.nbytes``)
ONE_BY_ONE = 32  # entries a column asks git for one by one, before the index's first slice
_ANSWER_KEY_BYTES = 200  # what an answer's key and bookkeeping take beside it


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
            "INSERT INTO answers (repo_id, kind, key, value) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (repo_id, kind, key) DO UPDATE SET value = excluded.value",
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


class Answers:
    """The answers of one forge's pages, over ``indexer``'s graphs."""

    def __init__(
        self,
        indexer: Indexer,
        open_repo: Callable[[Repo], pygit2.Repository],
        memory_bytes: int = ANSWER_MEMORY_BYTES,
    ) -> None:
        self.indexer = indexer
        self.open_repo = open_repo
        self.cache = AnswerCache(indexer.db, memory_bytes)
        self._lock = threading.Lock()
        self._deferred: set[tuple[object, ...]] = set()  # background walks running
        # (repo id, start, path or None for a branch's list over its objects) -> its walk
        self.walks: Cache[tuple[int, bytes, bytes | None], LogWalk[Any]] = Cache.lru(
            WALK_MEMORY_BYTES, getsizeof=lambda walk: walk.nbytes()
        )
        self.first_pages = 0  # first pages of a path's history git answered (``_first_page``)
        # columns git completed before the index could (``_last_before_indexed``, ...)
        self.rest_answered = 0

    def busy(self) -> bool:
        """Whether a background walk runs."""
        with self._lock:
            return bool(self._deferred)

    def last_commits(
        self, repo: Repo, commit: bytes, directory: bytes, names: Sequence[bytes]
    ) -> dict[bytes, bytes | None] | None:
        """Entry name -> id of the last commit that changed it; None while not known yet."""
        stored = self._stored_last(repo.id, commit, directory, names)
        if stored is not None:
            return stored
        graph = self.indexer.ready(repo.id, commit)
        small = len(names) <= ONE_BY_ONE and repo.id not in self.indexer.failures
        if small and (graph is None or not graph.indexed):
            self._defer(
                ("last-each", repo.id, commit, directory),
                lambda: self._last_one_by_one(repo, commit, directory, names),
                viewed=True,
            )
        # a wide root (git.git's): every commit's root is diffed at once, the index or not
        wide_root = not directory and not small and repo.id not in self.indexer.failures
        job = ("last", repo.id, commit, directory)

        def of_root() -> None:
            self._last_of_root(repo, commit, names)

        if graph is None:
            if wide_root:
                self._defer(job, of_root, viewed=True)
            return None
        complete = graph.indexed == len(graph)
        found = self._compute_last(graph, repo.id, commit, directory, names, INLINE_BUDGET)
        if found is None and complete:
            self._defer(
                job, lambda: self._compute_last(graph, repo.id, commit, directory, names, None)
            )
        elif found is None:  # the indexer goes on with it first
            self.indexer.want(repo.id)
            if wide_root:
                self._defer(job, of_root, viewed=True)
            # once a slice's worth of its recent history is in (a slice a viewed answer cut
            # short is not), that answers most entries, and git the few left
            elif graph.indexed >= min(len(graph), self.indexer.slice_commits):
                self._defer(
                    job,
                    lambda: self._last_before_indexed(graph, repo, commit, directory, names),
                    viewed=True,
                )
        return found

    def _stored_last(
        self, repo_id: int, commit: bytes, directory: bytes, names: Sequence[bytes]
    ) -> dict[bytes, bytes | None] | None:
        """The stored last commits of ``names``, if every one of them is stored (an answer
        for some entries, as the API asks of one, is not all)."""
        cached = self.cache.get(repo_id, "last", commit + b"\0" + directory)
        if cached is None:
            return None
        table = json.loads(cached)
        if not all(n.hex() in table for n in names):
            return None
        return {n: _unhex(table[n.hex()]) for n in names}

    def branch_history(self, repo: Repo, start: bytes, skip: int, limit: int) -> Page[bytes] | None:
        """The ``limit`` commits of ``git log start`` after the first ``skip``: walked over
        the index's graph once it holds ``start`` (its topology is all such a walk needs; a
        walk of 40,000 commits of git.git, 25 ms), else over the repository's objects (the
        same 40,000 commits read by libgit2: half a second). None while the walk goes on
        in the background (see the module docstring)."""
        graph = self.indexer.graph(repo.id)
        if graph is not None and start in graph:
            return self._page(
                (repo.id, start, None),
                lambda: graph.walk([graph.seq[start]], None),
                graph.history,
                graph.oids.__getitem__,
                skip,
                limit,
                lambda walk: walk.over is graph,
                budget=GRAPH_BRANCH_BUDGET,
            )
        return self._page(
            (repo.id, start, None),
            lambda: LogWalk([start], lambda oid: get_commit(self.open_repo(repo), oid).commit_time),
            lambda walk, until, budget: walk.extend(
                until, *commit_links(self.open_repo(repo)), budget
            ),
            lambda oid: oid,
            skip,
            limit,
            lambda walk: walk.over is None,  # (not one over a graph, kept under the same key)
        )

    def path_history(
        self,
        repo_id: int,
        start: bytes,
        path: bytes,
        skip: int,
        limit: int,
        repo: Repo | None = None,
    ) -> Page[bytes] | None:
        """The ``limit`` commits of ``git log start -- path`` after the first ``skip``.

        None while the answer is pending: the index does not hold ``start`` or the changed
        paths the walk needs yet (the repository then goes first in the indexer's queue), or
        the walk needs more than INLINE_BUDGET commits (a path changed rarely in a long
        history, a walk no longer kept); the walk then goes on in the background, and a page
        it had to finish there is kept, keyed by its commit ids. Given ``repo``, a first
        page the index cannot answer yet is asked of git meanwhile (``_first_page``).
        """
        graph = self.indexer.ready(repo_id, start)
        if graph is None or graph.indexed < len(graph):
            stored = self.cache.get(repo_id, "history", _page_key(start, path, skip, limit))
            if stored is not None:
                return _page_from_json(stored)
        if graph is None:
            if repo is not None and skip == 0:
                self._first_page(repo, start, path, limit)
            return None
        page = self._page(
            (repo_id, start, path),
            lambda: graph.walk([graph.seq[start]], path),
            graph.history,
            graph.oids.__getitem__,
            skip,
            limit,
            lambda walk: walk.over is graph,
            None if graph.indexed == len(graph) else lambda: self.indexer.want(repo_id),
        )
        if page is None and repo is not None and skip == 0 and graph.indexed < len(graph):
            self._first_page(repo, start, path, limit)
        return page

    def _first_page(self, repo: Repo, start: bytes, path: bytes, limit: int) -> None:
        """A path's first page before the index holds it, in the background: ``git
        rev-list -n`` (git's own walk, exact), kept with the pages of finished walks. The
        pages after it come from the index, which the page's request put first."""

        def run() -> None:
            try:  # (the repository may have gone meanwhile)
                handle = self.open_repo(repo)
                commits = path_log(
                    self.indexer.git_environment(),
                    Path(handle.path),
                    start,
                    path,
                    limit + 1,
                    stopped=lambda: self.indexer.stopping,
                )
            except (FloorlessError, pygit2.GitError, OSError) as exc:  # the next poll asks again
                log.warning("the history of %s in %s: %s", path, repo.full_name, exc)
                return
            if commits is None or self.indexer.stopping:
                return
            page = Page(commits[:limit], len(commits) > limit)
            self.first_pages += 1
            key = _page_key(start, path, 0, limit)
            self.cache.put(repo.id, "history", key, _page_to_json(page))

        self._defer(("first", repo.id, start, path, limit), run, viewed=True)

    def _page(
        self,
        key: tuple[int, bytes, bytes | None],
        make: Callable[[], LogWalk[N]],
        extend: Callable[[LogWalk[N], int, int | None], bool | None],
        oid: Callable[[N], bytes],
        skip: int,
        limit: int,
        valid: Callable[[LogWalk[N]], bool] | None = None,
        indexing: Callable[[], None] | None = None,
        budget: int | None = None,
    ) -> Page[bytes] | None:
        """A page of the walk kept under ``key`` (``make`` makes it if none is), extended on
        the request by at most ``budget`` commits (INLINE_BUDGET) and in the background past
        them. The
        ``extend`` of a walk over an index still being built answers None when it reaches a
        commit not indexed yet; ``indexing`` is then called instead of walking on in the
        background (the indexer gets there first)."""
        repo_id, start, path = key
        until = skip + limit
        budget = INLINE_BUDGET if budget is None else budget
        stored_key = _page_key(start, path, skip, limit)
        walk: LogWalk[N] | None = self.walks.get(key, valid)
        if walk is None or (len(walk.shown) < skip and not walk.done):  # a walk to redo
            stored = self.cache.get(repo_id, "history", stored_key)
            if stored is not None:
                return _page_from_json(stored)
        if walk is None:
            walk = make()
        with walk.lock:
            done = len(walk.shown) >= until or walk.done or extend(walk, until, budget)
            page = walk.page(skip, limit) if done else None
        self.walks.put(key, walk)  # again: a walk grows
        if page is not None:
            return Page([oid(c) for c in page.commits], page.more)
        if indexing is not None:
            indexing()
            return None

        def finish(walk: LogWalk[N]) -> None:
            try:
                while True:
                    with walk.lock:  # a chunk at a time: a page of this walk waits one at most
                        done = extend(walk, until, budget)
                        if done is None:  # not indexed yet: a later request goes on
                            return
                        if done:
                            last = walk.page(skip, limit)
                            break
            except FloorlessError as exc:  # the page's next request shows it
                log.warning("walking the history of repository %d failed: %s", repo_id, exc)
                return
            self.walks.put(key, walk)
            found = Page([oid(c) for c in last.commits], last.more)
            self.cache.put(repo_id, "history", stored_key, _page_to_json(found))

        self._defer(("walk", *key), lambda: finish(walk))
        return None

    def _defer(
        self, key: tuple[object, ...], work: Callable[[], object], viewed: bool = False
    ) -> None:
        """Run ``work`` in the background: once however often pages ask for it (each poll of a
        page would start another full walk), and at most DEFERRED_WALKS at a time (a page
        asking while they run asks again when it polls). ``viewed``: the answer a page
        waits for before the index can give it; the bulk index pauses meanwhile
        (``Indexer.page_waits``), as its parsing would take half the interpreter from it."""
        with self._lock:
            if key in self._deferred or len(self._deferred) >= DEFERRED_WALKS:
                return
            self._deferred.add(key)
        if viewed:
            self.indexer.page_waits()

        def run() -> None:
            try:
                work()
            finally:
                with self._lock:
                    self._deferred.discard(key)
                if viewed:
                    self.indexer.page_answered()

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
        result = graph.last_changes(graph.seq[commit], paths, budget, directory)
        if result is None:
            return None
        oids = graph.oids
        found = {p: None if n is None else oids[n] for p, n in result.items()}
        return self._store_last(repo_id, commit, directory, names, found)

    def _store_last(
        self,
        repo_id: int,
        commit: bytes,
        directory: bytes,
        names: Sequence[bytes],
        found: dict[bytes, bytes | None],
    ) -> dict[bytes, bytes | None]:
        """Keep the column's answer (``found``: path -> commit), beside what is kept of it."""
        paths = [directory + b"/" + n if directory else n for n in names]
        table = {
            n.hex(): (None if found[p] is None else found[p].hex())  # type: ignore[union-attr]
            for n, p in zip(names, paths, strict=True)
        }
        key = commit + b"\0" + directory
        known = self.cache.get(repo_id, "last", key)
        stored = {**json.loads(known), **table} if known is not None else table
        self.cache.put(repo_id, "last", key, json.dumps(stored))
        return {n: _unhex(table[n.hex()]) for n in names}

    def _last_before_indexed(
        self,
        graph: CommitGraph,
        repo: Repo,
        commit: bytes,
        directory: bytes,
        names: Sequence[bytes],
    ) -> None:
        """The last-commit column of a directory whose history is not all indexed yet, in
        the background: the index answers the entries it can (those changed in the recent
        history it holds), git the entries left (``lastchanged.last_among``) over the commits the
        index knows (all of them, from its first slice). A first visit's column is then
        complete within seconds, not once the whole history is indexed (the page polls,
        and finds it among the answers)."""
        paths = [directory + b"/" + n if directory else n for n in names]
        start = graph.seq[commit]
        found = graph.last_changes(start, paths, None, directory, partial=True) or {}
        rest = [p for p in paths if p not in found]
        try:
            if rest:
                handle = self.open_repo(repo)
                git_dir = Path(handle.path)
                found.update(
                    last_among(
                        self.indexer.git_environment(), git_dir, graph, start, directory, rest
                    )
                )
        except (FloorlessError, OSError, KeyError) as exc:  # the next poll asks again
            log.warning("last commits in %s: %s", repo.full_name, exc)
            return
        if self.indexer.stopping:  # the database may be closed by now
            return
        self.rest_answered += 1
        oids = graph.oids
        answer = {p: None if n is None else oids[n] for p, n in found.items()}
        self._store_last(repo.id, commit, directory, names, answer)

    def _last_of_root(self, repo: Repo, commit: bytes, names: Sequence[bytes]) -> None:
        """The last-commit column of a wide root before the index can answer it, in the
        background, from the first request on, asked of git alone (``lastchanged.root_last``:
        every commit's root diffed, in parts side by side). Waiting for the index's first
        slices, as a smaller directory's column does, would spare nothing here: the entries
        a root leaves to git (those unchanged for years) need every commit's diff all the
        same, and the index's commits are not needed either."""
        if self._stored_last(repo.id, commit, b"", names) is not None:
            return  # a run that ended between the page's look and this one stored it
        try:  # (the repository may have gone meanwhile)
            handle = self.open_repo(repo)
            found = root_last(self.indexer.git_environment(), handle, commit, names)
        except (FloorlessError, pygit2.GitError, OSError) as exc:  # the next poll asks again
            log.warning("last commits in %s: %s", repo.full_name, exc)
            return
        if self.indexer.stopping:  # the database may be closed by now
            return
        self.rest_answered += 1
        self._store_last(repo.id, commit, b"", names, found)

    def _last_one_by_one(
        self, repo: Repo, commit: bytes, directory: bytes, names: Sequence[bytes]
    ) -> None:
        """The last-commit column of a small directory before the index knows even the
        commits (its first slice, ``git rev-list`` of the whole history, is under way): git's
        own answer, entry by entry (``lastchanged.each_last``). It stops asking once the
        column needs git no more: the answer is stored, or the index has caught up with the
        whole history (the page's next poll answers from it). On slow storage an entry can
        take git seconds, and the index of a small repository is done before its column."""

        def needless() -> bool:  # (asked every STOP_POLL seconds while git runs)
            graph = self.indexer.graph(repo.id)
            if self.indexer.stopping or (graph and commit in graph and graph.indexed == len(graph)):
                return True
            return self._stored_last(repo.id, commit, directory, names) is not None

        try:  # (the repository may have gone meanwhile)
            handle = self.open_repo(repo)
            found = each_last(
                self.indexer.git_environment(),
                Path(handle.path),
                commit,
                directory,
                names,
                stopped=needless,
            )
        except (FloorlessError, pygit2.GitError, OSError) as exc:  # the next poll asks again
            log.warning("last commits in %s: %s", repo.full_name, exc)
            return
        if found is None or self.indexer.stopping:  # the forge stops
            return
        self.rest_answered += 1
        self._store_last(repo.id, commit, directory, names, found)

    def known_commit_count(self, repo_id: int, commit: bytes) -> int | None:
        """The commit count if already computed (pages never count: it is O(history))."""
        cached = self.cache.get(repo_id, "count", commit)
        return None if cached is None else int(cached)

    def commit_count(self, repo_id: int, commit: bytes) -> int | None:
        known = self.known_commit_count(repo_id, commit)
        if known is not None:
            return known
        graph = self.indexer.ready(repo_id, commit)
        if graph is None:
            return None
        count = graph.count_ancestors(graph.seq[commit])
        self.cache.put(repo_id, "count", commit, str(count))
        return count

    def precompute(self, repo: Repo, graph: CommitGraph, snapshot: RefSnapshot) -> None:
        """The answers the repository's home page needs, once its index is complete: each
        branch tip's commit count and its root's last commits."""
        handle = self.open_repo(repo)
        for commit in set(snapshot.branches.values()):
            if commit not in graph:
                continue
            self.commit_count(repo.id, commit)
            obj = read_commit(handle, pygit2.Oid(raw=commit))
            if obj is not None:
                names = [e.raw_name or b"" for e in obj.tree]
                if self.cache.get(repo.id, "last", commit + b"\0") is None:
                    self._compute_last(graph, repo.id, commit, b"", names, None)

    def forget_repository(self, repo_id: int) -> None:
        """Drop what is kept in memory about the repository: its history walks and answers.
        Called by its ``RepoState.forget`` alone."""
        self.walks.drop_where(lambda key: key[0] == repo_id)
        self.cache.forget_repository(repo_id)


def _page_key(start: bytes, path: bytes | None, skip: int, limit: int) -> bytes:
    """The answer cache's key of a page of a walk (None: a branch's list)."""
    named = b"\0" if path is None else b"/" + path  # a path is never empty
    return hashlib.sha256(b"\0".join([start, named, b"%d %d" % (skip, limit)])).digest()


def _page_to_json(page: Page[bytes]) -> str:
    return json.dumps([[c.hex() for c in page.commits], page.more])


def _page_from_json(value: str) -> Page[bytes]:
    commits, more = json.loads(value)
    return Page([bytes.fromhex(c) for c in commits], bool(more))


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)
