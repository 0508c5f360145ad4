"""Pull requests as Forgejo's API shapes them: PullRequest (with its two PRBranchInfo),
ChangedFile, PullReview and PullReviewComment. Field names and types follow Forgejo's swagger
(pyforgejo's models check them in the tests); every URL is absolute.

What a pull request's JSON needs besides its rows is read for a whole page at once (its
repositories and their facts, its review comment counts, and its labels, milestone,
assignees and people as ``issueshapes.IssueFacts`` reads them for issues): a few
statements whatever the page's length. ``mergeable`` is what the background check last
found for the pair of commits now at the base and the head; a read never computes a merge
(a pair not checked yet is queued, as the pull request's page queues it, and is not
mergeable meanwhile). The line counts are the in-process diff's of the merge base to the
head, kept by that pair of commit ids (``ShapeCaches``): a page of pull requests shown again
diffs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypedDict, cast

import pygit2

from floorless.accounts.access import Level, Viewer
from floorless.collab.merging import Merger
from floorless.collab.pulls import Pull
from floorless.collab.reviews import Review, ReviewComment, Reviews
from floorless.core.errors import BadRequest, NotFound
from floorless.db import Database
from floorless.forgejo import urls
from floorless.forgejo.caches import ShapeCaches
from floorless.forgejo.git import text
from floorless.forgejo.issues import (
    DRAFT_PREFIXES,
    IssueFacts,
    IssueSources,
    Label,
    Milestone,
    Team,
    label_json,
    milestone_json,
)
from floorless.forgejo.people import RepoFacts, Repository, RepoSources, User, repo_json, rfc3339
from floorless.forgejo.schema import DateTime
from floorless.git import diff as gitdiff
from floorless.git import objects
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Repo

# The diff a pull request's counts and files are read from: as many files as a commit's
# API answer lists, no lines kept (only their counts).
STAT_LIMITS = gitdiff.Limits(files=300, lines_per_file=0, lines_total=0)
_FILE_STATUS = {"added": "added", "deleted": "deleted", "renamed": "renamed", "copied": "copied"}
REVIEW_STATES = {
    "pending": "PENDING",
    "comment": "COMMENT",
    "approve": "APPROVED",
    "request_changes": "REQUEST_CHANGES",
}


def range_changes(
    caches: ShapeCaches, handle: pygit2.Repository, merge_base: str, head: str
) -> gitdiff.CommitDiff:
    """The files the pull request changes (merge base to head) with their line counts,
    kept by the pair of commit ids."""
    return cast(
        gitdiff.CommitDiff,
        caches.diffs.get_or_make(
            ("api-range", merge_base, head),
            lambda: gitdiff.range_diff(
                handle,
                objects.get_commit(handle, bytes.fromhex(merge_base)),
                objects.get_commit(handle, bytes.fromhex(head)),
                STAT_LIMITS,
            ),
        ),
    )


class PullSources(RepoSources, IssueSources, Protocol):
    """What a page of pull requests' JSON reads besides its repositories' and issues': the
    background merge check (a pair not checked yet is queued), the merge bases the reviews
    keep, and the API's caches by commit ids. The forge is one (taken by structure)."""

    @property
    def merger(self) -> Merger: ...

    @property
    def reviews(self) -> Reviews: ...

    @property
    def shapes(self) -> ShapeCaches: ...


class PullFacts:
    """What the PullRequest JSON of a page of pull requests of one repository needs."""

    def __init__(
        self,
        forge: PullSources,
        viewer: Viewer,
        repo: Repo,
        snapshot: RefSnapshot,
        handle: pygit2.Repository,
        pulls: Sequence[Pull],
        public: str,
        names: Iterable[str] = (),
    ) -> None:
        self.forge = forge
        self.viewer = viewer
        self.repo = repo
        self.snapshot = snapshot
        self.handle = handle
        self.public = public
        repos: dict[tuple[str, str], Repo | None] = {(repo.owner, repo.name): repo}
        for pull in pulls:
            key = (pull.head_owner, pull.head_name)
            if key not in repos:
                try:
                    repos[key] = forge.registry.get(*key)
                except NotFound:
                    repos[key] = None
        self.repos = repos
        found = [r for r in repos.values() if r is not None]
        self.repo_facts = RepoFacts(forge, viewer, found)
        # labels, assignees, milestones and people as the issues' JSON reads them
        self.issues = IssueFacts(
            forge,
            viewer,
            repo,
            public,
            [p.issue for p in pulls],
            [*names, *(p.merged_by for p in pulls)],
        )
        self.review_comments = _review_comment_counts(forge.db, [p.issue.id for p in pulls])
        self._repo_json: dict[tuple[str, str], Repository | None] = {}

    def user(self, name: str) -> User:
        return self.issues.user(name)

    def repository(self, owner: str, name: str) -> tuple[int, Repository | None]:
        """A side's repository id and JSON; None for one gone, or one the caller may not
        read (a private fork's head names no more of it than its label does)."""
        repo = self.repos.get((owner, name))
        if repo is None:
            return 0, None
        if (owner, name) not in self._repo_json:
            readable = self.repo_facts.level(repo) >= Level.READ
            self._repo_json[(owner, name)] = (
                repo_json(repo, self.repo_facts, self.public) if readable else None
            )
        return repo.id, self._repo_json[(owner, name)]


def _review_comment_counts(db: Database, ids: list[int]) -> dict[int, int]:
    """Submitted review comments of each pull request (by issue id)."""
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    rows = db.query(
        "SELECT c.issue_id, COUNT(*) AS n FROM review_comments c JOIN reviews r"  # noqa: S608
        f" ON r.id = c.review_id WHERE r.state <> 'pending' AND c.issue_id IN ({marks})"
        " GROUP BY c.issue_id",
        ids,
    )
    return {int(row["issue_id"]): int(row["n"]) for row in rows}


def mergeable(merger: Merger, repo: Repo, pull: Pull, base_tip: str) -> bool:
    """Whether the last check found the pair now at the base and the head mergeable; a pair
    not checked yet is queued for the background check (which costs the read nothing)."""
    if pull.merged or pull.issue.state != "open" or not base_tip:
        return False
    if pull.checked and (pull.checked_base, pull.checked_head) == (base_tip, pull.head_oid):
        return pull.check_state == "mergeable"
    if pull.check_state != "head_gone":
        merger.queue(repo)
    return False


def pull_json(facts: PullFacts, pull: Pull) -> PullRequest:
    """Forgejo's ``PullRequest``: its labels, milestone and people as its ``Issue`` shows
    them (``issueshapes.py``)."""
    repo, issue = facts.repo, pull.issue
    html = facts.public + urls.pull(repo, pull.number)
    tip = facts.snapshot.branches.get(pull.base_branch.encode())
    base_tip = "" if tip is None else tip.hex()
    merge_base = pull.merge_base
    additions = deletions = changed = 0
    if not merge_base and base_tip:
        merge_base = _merge_base(facts, base_tip, pull.head_oid)
    if merge_base:
        try:
            counted = range_changes(facts.forge.shapes, facts.handle, merge_base, pull.head_oid)
        except (KeyError, ValueError, pygit2.GitError):
            pass  # a head not here (yet): no counts
        else:
            additions, deletions, changed = (
                counted.additions,
                counted.deletions,
                counted.total_files,
            )
    base_id, base_repo = facts.repository(repo.owner, repo.name)
    head_id, head_repo = facts.repository(pull.head_owner, pull.head_name)
    assignees = [facts.user(name) for name in facts.issues.assignees.get(issue.id, [])]
    milestone = facts.issues.milestones.get(issue.id)
    return {
        "id": issue.id,
        "url": html,
        "number": pull.number,
        "user": facts.user(issue.author),
        "title": issue.title,
        "body": issue.body,
        "labels": [
            label_json(label, repo, facts.public) for label in facts.issues.labels.get(issue.id, [])
        ],
        "milestone": None if milestone is None else milestone_json(milestone),
        "assignee": assignees[0] if assignees else None,
        "assignees": assignees,
        "requested_reviewers": [],
        "requested_reviewers_teams": [],
        "state": "open" if issue.state == "open" else "closed",
        "draft": issue.title.lower().startswith(DRAFT_PREFIXES),
        "is_locked": False,
        "comments": issue.comments,
        "review_comments": facts.review_comments.get(issue.id, 0),
        "additions": additions,
        "deletions": deletions,
        "changed_files": changed,
        "html_url": html,
        "diff_url": facts.public + urls.pull_diff(repo, pull.number, "diff"),
        "patch_url": facts.public + urls.pull_diff(repo, pull.number, "patch"),
        "mergeable": mergeable(facts.forge.merger, repo, pull, base_tip),
        "merged": pull.merged,
        "merged_at": rfc3339(pull.merged_at) if pull.merged else None,
        "merge_commit_sha": pull.merged_oid if pull.merged else None,
        "merged_by": facts.user(pull.merged_by) if pull.merged else None,
        "allow_maintainer_edit": False,
        "base": {
            "label": pull.base_branch,
            "ref": pull.base_branch,
            "sha": base_tip,
            "repo_id": base_id,
            "repo": base_repo,
        },
        "head": {
            "label": pull.head_label,
            "ref": pull.head_branch or pull.ref,
            "sha": pull.head_oid,
            "repo_id": head_id,
            "repo": head_repo,
        },
        "merge_base": merge_base,
        "due_date": None,
        "created_at": rfc3339(issue.created_at),
        "updated_at": rfc3339(issue.updated_at),
        "closed_at": rfc3339(issue.closed_at) if issue.closed_at else None,
        "pin_order": 0,
        "flow": 1 if pull.agit else 0,
    }


def _merge_base(facts: PullFacts, base_tip: str, head: str) -> str:
    """The merge base of a pair the background check has not seen yet (kept by the pair in
    the reviews' cache, which the pull request's pages read too)."""
    try:
        pull_base = facts.forge.reviews.merge_bases.get_or_make(
            (base_tip, head),
            lambda: str(
                facts.handle.merge_base(pygit2.Oid(hex=base_tip), pygit2.Oid(hex=head)) or ""
            ),
        )
    except (KeyError, ValueError, pygit2.GitError, BadRequest):
        return ""
    return pull_base


def changed_file(public: str, repo: Repo, head: str, item: gitdiff.FileDiff) -> ChangedFile:
    """One file of ``pulls/{n}/files`` (Forgejo's ``ChangedFile``)."""
    name = item.new_path if item.status != "deleted" else item.old_path
    added, deleted = item.additions or 0, item.deletions or 0
    shown_at = item.old_path if item.status == "deleted" else item.new_path
    return {
        "filename": text(name),
        "previous_filename": text(item.old_path) if item.status == "renamed" else "",
        "status": _FILE_STATUS.get(item.status, "changed"),
        "additions": added,
        "deletions": deleted,
        "changes": added + deleted,
        "html_url": public + urls.src(repo, "commit", head, shown_at),
        "contents_url": public + urls.api_contents(repo, shown_at, head),
        "raw_url": public + urls.raw(repo, "commit", head, shown_at),
    }


def review_json(
    facts: PullFacts, pull: Pull, review: Review, comments: int, stale: bool = False
) -> PullReview:
    """Forgejo's ``PullReview``."""
    repo = facts.repo
    when = rfc3339(review.submitted_at or review.created_at)
    return {
        "id": review.id,
        "user": facts.user(review.author),
        "team": None,
        "state": REVIEW_STATES.get(review.state, "COMMENT"),
        "body": review.body,
        "commit_id": review.commit_oid,
        "stale": stale,
        "official": review.state in ("approve", "request_changes"),
        "dismissed": False,
        "comments_count": comments,
        "submitted_at": when,
        "updated_at": when,
        "html_url": facts.public + urls.review(repo, pull.number, review.id),
        "pull_request_url": facts.public + urls.pull(repo, pull.number),
    }


def review_comment_json(facts: PullFacts, pull: Pull, comment: ReviewComment) -> PullReviewComment:
    """Forgejo's ``PullReviewComment``: ``position`` the line on the head's side,
    ``original_position`` the line on the merge base's (the other 0)."""
    repo = facts.repo
    new = comment.side == "new"
    return {
        "id": comment.id,
        "body": comment.body,
        "user": facts.user(comment.author),
        "resolver": None,
        "pull_request_review_id": comment.review_id,
        "created_at": rfc3339(comment.created_at),
        "updated_at": rfc3339(comment.updated_at),
        "path": comment.path,
        "commit_id": comment.commit_oid,
        "original_commit_id": comment.commit_oid,
        "diff_hunk": "\n".join(
            f"{'+' if new else '-'}{line}" for line in comment.line_text.split("\n")
        ),
        "position": comment.line if new else 0,
        "original_position": 0 if new else comment.line,
        "html_url": facts.public + urls.review_anchor(repo, pull.number, comment.id),
        "pull_request_url": facts.public + urls.pull(repo, pull.number),
    }


class PRBranchInfo(TypedDict):
    """Forgejo's ``PRBranchInfo``."""

    label: str
    ref: str
    sha: str
    repo_id: int
    repo: Repository | None


class PullRequest(TypedDict):
    """Forgejo's ``PullRequest``."""

    id: int
    url: str
    number: int
    user: User
    title: str
    body: str
    labels: list[Label]
    milestone: Milestone | None
    assignee: User | None
    assignees: list[User]
    requested_reviewers: list[User]
    requested_reviewers_teams: list[Team]
    state: str
    draft: bool
    is_locked: bool
    comments: int
    review_comments: int
    additions: int
    deletions: int
    changed_files: int
    html_url: str
    diff_url: str
    patch_url: str
    mergeable: bool
    merged: bool
    merged_at: DateTime | None
    merge_commit_sha: str | None
    merged_by: User | None
    allow_maintainer_edit: bool
    base: PRBranchInfo
    head: PRBranchInfo
    merge_base: str
    due_date: DateTime | None
    created_at: DateTime
    updated_at: DateTime
    closed_at: DateTime | None
    pin_order: int
    flow: int


class ChangedFile(TypedDict):
    """Forgejo's ``ChangedFile``."""

    filename: str
    previous_filename: str
    status: str
    additions: int
    deletions: int
    changes: int
    html_url: str
    contents_url: str
    raw_url: str


class PullReview(TypedDict):
    """Forgejo's ``PullReview``."""

    id: int
    user: User
    team: Team | None
    state: str
    body: str
    commit_id: str
    stale: bool
    official: bool
    dismissed: bool
    comments_count: int
    submitted_at: DateTime
    updated_at: DateTime
    html_url: str
    pull_request_url: str


class PullReviewComment(TypedDict):
    """Forgejo's ``PullReviewComment``."""

    id: int
    body: str
    user: User
    resolver: User | None
    pull_request_review_id: int
    created_at: DateTime
    updated_at: DateTime
    path: str
    commit_id: str
    original_commit_id: str
    diff_hunk: str
    position: int
    original_position: int
    html_url: str
    pull_request_url: str
