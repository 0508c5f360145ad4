"""The composition root: settings, database, git environment and services, wired once.

``Forge(settings)`` builds every service from the narrow parts it needs and touches nothing;
``start()`` prepares the runtime directory, migrates the database, scans for repositories and
starts the background threads; ``stop()`` ends them. Nothing here decides anything: each
service is its package's (the live repositories, the ref-move hub, the other nodes, a
repository's lifecycle and its forks, garbage and the maintenance loop in ``repos/``; the
object gate beside the index; merging and forking in ``collab/``), and takes the few
collaborators it uses, never the forge. The web layer above receives the forge and reaches
the services through it (``forge.lifecycle.rename``, ``forge.live.snapshot``).

Several nodes may share one PostgreSQL database and one repositories directory: what one
node changes it tells the others (``repos/peers.py``), and a repository's index is built by
the node holding its lease (``db/leases.py``) and followed by the others as it is stored.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable

import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Policy
from floorless.accounts.accounts import Accounts, SecretKey
from floorless.accounts.keys import Keys
from floorless.collab.automerge import AutoMerge
from floorless.collab.forks import Forking
from floorless.collab.issues import Issues
from floorless.collab.merging import Merger
from floorless.collab.protections import Protections
from floorless.collab.pulls import Pull, Pulls
from floorless.collab.references import References
from floorless.collab.releases import Releases
from floorless.collab.reviews import Reviews
from floorless.collab.statuses import Statuses
from floorless.collab.triage import Triage
from floorless.core import heap
from floorless.core.asciidoctor import Asciidoctor
from floorless.core.background import Jobs
from floorless.core.config import Settings
from floorless.core.errors import FloorlessError
from floorless.db import migrations, open_database
from floorless.db.leases import Leases, node_name
from floorless.db.store import SQLite
from floorless.files.attachments import Attachments
from floorless.files.store import PART_AGE, Store
from floorless.forgejo import payloads
from floorless.forgejo.caches import ShapeCaches
from floorless.git import unreachable
from floorless.git.env import GitEnvironment
from floorless.git.protocol import capture_v2_advertisement
from floorless.git.repo import HandlePool
from floorless.index.answers import Answers
from floorless.index.gate import Gate
from floorless.index.indexer import Indexer
from floorless.index.reachability import PAGE_BUDGET
from floorless.lfs.locks import Locks
from floorless.lfs.objects import LfsObjects, pointers_between
from floorless.repos.forks import Forks
from floorless.repos.garbage import Garbage
from floorless.repos.lifecycle import Lifecycle
from floorless.repos.live import Live
from floorless.repos.maintenance import Maintenance
from floorless.repos.moves import Moves
from floorless.repos.peers import Peers
from floorless.repos.registry import Registry, Repo
from floorless.repos.state import RepoStates
from floorless.search.index import CodeIndex
from floorless.webhooks.delivery import Webhooks

log = logging.getLogger(__name__)

FILE_SWEEP_SECONDS = 3600.0  # how often unclaimed uploads and stale part files are looked for


class Forge:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        connections = settings.threads + settings.expensive_threads + 4
        db = self.db = open_database(settings.database, connections, settings.database_timeout)
        if isinstance(db, SQLite) and settings.processes > 1:  # several write to it
            db.shared = True
        git = self.git = GitEnvironment(
            settings.runtime_dir, settings.git_mapped_bytes, settings.git_object_cache_bytes
        )
        handles = self.handles = HandlePool(settings.repo_handles)
        states = self.states = RepoStates(handles)
        # The database's versions of repos and repo_access when each repository's row was
        # last read: while the database is unreachable, a row is served only if no write to
        # either is known since (web/context.py).
        self.read_visibility: dict[int, tuple[int, int]] = {}
        node = node_name()
        leases = self.leases = Leases(db, node, settings.lease_seconds)
        private = settings.adopt_visibility == "private"
        registry = self.registry = Registry(db, settings.repos, settings.default_owner, private)
        peers = self.peers = Peers(db, node, states)
        live = self.live = Live(states, handles, registry, peers.notices)
        # (forgejo/'s sources are the forge, taken by structure: they read through these)
        self.open, self.snapshot = live.open, live.snapshot
        reached = functools.partial(unreachable.reached_among, git)
        indexer = self.indexer = Indexer(
            db, live.open, reached, git, leases, settings.index_slice_commits, live.release_handles
        )
        live.on_fresh.append(indexer.schedule)
        peers.on_indexed.append(indexer.follow)
        indexer.on_stored.append(lambda repo_id: peers.tell(repo_id, "indexed"))
        self.answers = Answers(indexer, live.open)
        indexer.precompute = self.answers.precompute
        states.attach(indexer)
        states.attach(self.answers)
        # Every ref move ends here; its listeners (cheap: each queues its work) are added below.
        moves = self.moves = Moves(live, registry, peers, indexer.schedule)
        self.secret = SecretKey(settings.data / "secret.key", db)
        accounts = self.accounts = Accounts(
            db,
            self.secret,
            settings.session_days,
            frozenset({settings.default_owner}),
            settings.password_checks,
        )
        policy = self.policy = Policy(db)
        self.keys = Keys(db)  # SSH keys: people's and repositories' deploy keys
        # Uploaded files (attachments, LFS objects), kept once each by their SHA-256.
        self.store = Store(settings.storage_dir)
        self.attachments = Attachments(
            db, self.store, settings.attachment_max_bytes, settings.attachment_types
        )
        # Git LFS: the objects each repository holds (their bytes in the same store), locks.
        self.lfs = LfsObjects(db, self.store, settings.lfs_max_bytes)
        self.locks = Locks(db)
        forks = self.forks = Forks(db, git, registry, states)
        self.lifecycle = Lifecycle(registry, forks, live, moves, peers, policy.may_publish)
        self.lifecycle.on_forked.append(self._lend_lfs)
        self.gate = Gate(indexer, live, registry, forks, policy)
        # Releases: a tag with notes and files; tags they make go through the ref-move hub,
        # and only at commits the gate would serve.
        self.releases = Releases(db, live.open, moves, self.attachments, self._reaches)
        self.garbage = Garbage(
            git, states, leases, forks, settings.gc_pack_depth, indexer.reach.collected
        )
        issues = self.issues = Issues(db, self.attachments)
        pulls = self.pulls = Pulls(db, issues)
        self.triage = Triage(db, issues)  # labels, milestones, assignees
        statuses = self.statuses = Statuses(db)  # what CI says of commits
        protections = self.protections = Protections(db)  # what a merge into a branch needs
        # Code search's index of each default branch (it pauses for a page's answer).
        self.code = CodeIndex(
            db,
            live.handle_of,
            settings.search_max_file_bytes,
            settings.search_cache_bytes,
            indexer.make_way,
        )
        moves.listeners.append(self.code.queue)
        self.reviews = Reviews(db, issues, pulls)
        self.reviews.locate = live.locate
        moves.listeners.append(lambda repo, _: self.reviews.follow_soon(repo.owner, repo.name))
        merger = self.merger = Merger(
            db, git, registry, accounts, policy, pulls, protections, statuses, live, moves, forks
        )
        moves.listeners.append(merger.queue)
        merger.on_merged.append(self._bring_lfs)  # a fork's LFS objects, merged in
        # Merges scheduled for when the required checks pass, tried on its thread.
        self.automerge = AutoMerge(
            db, issues, pulls, accounts, registry, policy, leases, merger, live.snapshot
        )
        statuses.on_posted.append(self.automerge.status_posted)
        if peers.notices.board is not None:  # (PostgreSQL's nodes hear the table's writes)
            statuses.on_posted.append(lambda repo, status: peers.tell(repo.id, "statuses"))

        def statuses_heard(repo_id: int) -> None:
            state = states.by_id(repo_id)
            if state is not None:
                statuses.heard(state.repo)
            else:  # nothing of it kept here but the table's answers
                db.changed(("commit_statuses",))

        peers.on_statuses.append(statuses_heard)
        # References to issues: mentions in text and commits, and closing ones.
        self.references = References(db, accounts, issues, registry, policy, live.handle_of)
        issues.on_text.append(self.references.from_text)
        pulls.on_merged.append(self.references.on_merged)
        moves.listeners.append(self.references.queue)
        # requests counted by the gateway; the maintenance loop gives memory back once they stop
        self.activity = heap.Activity()
        self.maintenance = Maintenance(
            settings,
            registry,
            states,
            handles,
            moves,
            self.garbage,
            self._sweep,
            self.activity.quiet,
        )
        # Webhooks: deliveries are sent by worker threads; the payloads of a change's events
        # are computed on ``hook_events``'s thread, after the request has ended.
        self.webhooks = Webhooks(db, settings)
        self.hook_events = Jobs(
            "hook-events", log, (FloorlessError, pygit2.GitError, OSError, ValueError)
        )
        # The API's shapes kept by object ids (a commit's JSON, a range's diff, a tree's
        # listing), which webhook payloads use too: sized as the caches of fragments.
        self.shapes = ShapeCaches(settings.render_cache_bytes)
        # What turns a change to an issue or pull request, a fork made, a release or a tag
        # into webhook events (their payloads are the API's shapes): wired here, so that a
        # forge serving no web app sends them too.
        self.event_payloads: Callable[[payloads.Event], None] = functools.partial(
            payloads.event, self
        )
        self._changes = itertools.count()
        issues.on_change.append(self.changed)
        self.releases.on_change.append(self.changed)
        self.forking = Forking(accounts, policy, self.lifecycle, self.changed)
        # A deleted repository's uploaded files (attachments, LFS objects) are removed from the
        # store once nothing else refers to them, on ``hook_events``'s thread.
        self.lifecycle.on_deleted.append(
            lambda repo: self.hook_events.queue(("collect files",), self.attachments.collect)
        )
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
        self._swept_files = time.monotonic()  # (at start the store sweeps itself)
        self._advertisement: bytes | None = None
        self._advertisement_lock = threading.Lock()

    def _sweep(self) -> None:
        """The maintenance loop's frequent work: scheduled merges, and hourly, uploads no
        comment claimed and part files no upload finished (another node's may be running:
        only those a day old)."""
        self.automerge.tick()
        now = time.monotonic()
        if now - self._swept_files >= FILE_SWEEP_SECONDS:
            self._swept_files = now
            self.attachments.expire()
            self.store.sweep(older_than=PART_AGE)

    def _reaches(self, repo: Repo, commit: pygit2.Oid) -> bool | None:
        snapshot = self.live.snapshot(repo)
        return self.gate.reachable(repo, snapshot, ObjectType.COMMIT, commit.raw, PAGE_BUDGET)

    def _lend_lfs(self, parent: Repo, fork: Repo) -> None:
        self.lfs.lend(parent.id, fork.id)

    def _bring_lfs(self, pull: Pull, head: str, base: str) -> None:
        """Give the base of a pull request merged from another repository the LFS objects its
        commits point to, when the head's repository holds them (as Forgejo's merge does)."""
        if pull.same_repo:
            return
        target = self.registry.get(pull.owner, pull.name)
        source = self.registry.get(pull.head_owner, pull.head_name)
        handle = self.live.open(target)
        pointers = pointers_between(handle, pygit2.Oid(hex=head), pygit2.Oid(hex=base))
        self.lfs.bring(source.id, target.id, pointers)

    def prepare(self) -> None:
        """Everything short of background threads: enough for the command line."""
        self.settings.data.mkdir(parents=True, exist_ok=True)
        self.git.prepare()
        self.store.prepare()
        migrations.migrate(self.db)
        self.secret.get()

    def start(self, background: bool = True) -> None:
        """Scan for repositories now; read their refs and index them in the background."""
        self.prepare()
        self.advertisement()
        self.registry.recover()  # before the scan: it would adopt a half-moved directory anew
        self.maintenance.scan()
        if background:
            self.peers.notices.start()
            self.indexer.start()
            self.reviews.start()
            self.merger.start()
            self.automerge.start()
            self.references.start()
            self.hook_events.start()
            self.webhooks.start()
            self.code.start()
            self.maintenance.start()

    def stop(self) -> None:
        self.gate.stop()
        self.maintenance.stop()
        self.automerge.stop()
        self.merger.stop()
        self.references.stop()
        self.hook_events.stop()
        self.webhooks.stop()
        self.code.stop()
        self.peers.notices.stop()
        self.reviews.stop()
        self.indexer.stop()
        self.asciidoctor.stop()
        self.leases.stop()
        self.db.close()

    def advertisement(self) -> bytes:
        """git's protocol v2 capability advertisement, asked of git once (at start)."""
        with self._advertisement_lock:
            if self._advertisement is None:
                self._advertisement = capture_v2_advertisement(self.git)
            return self._advertisement

    def changed(self, change: payloads.Event) -> None:
        """Queue the webhook events of ``change`` (to an issue or pull request, a fork made,
        a release or a tag): worked out on ``hook_events``'s thread."""
        build = self.event_payloads
        self.hook_events.queue(("change", next(self._changes)), lambda: build(change))
