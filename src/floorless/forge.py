"""The forge: settings, database, git environment, caches and background work, wired once.

``Forge(settings)`` builds everything and touches nothing; ``start()`` prepares the runtime
directory, migrates the database, scans for repositories and starts the background threads
(the indexer, and the maintenance loop that re-checks refs and rescans the directory).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from floorless import dates
from floorless.access import Policy
from floorless.accounts import Accounts, SecretKey
from floorless.background import start as start_thread
from floorless.config import Settings
from floorless.db import Database
from floorless.errors import FloorlessError
from floorless.garbage import collect
from floorless.git.env import GitEnvironment
from floorless.git.protocol import capture_v2_advertisement
from floorless.git.refs import (
    Fingerprint,
    RefCache,
    RefSnapshot,
    read_snapshot,
    ref_fingerprint,
)
from floorless.git.repo import HandlePool
from floorless.indexer import Indexer
from floorless.repos import Registry, Repo, ScanResult

log = logging.getLogger(__name__)


class Forge:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = Database(settings.database)
        self.git = GitEnvironment(settings.runtime_dir)
        self.handles = HandlePool(settings.repo_handles)
        self.refs = RefCache(self._read_refs)
        self.registry = Registry(
            self.db,
            settings.repos,
            settings.default_owner,
            adopt_private=settings.adopt_visibility == "private",
        )
        self.indexer = Indexer(self.db, self.open)
        self.secret = SecretKey(settings.data / "secret.key")
        self.accounts = Accounts(
            self.db,
            self.secret,
            settings.session_days,
            frozenset({settings.default_owner}),
            settings.password_checks,
        )
        self.policy = Policy(self.db)
        # Archives and blame run a git child while a worker thread waits (for a slow client, as
        # long as it likes): at most half the threads at once, so every other page keeps one.
        self.git_slots = threading.BoundedSemaphore(max(1, settings.threads // 2))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._repo_of_path: dict[Path, Repo] = {}
        self.last_scan = 0.0
        self._fingerprints: dict[Path, Fingerprint] = {}
        self._advertisement: bytes | None = None
        self._advertisement_lock = threading.Lock()
        self._gc_due: set[Path] = set()  # repositories whose refs moved since their last gc
        self.last_gc = time.monotonic()
        self._gc_lock = threading.Lock()
        self._gc_thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Everything short of background threads: enough for the command line."""
        self.settings.data.mkdir(parents=True, exist_ok=True)
        self.git.prepare()
        self.db.migrate()
        self.secret.get()

    def start(self, background: bool = True) -> None:
        """Scan for repositories now; read their refs and index them in the background."""
        self.prepare()
        self.advertisement()
        self.registry.recover()  # before the scan: it would adopt a half-moved directory anew
        self.registry.scan()
        self.last_scan = time.monotonic()
        if background:
            self.indexer.start()
            self._thread = start_thread(self._maintain, "maintain")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.indexer.stop()

    # -- repositories -------------------------------------------------------------------------

    def rescan(self) -> ScanResult:
        """Scan the directory; read the refs of (and index) repositories new to this process."""
        result = self.registry.scan()
        self.last_scan = time.monotonic()
        self._adopt_new()
        return result

    def _adopt_new(self) -> None:
        current = {repo.path: repo for repo in self.registry.all()}
        for path in set(self._repo_of_path) - set(current):
            self.indexer.forget(self._repo_of_path[path].id)
            self._forget_path(path)
        for path, repo in current.items():
            known = self._repo_of_path.get(path)
            if known is not None and known.id != repo.id:  # another repository, same path
                self.indexer.forget(known.id)
                self._forget_path(path)
            self._repo_of_path[path] = repo
            # updated_at is None too when a request read the refs before adoption got here
            if known is None or known.id != repo.id or repo.updated_at is None:
                self._index_soon(repo)

    def advertisement(self) -> bytes:
        """git's protocol v2 capability advertisement, asked of git once (at start)."""
        with self._advertisement_lock:
            if self._advertisement is None:
                self._advertisement = capture_v2_advertisement(self.git)
            return self._advertisement

    def open(self, repo: Repo) -> pygit2.Repository:
        return self.handles.get(repo.path)

    def snapshot(self, repo: Repo) -> RefSnapshot:
        fresh = repo.path not in self.refs
        snapshot = self.refs.get(repo.path)
        if fresh:
            self._repo_of_path[repo.path] = repo
            self.indexer.schedule(repo, snapshot)
        return snapshot

    def refs_changed(self, repo: Repo) -> None:
        """Call after floorless itself moved a ref: the next request sees it at once."""
        self.refs.invalidate(repo.path)
        self._index_soon(repo)

    def after_push(self, repo: Repo) -> None:
        """A push just ended: give an empty repository's first branch the default, then let the
        next request see the new refs (and the indexer index them) without waiting."""
        try:
            handle = self.handles.get(repo.path)
            if handle.head_is_unborn and handle.branches.local:
                names = sorted(handle.branches.local)
                current_name = str(handle.references["HEAD"].target).removeprefix("refs/heads/")
                for choice in (current_name, "main", "master", names[0]):
                    if choice in names:  # not set_head: it lets go of the GIL
                        handle.create_reference_symbolic("HEAD", f"refs/heads/{choice}", True)
                        break
        except (pygit2.GitError, FloorlessError, KeyError, OSError) as exc:
            log.warning("%s: after push: %s", repo.full_name, exc)
        self.refs_changed(repo)

    def rename(self, repo: Repo, new_name: str) -> Repo:
        renamed = self.registry.rename(repo, new_name)
        self._forget_path(repo.path)
        self._repo_of_path[renamed.path] = renamed
        return renamed

    def delete(self, repo: Repo) -> None:
        self.registry.delete(repo)
        self._forget_path(repo.path)
        self.indexer.forget(repo.id)

    def _forget_path(self, git_dir: Path) -> None:
        self.refs.invalidate(git_dir)
        self.handles.forget(git_dir)
        self._repo_of_path.pop(git_dir, None)

    def _read_refs(self, git_dir: Path) -> RefSnapshot:
        # the fingerprint first: a ref that moves while the refs are read shows as a change
        self._fingerprints[git_dir] = ref_fingerprint(git_dir)
        return read_snapshot(self.handles.get(git_dir))

    def _index_soon(self, repo: Repo) -> None:
        self._gc_due.add(repo.path)
        try:
            snapshot = self.refs.get(repo.path)
            self._record_update(repo, snapshot)
        except (FloorlessError, pygit2.GitError) as exc:
            log.warning("%s: %s", repo.full_name, exc)
            return
        self.indexer.schedule(repo, snapshot)

    def _record_update(self, repo: Repo, snapshot: RefSnapshot) -> None:
        """Store the newest branch tip's commit date as the repository's ``updated_at``: in
        range whatever the commit says, and never later than now (a commit dated in the year
        99999 must not keep a repository first among the recently updated)."""
        handle = self.handles.get(repo.path)
        times: list[int] = []
        for commit in snapshot.branches.values():
            obj = handle.get(pygit2.Oid(raw=commit))
            if isinstance(obj, pygit2.Commit):
                times.append(obj.commit_time)
        updated = min(dates.clamp(max(times)), time.time()) if times else None
        self.registry.set_updated(repo.id, updated)

    # -- reachability and garbage (reachability.py, garbage.py) ----------------------------

    def reachable(
        self, repo: Repo, snapshot: RefSnapshot, kind: int, oid: bytes, budget: int | None
    ) -> bool | None:
        """Whether the object ``oid`` of type ``kind`` (an ``ObjectType``) may be served by its
        id: the refs of ``snapshot`` reach it. None when that is not known yet within
        ``budget`` commits read."""
        tips, reach, handle = snapshot.tip_set, self.indexer.reach, self.open(repo)
        if kind == ObjectType.COMMIT:
            return reach.commit(repo.id, handle, tips, oid, budget)
        if kind == ObjectType.TAG:
            return oid in snapshot.tag_objects
        return reach.blob_or_tree(repo.id, handle, tips, oid, budget)

    def fetchable(self, repo: Repo, wait: float = 30.0) -> Callable[[bytes], bool]:
        """For a fetch: whether an object id may be sent. Not known yet (the index is behind
        a ref that was deleted): wait for the indexer, up to ``wait`` seconds."""

        def allowed(oid: bytes) -> bool:
            deadline = time.monotonic() + wait
            while True:
                try:  # the header alone: a large blob is not read
                    kind, _ = self.open(repo).odb.read_header(pygit2.Oid(raw=oid))
                except (KeyError, ValueError, pygit2.GitError):
                    return False
                answer = self.reachable(repo, self.snapshot(repo), kind, oid, None)
                if answer is not None:
                    return answer
                if time.monotonic() > deadline or repo.id in self.indexer.failures:
                    return False
                self._stop.wait(0.05)

        return allowed

    def collect_garbage(self, repo: Repo) -> bool:
        """``git gc --prune=now`` on one repository; False when skipped (a push is running)."""
        with self._gc_lock:
            self._gc_due.discard(repo.path)
            if not collect(self.git, repo.path):
                self._gc_due.add(repo.path)
                return False
            self.handles.forget(repo.path)  # the old handle still reads the removed packs
            self.indexer.reach.collected(repo.id, self.open(repo))
            return True

    def collect_due(self) -> None:
        """Collect the garbage of every repository whose refs moved since its last gc."""
        for path in sorted(self._gc_due):
            repo = self._repo_of_path.get(path)
            if repo is None:
                self._gc_due.discard(path)
                continue
            try:
                self.collect_garbage(repo)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s: garbage collection: %s", repo.full_name, exc)

    # -- background ---------------------------------------------------------------------------

    def _maintain(self) -> None:
        interval = self.settings.ref_check_interval
        try:
            self._adopt_new()
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("background maintenance: %s", exc)
        while not self._stop.wait(interval):
            try:
                self.check_refs()
                if time.monotonic() - self.last_scan >= self.settings.rescan_interval:
                    self.rescan()
                self.handles.collect()
                gc_interval = self.settings.gc_interval
                running = self._gc_thread is not None and self._gc_thread.is_alive()
                if gc_interval and not running and time.monotonic() - self.last_gc >= gc_interval:
                    self.last_gc = time.monotonic()
                    self._gc_thread = start_thread(self.collect_due, "gc")
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("background maintenance: %s", exc)

    def check_refs(self) -> int:
        """Re-read the refs of every repository in the cache; index those that changed."""
        changed = 0
        for git_dir in self.refs.cached():
            repo = self._repo_of_path.get(git_dir)
            if self._fingerprints.get(git_dir) == ref_fingerprint(git_dir):
                continue  # nothing moved: no need to hold the interpreter to read the refs
            try:
                moved = self.refs.refresh(git_dir)
            except FloorlessError:
                self.refs.invalidate(git_dir)
                continue
            if moved and repo is not None:
                changed += 1
                self._index_soon(repo)
        return changed
