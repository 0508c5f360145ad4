"""Merging pull requests, and following the pushes to their heads and bases.

``Merger`` (``forge.merger``) does two things.

It follows pushes. ``queue`` is a listener of the ref-move hub (``repos/moves.py``), called
whenever the forge learns that a repository's refs moved; that only notes the repository, and
one background thread then, for that repository: moves the pull requests whose head branch it
holds to the branch's new tip (a ``pushed`` or ``force_pushed`` event; a fork's head is first
fetched into the base), marks those whose head branch is gone, and checks every open pull
request whose base it is -- whether the head merges cleanly and which files conflict, kept in
the pull's row for the pair of commits checked, so that a page reads it and never waits. A
pull request whose head the base branch reaches (someone merged it by hand and pushed) is
marked merged. All of it is idempotent and written by compare-and-swap, so two threads or two
nodes doing the same leave one record.

It merges. The result is computed in memory (``git/merge.py``), written as objects, and the
base branch moves by compare-and-swap with ``git update-ref <ref> <new> <old>``: git takes
the ref's lock file (the one ``git receive-pack`` takes for a push) and compares the old
value under it, so a push that landed on the base meanwhile makes the swap fail, and the merge
is computed again on the new base; no commit is ever lost. (libgit2 as pygit2 offers it has
no update that checks the old value under the lock.) The merge is written down in the pull's
row before the ref moves and recorded as done after: a process that dies between leaves a
base that reaches the intended commit, and the follower finishes the merge when it next
looks at the base.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pygit2

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.accounts import Account, Accounts
from floorless.collab.protections import (
    DisallowedToMerge,
    Protections,
    Rule,
    Verdict,
    checks,
    matching_files,
    merge_refusals,
)
from floorless.collab.pulls import Pull, Pulls
from floorless.collab.statuses import Statuses
from floorless.core.background import start as start_thread
from floorless.core.errors import BadRequest, Conflict, FloorlessError, GitCommandError, NotFound
from floorless.db import Database
from floorless.git import merge as engine
from floorless.git.env import GitEnvironment
from floorless.git.refs import RefSnapshot
from floorless.repos.forks import Forks
from floorless.repos.live import Live
from floorless.repos.moves import Moves
from floorless.repos.registry import Registry, Repo

log = logging.getLogger(__name__)

ATTEMPTS = 5  # computations of one merge while the base keeps moving under it
NAMES = {
    "merge": "Create merge commit",
    "rebase": "Rebase then fast-forward",
    "squash": "Create squash commit",
    "fast-forward-only": "Fast-forward only",
}


def signature(account: Account | None) -> pygit2.Signature:
    """Author and committer of what floorless writes for ``account``: their name and email,
    or ``name@floorless`` when they gave none."""
    if account is None:
        return pygit2.Signature("floorless", "floorless@floorless")
    return pygit2.Signature(account.name, account.email or f"{account.name}@floorless")


def merge_message(pull: Pull, url: str) -> str:
    """Forgejo's words for a merge commit."""
    text = (
        f"Merge pull request '{pull.title}' (#{pull.number}) from {pull.head_label}"
        f" into {pull.base_branch}\n"
    )
    return text + (f"\nReviewed-on: {url}\n" if url else "")


def squash_message(pull: Pull, handle: pygit2.Repository, base: str, head: str, url: str) -> str:
    """The title and number, then each squashed commit's message, oldest first."""
    bodies = []
    for each in engine.commits_between(handle, base, head):
        if len(each.parents) > 1:
            continue
        bodies.append("* " + each.message.strip())
    text = f"{pull.title} (#{pull.number})\n"
    if bodies:
        text += "\n" + "\n\n".join(bodies) + "\n"
    return text + (f"\nReviewed-on: {url}\n" if url else "")


class Merger:
    def __init__(
        self,
        db: Database,
        git: GitEnvironment,
        registry: Registry,
        accounts: Accounts,
        policy: Policy,
        pulls: Pulls,
        protections: Protections,
        statuses: Statuses,
        live: Live,
        moves: Moves,
        forks: Forks,
    ) -> None:
        self.db = db
        self.git = git
        self.registry = registry
        self.accounts = accounts
        self.policy = policy
        self.pulls = pulls
        self.protections = protections
        self.statuses = statuses
        self.live = live
        self.moves = moves
        self.forks = forks  # a fork's head is fetched into its base (``fork_head_moved``)
        self._queue: dict[int, Repo] = {}
        self._busy = False
        self._stopping = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._locks: dict[int, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        # Told of each merge done here: (pull, its head, the base branch's tip before it).
        self.on_merged: list[Callable[[Pull, str, str], None]] = []

    # -- the background thread ------------------------------------------------------------

    def start(self) -> None:
        self._thread = start_thread(self._run, "merger")

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def queue(self, repo: Repo, snapshot: RefSnapshot | None = None) -> None:
        """A ref listener: note ``repo`` for the thread, and return at once."""
        with self._cond:
            self._queue[repo.id] = repo
            self._cond.notify_all()

    def idle(self) -> bool:
        """Whether nothing is queued or being followed (for tests and for shutdown)."""
        with self._cond:
            return not self._queue and not self._busy

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                repo_id = next(iter(self._queue))
                repo = self._queue.pop(repo_id)
                self._busy = True
            try:
                self.follow(repo)
            except (FloorlessError, pygit2.GitError, OSError, KeyError, ValueError) as exc:
                log.warning("%s: following pull requests: %s", repo.full_name, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    # -- following pushes -----------------------------------------------------------------

    def follow(self, repo: Repo) -> None:
        """Take in the refs of ``repo`` as they are now (see the module's docstring)."""
        pulls = self.pulls
        snapshot = self.live.snapshot(repo)
        for pull in pulls.open_with_head(repo.owner, repo.name):
            if pull.agit:
                continue
            tip = snapshot.branches.get(pull.head_branch.encode())
            if tip is None:
                pulls.head_gone(pull)
                continue
            new = tip.hex()
            if new != pull.head_oid:
                if pull.same_repo:
                    self.follow_head(pull, new)
                else:
                    self.fork_head_moved(pull, new)
            elif pull.check_state == "head_gone":  # deleted, then pushed again as it was
                pulls.record_check(pull, "", new, "checking")
        for pull in pulls.open_with_base(repo.owner, repo.name):
            self.check(repo, pull, snapshot)

    def fork_head_moved(self, pull: Pull, new_oid: str) -> None:
        """The head branch of ``pull``, in a fork, moved to ``new_oid``, a commit the base may
        not have yet: fetch it into the base (``Forks.fetch_head_into_base``), then follow it."""
        try:
            base = self.registry.get(pull.owner, pull.name)
            head = self.registry.get(pull.head_owner, pull.head_name)
            self.forks.fetch_head_into_base(base, head, new_oid)
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("%s#%d: fetching its head: %s", pull.owner, pull.number, exc)
            return
        self.follow_head(pull, new_oid)

    def follow_head(self, pull: Pull, new_oid: str) -> bool:
        """The head of ``pull`` is now ``new_oid``, a commit the base repository has: record
        the move (once), then point ``refs/pull/N/head`` at whatever head the row holds
        after it -- the row first, so that a slower thread that saw an older tip, and lost
        the row's compare-and-swap, never moves the ref back. Whether this call moved it."""
        base = self.registry.get(pull.owner, pull.name)
        handle = self.live.open(base)
        try:
            forced = not engine.is_ancestor(handle, pull.head_oid, new_oid)
        except (KeyError, ValueError, pygit2.GitError):  # the old head is not here
            forced = True
        moved = self.pulls.moved_head(pull, new_oid, forced, None)
        now = self.pulls.get(pull.owner, pull.name, pull.number)
        ref = handle.references.get(pull.ref)
        if ref is None or str(ref.target) != now.head_oid:
            self.moves.set_pull_ref(base, pull.number, now.head_oid)
        return moved

    def check(self, repo: Repo, pull: Pull, snapshot: RefSnapshot) -> str:
        """Check ``pull`` (open, based in ``repo``) against its base branch's tip in
        ``snapshot``, unless the row holds a check of that very pair already; finish an
        interrupted merge, or mark the pull merged when the base reaches its head. The state
        found ("" when nothing could be checked)."""
        pulls = self.pulls
        tip = snapshot.branches.get(pull.base_branch.encode())
        if tip is None:
            return ""
        base, head = tip.hex(), pull.head_oid
        handle = self.live.open(repo)
        intended = pull.merged_oid
        if intended and self._has(handle, intended) and engine.is_ancestor(handle, intended, base):
            actor = self.accounts.get(pull.merged_by) if pull.merged_by else None
            pulls.mark_merged(pull, actor, intended, pull.merge_style)
            return "merged"
        if (pull.checked_base, pull.checked_head) == (base, head) and pull.checked:
            return pull.check_state  # this pair was checked (and found unmerged) already
        if not self._has(handle, head):  # a fork's head not fetched yet
            return ""
        if engine.is_ancestor(handle, head, base):
            pulls.mark_merged(pull, None, head, "push")
            return "merged"
        if pull.check_state == "head_gone":
            return pull.check_state
        found = engine.analyse(handle, base, head)
        pulls.record_check(pull, base, head, found.state, found.merge_base, found.conflicts)
        return found.state

    @staticmethod
    def _has(handle: pygit2.Repository, oid: str) -> bool:
        try:
            return engine.oid(oid) in handle
        except ValueError:
            return False

    # -- merging ------------------------------------------------------------------------------

    def _lock(self, repo: Repo) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(repo.id, threading.Lock())

    def merge(
        self,
        repo: Repo,
        pull: Pull,
        actor: Account,
        style: str,
        expected_base: str = "",
        expected_head: str = "",
        delete_branch: bool = False,
        url: str = "",
        message: str = "",
        force: bool = False,
    ) -> str:
        """Merge ``pull`` (based in ``repo``) as ``style``; the commit the base branch is at
        afterwards (hex). ``message``, when given, is the merge or squash commit's message in
        place of Forgejo's words (the API's ``MergeTitleField`` and ``MergeMessageField``).
        ``expected_base`` and ``expected_head`` are the commits the page showed: if either
        branch moved since, nothing moves and ``Conflict`` says so. Merges into one
        repository on this node take turns; one that finds its base moved by another (or by a
        push) is computed again on the new base. A base branch whose protection requires
        status checks takes a head whose checks pass (``required``), unless ``force`` and
        ``actor`` may force it."""
        features = self.pulls.features(repo.owner, repo.name)
        if style not in engine.STYLES:
            raise BadRequest(f"no way to merge called {style[:40]!r}")
        if style not in features.merge_styles:
            raise BadRequest(f"this repository does not allow “{NAMES[style]}”")
        handle = self.live.open(repo)
        base_ref = f"refs/heads/{pull.base_branch}"
        if expected_base and self._tip(handle, base_ref) != expected_base:
            raise Conflict(
                f"{pull.base_branch} has moved since this page was shown: look again, then merge"
            )
        with self._lock(repo):
            pull = self.pulls.get(pull.owner, pull.name, pull.number)
            if pull.merged:
                raise Conflict(f"pull request #{pull.number} is merged already")
            if pull.issue.state != "open":
                raise Conflict(f"pull request #{pull.number} is closed: reopen it to merge")
            head = self._current_head(pull)
            if head != pull.head_oid or (expected_head and head != expected_head):
                raise Conflict(
                    f"{pull.head_label} has moved since this page was shown: look again, then merge"
                )
            self.required(repo, pull, head, actor, force)
            result = ""
            for _ in range(ATTEMPTS):
                base = self._tip(handle, base_ref)
                if not base:
                    raise Conflict(f"the base branch {pull.base_branch} is gone")
                result = self._compute(handle, pull, style, base, head, actor, url, message)
                self.pulls.intend_merge(pull, actor, result, style)
                if self.swap(repo, base_ref, result, base):
                    break
                self.pulls.drop_intent(pull, result)
            else:
                raise Conflict(f"{pull.base_branch} kept moving: try again")
            self.moves.refs_moved(repo)
            self.finish(pull, actor, result, style)
        for listener in self.on_merged:
            try:
                listener(pull, head, base)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s#%d: after its merge: %s", pull.owner, pull.number, exc)
        if delete_branch:
            self._delete_head(repo, pull, actor, head)
        return result

    def required(self, repo: Repo, pull: Pull, head: str, actor: Account, force: bool) -> None:
        """Refuse (``DisallowedToMerge``, Forgejo's 405) a merge of ``head`` into a branch
        whose protection rule holds it: required checks, approvals, requests for changes, an
        outdated head, protected files, who may merge (``protections.merge_refusals``). An
        administrator the rule does not bind may force it past them (``force``)."""
        rule = self.protections.for_branch(repo, pull.base_branch)
        if rule is None:
            return
        policy, viewer = self.policy, Viewer(actor)
        level = policy.level(viewer, repo)
        found = None
        if rule.enable_status_check:
            found = checks(rule, self.statuses.latest(repo, head))
        handle = self.live.open(repo)
        base = self._tip(handle, f"refs/heads/{pull.base_branch}")
        outdated = False
        if rule.block_on_outdated_branch and base:
            outdated = not engine.is_ancestor(handle, base, head)
        protected: list[str] = []
        if rule.protected_file_patterns and base and rule.bound(level >= Level.ADMIN):
            protected = matching_files(
                rule.protected_file_patterns, engine.changed_paths(handle, base, head)
            )
        reasons = merge_refusals(
            rule, actor.name, found, self.verdicts(repo, pull, rule), head, outdated, protected
        )
        if not reasons:
            return
        if force and policy.may_force_merge(viewer, level, rule.apply_to_admins):
            log.info("%s: #%d merged past its rule by %s", repo.full_name, pull.number, actor.name)
            return
        raise DisallowedToMerge("; ".join(reasons))

    def verdicts(self, repo: Repo, pull: Pull, rule: Rule) -> list[Verdict]:
        """The latest approval or request for changes of each reviewer of ``pull``, and
        whether the rule counts it: theirs when it lists whose approvals count, else anyone's
        who may write to the repository."""
        rows = self.db.query(
            "SELECT a.name, r.state, r.commit_oid FROM reviews r"
            " JOIN accounts a ON a.id = r.author_id WHERE r.issue_id = ?"
            " AND r.submitted_at IS NOT NULL AND r.state IN ('approve', 'request_changes')"
            " ORDER BY r.submitted_at, r.id",
            (pull.issue.id,),
        )
        latest = {str(row["name"]): row for row in rows}
        listed = {n.lower() for n in rule.approvals_whitelist_username}
        found = []
        for name, row in latest.items():
            if rule.enable_approvals_whitelist:
                official = name.lower() in listed
            else:
                account = self.accounts.get(name)
                official = account is not None and (
                    self.policy.level(Viewer(account), repo) >= Level.WRITE
                )
            found.append(Verdict(name, str(row["state"]), str(row["commit_oid"]), official))
        return found

    def finish(self, pull: Pull, actor: Account, result: str, style: str) -> None:
        """Record the merge, once the base branch is at ``result``."""
        self.pulls.mark_merged(pull, actor, result, style)

    def _compute(
        self,
        handle: pygit2.Repository,
        pull: Pull,
        style: str,
        base: str,
        head: str,
        actor: Account,
        url: str,
        message: str = "",
    ) -> str:
        who = signature(actor)
        try:
            if style == "merge":
                text = message or merge_message(pull, url)
                return engine.make_merge(handle, base, head, text, who)
            if style == "squash":
                text = message or squash_message(pull, handle, base, head, url)
                return engine.make_squash(handle, base, head, text, who)
            if style == "rebase":
                return engine.make_rebase(handle, base, head, who)
            return engine.fast_forward(handle, base, head)
        except engine.MergeRefused as exc:
            raise Conflict(f"cannot merge: {exc}") from exc

    def _tip(self, handle: pygit2.Repository, ref: str) -> str:
        """The commit ``ref`` is at (hex); "" when there is no such ref (or no such name)."""
        try:
            found = handle.references.get(ref)
            return "" if found is None else str(found.resolve().target)
        except (ValueError, KeyError, pygit2.GitError):
            return ""

    def _current_head(self, pull: Pull) -> str:
        """The head as its branch (or, for AGit, ``refs/pull/N/head``) holds it now."""
        if pull.agit:
            return pull.head_oid
        try:
            head_repo = self.registry.get(pull.head_owner, pull.head_name)
        except NotFound as exc:
            raise Conflict("the head's repository is gone") from exc
        tip = self._tip(self.live.open(head_repo), f"refs/heads/{pull.head_branch}")
        if not tip:
            raise Conflict(f"the head branch {pull.head_branch} is gone")
        return tip

    def swap(self, repo: Repo, ref: str, new: str, old: str) -> bool:
        """Move ``ref`` from ``old`` to ``new`` if it is still at ``old`` (see the module's
        docstring); False when it is not (or its lock is held by a push right now)."""
        try:
            self.git.run(repo.path, ["update-ref", ref, new, old])
        except GitCommandError as exc:
            log.info("%s: %s did not move: %s", repo.full_name, ref, exc)
            return False
        return True

    def _delete_head(self, repo: Repo, pull: Pull, actor: Account, head: str) -> None:
        """Delete the merged head branch, if it is still where it was merged from, the
        merger may push to its repository, no open pull request is based on it, and no rule
        protects it."""
        if pull.agit:
            return
        try:
            head_repo = self.registry.get(pull.head_owner, pull.head_name)
        except NotFound:
            return
        if self.policy.level(Viewer(actor), head_repo) < Level.WRITE:
            return
        if self.live.snapshot(head_repo).default_branch == pull.head_branch.encode():
            return
        based = self.pulls.open_with_base(head_repo.owner, head_repo.name)
        if any(other.base_branch == pull.head_branch for other in based):
            return
        if self.protections.for_branch(head_repo, pull.head_branch) is not None:
            log.info("%s: protected head branch %s kept", head_repo.full_name, pull.head_branch)
            return  # a protected branch is never deleted, by a merge neither
        try:
            branch = f"refs/heads/{pull.head_branch}"
            self.git.run(head_repo.path, ["update-ref", "-d", branch, head])
        except GitCommandError as exc:
            log.info("%s: head branch not deleted: %s", head_repo.full_name, exc)
            return
        self.pulls.issues.event(pull.issue, actor, "head_deleted", "", pull.head_branch)
        self.moves.refs_moved(head_repo)
