"""Scheduled merges: Forgejo's "merge when checks succeed" (the API's
``merge_when_checks_succeed``), kept as a row of ``pull_automerges`` so that it survives a
restart and is carried out by whichever node is up.

A merge is scheduled when the pull request could be merged now but for what its base
branch's protection still waits for (required status checks, approvals: the
``DisallowedToMerge`` of ``Merger.merge``): the row keeps the way to merge, the message, whether
to delete the head branch afterwards and who asked, and a ``automerge_scheduled`` event goes on
the timeline in the same transaction (Forgejo's ``pull_scheduled_merge``). Cancelling removes
the row with an ``automerge_cancelled`` event (``pull_cancel_scheduled_merge``). A pull
request has at most one schedule.

A scheduled merge is tried (``attempt``, on one background thread) when something may have
let it through: a ``success`` status of its head posted to the base repository, a review
submitted, its head moved; right after it is scheduled (a status may have come in between);
when a forge starts; and every ``SWEEP_SECONDS`` (``tick``, from the maintenance loop), for
what this node was not told (another node died before trying, the base branch moved). A
try merges as the one who scheduled it, through ``Merger.merge`` like any merge, and:

- leaves the schedule as it is while the merge is refused by the protection, the pull request
  is closed, in conflict or not checked yet, its head moved meanwhile or is gone, or the one
  who scheduled it may no longer merge (Forgejo keeps the schedule in every one of these);
- drops it, with an ``automerge_cancelled`` event that says why, when the merge itself fails
  (the head does not apply, fast-forward is impossible, the way to merge is no longer
  allowed): Forgejo removes the schedule before merging, so such a failure leaves none;
- once merged (by this or by anyone: ``Pulls.on_merged``), the row goes without an event,
  as on Forgejo.

A push to the head does not cancel the schedule, as on Forgejo: the new head waits for its
own checks (and, with stale approvals dismissed, for approvals of it).

Two nodes never merge one schedule at once: a try that gets as far as merging holds the
lease ``automerge {issue id}`` (``db/leases.py``) while it does; one that finds it held
leaves the schedule to the holder. The merge itself is a compare-and-swap of the base
branch (``merging.py``), so nothing is ever merged twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from floorless.accounts.access import Policy, Viewer
from floorless.accounts.accounts import Account, Accounts
from floorless.collab.issues import Change, Issues
from floorless.collab.merging import Merger
from floorless.collab.protections import DisallowedToMerge
from floorless.collab.pulls import Pull, Pulls
from floorless.collab.statuses import Status
from floorless.core.background import Jobs
from floorless.core.errors import BadRequest, Conflict, FloorlessError, NotFound
from floorless.db import Database, Row
from floorless.db.leases import Leases
from floorless.git import merge as engine
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Registry, Repo

log = logging.getLogger(__name__)

SWEEP_SECONDS = 30.0  # how often every schedule is tried, for what no node was told of
REASON_MAX = 500  # characters of a failed merge's reason kept on the timeline
_SELECT = (
    "SELECT a.*, i.owner, i.name, i.number, d.name AS doer FROM pull_automerges a"
    " JOIN issues i ON i.id = a.issue_id JOIN accounts d ON d.id = a.doer_id"
)


@dataclass(frozen=True)
class Schedule:
    issue_id: int
    owner: str
    name: str
    number: int
    doer_id: int
    doer: str
    style: str
    message: str  # "" for Forgejo's words, worked out when it merges
    delete_branch: bool
    url: str  # the pull request's page, for the merge message's ``Reviewed-on``
    created_at: float


def _schedule(row: Row) -> Schedule:
    return Schedule(
        issue_id=int(row["issue_id"]),
        owner=row["owner"],
        name=row["name"],
        number=int(row["number"]),
        doer_id=int(row["doer_id"]),
        doer=row["doer"],
        style=row["style"],
        message=row["message"],
        delete_branch=bool(row["delete_branch"]),
        url=row["url"],
        created_at=float(row["created_at"]),
    )


class AutoMerge:
    def __init__(
        self,
        db: Database,
        issues: Issues,
        pulls: Pulls,
        accounts: Accounts,
        registry: Registry,
        policy: Policy,
        leases: Leases,
        merger: Merger,
        snapshot: Callable[[Repo], RefSnapshot],
    ) -> None:
        self.db = db
        self.issues = issues
        self.pulls = pulls
        self.accounts = accounts
        self.registry = registry
        self.policy = policy
        self.leases = leases
        self.merger = merger
        self.snapshot = snapshot
        self.last_sweep = 0.0  # (monotonic) 0: not yet, so a starting forge sweeps at once
        self.sweep_seconds = SWEEP_SECONDS
        self._jobs = Jobs(
            "automerge", log, (FloorlessError, pygit2.GitError, OSError, KeyError, ValueError)
        )
        pulls.on_merged.append(self.merged)
        pulls.on_head_moved.append(lambda pull: self.soon(pull.issue.id))
        issues.on_change.append(self.changed)

    # -- the schedule -----------------------------------------------------------------------

    def of(self, pull: Pull) -> Schedule | None:
        row = self.db.one(f"{_SELECT} WHERE a.issue_id = ?", (pull.issue.id,))
        return None if row is None else _schedule(row)

    def schedule(
        self,
        pull: Pull,
        doer: Account,
        style: str,
        message: str = "",
        delete_branch: bool = False,
        url: str = "",
    ) -> Schedule:
        """Schedule ``pull``'s merge as ``style`` by ``doer`` (who may merge it: the
        caller's), with its timeline event, and try it at once; ``Conflict`` (Forgejo's 409)
        when it is scheduled already."""
        if style not in engine.STYLES:
            raise BadRequest(f"no way to merge called {style[:40]!r}")
        now = time.time()
        with self.db.transaction():
            added = self.db.execute(
                "INSERT INTO pull_automerges (issue_id, doer_id, style, message, delete_branch,"
                " url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (issue_id) DO NOTHING",
                (pull.issue.id, doer.id, style, message, int(delete_branch), url, now),
            )
            if not added:
                raise Conflict(f"pull request #{pull.number} is scheduled to merge already")
            self.issues.event(pull.issue, doer, "automerge_scheduled", style, "", now)
        found = self.of(pull)
        assert found is not None
        self.soon(pull.issue.id)  # what it waited for may have come in meanwhile
        return found

    def cancel(self, pull: Pull, actor: Account) -> None:
        """Cancel ``pull``'s scheduled merge (who may is the caller's: the one who scheduled
        it, or anyone who may merge), with its timeline event; ``NotFound`` when none."""
        with self.db.transaction():
            gone = self.db.execute(
                "DELETE FROM pull_automerges WHERE issue_id = ?", (pull.issue.id,)
            )
            if not gone:
                raise NotFound(f"pull request #{pull.number} has no scheduled merge")
            self.issues.event(pull.issue, actor, "automerge_cancelled")

    def merged(self, pull: Pull, actor: Account | None) -> None:
        """``Pulls.on_merged``: a merged pull request's schedule goes, without an event."""
        self.db.execute("DELETE FROM pull_automerges WHERE issue_id = ?", (pull.issue.id,))

    def _drop(self, schedule: Schedule, pull: Pull, reason: str) -> None:
        """The merge failed: the schedule goes, with an event saying why (once, whichever
        thread or node gets here)."""
        doer = self.accounts.by_id(schedule.doer_id)
        with self.db.transaction():
            gone = self.db.execute(
                "DELETE FROM pull_automerges WHERE issue_id = ? AND created_at = ?",
                (schedule.issue_id, schedule.created_at),
            )
            if gone:
                self.issues.event(
                    pull.issue, doer, "automerge_cancelled", "failed", reason[:REASON_MAX]
                )
        log.info("%s/%s#%d: scheduled merge failed: %s", pull.owner, pull.name, pull.number, reason)

    # -- what may let a scheduled merge through ---------------------------------------------

    def soon(self, issue_id: int) -> None:
        """Try the schedule of the pull request whose issue is ``issue_id`` (if it has one) on
        the background thread."""
        self._jobs.queue(("try", issue_id), lambda: self.attempt(issue_id))

    def status_posted(self, repo: Repo, status: Status) -> None:
        """``Statuses.on_posted``: a ``success`` may be what the schedules of the pull
        requests whose head that commit is were waiting for (as Forgejo, only a status of the
        base repository counts)."""
        if status.state != "success":
            return
        owner, name, sha = repo.owner, repo.name, status.sha
        self._jobs.queue(("status", owner, name, sha), lambda: self._head_passed(owner, name, sha))

    def _head_passed(self, owner: str, name: str, sha: str) -> None:
        rows = self.db.query(
            "SELECT a.issue_id FROM pull_automerges a JOIN issues i ON i.id = a.issue_id"
            " JOIN pulls p ON p.issue_id = a.issue_id"
            " WHERE i.owner = ? AND i.name = ? AND p.head_oid = ?",
            (owner, name, sha),
        )
        for row in rows:
            self.soon(int(row["issue_id"]))

    def changed(self, change: Change) -> None:
        """``Issues.on_change``: a review submitted may be the approval a schedule waits for."""
        if change.action == "reviewed" and change.issue.is_pull:
            self.soon(change.issue.id)

    def sweep(self) -> int:
        """Queue a try of every schedule; how many there are."""
        self.last_sweep = time.monotonic()
        rows = self.db.query("SELECT issue_id FROM pull_automerges ORDER BY created_at")
        for row in rows:
            self.soon(int(row["issue_id"]))
        return len(rows)

    def tick(self) -> None:
        """From the maintenance loop: sweep when ``sweep_seconds`` have passed since the
        last sweep (at once on the first call)."""
        if not self.last_sweep or time.monotonic() - self.last_sweep >= self.sweep_seconds:
            self.sweep()

    # -- trying one -------------------------------------------------------------------------

    def attempt(self, issue_id: int) -> str:
        """Try the scheduled merge of the pull request whose issue is ``issue_id`` (see the
        module's docstring); what came of it: ``merged``, ``waiting`` (still scheduled),
        ``failed`` (dropped), ``busy`` (another node is at it) or ``none`` (no schedule)."""
        row = self.db.one(f"{_SELECT} WHERE a.issue_id = ?", (issue_id,))
        if row is None:
            return "none"
        schedule = _schedule(row)
        pull = self.pulls.get(schedule.owner, schedule.name, schedule.number)
        if pull.merged:
            self.merged(pull, None)
            return "merged"
        if pull.issue.state != "open":
            return "waiting"
        try:
            repo = self.registry.get(schedule.owner, schedule.name)
        except NotFound:
            return "waiting"
        doer = self.accounts.by_id(schedule.doer_id)
        if doer is None:
            return "waiting"
        viewer = Viewer(doer)
        if not self.policy.may_merge(viewer, self.policy.level(viewer, repo)):
            log.info("%s#%d: scheduled by %s, who may no longer merge", repo.full_name,
                     pull.number, doer.name)  # fmt: skip
            return "waiting"
        state = self.merger.check(repo, pull, self.snapshot(repo))
        if state == "merged":
            self.merged(pull, None)
            return "merged"
        if state != "mergeable":
            return "waiting"
        lease = f"automerge {issue_id}"
        if not self.leases.take(lease):
            return "busy"
        try:
            return self._merge(repo, schedule, doer)
        finally:
            self.leases.release(lease)

    def _merge(self, repo: Repo, schedule: Schedule, doer: Account) -> str:
        pull = self.pulls.get(schedule.owner, schedule.name, schedule.number)
        if self.of(pull) != schedule:  # cancelled (or scheduled anew) meanwhile
            return "none"
        try:
            self.merger.merge(
                repo,
                pull,
                doer,
                schedule.style,
                expected_head=pull.head_oid,
                delete_branch=schedule.delete_branch,
                url=schedule.url,
                message=schedule.message,
            )
        except DisallowedToMerge:
            return "waiting"
        except BadRequest as exc:  # the way to merge is no longer allowed
            self._drop(schedule, pull, str(exc))
            return "failed"
        except Conflict as exc:
            if isinstance(exc.__cause__, engine.MergeRefused):  # the head does not apply
                self._drop(schedule, pull, str(exc))
                return "failed"
            return "waiting"  # merged, closed or moved meanwhile: looked at again
        log.info("%s#%d: merged as scheduled by %s", repo.full_name, pull.number, doer.name)
        return "merged"

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        self._jobs.start()

    def stop(self) -> None:
        self._jobs.stop()

    def idle(self) -> bool:
        """Whether no try is queued or running (for tests)."""
        return self._jobs.idle()
