"""The forge: settings, database, git environment, caches and background work, wired once.

``Forge(settings)`` builds everything and touches nothing; ``start()`` prepares the runtime
directory, migrates the database, scans for repositories and starts the background threads
(the indexer, and the maintenance loop that re-checks refs and rescans the directory).

What is kept in memory about a repository is its ``RepoState`` (``floorless.repos.state``): the
forge reaches it by the repository's row, calls its ``forget()`` whenever the repository is
deleted, renamed, replaced or gone, and its ``refs_moved()`` after floorless moved a ref.

Several nodes may share one PostgreSQL database and one repositories directory. What one
node changes it tells the others (``db/notices.py``): they take it in as their own change,
at once. A repository's index is built by the node holding its lease (``db/leases.py``) and
followed by the others as it is stored.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.accounts import Accounts, SecretKey
from floorless.collab import forks
from floorless.collab.automerge import AutoMerge
from floorless.collab.issues import Change, Issues
from floorless.collab.merging import Merger
from floorless.collab.protections import Protections
from floorless.collab.pulls import Pull, Pulls
from floorless.collab.references import References
from floorless.collab.reviews import Reviews
from floorless.collab.statuses import Statuses
from floorless.collab.triage import Triage
from floorless.core import dates
from floorless.core.asciidoctor import Asciidoctor
from floorless.core.background import Jobs
from floorless.core.background import start as start_thread
from floorless.core.config import Settings
from floorless.core.errors import FloorlessError, Forbidden, NotFound
from floorless.db import migrations, open_database
from floorless.db.leases import Leases, node_name
from floorless.db.notices import Notices
from floorless.git import unreachable
from floorless.git.env import GitEnvironment
from floorless.git.lenient import read_commit
from floorless.git.protocol import capture_v2_advertisement
from floorless.git.refs import RefSnapshot
from floorless.git.repo import HandlePool
from floorless.index.answers import Answers
from floorless.index.indexer import Indexer
from floorless.repos.garbage import collect
from floorless.repos.registry import Registry, Repo, ScanResult, _renamed_path, check_name
from floorless.repos.state import RepoState, RepoStates
from floorless.search.index import CodeIndex
from floorless.webhooks.delivery import Webhooks

log = logging.getLogger(__name__)


class Forge:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = open_database(
            settings.database,
            max_connections=settings.threads + settings.expensive_threads + 4,
            timeout=settings.database_timeout,
        )
        self.git = GitEnvironment(
            settings.runtime_dir, settings.git_mapped_bytes, settings.git_object_cache_bytes
        )
        self.handles = HandlePool(settings.repo_handles)
        self.states = RepoStates(self.handles)
        # The database's versions of repos and repo_access when each repository's row was
        # last read: while the database is unreachable, a row is served only if no write to
        # either is known since (web/context.py).
        self.read_visibility: dict[int, tuple[int, int]] = {}
        self.node = node_name()
        self.leases = Leases(self.db, self.node, settings.lease_seconds)
        self.notices = Notices(self.db, self.node, self._heard)
        self.notices.on_listening = self._missed
        self.registry = Registry(
            self.db,
            settings.repos,
            settings.default_owner,
            adopt_private=settings.adopt_visibility == "private",
        )
        self.indexer = Indexer(
            self.db,
            self.open,
            lambda git_dir, tips, ids: unreachable.reached_among(self.git, git_dir, tips, ids),
            git=self.git,
            leases=self.leases,
            slice_commits=settings.index_slice_commits,
            release_repos=self.release_handles,
        )
        self.indexer.on_stored.append(lambda repo_id: self._tell(repo_id, "indexed"))
        self.answers = Answers(self.indexer, self.open)
        self.indexer.precompute = self.answers.precompute
        self.states.attach(self.indexer)
        self.states.attach(self.answers)
        self.secret = SecretKey(settings.data / "secret.key", self.db)
        self.accounts = Accounts(
            self.db,
            self.secret,
            settings.session_days,
            frozenset({settings.default_owner}),
            settings.password_checks,
        )
        self.policy = Policy(self.db)
        self.issues = Issues(self.db)
        self.pulls = Pulls(self.db, self.issues)
        self.triage = Triage(self.db, self.issues)  # labels, milestones, assignees
        self.statuses = Statuses(self.db)  # what CI says of commits
        self.protections = Protections(self.db)  # what a merge into a branch needs
        # Called (cheaply: each queues its work) whenever this node learns that a repository's
        # refs moved: a push or API write through it, or a change its ref check saw. Pull
        # requests follow their heads and bases from here.
        self.ref_listeners: list[Callable[[Repo, RefSnapshot], None]] = []
        # Code search's index of each default branch, kept up in the background (search/).
        self.code = CodeIndex(
            self.db,
            self._handle_of,
            settings.search_max_file_bytes,
            settings.search_cache_bytes,
            self.indexer.make_way,  # (it pauses with the bulk index for a page's answer)
        )
        self.ref_listeners.append(self.code.queue)
        self.reviews = Reviews(self.db, self.issues, self.pulls)
        self.reviews.locate = self._locate
        self.ref_listeners.append(lambda repo, _: self.reviews.follow_soon(repo.owner, repo.name))
        # Merges pull requests; its thread follows their heads and bases (merging.py).
        self.merger = Merger(self)
        self.ref_listeners.append(self.merger.queue)
        self.merger.fork_head_moved.append(self._fork_head_moved)
        # Merges scheduled for when the required checks pass, tried on its thread (automerge.py).
        self.automerge = AutoMerge(
            self.db,
            self.issues,
            self.pulls,
            self.accounts,
            self.registry,
            self.policy,
            self.leases,
            self.merger,
            self.snapshot,
        )
        self.statuses.on_posted.append(self.automerge.status_posted)
        # References to issues: mentions in text and commits, and closing ones (references.py).
        self.references = References(
            self.db, self.accounts, self.issues, self.registry, self.policy, self._handle_of
        )
        self.issues.on_text.append(self.references.from_text)
        self.pulls.on_merged.append(self.references.on_merged)
        self.ref_listeners.append(self.references.queue)
        # Webhooks: their deliveries are sent by worker threads (webhooks.py); the payloads of
        # a push's events are computed on ``hook_events``'s thread, after the push has ended.
        self.webhooks = Webhooks(self.db, settings)
        self.hook_events = Jobs(
            "hook-events", log, (FloorlessError, pygit2.GitError, OSError, ValueError)
        )
        # What turns a change to an issue or pull request into webhook events (their payloads
        # are the API's shapes: the web layer sets it, ``hookpayloads.issue_event``).
        self.event_payloads: Callable[[Change | forks.Forked], None] | None = None
        self._changes = itertools.count()
        self.issues.on_change.append(self.changed)
        # Archives and blame run a git child while a worker thread waits (for a slow client, as
        # long as it likes): at most half the threads at once, so every other page keeps one.
        self.git_slots = threading.BoundedSemaphore(max(1, settings.threads // 2))
        # AsciiDoc documents are converted by one Asciidoctor worker, started when first needed;
        # at most half the threads are in it at once (converting, or waiting for it)
        self.asciidoctor = Asciidoctor(
            settings.asciidoctor_ruby,
            settings.asciidoctor_seconds,
            settings.runtime_dir / "asciidoctor",
            at_once=max(1, settings.threads // 2),
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_scan = 0.0
        self._advertisement: bytes | None = None
        self._advertisement_lock = threading.Lock()
        self.last_gc = time.monotonic()
        self._gc_lock = threading.Lock()
        self._gc_thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Everything short of background threads: enough for the command line."""
        self.settings.data.mkdir(parents=True, exist_ok=True)
        self.git.prepare()
        migrations.migrate(self.db)
        self.secret.get()

    def start(self, background: bool = True) -> None:
        """Scan for repositories now; read their refs and index them in the background."""
        self.prepare()
        self.advertisement()
        self.registry.recover()  # before the scan: it would adopt a half-moved directory anew
        self.registry.scan()
        self.last_scan = time.monotonic()
        if background:
            self.notices.start()
            self.indexer.start()
            self.reviews.start()
            self.merger.start()
            self.automerge.start()
            self.references.start()
            self.hook_events.start()
            self.webhooks.start()
            self.code.start()
            self._thread = start_thread(self._maintain, "maintain")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.automerge.stop()
        self.merger.stop()
        self.references.stop()
        self.hook_events.stop()
        self.webhooks.stop()
        self.code.stop()
        self.notices.stop()
        self.reviews.stop()
        self.indexer.stop()
        self.asciidoctor.stop()
        self.leases.stop()
        self.db.close()

    # -- repositories -------------------------------------------------------------------------

    def rescan(self) -> ScanResult:
        """Scan the directory; read the refs of (and index) repositories new to this process."""
        result = self.registry.scan()
        self.last_scan = time.monotonic()
        self._adopt_new()
        return result

    def _adopt_new(self) -> None:
        """Forget the states of repositories whose rows are gone (scans saw them missing, or
        another process removed them); read the refs of, and index, those new here."""
        current = {repo.path: repo for repo in self.registry.all()}
        for state in self.states.all():
            row = current.get(state.path)
            if row is None or row.id != state.repo.id:  # gone, or replaced at its path
                state.forget()
        for path, repo in current.items():
            known = self.states.at(path)
            state = self.state(repo)
            # updated_at is None too when a request read the refs before adoption got here
            if known is None or known is not state or repo.updated_at is None:
                self._index_soon(state)

    def advertisement(self) -> bytes:
        """git's protocol v2 capability advertisement, asked of git once (at start)."""
        with self._advertisement_lock:
            if self._advertisement is None:
                self._advertisement = capture_v2_advertisement(self.git)
            return self._advertisement

    def state(self, repo: Repo) -> RepoState:
        """What is kept in memory about the repository ``repo`` is a row of."""
        return self.states.of(repo)

    def release_handles(self, repos: list[Repo]) -> None:
        """Open the repositories' handles anew, and free the old ones now (a dropped handle
        sits in a reference cycle: the pool's collection is a full one), rather than in the
        maintenance loop, where that collection would pause the pages of a crawl."""
        for repo in repos:
            try:
                self.state(repo).reopen()
            except (FloorlessError, pygit2.GitError, OSError) as exc:  # gone meanwhile
                log.warning("letting go of %s: %s", repo.full_name, exc)
        self.handles.collect()

    def open(self, repo: Repo) -> pygit2.Repository:
        return self.state(repo).handle()

    def _handle_of(self, repo: Repo) -> tuple[pygit2.Repository, RefSnapshot]:
        return self.open(repo), self.snapshot(repo)

    def snapshot(self, repo: Repo) -> RefSnapshot:
        state = self.state(repo)
        fresh = not state.loaded
        if not fresh and not self.notices.listening:
            # Deaf to other nodes' pushes (the database is away, or was): look at the refs'
            # files on each request instead, as fresh as the storage's attribute cache allows.
            fresh = state.check()
        snapshot = state.snapshot()
        if fresh:
            self.indexer.schedule(state.repo, snapshot)
        return snapshot

    def _locate(self, owner: str, name: str) -> tuple[pygit2.Repository, RefSnapshot]:
        """The handle and refs of the repository ``owner/name``, for background work."""
        repo = self.registry.get(owner, name)
        return self.open(repo), self.snapshot(repo)

    def refs_moved(self, repo: Repo) -> None:
        """Call after floorless itself moved a ref (a push, an API call): the next request
        sees it at once, and the indexer indexes it."""
        state = self.state(repo)
        state.refs_moved()
        self._tell(repo.id, "moved")
        self._index_soon(state)

    def after_push(self, repo: Repo) -> None:
        """A push just ended: give an empty repository's first branch the default, then let the
        next request see the new refs (and the indexer index them) without waiting."""
        try:
            handle = self.open(repo)
            if handle.head_is_unborn and handle.branches.local:
                names = sorted(handle.branches.local)
                current_name = str(handle.references["HEAD"].target).removeprefix("refs/heads/")
                for choice in (current_name, "main", "master", names[0]):
                    if choice in names:  # not set_head: it lets go of the GIL
                        handle.create_reference_symbolic("HEAD", f"refs/heads/{choice}", True)
                        break
        except (pygit2.GitError, FloorlessError, KeyError, OSError) as exc:
            log.warning("%s: after push: %s", repo.full_name, exc)
        self.refs_moved(repo)

    def rename(self, repo: Repo, new_name: str) -> Repo:
        """Rename on disk and in the database; what was kept under the old path goes (the
        first request under the new name reads the refs and has it indexed again)."""
        check_name(new_name)
        if new_name == repo.name:
            return repo
        target = _renamed_path(repo, new_name)
        target = target if repo.bare else target / ".git"
        children = forks.before_rename(self, repo, target)  # its forks borrow under both names
        try:
            renamed = self.registry.rename(repo, new_name)
        except BaseException:
            forks.after_rename(self, children, target)
            raise
        if renamed is not repo:
            forks.after_rename(self, children, repo.path)  # (the same name: nothing happened)
            self.states.forget(repo)
            self._tell(repo.id, "gone")
        return renamed

    def delete(self, repo: Repo) -> None:
        """Remove ``repo``; its forks are made whole first (``forks.before_delete``)."""
        forks.before_delete(self, repo)
        self.registry.delete(repo)
        self.states.forget(repo)
        self._tell(repo.id, "gone")

    # -- other nodes (db/notices.py) ----------------------------------------------------------

    def _tell(self, repo_id: int, event: str) -> None:
        """Tell the other nodes sharing the database (none on SQLite). A notice that cannot
        be sent is lost to them: their ref check finds the change, their next request of
        the index after the lease expires."""
        try:
            self.notices.send(repo_id, event)
        except FloorlessError as exc:
            log.warning("telling other nodes that repository %d %s: %s", repo_id, event, exc)

    def _heard(self, repo_id: int, event: str) -> None:
        """Another node moved a repository's refs, removed or renamed it, or stored more of
        its index: take it in as if it were done here. (A repository created elsewhere
        needs no notice: its row is read on each request.)"""
        if event == "indexed":
            self.indexer.follow(repo_id)
            return
        state = self.states.by_id(repo_id)
        if state is None:
            return
        if event == "gone":
            state.forget()
        else:  # the next request reads the refs, and has the index follow
            state.refs_moved()

    def _missed(self) -> None:
        """Listening (again): notices sent while this node was not listening are lost, so
        every repository's refs are read again at its next request, and every index waiting
        for another node's lease loads what was stored."""
        for state in self.states.all():
            state.refs_moved()
            self.indexer.follow(state.repo.id)

    def _index_soon(self, state: RepoState) -> None:
        repo = state.repo
        state.gc_due = True
        try:
            snapshot = state.snapshot()
            self._record_update(state, snapshot)
        except (FloorlessError, pygit2.GitError) as exc:
            log.warning("%s: %s", repo.full_name, exc)
            return
        self.indexer.schedule(repo, snapshot)
        for listener in self.ref_listeners:
            try:
                listener(repo, snapshot)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s: after its refs moved: %s", repo.full_name, exc)

    def changed(self, change: Change | forks.Forked) -> None:
        """Queue the webhook events of ``change`` (to an issue or pull request, or a fork
        made): worked out on ``hook_events``'s thread."""
        build = self.event_payloads
        if build is not None:
            self.hook_events.queue(("change", next(self._changes)), lambda: build(change))

    def fetch_head_into_base(self, base: Repo, head: Repo, oid: str) -> None:
        """Bring the commit ``oid`` of ``head`` (a fork's branch) into ``base``, for its
        ``refs/pull/N/head``: see ``forks.fetch_head_into_base``."""
        forks.fetch_head_into_base(self, base, head, oid)

    def _fork_head_moved(self, pull: Pull, new_oid: str) -> None:
        """The head branch of ``pull``, in a fork, moved to ``new_oid``: fetch it into the base
        (on the merger's thread), then let the merger follow it."""
        try:
            base = self.registry.get(pull.owner, pull.name)
            head = self.registry.get(pull.head_owner, pull.head_name)
            self.fetch_head_into_base(base, head, new_oid)
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("%s#%d: fetching its head: %s", pull.owner, pull.number, exc)
            return
        self.merger.follow_head(pull, new_oid)

    def set_pull_ref(self, repo: Repo, number: int, oid: str) -> None:
        """Point ``refs/pull/{number}/head`` of ``repo`` at the commit ``oid`` (hex, present in
        ``repo``'s objects), then take the move in as any other."""
        handle = self.open(repo)
        handle.references.create(f"refs/pull/{number}/head", pygit2.Oid(hex=oid), force=True)
        self.refs_moved(repo)

    def _record_update(self, state: RepoState, snapshot: RefSnapshot) -> None:
        """Store the newest branch tip's commit date as the repository's ``updated_at``: in
        range whatever the commit says, and never later than now (a commit dated in the year
        99999 must not keep a repository first among the recently updated)."""
        repo, handle = state.repo, state.handle()
        times: list[int] = []
        for commit in snapshot.branches.values():
            obj = read_commit(handle, pygit2.Oid(raw=commit))
            if obj is not None:
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
        if repo.parent is not None and not forks.owns(Path(handle.path), oid):
            return self._borrowed(repo.parent, kind, oid, budget)
        return reach.blob_or_tree(repo.id, handle, tips, oid, budget)

    def set_private(self, repo: Repo, private: bool) -> None:
        """Make ``repo`` private or public (``check_public`` first)."""
        if not private:
            self.check_public(repo)
        self.registry.set_private(repo.owner, repo.name, private)

    def check_public(self, repo: Repo) -> None:
        """Refuse to make ``repo`` public when it is a fork of a private repository (at any
        remove): ``Policy.may_publish``."""
        if not self.policy.may_publish(self.ancestors(repo)):
            raise Forbidden("a fork of a private repository stays private")

    def ancestors(self, repo: Repo) -> list[Repo | None]:
        """The repositories ``repo`` was forked from, nearest first, the objects of each
        borrowed by the one before; None for one that is gone (and ends the line)."""
        found: list[Repo | None] = []
        names = repo.parent
        while names is not None and len(found) < 100:
            try:
                lender: Repo | None = self.registry.get(*names)
            except NotFound:
                lender = None
            found.append(lender)
            names = lender.parent if lender is not None else None
        return found

    def readable_lenders(self, viewer: Viewer, repo: Repo) -> list[Repo]:
        """The repositories whose objects ``repo`` borrows (``ancestors``) that ``viewer``
        may read now: a push into ``repo`` may build on their refs (``git/pushgate.py``),
        and on nothing else they hold."""
        return [
            lender
            for lender in self.ancestors(repo)
            if lender is not None and self.policy.level(viewer, lender) >= Level.READ
        ]

    def _borrowed(
        self, parent_name: tuple[str, str], kind: int, oid: bytes, budget: int | None
    ) -> bool | None:
        """A tree or blob a fork reads from its parent's objects (alternates) is served by id
        only as the parent serves it to anyone: the parent public and its refs reaching it.
        The fork's own index knows nothing of what the parent gained since the fork, so its
        suspects would let through whatever the parent (perhaps private by now) holds."""
        try:
            parent = self.registry.get(*parent_name)
        except NotFound:
            return False
        if parent.private:
            return False
        return self.reachable(parent, self.snapshot(parent), kind, oid, budget)

    def fetchable(self, repo: Repo, wait: float = 2.0) -> Callable[[bytes], bool | None]:
        """For a fetch: whether an object id may be sent; None when that is not known yet
        (the index is behind a ref that was deleted) after waiting ``wait`` seconds for the
        indexer. The wait is short: it holds a request thread."""

        def allowed(oid: bytes) -> bool | None:
            deadline = time.monotonic() + wait
            try:  # the header alone: a large blob is not read (nor a cached header trusted:
                # garbage collection may have removed the object since)
                kind, _ = self.open(repo).odb.read_header(pygit2.Oid(raw=oid))
            except (KeyError, ValueError, pygit2.GitError):
                return False
            while True:
                answer = self.reachable(repo, self.snapshot(repo), kind, oid, None)
                if answer is not None:
                    return answer
                if repo.id in self.indexer.failures:
                    return False
                if time.monotonic() > deadline:
                    return None
                self._stop.wait(0.05)

        return allowed

    def collect_garbage(self, repo: Repo) -> bool:
        """``git gc --prune=now`` on one repository; False when skipped (a push is running,
        or another node sharing the repositories collects this one now: it collects what
        this node's push left too)."""
        state = self.state(repo)
        lease = f"gc {repo.id}"
        with self._gc_lock:
            state.gc_due = False
            if not self.leases.take(lease):
                return False
            try:
                # a fork may reach what its parent no longer does: nothing is pruned
                keep = bool(forks.forks_of(self, repo.owner, repo.name))
                if not collect(self.git, repo.path, keep, self.settings.gc_pack_depth):
                    state.gc_due = True
                    return False
            finally:
                self.leases.release(lease)
            state.reopen()  # the old handle still maps the removed packs
            self.indexer.reach.collected(repo.id, state.handle())
            return True

    def collect_due(self) -> None:
        """Collect the garbage of every repository whose refs moved since its last gc."""
        for state in sorted(self.states.all(), key=lambda s: s.path):
            if not state.gc_due:
                continue
            try:
                self.collect_garbage(state.repo)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s: garbage collection: %s", state.repo.full_name, exc)

    # -- background ---------------------------------------------------------------------------

    def _maintain(self) -> None:
        interval = self.settings.ref_check_interval
        try:
            self._adopt_new()
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("background maintenance: %s", exc)
        while True:
            try:
                self.automerge.tick()  # at once, then every automerge.SWEEP_SECONDS
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("scheduled merges: %s", exc)
            if self._stop.wait(interval):
                return
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
        """Check every repository whose refs are in memory for changes made behind
        floorless's back (``RepoState.check``: a removed pack reopens the handle, moved refs
        are read again); index those whose refs changed, and return how many did."""
        changed = 0
        for state in self.states.all():
            if not state.loaded:
                continue
            try:
                moved = state.check()
            except (FloorlessError, pygit2.GitError) as exc:  # the reopen failed
                log.warning("%s: %s", state.repo.full_name, exc)
                continue
            if moved and not state.forgotten:
                changed += 1
                self._index_soon(state)
        return changed
