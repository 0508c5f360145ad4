"""The payloads of the events webhooks are sent (Forgejo's ``PushPayload``, ``CreatePayload``,
``DeletePayload``, ``IssuePayload``, ``PullRequestPayload``, ``IssueCommentPayload``,
``ForkPayload``, ``ReleasePayload``), and where a push's events come from.

A push over HTTP names its updates in the first lines of its body (``old new ref``, git's
receive-pack commands): ``commands`` reads them from the piece the gateway already holds,
so no hook process runs. When git is done, ``pushed`` keeps those whose ref now is at the new
id (git applied them), and only if the repository (or its organisation) has a hook does it
queue the work: the payloads, with each commit's added, removed and modified files, are
computed with pygit2 on a background thread, never in the push's request. A tag made or
deleted through the API or by publishing a release (``Tagged``) is sent as the push of it would
be: ``create`` and ``push``, or ``delete``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict

import pygit2

from floorless.accounts.access import ANONYMOUS, Viewer
from floorless.accounts.accounts import Account
from floorless.collab.forks import Forked
from floorless.collab.issues import Change, Issues
from floorless.collab.releases import ReleaseChange, Releases, Tagged
from floorless.core.background import Jobs
from floorless.core.config import Settings
from floorless.core.errors import FloorlessError
from floorless.forgejo import urls
from floorless.forgejo.git import Links, PayloadCommit, payload_commit
from floorless.forgejo.issues import GHOST, Comment, Issue, IssueFacts, comment_json, issue_json
from floorless.forgejo.people import (
    Person,
    RepoFacts,
    Repository,
    User,
    person,
    repo_json,
    user_json,
)
from floorless.forgejo.pulls import PullFacts, PullRequest, PullSources, pull_json
from floorless.forgejo.releases import Release, ReleaseSources, releases_json
from floorless.git import objects
from floorless.repos.registry import Repo
from floorless.webhooks.delivery import Webhooks
from floorless.webhooks.hooks import Hook

log = logging.getLogger(__name__)

MAX_COMMITS = 20  # commits a push payload lists (the newest); total_commits counts them all
MAX_COUNTED = 10_000  # commits counted for total_commits, at most
MAX_COMMANDS = 1000


class EventSources(PullSources, ReleaseSources, Protocol):
    """What the payloads read besides the API's shapes' sources: the forge's settings (its
    public URL), the hooks and their deliveries, the thread payloads are made on, the
    issues, the releases, and a repository's handle. The forge is one (taken by structure)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def webhooks(self) -> Webhooks: ...

    @property
    def hook_events(self) -> Jobs: ...

    @property
    def issues(self) -> Issues: ...

    @property
    def releases(self) -> Releases: ...

    def open(self, repo: Repo) -> pygit2.Repository: ...


@dataclass(frozen=True)
class Update:
    old: str
    new: str
    ref: str

    @property
    def created(self) -> bool:
        return set(self.old) == {"0"}

    @property
    def deleted(self) -> bool:
        return set(self.new) == {"0"}


def commands(first: bytes) -> list[Update]:
    """The updates a receive-pack request's body begins with, as far as ``first`` holds them
    (pkt-lines up to the first flush)."""
    found: list[Update] = []
    at = 0
    while at + 4 <= len(first) and len(found) < MAX_COMMANDS:
        try:
            size = int(first[at : at + 4], 16)
        except ValueError:
            break
        if size < 4 or at + size > len(first):  # a flush, or cut off
            break
        line = first[at + 4 : at + size].split(b"\0", 1)[0].rstrip(b"\n")
        at += size
        parts = line.decode("utf-8", "replace").split(" ", 2)
        if len(parts) == 3 and parts[2].startswith(("refs/heads/", "refs/tags/")):
            found.append(Update(*parts))
    return found


def org_of(forge: EventSources, repo: Repo) -> int | None:
    owner = person(forge.db, repo.owner)
    return owner.id if owner is not None and owner.is_org else None


def pushed(
    forge: EventSources, repo: Repo, account: Account | None, updates: list[Update], public: str
) -> None:
    """After a push: queue the events of the updates git applied, if any hook may want them."""
    if account is None or not updates:
        return
    hooks = forge.webhooks.targets(repo.id, org_of(forge, repo))
    if not any(h.active for h in hooks):
        return
    handle = forge.open(repo)
    applied = []
    for update in updates:
        ref = handle.references.get(update.ref)
        now = str(ref.target) if ref is not None else "0" * len(update.new)
        if now == update.new:
            applied.append(update)
    if not applied:
        return
    # the other branches as the push left them: a new branch's commits are those none of
    # them has (read now, not when the payload is made, after later pushes)
    tips: dict[str, pygit2.Oid] = {}
    if any(u.created for u in applied):
        for name in handle.branches.local:
            try:
                target = handle.references[f"refs/heads/{name}"].target
            except (KeyError, ValueError, pygit2.GitError):
                continue
            if isinstance(target, pygit2.Oid):
                tips[f"refs/heads/{name}"] = target
    key = ("push", repo.id, tuple(applied))
    forge.hook_events.queue(
        key, lambda: send_push(forge, repo, account, applied, public, hooks, tips)
    )


def send_push(
    forge: EventSources,
    repo: Repo,
    account: Account,
    updates: list[Update],
    public: str,
    hooks: list[Hook],
    tips: dict[str, pygit2.Oid] | None = None,
) -> None:
    """The create, delete and push events of one push's updates, queued for ``hooks``
    (``tips``: the branches when the push ended)."""
    handle = forge.open(repo)
    links = Links(public, repo)
    pusher = _user(forge, account, public)
    repository = repo_json(repo, RepoFacts(forge, Viewer(account=account), [repo]), public)
    for update in updates:
        tag = update.ref.startswith("refs/tags/")
        short = update.ref.removeprefix("refs/tags/" if tag else "refs/heads/")
        kind = "tag" if tag else "branch"
        branch = None if tag else short
        if update.deleted:
            deleted: DeletePayload = {
                "ref": short,
                "ref_type": kind,
                "pusher_type": "user",
                "repository": repository,
                "sender": pusher,
            }
            forge.webhooks.emit(hooks, "delete", deleted, branch=branch)
            continue
        try:
            head = handle[pygit2.Oid(hex=update.new)].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            log.warning("%s: %s is no commit: %s", repo.full_name, update.ref, exc)
            continue
        if update.created:
            created: CreatePayload = {
                "sha": str(head.id),
                "ref": short,
                "ref_type": kind,
                "repository": repository,
                "sender": pusher,
            }
            forge.webhooks.emit(hooks, "create", created, branch=branch)
        listed, total = ([], 0) if tag else _commits(handle, update, head, tips or {})
        names = _usernames(forge, [head, *listed])
        commits = [commit_json(handle, links, c, names) for c in reversed(listed)]
        before = update.old
        payload: PushPayload = {
            "ref": update.ref,
            "before": before,
            "after": update.new,
            "compare_url": (
                public + urls.compare(repo, before, update.new) if not update.created else ""
            ),
            "commits": commits,
            "total_commits": total,
            "head_commit": commit_json(handle, links, head, names),
            "repository": repository,
            "pusher": pusher,
            "sender": pusher,
        }
        # a tag's push meets the branch filter by its full name, as on Forgejo (which takes
        # what follows refs/heads/ for the branch: nothing is cut from refs/tags/...)
        forge.webhooks.emit(hooks, "push", payload, branch=branch or update.ref)


def test_payload(
    forge: EventSources, repo: Repo, account: Account, public: str
) -> PushPayload | None:
    """Forgejo's test delivery: a push of the default branch's last commit onto itself."""
    snapshot = forge.snapshot(repo)
    branch = snapshot.default_branch
    if branch is None or branch not in snapshot.branches:
        return None
    handle = forge.open(repo)
    head = handle[pygit2.Oid(raw=snapshot.branches[branch])].peel(pygit2.Commit)
    names = _usernames(forge, [head])
    shown = commit_json(handle, Links(public, repo), head, names)
    pusher = _user(forge, account, public)
    sha = str(head.id)
    return {
        "ref": "refs/heads/" + branch.decode("utf-8", "replace"),
        "before": sha,
        "after": sha,
        "compare_url": public + urls.compare(repo, sha, sha),
        "commits": [shown],
        "total_commits": 1,
        "head_commit": shown,
        "repository": repo_json(repo, RepoFacts(forge, Viewer(account=account), [repo]), public),
        "pusher": pusher,
        "sender": pusher,
    }


def _user(forge: EventSources, account: Account, public: str) -> User:
    who = person(forge.db, account.name) or Person(
        account.id, account.name, "user", account.email or "", False, None
    )
    return user_json(who, ANONYMOUS, public)


def _commits(
    handle: pygit2.Repository, update: Update, head: pygit2.Commit, tips: dict[str, pygit2.Oid]
) -> tuple[list[pygit2.Commit], int]:
    """The newest ``MAX_COMMITS`` commits the push brought to its branch (newest first) and
    how many it brought: those the old tip lacks; for a new branch, those no other branch has."""
    walker = handle.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
    try:
        if not update.created:
            walker.hide(pygit2.Oid(hex=update.old))
        else:
            for ref, tip in tips.items():
                if ref != update.ref:
                    walker.hide(tip)
    except (KeyError, ValueError, pygit2.GitError):
        pass  # the old tip is gone (a forced push pruned?): the walk goes on unbounded
    listed: list[pygit2.Commit] = []
    total = 0
    for commit in walker:
        total += 1
        if len(listed) < MAX_COMMITS:
            listed.append(commit)
        if total >= MAX_COUNTED:
            break
    return listed, total


def _usernames(forge: EventSources, commits: list[pygit2.Commit]) -> dict[str, str]:
    """The accounts whose address authored or committed ``commits``, by lower-cased address."""
    emails = set()
    for commit in commits:
        for sig in (commit.author, commit.committer):
            emails.add(sig.raw_email.decode("utf-8", "replace").lower())
    wanted = sorted(emails)[:200]
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    rows = forge.db.query(
        f"SELECT name, email FROM accounts WHERE lower(email) IN ({marks})",  # noqa: S608
        wanted,
    )
    return {str(r["email"]).lower(): str(r["name"]) for r in rows}


def commit_json(
    handle: pygit2.Repository, links: Links, commit: pygit2.Commit, names: dict[str, str]
) -> PayloadCommit:
    """Forgejo's ``PayloadCommit``, with the files the commit added, removed and modified
    (against its first parent)."""
    shown = payload_commit(links, objects.commit_info(commit))
    for key in ("author", "committer"):
        shown[key]["username"] = names.get(shown[key]["email"].lower(), "")
    shown["verification"] = None
    added: list[str] = []
    removed: list[str] = []
    modified: list[str] = []
    try:
        if commit.parents:
            diff = commit.parents[0].tree.diff_to_tree(commit.tree)
        else:
            diff = commit.tree.diff_to_tree(swap=True)
    except pygit2.GitError as exc:
        raise FloorlessError(f"cannot compare commit {commit.id}: {exc}") from exc
    for delta in diff.deltas:
        status = delta.status
        if status == pygit2.enums.DeltaStatus.ADDED:
            added.append(delta.new_file.path)
        elif status == pygit2.enums.DeltaStatus.DELETED:
            removed.append(delta.old_file.path)
        else:
            modified.append(delta.new_file.path)
    shown["added"], shown["removed"], shown["modified"] = added, removed, modified
    return shown


# -- issues and pull requests -------------------------------------------------------------------


def base_url(forge: EventSources) -> str:
    """The forge's public URL with no request to go by: ``base_url``, else where it listens."""
    settings = forge.settings
    return settings.base_url.rstrip("/") or f"http://{settings.host}:{settings.port}"


Event = Change | Forked | ReleaseChange | Tagged


def event(forge: EventSources, change: Event) -> None:
    """The webhook event of ``change`` (``Forge.changed``), queued for the hooks that want
    it: ``fork_event``, ``release_event``, ``tag_event`` or ``issue_event``."""
    if isinstance(change, Forked):
        fork_event(forge, change)
    elif isinstance(change, ReleaseChange):
        release_event(forge, change)
    elif isinstance(change, Tagged):
        tag_event(forge, change)
    else:
        issue_event(forge, change)


def release_event(forge: EventSources, change: ReleaseChange) -> None:
    """Forgejo's ``ReleasePayload`` (``published``, ``updated``, ``deleted``): the release as
    it was when changed, its files as they are (a deleted one's as they were)."""
    release = change.release
    repo = forge.registry.by_id(release.repo_id)
    if repo is None:
        return
    hooks = forge.webhooks.targets(repo.id, org_of(forge, repo))
    if not any(h.active for h in hooks):
        return
    public = base_url(forge)
    account = forge.accounts.by_id(change.actor_id) if change.actor_id is not None else None
    viewer = Viewer(account=account)
    assets = None if change.assets is None else {release.id: change.assets}
    payload: ReleasePayload = {
        "action": change.action,
        "release": releases_json(forge, viewer, repo, [release], public, assets)[0],
        "repository": repo_json(repo, RepoFacts(forge, viewer, [repo]), public),
        "sender": _user(forge, account, public) if account else _ghost(forge, public),
    }
    forge.webhooks.emit(hooks, "release", payload, action=change.action)


def tag_event(forge: EventSources, tagged: Tagged) -> None:
    """A tag made or deleted through the API or by a release, sent as its push would be
    (``send_push``: ``create`` and ``push``, or ``delete``)."""
    repo = tagged.repo
    hooks = forge.webhooks.targets(repo.id, org_of(forge, repo))
    if not any(h.active for h in hooks):
        return
    account = forge.accounts.by_id(tagged.actor_id) if tagged.actor_id is not None else None
    if account is None:  # (a push's events name their pusher: none without one)
        log.info("%s: %s moved by no one known: no event", repo.full_name, tagged.ref)
        return
    update = Update(tagged.old, tagged.new, tagged.ref)
    send_push(forge, repo, account, [update], base_url(forge), hooks)


def fork_event(forge: EventSources, forked: Forked) -> None:
    """Forgejo's ``ForkPayload``, to the parent's hooks: ``forkee`` the parent, ``repo`` the
    fork."""
    parent = forked.parent
    hooks = forge.webhooks.targets(parent.id, org_of(forge, parent))
    if not any(h.active for h in hooks):
        return
    public = base_url(forge)
    viewer = Viewer(account=forked.account)
    both = RepoFacts(forge, viewer, [parent, forked.fork])
    payload: ForkPayload = {
        "forkee": repo_json(parent, both, public),
        "repo": repo_json(forked.fork, both, public),
        "sender": _user(forge, forked.account, public),
    }
    forge.webhooks.emit(hooks, "fork", payload)


_REVIEWED = {
    "approve": "pull_request_review_approved",
    "request_changes": "pull_request_review_rejected",
    "comment": "pull_request_review_comment",
}


def issue_event(forge: EventSources, change: Change) -> None:
    """The webhook event of ``change`` (``Issues.on_change``), as Forgejo's ``IssuePayload``,
    ``PullRequestPayload`` or ``IssueCommentPayload``, queued for the hooks that want it.
    A repository without hooks costs one statement."""
    old = change.issue
    repo = forge.registry.get(old.owner, old.name)
    hooks = forge.webhooks.targets(repo.id, org_of(forge, repo))
    if not any(h.active for h in hooks):
        return
    issue = forge.issues.get(old.owner, old.name, old.number, pull=old.is_pull)
    public = base_url(forge)
    viewer = Viewer(account=change.actor)
    sender = _user(forge, change.actor, public) if change.actor else _ghost(forge, public)
    repository = repo_json(repo, RepoFacts(forge, viewer, [repo]), public)
    action = "closed" if change.action == "merged" else change.action
    if change.comment_id is not None:
        comment = forge.issues.comment_by_id(repo.owner, repo.name, change.comment_id)
        facts = IssueFacts(forge, viewer, repo, public, [issue], [comment.author], [comment])
        comment_payload: IssueCommentPayload = {
            "action": "created",
            "issue": issue_json(issue, facts),
            "comment": comment_json(comment, facts),
            "repository": repository,
            "sender": sender,
            "is_pull": issue.is_pull,
        }
        if issue.is_pull:
            comment_payload["pull_request"] = _pull(forge, repo, viewer, public, issue.number)
        kind = "pull_request_comment" if issue.is_pull else "issue_comment"
        forge.webhooks.emit(hooks, kind, comment_payload, action="created")
        return
    if issue.is_pull:
        review = None
        kind = "pull_request_sync" if action == "synchronized" else "pull_request"
        if change.review_id is not None:
            row = forge.db.one("SELECT state, body FROM reviews WHERE id = ?", (change.review_id,))
            if row is None or row["state"] not in _REVIEWED:
                return
            kind = _REVIEWED[row["state"]]
            review = ReviewPayload(type=kind, content=row["body"])
        pull_payload: PullRequestPayload = {
            "action": action,
            "number": issue.number,
            "pull_request": _pull(forge, repo, viewer, public, issue.number),
            "requested_reviewer": None,
            "repository": repository,
            "sender": sender,
            "commit_id": "",
            "review": review,
        }
        forge.webhooks.emit(hooks, kind, pull_payload, action=action)
        return
    facts = IssueFacts(forge, viewer, repo, public, [issue])
    payload: IssuePayload = {
        "action": action,
        "number": issue.number,
        "issue": issue_json(issue, facts),
        "repository": repository,
        "sender": sender,
        "commit_id": "",
    }
    forge.webhooks.emit(hooks, "issues", payload, action=action)


def _pull(forge: EventSources, repo: Repo, viewer: Viewer, public: str, number: int) -> PullRequest:
    pull = forge.pulls.get(repo.owner, repo.name, number)
    facts = PullFacts(forge, viewer, repo, forge.snapshot(repo), forge.open(repo), [pull], public)
    return pull_json(facts, pull)


def _ghost(forge: EventSources, public: str) -> User:
    return user_json(GHOST, ANONYMOUS, public)


# Forgejo's payloads as this module makes them (its ``modules/structs/hook.go``); webhooks
# are not in the API's description, so these are held by mypy alone.


class CreatePayload(TypedDict):
    """Forgejo's ``CreatePayload``: a branch or tag made."""

    sha: str
    ref: str
    ref_type: str
    repository: Repository
    sender: User


class DeletePayload(TypedDict):
    """Forgejo's ``DeletePayload``: a branch or tag deleted."""

    ref: str
    ref_type: str
    pusher_type: str
    repository: Repository
    sender: User


class ReleasePayload(TypedDict):
    """Forgejo's ``ReleasePayload``: a release ``published``, ``updated`` or ``deleted``."""

    action: str
    release: Release
    repository: Repository
    sender: User


class PushPayload(TypedDict):
    """Forgejo's ``PushPayload``: the commits a ref moved by (the newest ``MAX_COMMITS``)."""

    ref: str
    before: str
    after: str
    compare_url: str
    commits: list[PayloadCommit]
    total_commits: int
    head_commit: PayloadCommit
    repository: Repository
    pusher: User
    sender: User


class ForkPayload(TypedDict):
    """Forgejo's ``ForkPayload``: ``forkee`` the parent, ``repo`` the fork."""

    forkee: Repository
    repo: Repository
    sender: User


class IssueCommentPayload(TypedDict):
    """Forgejo's ``IssueCommentPayload`` (of a pull request's conversation too)."""

    action: str
    issue: Issue
    comment: Comment
    repository: Repository
    sender: User
    is_pull: bool
    pull_request: NotRequired[PullRequest]


class ReviewPayload(TypedDict):
    """Forgejo's ``ReviewPayload``: a review's kind and text."""

    type: str
    content: str


class PullRequestPayload(TypedDict):
    """Forgejo's ``PullRequestPayload``."""

    action: str
    number: int
    pull_request: PullRequest
    requested_reviewer: User | None
    repository: Repository
    sender: User
    commit_id: str
    review: ReviewPayload | None


class IssuePayload(TypedDict):
    """Forgejo's ``IssuePayload``."""

    action: str
    number: int
    issue: Issue
    repository: Repository
    sender: User
    commit_id: str
