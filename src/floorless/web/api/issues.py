"""Issues, their comments, labels and timeline, in Forgejo's paths and shapes (a repository's
labels and milestones themselves are ``triage.py``'s).

Every change is made by the domain layer the web pages use (``issues.py``, ``triage.py``),
each in its transaction with its timeline event, and allowed by the same rules
(``access.py``): whoever may read a public repository may open an issue and comment; its
author and those who may push may edit, close and reopen it; only those who may push may
label, assign and set milestones. As on Forgejo, labels, milestone and assignees sent by
someone who may not set them are ignored when an issue is opened or edited (its other fields
are taken), while the routes that do nothing else (an issue's labels, the repository's
labels and milestones) refuse them with a 403.

What a request names (labels, a milestone, assignees) is all checked before anything is
written, so that a refusal writes nothing. A list is one page of rows and a bounded number of
statements for what it shows (``issueshapes.IssueFacts``); its total is the one the database
keeps when nothing but the state and the kind is asked for.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, ClassVar, Required, TypedDict

import falcon

from floorless.accounts.access import Level
from floorless.accounts.accounts import Account
from floorless.collab.filters import IssueFilter
from floorless.collab.issues import Comment, Issue
from floorless.collab.triage import Label, Milestone
from floorless.core.errors import Conflict, Forbidden, NotFound
from floorless.forgejo import issues as shapes
from floorless.forgejo.issues import (
    IssueFacts,
    Sorting,
    comment_json,
    issue_json,
    label_json,
    timeline_json,
    timeline_names,
)
from floorless.forgejo.people import people
from floorless.forgejo.schema import Doc
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url


class IssueListQuery(Paged, total=False):
    """What ``GET`` of ``RepoIssues`` reads from its query."""

    state: Annotated[str, Doc("open (the default), closed or all")]
    labels: Annotated[str, Doc("label names, comma separated: those with all")]
    q: Annotated[str, Doc("words of the title")]
    type: Annotated[str, Doc("issues or pulls (both when not given)")]
    milestones: Annotated[str, Doc("milestone titles or ids, comma separated")]
    created_by: Annotated[str, Doc("only those this person opened")]
    assigned_by: Annotated[str, Doc("only those assigned to this person")]
    since: Annotated[str, Doc("only those updated at or after this time (RFC 3339)")]
    before: Annotated[str, Doc("only those updated before this time (RFC 3339)")]


class CreateIssueOption(TypedDict, total=False):
    """What ``POST`` of ``RepoIssues`` takes (Forgejo's ``CreateIssueOption``)."""

    title: Required[Annotated[str, Doc("the title")]]
    body: Annotated[str, Doc("the description (Markdown)")]
    assignee: Annotated[str, Doc("one person to assign (deprecated: assignees)")]
    assignees: Annotated[list[str], Doc("the people to assign, by name")]
    milestone: Annotated[int, Doc("the milestone's id (0: none)")]
    due_date: Annotated[str, Doc("not kept by floorless: ignored")]
    ref: Annotated[str, Doc("not kept by floorless: ignored")]
    labels: Annotated[list[int], Doc("the labels' ids")]
    closed: Annotated[bool, Doc("close it at once")]


class CommentsQuery(Paged, total=False):
    """What ``GET`` of ``RepoComments`` reads from its query."""

    since: Annotated[str, Doc("only those updated at or after this time (RFC 3339)")]
    before: Annotated[str, Doc("only those updated before this time (RFC 3339)")]


class EditIssueCommentOption(TypedDict, total=False):
    """What ``PATCH`` of ``RepoComment`` takes (Forgejo's ``EditIssueCommentOption``)."""

    body: Required[Annotated[str, Doc("the comment (Markdown)")]]


class EditIssueOption(TypedDict, total=False):
    """What ``PATCH`` of ``RepoIssue`` takes (Forgejo's ``EditIssueOption``)."""

    title: Annotated[str, Doc("the title")]
    body: Annotated[str, Doc("the description (Markdown)")]
    assignee: Annotated[str, Doc("one person to assign (deprecated: assignees)")]
    assignees: Annotated[list[str], Doc("the people to assign, by name")]
    milestone: Annotated[int, Doc("the milestone's id (0: none)")]
    due_date: Annotated[str, Doc("not kept by floorless: ignored")]
    ref: Annotated[str, Doc("not kept by floorless: ignored")]
    state: Annotated[str, Doc("open or closed")]
    unset_due_date: Annotated[bool, Doc("not kept by floorless: ignored")]


class SinceQuery(TypedDict, total=False):
    """What ``GET`` of ``IssueComments`` reads from its query."""

    since: Annotated[str, Doc("only those updated at or after this time (RFC 3339)")]
    before: Annotated[str, Doc("only those updated before this time (RFC 3339)")]


class IssueLabelsOption(TypedDict, total=False):
    """What ``POST`` of ``IssueLabels`` takes (Forgejo's ``IssueLabelsOption``)."""

    labels: Annotated[list[int | str], Doc("the labels, by id or by name")]


NUMBER = re.compile(r"[0-9]{1,12}")  # an id or number in a path


def number_of(text: str, what: str = "issue") -> int:
    """A number in a path; anything else names nothing (404)."""
    if not NUMBER.fullmatch(text):
        raise NotFound(f"{what} does not exist")
    return int(text)


def moment(req: falcon.Request, name: str) -> float | None:
    """A query parameter holding an RFC 3339 time, as seconds; 422 when it is not one."""
    text = req.get_param(name)
    if not text:
        return None
    return parse_time(text, name)


def parse_time(text: str, name: str) -> float:
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise Unprocessable(f"{name} is not a time as RFC 3339 writes it") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    try:
        return when.timestamp()
    except (ValueError, OverflowError, OSError):
        raise Unprocessable(f"{name} is out of range") from None


class IssueResource(RepoResource):
    """What the issue resources share: finding the repository, an issue, who may act."""

    def public(self, req: falcon.Request) -> str:
        return public_url(self.forge.settings, req)

    def facts(
        self,
        req: falcon.Request,
        repo: Repo,
        issues: Sequence[Issue] = (),
        names: Iterable[str] = (),
        comments: Sequence[Comment] = (),
    ) -> IssueFacts:
        return IssueFacts(
            self.forge, self.viewer(req), repo, self.public(req), issues, names, comments
        )

    def facts_of(self, req: falcon.Request, repo: Repo, comments: Sequence[Comment]) -> IssueFacts:
        """The facts a page of comments' JSON needs: their authors and files."""
        return self.facts(req, repo, names=_authors(comments), comments=comments)

    def sorting(self, target: Target) -> tuple[Repo, Level]:
        """A repository whose labels and milestones exist: it has issues or pull requests."""
        if not (target.repo.has_issues or target.repo.has_pulls):
            raise NotFound("this repository has no issues")
        return target.repo, target.level

    def issue(self, repo: Repo, index: str) -> Issue:
        """Issue (or pull request) ``index``, if that kind is on in the repository."""
        issue = self.forge.issues.find(repo.owner, repo.name, number_of(index))
        if not (repo.has_pulls if issue.is_pull else repo.has_issues):
            raise NotFound("issue does not exist")
        return issue

    def comment(self, repo: Repo, comment_id: str) -> Comment:
        """Comment ``comment_id`` of the repository, if its kind is on there."""
        comment = self.forge.issues.comment_by_id(
            repo.owner, repo.name, number_of(comment_id, "comment")
        )
        if not (repo.has_pulls if comment.is_pull else repo.has_issues):
            raise NotFound("comment does not exist")
        return comment

    def may_sort(self, req: falcon.Request, level: Level) -> bool:
        """Whether the caller may label, assign and set milestones (those who may push)."""
        return self.forge.policy.may_label(self.viewer(req), level)

    def must_sort(self, req: falcon.Request, level: Level) -> None:
        if not self.may_sort(req, level):
            raise Forbidden("only those who may push may change labels and milestones")

    def labels_named(self, repo: Repo, wanted: Sequence[int | str]) -> list[Label]:
        """The repository's labels ``wanted`` names, by id or by name; 422 for one it has
        not (nothing is written then)."""
        ids = [item for item in wanted if isinstance(item, int)]
        names = [item for item in wanted if isinstance(item, str)]
        labels = self.forge.triage.labels_named(repo.owner, repo.name, ids, names)
        by_id = {label.id: label for label in labels}
        by_name = {label.name.lower(): label for label in labels}
        found: dict[int, Label] = {}
        for item in wanted:
            label = by_id.get(item) if isinstance(item, int) else by_name.get(item.lower())
            if label is None:
                raise Unprocessable(f"label {str(item)[:50]!r} does not exist")
            found[label.id] = label
        return list(found.values())

    def milestone_of(self, repo: Repo, milestone_id: int) -> Milestone | None:
        """Milestone ``milestone_id`` of the repository (0: none); 422 for an unknown one."""
        if milestone_id == 0:
            return None
        try:
            return self.forge.triage.milestone(repo.owner, repo.name, milestone_id)
        except NotFound:
            raise Unprocessable(f"milestone {milestone_id} does not exist") from None

    def assignees(self, repo: Repo, data: dict[str, Any]) -> list[Account] | None:
        """The people ``assignees`` (and the older ``assignee``) name, each one who may be
        assigned in the repository (``Policy.assignable``); None when neither is sent."""
        names = list(data.get("assignees", []))
        if data.get("assignee"):
            names.append(data["assignee"])
        if "assignees" not in data and "assignee" not in data:
            return None
        allowed = {name.lower(): name for name in self.forge.policy.assignable(repo)}
        chosen: dict[str, Account] = {}
        for name in names:
            if name.lower() not in allowed:
                raise Unprocessable(f"{name[:50]!r} may not be assigned here")
            chosen[name.lower()] = self.forge.accounts.require(allowed[name.lower()])
        return list(chosen.values())

    def assign(self, issue: Issue, actor: Account, people_: list[Account]) -> None:
        """Make ``people_`` the assignees of ``issue``, with an event for each change."""
        triage = self.forge.triage
        current = set(triage.assignees_of([issue.id]).get(issue.id, []))
        wanted = {person.name for person in people_}
        with self.forge.db.transaction():
            for name in sorted(current - wanted):
                triage.set_assignee(issue, actor, self.forge.accounts.require(name), False)
            for person in people_:
                if person.name not in current:
                    triage.set_assignee(issue, actor, person, True)

    def send_issue(
        self, req: falcon.Request, resp: falcon.Response, repo: Repo, number: int, status: int
    ) -> None:
        issue = self.forge.issues.find(repo.owner, repo.name, number)
        self.send(resp, issue_json(issue, self.facts(req, repo, [issue])), status)


# -- issues ---------------------------------------------------------------------------------


class RepoIssues(IssueResource):
    """``/repos/{owner}/{repo}/issues``: list them, open one."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a repository's issues and pull requests",
            list[shapes.Issue],
            query=IssueListQuery,
            paged=True,
            operation_id="issueListIssues",
            tag="issue",
        ),
        "post": Operation(
            "open an issue",
            shapes.Issue,
            status=201,
            body=CreateIssueOption,
            operation_id="issueCreateIssue",
            tag="issue",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = target.repo
        kind = {"issues": False, "pulls": True}.get(req.get_param("type") or "")
        if not found.has_issues and not found.has_pulls:
            raise NotFound("this repository has no issues")
        if not found.has_issues or not found.has_pulls:  # only the kind that is on
            kind = found.has_pulls if kind in (None, found.has_pulls) else None
            if kind is None:
                raise NotFound("this repository has no issues")
        state = req.get_param("state") or "open"
        search = IssueFilter(
            state=state if state in ("closed", "all") else "open",
            pull=kind,
            q=(req.get_param("q") or "").strip()[:200],
            label_ids=self._labels(found, req.get_param("labels") or ""),
            milestone_ids=self._milestones(found, req.get_param("milestones") or ""),
            author_id=self._person(req, "created_by"),
            assignee_id=self._person(req, "assigned_by"),
            since=moment(req, "since"),
            before=moment(req, "before"),
        )
        paging = self.paging(req)
        issues, total = self.forge.issues.listing(
            found.owner, found.name, search, paging.offset, paging.limit
        )
        facts = self.facts(req, found, issues)
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, [issue_json(issue, facts) for issue in issues])

    def _labels(self, repo: Repo, text: str) -> tuple[int, ...]:
        """Label names as ids; names the repository has not are left out (as Forgejo)."""
        names = {part.strip().lower() for part in text.split(",") if part.strip()}
        if not names:
            return ()
        labels = self.forge.triage.labels_named(repo.owner, repo.name, names=names)
        return tuple(label.id for label in labels)

    def _milestones(self, repo: Repo, text: str) -> tuple[int, ...]:
        """Milestone titles or ids as ids; unknown ones are left out (as Forgejo)."""
        parts = {part.strip().lower() for part in text.split(",") if part.strip()}
        if not parts:
            return ()
        found = self.forge.triage.milestones(repo.owner, repo.name)
        return tuple(m.id for m in found if m.title.lower() in parts or str(m.id) in parts)

    def _person(self, req: falcon.Request, name: str) -> int | None:
        text = (req.get_param(name) or "").strip()
        if not text:
            return None
        who = people(self.forge.db, [text]).get(text.lower())
        if who is None:
            raise NotFound(f"user {text[:40]!r} does not exist")
        return who.id

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, level = target.repo, target.level
        account = self.writer(req)
        data = self.body(req)
        if not found.has_issues:
            raise NotFound("this repository has no issues")
        if not self.forge.policy.may_take_part(self.viewer(req), level):
            raise Forbidden("you may not open issues here")
        labels: list[Label] = []
        milestone = None
        assignees = None
        if self.may_sort(req, level):  # ignored from others, as Forgejo does
            labels = self.labels_named(found, data.get("labels", []))
            milestone = self.milestone_of(found, data.get("milestone", 0))
            assignees = self.assignees(found, data)
        issue = self.forge.issues.create(
            found.owner, found.name, account, data["title"], data.get("body", "")
        )
        triage = self.forge.triage
        with self.forge.db.transaction():
            for label in labels:
                triage.set_label(issue, account, label.id, True)
            if milestone is not None:
                triage.set_milestone(issue, account, milestone.id)
        if assignees:
            self.assign(issue, account, assignees)
        if data.get("closed"):
            self.forge.issues.close(issue, account, "completed")
        self.send_issue(req, resp, found, issue.number, 201)


class RepoIssue(IssueResource):
    """``/repos/{owner}/{repo}/issues/{index}``: an issue, or a pull request as an issue."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get an issue (or a pull request as one)",
            shapes.Issue,
            operation_id="issueGetIssue",
            tag="issue",
        ),
        "patch": Operation(
            "edit an issue",
            shapes.Issue,
            status=201,  # as Forgejo answers
            body=EditIssueOption,
            operation_id="issueEditIssue",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found = target.repo
        issue = self.issue(found, index)
        self.send(resp, issue_json(issue, self.facts(req, found, [issue])))

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found, level = target.repo, target.level
        account = self.writer(req)
        data = self.body(req)
        issue = self.issue(found, index)
        viewer = self.viewer(req)
        if not self.forge.policy.may_change_issue(viewer, level, issue.author_id):
            raise Forbidden("only its author and those who may push may edit it")
        state = data.get("state")
        if state not in (None, "open", "closed"):
            raise Unprocessable("state is open or closed")
        reopening = state == "open" and issue.is_pull and issue.closed
        if reopening and self.forge.pulls.of_issue(issue).merged:
            raise Conflict("a merged pull request cannot be reopened")
        milestone: Milestone | None = None
        assignees = None
        sorting = self.may_sort(req, level)
        if sorting:  # ignored from others, as Forgejo does
            if "milestone" in data:
                milestone = self.milestone_of(found, data["milestone"])
            assignees = self.assignees(found, data)
        title, body = data.get("title", issue.title), data.get("body", issue.body)
        if (title, body) != (issue.title, issue.body):
            self.forge.issues.edit(issue, account, title, body)
        if sorting and "milestone" in data:
            self.forge.triage.set_milestone(issue, account, milestone.id if milestone else None)
        if assignees is not None:
            self.assign(issue, account, assignees)
        if state == "closed":
            self.forge.issues.close(issue, account, "completed")
        elif state == "open":
            self.forge.issues.reopen(issue, account)
        self.send_issue(req, resp, found, issue.number, 201)


# -- comments -------------------------------------------------------------------------------


class IssueComments(IssueResource):
    """``/repos/{owner}/{repo}/issues/{index}/comments``: its comments, oldest first."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list an issue's comments",
            list[shapes.Comment],
            query=SinceQuery,
            operation_id="issueGetComments",
            tag="issue",
        ),
        "post": Operation(
            "comment on an issue",
            shapes.Comment,
            status=201,
            body=EditIssueCommentOption,
            operation_id="issueCreateComment",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found = target.repo
        issue = self.issue(found, index)
        comments = self.forge.issues.comments(
            found.owner,
            found.name,
            issue.number,
            since=moment(req, "since"),
            before=moment(req, "before"),
        )
        self.send(resp, _comments(self.facts_of(req, found, comments), comments))

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found, level = target.repo, target.level
        account = self.writer(req)
        data = self.body(req)
        issue = self.issue(found, index)
        if not self.forge.policy.may_take_part(self.viewer(req), level):
            raise Forbidden("you may not comment here")
        made = self.forge.issues.comment(issue, account, data["body"])
        comment = self.forge.issues.comment_by_id(found.owner, found.name, made)
        facts = self.facts_of(req, found, [comment])
        self.send(resp, comment_json(comment, facts), 201)


class RepoComments(IssueResource):
    """``/repos/{owner}/{repo}/issues/comments``: all comments of the repository, oldest
    first, a page at a time."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a repository's comments",
            list[shapes.Comment],
            query=CommentsQuery,
            paged=True,
            operation_id="issueGetRepoComments",
            tag="issue",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, _ = self.sorting(target)
        since, before = moment(req, "since"), moment(req, "before")
        paging = self.paging(req)
        issues = self.forge.issues
        # of the kinds the repository has on: a kind turned off keeps its comments to itself
        pulls = None if found.has_issues and found.has_pulls else found.has_pulls
        comments = issues.comments(
            found.owner,
            found.name,
            since=since,
            before=before,
            offset=paging.offset,
            limit=paging.limit,
            pulls=pulls,
        )
        total = issues.count_comments(found.owner, found.name, since, before, pulls)
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, _comments(self.facts_of(req, found, comments), comments))


class RepoComment(IssueResource):
    """``/repos/{owner}/{repo}/issues/comments/{id}``: one comment, edited or deleted by
    its author or by those who may push."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a comment", shapes.Comment, operation_id="issueGetComment", tag="issue"
        ),
        "patch": Operation(
            "edit a comment",
            shapes.Comment,
            body=EditIssueCommentOption,
            operation_id="issueEditComment",
            tag="issue",
        ),
        "delete": Operation(
            "delete a comment", None, status=204, operation_id="issueDeleteComment", tag="issue"
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found = target.repo
        comment = self.comment(found, id)
        self.send(resp, comment_json(comment, self.facts_of(req, found, [comment])))

    def changing(
        self, req: falcon.Request, target: Target, id: str
    ) -> tuple[Repo, Account, Comment, Issue]:
        found, level = target.repo, target.level
        account = self.writer(req)
        comment = self.comment(found, id)
        if not self.forge.policy.may_edit_comment(self.viewer(req), level, comment.author_id):
            raise Forbidden("only its author and those who may push may change a comment")
        issue = self.forge.issues.find(found.owner, found.name, comment.number)
        return found, account, comment, issue

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found, account, comment, issue = self.changing(req, target, id)
        data = self.body(req)
        self.forge.issues.edit_comment(issue, comment.id, account, data["body"])
        changed = self.forge.issues.comment_by_id(found.owner, found.name, comment.id)
        self.send(resp, comment_json(changed, self.facts_of(req, found, [changed])))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        _, _, comment, issue = self.changing(req, target, id)
        self.forge.issues.delete_comment(issue, comment.id)
        self.nothing(resp)


class IssueTimeline(IssueResource):
    """``/repos/{owner}/{repo}/issues/{index}/timeline``: its comments and events in the
    order they happened, a page at a time. A page is a range of places on the timeline (each
    entry takes the next), so that the last page of a long one costs what the first does;
    the total is the number of places the issue keeps, a deleted comment's included (and
    a mention from a repository the caller may not read now: ``References.shown_to``)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list an issue's comments and events",
            list[shapes.TimelineComment],
            query=Paged,
            paged=True,
            operation_id="issueGetCommentsAndTimeline",
            tag="issue",
        )
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found = target.repo
        issue = self.issue(found, index)
        paging = self.paging(req)
        recorded = self.forge.issues.window(issue, paging.offset, paging.offset + paging.limit)
        entries = self.forge.references.shown_to(self.viewer(req), found, recorded)
        facts = self.facts(req, found, names=timeline_names(entries))
        sorting = Sorting(self.forge.triage, found, entries)
        self.paged(req, resp, self.forge, paging, issue.entries)
        self.send(resp, [timeline_json(entry, issue, facts, sorting) for entry in entries])


def _authors(comments: Sequence[Comment]) -> set[str]:
    return {comment.author for comment in comments if comment.author}


def _comments(facts: IssueFacts, comments: Sequence[Comment]) -> list[shapes.Comment]:
    return [comment_json(comment, facts) for comment in comments]


# -- an issue's labels ----------------------------------------------------------------------


class LabelChanges(IssueResource):
    """What changing an issue's labels takes: the issue, the right, the labels named."""

    def answer(self, req: falcon.Request, resp: falcon.Response, repo: Repo, issue: Issue) -> None:
        labels = self.forge.triage.labels_of([issue.id]).get(issue.id, [])
        public = self.public(req)
        self.send(resp, [label_json(label, repo, public) for label in labels])

    def change(
        self, req: falcon.Request, target: Target, index: str, labels: bool = True
    ) -> tuple[Repo, Account, Issue, list[Label]]:
        found, level = target.repo, target.level
        account = self.writer(req)
        data = self.body(req) if labels else {}
        issue = self.issue(found, index)
        self.must_sort(req, level)
        return found, account, issue, self.labels_named(found, data.get("labels", []))

    def put_on(self, issue: Issue, actor: Account, labels: list[Label], only: bool) -> None:
        """Put ``labels`` on ``issue`` (and, ``only``, take the others off), one transaction."""
        triage = self.forge.triage
        wanted = {label.id for label in labels}
        with self.forge.db.transaction():
            if only:
                for label in triage.labels_of([issue.id]).get(issue.id, []):
                    if label.id not in wanted:
                        triage.set_label(issue, actor, label.id, False)
            for label in labels:
                triage.set_label(issue, actor, label.id, True)


class IssueLabels(LabelChanges):
    """``/repos/{owner}/{repo}/issues/{index}/labels``: list, add, replace, clear."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list an issue's labels", list[shapes.Label], operation_id="issueGetLabels", tag="issue"
        ),
        "post": Operation(
            "add labels to an issue",
            list[shapes.Label],
            body=IssueLabelsOption,
            operation_id="issueAddLabel",
            tag="issue",
        ),
        "put": Operation(
            "replace an issue's labels",
            list[shapes.Label],
            body=IssueLabelsOption,
            operation_id="issueReplaceLabels",
            tag="issue",
        ),
        "delete": Operation(
            "take every label off an issue",
            None,
            status=204,
            operation_id="issueClearLabels",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found = target.repo
        self.answer(req, resp, found, self.issue(found, index))

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found, account, issue, labels = self.change(req, target, index)
        self.put_on(issue, account, labels, only=False)
        self.answer(req, resp, found, issue)

    def on_put(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        found, account, issue, labels = self.change(req, target, index)
        self.put_on(issue, account, labels, only=True)
        self.answer(req, resp, found, issue)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        _, account, issue, _ = self.change(req, target, index, labels=False)
        self.put_on(issue, account, [], only=True)
        self.nothing(resp)


class IssueLabel(LabelChanges):
    """``DELETE /repos/{owner}/{repo}/issues/{index}/labels/{id}``: take one label off (named
    by its id, or by its name as newer Forgejo also takes it; 422 for one the repository has
    not, as Forgejo)."""

    operations: ClassVar[dict[str, Operation]] = {
        "delete": Operation(
            "take a label off an issue",
            None,
            status=204,
            operation_id="issueRemoveLabel",
            tag="issue",
        )
    }

    def on_delete(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        id: str,
    ) -> None:
        found, account, issue, _ = self.change(req, target, index, labels=False)
        (label,) = self.labels_named(found, [int(id) if NUMBER.fullmatch(id) else id])
        self.forge.triage.set_label(issue, account, label.id, False)
        self.nothing(resp)


# -- a repository's labels ------------------------------------------------------------------
