"""Issues, pull requests as issues, comments, labels and milestones as Forgejo's API shapes
them (``Issue``, ``Comment``, ``Label``, ``Milestone``), a page of them at a time.

What a page of issues shows besides their rows (labels, assignees, milestone, the people
named, whether a pull request was merged) is read for the whole page by ``IssueFacts``: five
statements at most whatever the page's length, never one per issue. Field names and types
follow Forgejo's swagger; pyforgejo's models check them in the tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Protocol, TypedDict

from floorless.accounts.access import Viewer
from floorless.collab import issues as collab
from floorless.collab import triage
from floorless.collab.pulls import Pulls
from floorless.db import Database
from floorless.files.attachments import Attachment as AttachmentRow
from floorless.files.attachments import Attachments
from floorless.forgejo import urls
from floorless.forgejo.people import Person, User, people, rfc3339, user_json
from floorless.forgejo.schema import DateTime
from floorless.repos.registry import Repo

# Forgejo's stand-in for an account that is gone (its ``user_model.NewGhostUser``)
GHOST = Person(-1, "Ghost", "user", "", False, None)
# Forgejo's marks of a work-in-progress pull request (its ``setting.Repository.PullRequest``)
DRAFT_PREFIXES = ("wip:", "[wip]")


def label_json(label: triage.Label, repo: Repo, public: str) -> Label:
    """Forgejo's ``Label``: its colour without the ``#``."""
    return {
        "id": label.id,
        "name": label.name,
        "exclusive": False,
        "is_archived": False,
        "color": label.color.removeprefix("#"),
        "description": label.description,
        "url": public + urls.api_repo(repo, "labels", str(label.id)),
    }


def milestone_json(milestone: triage.Milestone) -> Milestone:
    """Forgejo's ``Milestone``. Floorless keeps no time of a milestone's creation or change:
    those are the epoch, as Forgejo writes an unknown time; ``closed_at`` is null."""
    return {
        "id": milestone.id,
        "title": milestone.title,
        "description": milestone.description,
        "state": milestone.state,
        "open_issues": milestone.open_issues,
        "closed_issues": milestone.closed_issues,
        "created_at": rfc3339(None),
        "updated_at": rfc3339(None),
        "closed_at": None,
        "due_on": None if milestone.due_at is None else rfc3339(milestone.due_at),
    }


class IssueSources(Protocol):
    """What a page of issues' JSON reads: the rows, their labels, milestones, assignees and
    files, and whether a pull request was merged. The forge is one (taken by structure)."""

    @property
    def db(self) -> Database: ...

    @property
    def triage(self) -> triage.Triage: ...

    @property
    def pulls(self) -> Pulls: ...

    @property
    def attachments(self) -> Attachments: ...


class IssueFacts:
    """What the ``Issue`` JSON of a page of issues (and ``Comment`` JSON of a page of
    comments) needs besides their rows, read for the page."""

    def __init__(
        self,
        forge: IssueSources,
        viewer: Viewer,
        repo: Repo,
        public: str,
        issues: Sequence[collab.Issue] = (),
        names: Iterable[str] = (),
        comments: Sequence[collab.Comment] = (),
    ) -> None:
        self.forge = forge
        self.viewer = viewer
        self.repo = repo
        self.public = public
        ids = [issue.id for issue in issues]
        self.labels = forge.triage.labels_of(ids)
        self.assignees = forge.triage.assignees_of(ids)
        self.milestones = forge.triage.milestones_of(ids)
        pulls = [issue.id for issue in issues if issue.is_pull]
        self.merges = forge.pulls.merges_of(pulls)
        self.files, self.comment_files = forge.attachments.of_issues(
            ids, [comment.id for comment in comments]
        )
        wanted = {issue.author for issue in issues if issue.author} | set(names)
        for found in self.assignees.values():
            wanted.update(found)
        self.people = people(forge.db, wanted)

    def user(self, name: str) -> User:
        """A person named on the page as Forgejo's ``User``; the ghost for one who is gone."""
        who = self.people.get(name.lower(), GHOST) if name else GHOST
        return user_json(who, self.viewer, self.public)

    def assets(self, files: Iterable[AttachmentRow]) -> list[Attachment]:
        return [attachment_json(found, self.public, self.repo) for found in files]

    def page_url(self, number: int, is_pull: bool, comment: int | None = None) -> str:
        if is_pull:
            return self.public + urls.pull(self.repo, number, comment=comment)
        return self.public + urls.issue(self.repo, number, comment)


def attachment_json(
    attachment: AttachmentRow, public: str, repo: Repo, tag: str | None = None
) -> Attachment:
    """Forgejo's ``Attachment``: downloaded by its release's tag and name when it has one."""
    if tag is not None:
        download = urls.release_download(repo, tag, attachment.name)
    else:
        download = urls.attachment(attachment.uuid)
    return {
        "id": attachment.id,
        "name": attachment.name,
        "size": attachment.size,
        "download_count": attachment.download_count,
        "created_at": rfc3339(attachment.created_at),
        "uuid": attachment.uuid,
        "browser_download_url": public + download,
        "type": "attachment",
    }


def issue_json(issue: collab.Issue, facts: IssueFacts) -> Issue:
    """Forgejo's ``Issue`` (a pull request's too: then ``pull_request`` is set)."""
    repo = facts.repo
    assignees = [facts.user(name) for name in facts.assignees.get(issue.id, [])]
    milestone = facts.milestones.get(issue.id)
    html_url = facts.page_url(issue.number, issue.is_pull)
    pull: PullRequestMeta | None = None
    if issue.is_pull:
        merged_at = facts.merges.get(issue.id)
        pull = {
            "merged": merged_at is not None,
            "merged_at": None if merged_at is None else rfc3339(merged_at),
            "draft": issue.title.lower().startswith(DRAFT_PREFIXES),
            "html_url": html_url,
        }
    return {
        "id": issue.id,
        "url": facts.public + urls.api_repo(repo, "issues", str(issue.number)),
        "html_url": html_url,
        "number": issue.number,
        "user": facts.user(issue.author),
        "original_author": "",
        "original_author_id": 0,
        "title": issue.title,
        "body": issue.body,
        "ref": "",
        "assets": facts.assets(facts.files.get(issue.id, [])),
        "labels": [
            label_json(label, repo, facts.public) for label in facts.labels.get(issue.id, [])
        ],
        "milestone": None if milestone is None else milestone_json(milestone),
        "assignee": assignees[0] if assignees else None,
        "assignees": assignees,
        "state": issue.state,
        "is_locked": False,
        "comments": issue.comments,
        "created_at": rfc3339(issue.created_at),
        "updated_at": rfc3339(issue.updated_at),
        "closed_at": None if issue.closed_at is None else rfc3339(issue.closed_at),
        "due_date": None,
        "pull_request": pull,
        "repository": {
            "id": repo.id,
            "name": repo.name,
            "owner": repo.owner,
            "full_name": repo.full_name,
        },
        "pin_order": 0,
    }


def comment_json(comment: collab.Comment, facts: IssueFacts) -> Comment:
    """Forgejo's ``Comment``: ``issue_url`` (an issue's) or ``pull_request_url`` (a pull
    request's) is the page it is on, the other is empty, as Forgejo has them."""
    page = facts.page_url(comment.number, comment.is_pull)
    return {
        "id": comment.id,
        "html_url": facts.page_url(comment.number, comment.is_pull, comment.id),
        "pull_request_url": page if comment.is_pull else "",
        "issue_url": "" if comment.is_pull else page,
        "user": facts.user(comment.author),
        "original_author": "",
        "original_author_id": 0,
        "body": comment.body,
        "assets": facts.assets(facts.comment_files.get(comment.id, [])),
        "created_at": rfc3339(comment.created_at),
        "updated_at": rfc3339(comment.updated_at),
    }


# floorless's timeline events as Forgejo's comment types (``TimelineComment.type``)
TIMELINE_TYPES = {
    "comment": "comment",
    "closed": "close",
    "reopened": "reopen",
    "title": "change_title",
    "label": "label",
    "milestone": "milestone",
    "assigned": "assignees",
    "unassigned": "assignees",
    "pushed": "pull_push",
    "force_pushed": "pull_push",
    "merged": "merge_pull",
    "head_deleted": "delete_branch",
    "base_changed": "change_target_branch",
    "automerge_scheduled": "pull_scheduled_merge",
    "automerge_cancelled": "pull_cancel_scheduled_merge",
    "review": "review",
    "ref": "issue_ref",
}
_REF_TYPES = {"commit": "commit_ref", "pull": "pull_ref", "issue": "issue_ref"}


class Sorting:
    """The labels a page of a timeline names (only those: a repository may have thousands)
    and the repository's milestones, by name: two statements for the page at most. One
    deleted since is shown by its name alone (id 0), as the event recorded it."""

    def __init__(self, labels: triage.Triage, repo: Repo, entries: Iterable[collab.Entry]) -> None:
        names = {entry.body[1:] for entry in entries if entry.kind == "label"}
        named = labels.labels_named(repo.owner, repo.name, names=names)
        self.labels = {x.name.lower(): x for x in named}
        self.milestones = {m.title.lower(): m for m in labels.milestones(repo.owner, repo.name)}

    def label(self, name: str) -> triage.Label:
        return self.labels.get(name.lower()) or triage.Label(0, name, "#000000")

    def milestone(self, title: str) -> Milestone | None:
        if not title:
            return None
        found = self.milestones.get(title.lower()) or triage.Milestone(0, title, "", None, "open")
        return milestone_json(found)


def timeline_json(
    entry: collab.Entry, issue: collab.Issue, facts: IssueFacts, sorting: Sorting
) -> TimelineComment:
    """Forgejo's ``TimelineComment`` for an entry of ``issue``'s timeline: a comment, or an
    event of the type Forgejo gives the same change, with what it names (a label, a
    milestone, an assignee, a title, a commit)."""
    kind = entry.kind
    page = facts.page_url(issue.number, issue.is_pull)
    anchor = f"#issuecomment-{entry.id}" if kind == "comment" else f"#event-{entry.id}"
    shaped: TimelineComment = {
        "id": entry.id,
        "type": TIMELINE_TYPES.get(kind, kind),
        "html_url": page + anchor,
        "pull_request_url": page if issue.is_pull else "",
        "issue_url": "" if issue.is_pull else page,
        "user": facts.user(entry.who),
        "body": "",
        "created_at": rfc3339(entry.created_at),
        "updated_at": rfc3339(entry.updated_at or entry.created_at),
        "old_project_id": 0,
        "project_id": 0,
        "old_milestone": None,
        "milestone": None,
        "tracked_time": None,
        "old_title": "",
        "new_title": "",
        "old_ref": "",
        "new_ref": "",
        "ref_issue": None,
        "ref_comment": None,
        "ref_action": "",
        "ref_commit_sha": "",
        "review_id": 0,
        "label": None,
        "assignee": None,
        "assignee_team": None,
        "removed_assignee": False,
        "resolve_doer": None,
        "dependent_issue": None,
    }
    if kind == "comment":
        shaped["body"] = entry.body
    elif kind == "title":
        shaped["old_title"], shaped["new_title"] = entry.old_value, entry.body
    elif kind == "label":  # "+name" put on, "-name" taken off: Forgejo's body "1" or ""
        added = entry.body.startswith("+")
        shaped["body"] = "1" if added else ""
        shaped["label"] = label_json(sorting.label(entry.body[1:]), facts.repo, facts.public)
    elif kind == "milestone":
        shaped["old_milestone"] = sorting.milestone(entry.old_value)
        shaped["milestone"] = sorting.milestone(entry.body)
    elif kind in ("assigned", "unassigned"):
        shaped["assignee"] = facts.user(entry.body)
        shaped["removed_assignee"] = kind == "unassigned"
    elif kind in ("pushed", "force_pushed"):  # the new head (and, forced, the old one)
        commits = [entry.old_value, entry.body] if kind == "force_pushed" else [entry.body]
        shaped["body"] = json.dumps(
            {"is_force_push": kind == "force_pushed", "commit_ids": commits}
        )
    elif kind == "merged":
        shaped["ref_commit_sha"] = entry.body
    elif kind == "head_deleted":
        shaped["old_ref"] = entry.body
    elif kind == "base_changed":
        shaped["old_ref"], shaped["new_ref"] = entry.old_value, entry.body
    elif kind == "review":
        shaped["review_id"] = (
            int(entry.old_value) if (entry.old_value.isascii() and entry.old_value.isdigit()) else 0
        )
    elif kind == "ref":  # where it was mentioned: "owner/name#M" or "owner/name@commit"
        shaped["type"] = _REF_TYPES.get(entry.old_value, "issue_ref")
        shaped["body"] = entry.body
        if entry.old_value == "commit":
            shaped["ref_commit_sha"] = entry.body.partition("@")[2]
    elif kind == "closed" and entry.old_value:  # closed by a commit or a pull request
        by, _, where = entry.old_value.partition(":")
        if by == "commit":
            shaped["ref_commit_sha"] = where.partition("@")[2]
    return shaped


def timeline_names(entries: Iterable[collab.Entry]) -> set[str]:
    """The people a page of a timeline names: who acted, who was (un)assigned."""
    names = {entry.who for entry in entries if entry.who}
    names |= {e.body for e in entries if e.kind in ("assigned", "unassigned") and e.body}
    return names


class Team(TypedDict):
    """Forgejo's ``Team``: never one, floorless has no teams."""

    id: int
    name: str


class Label(TypedDict):
    """Forgejo's ``Label``."""

    id: int
    name: str
    exclusive: bool
    is_archived: bool
    color: str
    description: str
    url: str


class Milestone(TypedDict):
    """Forgejo's ``Milestone``."""

    id: int
    title: str
    description: str
    state: str
    open_issues: int
    closed_issues: int
    created_at: DateTime
    updated_at: DateTime
    closed_at: DateTime | None
    due_on: DateTime | None


class PullRequestMeta(TypedDict):
    """Forgejo's ``PullRequestMeta``."""

    merged: bool
    merged_at: DateTime | None
    draft: bool
    html_url: str


class RepositoryMeta(TypedDict):
    """Forgejo's ``RepositoryMeta``."""

    id: int
    name: str
    owner: str
    full_name: str


class Attachment(TypedDict):
    """Forgejo's ``Attachment``."""

    id: int
    name: str
    size: int
    download_count: int
    created_at: DateTime
    uuid: str
    browser_download_url: str
    type: str


class Issue(TypedDict):
    """Forgejo's ``Issue``."""

    id: int
    url: str
    html_url: str
    number: int
    user: User
    original_author: str
    original_author_id: int
    title: str
    body: str
    ref: str
    assets: list[Attachment]
    labels: list[Label]
    milestone: Milestone | None
    assignee: User | None
    assignees: list[User]
    state: str
    is_locked: bool
    comments: int
    created_at: DateTime
    updated_at: DateTime
    closed_at: DateTime | None
    due_date: DateTime | None
    pull_request: PullRequestMeta | None
    repository: RepositoryMeta
    pin_order: int


class TrackedTime(TypedDict):
    """Forgejo's ``TrackedTime``."""

    id: int
    created: DateTime
    time: int
    user_name: str
    issue_id: int


class TimelineComment(TypedDict):
    """Forgejo's ``TimelineComment``."""

    id: int
    type: str
    html_url: str
    pull_request_url: str
    issue_url: str
    user: User
    body: str
    created_at: DateTime
    updated_at: DateTime
    old_project_id: int
    project_id: int
    old_milestone: Milestone | None
    milestone: Milestone | None
    tracked_time: TrackedTime | None
    old_title: str
    new_title: str
    old_ref: str
    new_ref: str
    ref_issue: Issue | None
    ref_comment: Comment | None
    ref_action: str
    ref_commit_sha: str
    review_id: int
    label: Label | None
    assignee: User | None
    assignee_team: Team | None
    removed_assignee: bool
    resolve_doer: User | None
    dependent_issue: Issue | None


class Comment(TypedDict):
    """Forgejo's ``Comment``."""

    id: int
    html_url: str
    pull_request_url: str
    issue_url: str
    user: User
    original_author: str
    original_author_id: int
    body: str
    assets: list[Attachment]
    created_at: DateTime
    updated_at: DateTime
