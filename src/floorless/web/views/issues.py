"""A repository's issues: the list (the pull requests' too), the form for a new one, and an
issue's own page (``Conversation``, which a pull request's page is as well).

Every route is a page of its repository (``RepoPage``), so a private repository's issues
answer 404 to whoever may not read it; what a reader may do besides reading (open, comment,
close, reopen, edit) is asked of the access policy. Nothing here runs git: commit ids in
Markdown are looked up through the open handle.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import falcon
from markupsafe import Markup

from floorless.accounts.access import Level, Viewer
from floorless.accounts.accounts import Account
from floorless.collab.filters import IssueFilter
from floorless.collab.issues import Entry, Issue
from floorless.collab.pulls import Pull
from floorless.collab.references import names_others
from floorless.collab.triage import LABEL_MAX, Label
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import objects
from floorless.web import auth
from floorless.web.context import RepoView
from floorless.web.marks import mark
from floorless.web.markup import link_references, render_markdown
from floorless.web.render import Renderer
from floorless.web.views.attachments import FilesForm

_NUMBER = re.compile(r"[0-9]{1,9}")
STATES = ("open", "closed", "all")
QUERY_MAX = 200
# A timeline shows its first TIMELINE_FIRST entries and its last TIMELINE_LAST, and offers
# TIMELINE_MORE more of those between at a time (as GitHub folds a long conversation).
TIMELINE_FIRST = 30
TIMELINE_LAST = 30
TIMELINE_MORE = 100
PICKER_LABELS = 30  # labels offered by an issue's sidebar at once; more are searched for


def issue_number(text: str) -> int:
    """An issue number from a URL: anything else names no issue."""
    if not _NUMBER.fullmatch(text):
        raise NotFound(f"no issue {text[:20]!r}")
    return int(text)


def _shown(req: falcon.Request) -> int:
    """How many of a timeline's first entries to show (``?shown=``): an issue with thousands
    of comments opens with its first and its last, and the rest a click away."""
    value = req.get_param("shown") or ""
    if not _NUMBER.fullmatch(value):
        return TIMELINE_FIRST
    return max(TIMELINE_FIRST, int(value))


def _find_label(req: falcon.Request) -> str:
    """What the sidebar's label picker is narrowed to (``?find_label=``)."""
    return " ".join((req.get_param("find_label") or "").split())[:LABEL_MAX]


def _cursor(req: falcon.Request, name: str) -> int | None:
    value = req.get_param(name)
    if value is None or value == "":
        return None
    if not _NUMBER.fullmatch(value):
        raise BadRequest(f"{name} is an issue number")
    return int(value)


def sidebar(
    forge: Forge,
    view: RepoView,
    issue: Issue,
    viewer: Viewer,
    timeline: Sequence[Entry] = (),
    find: str = "",
) -> dict[str, Any]:
    """What ``_issue_sidebar.html`` shows of ``issue`` (or a pull request's issue) and lets
    ``viewer`` change: pass it to the template as ``sidebar``. Six statements, whatever the
    number of labels: the labels it carries and those ``timeline``'s events name, and a
    picker of at most ``PICKER_LABELS`` others (those whose name holds ``find``, when it is
    given; a repository with more offers that search)."""
    repo = view.repo
    policy = forge.policy
    triage = forge.triage
    named = {entry.body[1:] for entry in timeline if entry.kind == "label"}
    carried, mentioned = triage.labels_around(issue, named)
    assignees = triage.assignees_of([issue.id]).get(issue.id, [])
    may_label = policy.may_label(viewer, view.level)
    may_assign = policy.may_assign(viewer, view.level)
    picker: list[Label] = []
    choices = 0
    if may_label:
        picker, choices = triage.listing(repo.owner, repo.name, 0, PICKER_LABELS, find)
    on = {label.id for label in carried}
    offered = {label.id: label for label in [*picker, *carried]}
    return {
        "issue": issue,
        "action": urls.triage(repo, issue.number),
        "labels": carried,
        "all_labels": [
            (label, label.id in on)
            for label in sorted(offered.values(), key=lambda x: (x.name.lower(), x.id))
        ],
        "find": find,
        "find_url": urls.numbered(repo, issue.number, issue.is_pull) + "#labels",
        "choices": choices,
        "offered": len(picker),
        "searchable": choices > PICKER_LABELS or bool(find),
        "by_name": {label.name.lower(): label for label in [*mentioned, *carried, *picker]},
        "assignees": assignees,
        "assignable": policy.assignable(repo) if may_assign else [],
        "milestone": triage.milestone_of(issue),
        "milestones": triage.milestones(repo.owner, repo.name, "open") if may_label else [],
        "may_label": may_label,
        "may_assign": may_assign,
    }


def issues_on(view: RepoView) -> None:
    """A repository with issues turned off (its settings) has no issue pages: 404."""
    if not view.repo.has_issues:
        raise NotFound("this repository has no issues")


def pulls_on(view: RepoView) -> None:
    """404 where the repository has turned pull requests off (its settings)."""
    if not view.repo.has_pulls:
        raise NotFound("pull requests are turned off here")


class IssueView(FilesForm):
    def markdown(self, view: RepoView, texts: list[str]) -> list[Markup]:
        """``texts`` as sanitized HTML, relative links to the default branch's files and
        ``#N``, ``@user`` and commit ids linked where they exist (looked up once for all)."""
        repo = view.repo
        home = view.snapshot.home
        link: Callable[[bytes, bool], str]
        if home is None:
            link = lambda path, image: urls.home(repo)  # noqa: E731
        else:
            kind, ref = home[0], home[1]
            link = lambda path, image: (urls.raw if image else urls.src)(  # noqa: E731
                repo, kind, ref, path
            )

        def lookup(found: dict[str, set[str]]) -> dict[tuple[str, str], str]:
            links: dict[tuple[str, str], str] = {}
            numbers = {token: int(token) for token in found["issue"]}
            known = self.forge.issues.existing(repo.owner, repo.name, set(numbers.values()))
            for token, number in numbers.items():
                if number in known:
                    links["issue", token] = urls.numbered(repo, number, known[number])
            links.update(self.elsewhere(view, found["elsewhere"]))
            for token, name in self.forge.accounts.existing_names(found["user"]).items():
                links["user", token] = urls.owner(name)
            for token in found["commit"]:
                oid = objects.expand_commit_id(view.handle, token.encode())
                if oid is not None:
                    links["commit", token] = urls.commit(repo, oid.decode())
            return links

        cache = self.renderer.caches["markdown"]
        place = (repo.owner, repo.name, home[:2] if home else None)

        def rendered(text: str) -> str:
            key = (place, hashlib.blake2b(text.encode(), digest_size=16).digest())
            return cast(str, cache.get_or_make(key, lambda: render_markdown(text, link)))

        htmls = link_references([rendered(text) for text in texts], lookup, cache)
        return [Markup(html) for html in htmls]  # noqa: S704 - sanitized by nh3

    def elsewhere(self, view: RepoView, tokens: set[str]) -> dict[tuple[str, str], str]:
        """Links for ``owner/repo#N`` references: to the issue or pull request, where the
        repository exists, the viewer may read it, and it has that number. One repository a
        statement or two (a page names few; ``link_references`` stops at its limit)."""
        wanted: dict[tuple[str, str], dict[str, int]] = {}
        for token in tokens:
            place, _, digits = token.partition("#")
            owner, _, name = place.partition("/")
            wanted.setdefault((owner, name), {})[token] = int(digits)
        viewer = auth.current().viewer
        links: dict[tuple[str, str], str] = {}
        for (owner, name), numbers in sorted(wanted.items()):
            if (owner, name) == (view.repo.owner, view.repo.name):
                repo = view.repo
            else:
                try:
                    repo = self.forge.registry.get(owner, name)
                except NotFound:
                    continue
                if self.forge.policy.level(viewer, repo) < Level.READ:
                    continue  # a private repository's numbers are nobody else's business
            known = self.forge.issues.existing(repo.owner, repo.name, set(numbers.values()))
            for token, found in numbers.items():
                if found in known:
                    links["elsewhere", token] = urls.numbered(repo, found, known[found])
        return links

    def page(self, resp: falcon.Response, view: RepoView, template: str, **more: Any) -> None:
        self.html(resp, template, **view.template_context(**more))

    def kept_page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        render: Callable[[], bool],
    ) -> None:
        """A page of issues or pull requests, from the page cache while the repository's refs
        and its activity version (``Issues.activity``: one statement, none on a node that
        hears every write) are as they were when it was rendered; ``render`` says whether
        what it rendered is final."""
        stamp = self.forge.issues.activity(view.repo.owner, view.repo.name)
        self.cached_page(req, resp, view, render, stamp)


# The query parameters an issue or pull request list reads: its filter's and its cursor.
LIST_QUERY = ("state", "q", "author", "label", "milestone", "assignee", "before", "after")


class IssueList(IssueView):
    """``/issues``, or (``pull``) ``/pulls``: a page of them as ``IssueFilter`` narrows them.
    The two lists are one page of two kinds; a pull request's row shows its branches, and
    whether it is merged and its head's commit status, besides."""

    query = LIST_QUERY

    def __init__(
        self,
        forge: Forge,
        renderer: Renderer,
        authenticator: auth.Authenticator,
        pull: bool = False,
    ) -> None:
        super().__init__(forge, renderer, authenticator)
        self.pull = pull

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        (pulls_on if self.pull else issues_on)(view)
        self.kept_page(req, resp, view, lambda: self.show(req, resp, view))

    def show(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> bool:
        search = IssueFilter.from_query(req.get_param, self.pull)
        owner, name = view.repo.owner, view.repo.name
        before, after = _cursor(req, "before"), _cursor(req, "after")
        pulls: dict[int, Pull] = {}
        marks: dict[str, Any] = {}
        if self.pull:
            found_pulls = self.forge.pulls.page(owner, name, search, before, after)
            found, pulls = found_pulls.page, found_pulls.pulls
            heads = [pull.head_oid for pull in pulls.values() if pull.head_oid]
            latest = self.forge.statuses.latest_of(view.repo, heads)  # one statement
            marks = {sha: mark(each) for sha, each in latest.items()}
        else:
            found = self.forge.issues.page(owner, name, search, before, after)
        ids = [issue.id for issue in found.issues]
        self.page(
            resp,
            view,
            "issue_list.html",
            found=found,
            pulls=pulls,
            marks=marks,
            search=search,
            labels_of=self.forge.triage.labels_of(ids),
            assignees_of=self.forge.triage.assignees_of(ids),
            may_open=self.forge.policy.may_take_part(auth.viewer_of(req), view.level),
        )
        return True


class NewIssue(IssueView):
    def allowed(self, req: falcon.Request, view: RepoView) -> None:
        """Whether the reader may open an issue (they may read it: found before)."""
        issues_on(view)
        self.signed_in(req)
        if not self.forge.policy.may_take_part(auth.viewer_of(req), view.level):
            raise Forbidden("you may not open issues here")

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        self.allowed(req, view)
        self.page(resp, view, "issue_new.html", form={}, error="")

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        self.allowed(req, view)
        account = self.signed_in(req)
        form, files, uploaded = self.form_and_files(req, view, account)
        try:
            issue = self.forge.issues.create(
                view.repo.owner,
                view.repo.name,
                account,
                form.get("title", ""),
                form.get("body", ""),
            )
            self.claim(view, account, files, issue.id)
        except BadRequest as exc:
            resp.status = exc.status
            self.page(resp, view, "issue_new.html", form=form, error=str(exc))
            return
        finally:
            self.discard(uploaded)  # those the issue did not claim: it failed
        raise falcon.HTTPSeeOther(urls.issue(view.repo, issue.number))


# What a conversation is of: an issue, or a pull request (which is an issue and more).
Subject = TypeVar("Subject", bound=Issue | Pull)


class Conversation(IssueView, Generic[Subject]):
    """A conversation's page and its actions (comment, close, reopen, edit): an issue's
    (``IssueDetail``) or a pull request's (``PullDetail``, with its own template, header and
    URLs). ``find`` reads what the page is of, and every step after is handed it."""

    template: str
    query = ("shown", "find_label")

    def find(self, req: falcon.Request, view: RepoView, number: str) -> Subject:
        raise NotImplementedError

    def issue_of(self, subject: Subject) -> Issue:
        raise NotImplementedError

    def target(self, view: RepoView, issue: Issue, comment: int | None = None) -> str:
        raise NotImplementedError

    def more(
        self, req: falcon.Request, view: RepoView, subject: Subject, timeline: list[Entry]
    ) -> dict[str, Any]:
        """What the template needs besides the conversation itself; ``final`` False when it
        shows work still under way (the page is then not kept)."""
        return {}

    def refuse(self, subject: Subject, action: str) -> None:
        """Raise if ``action`` may not be taken on ``subject`` as it stands."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        self.kept_page(
            req, resp, view, lambda: self.show(req, resp, view, self.find(req, view, number))
        )

    def show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        subject: Subject,
        form: dict[str, str] | None = None,
        error: str = "",
    ) -> bool:
        """Render the conversation; whether the page is final."""
        issue = self.issue_of(subject)
        viewer = auth.viewer_of(req)
        policy = self.forge.policy
        shown = _shown(req)
        recorded = self.forge.issues.timeline(issue, shown, TIMELINE_LAST)
        timeline = self.forge.references.shown_to(viewer, view.repo, recorded)
        hidden = max(0, issue.entries - shown - TIMELINE_LAST)
        comments = [entry for entry in timeline if entry.kind == "comment"]
        files, comment_files = self.forge.attachments.of_issues(
            [issue.id], [entry.id for entry in comments]
        )
        texts = [issue.body, *(entry.body for entry in comments)]
        body, *htmls = self.markdown(view, texts)
        html_of = dict(zip(map(id, comments), htmls, strict=True))
        more = self.more(req, view, subject, timeline)
        self.page(
            resp,
            view,
            self.template,
            issue=issue,
            body=body,
            files=files[issue.id],
            comment_files=comment_files,
            timeline=[(entry, html_of.get(id(entry))) for entry in timeline],
            gap=(
                shown,
                hidden,
                min(hidden, TIMELINE_MORE),
                urls.exact_path(req) + f"?shown={shown + TIMELINE_MORE}#event-gap",
            ),
            may_comment=policy.may_take_part(viewer, view.level),
            may_change=policy.may_change_issue(viewer, view.level, issue.author_id),
            may_tidy=policy.may_edit_comment(viewer, view.level, None),  # anyone's comments
            reasons={"completed": "completed", "not_planned": "not planned"},
            form=form or {},
            error=error,
            here=urls.exact_path(req),
            sidebar=sidebar(self.forge, view, issue, viewer, timeline, _find_label(req)),
            action=self.target(view, issue),
            **more,
        )
        # what it shows of another repository follows that one's visibility, which this
        # repository's activity version does not: such a page is rendered each time
        others = names_others(view.repo, recorded, texts)
        return bool(more.get("final", True)) and not others

    def change_comment(
        self,
        view: RepoView,
        issue: Issue,
        account: Account,
        viewer: Viewer,
        form: dict[str, str],
        files: list[str],
    ) -> str:
        """Edit or delete the comment ``form["comment"]``: its author may, and whoever may
        push; an edit claims the files it names. The way back to the issue (or to the
        comment edited)."""
        text = form.get("comment", "")
        if not _NUMBER.fullmatch(text):
            raise BadRequest("name a comment")
        comment = int(text)
        author = self.forge.issues.comment_author(issue, comment)
        if not self.forge.policy.may_edit_comment(viewer, view.level, author):
            raise Forbidden("only its author and those who may push may change a comment")
        if form.get("action") == "delete_comment":
            self.forge.issues.delete_comment(issue, comment)
            return self.target(view, issue)
        self.forge.issues.edit_comment(issue, comment, account, form.get("body", ""))
        self.claim(view, account, files, issue.id, comment)
        return self.target(view, issue, comment)

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        subject = self.find(req, view, number)
        account = self.signed_in(req)
        form, files, uploaded = self.form_and_files(req, view, account)
        try:
            target = self.act(req, resp, view, subject, account, form, files)
        finally:
            self.discard(uploaded)  # the files it carried that what it posted did not claim
        if target is not None:
            raise falcon.HTTPSeeOther(target)

    def act(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        subject: Subject,
        account: Account,
        form: dict[str, str],
        files: list[str],
    ) -> str | None:
        """Take the action the form posts, claiming the files it names for the text it
        writes (a comment, the description): where to go next, or None when it failed and
        the form is shown again with the reason."""
        issue = self.issue_of(subject)
        viewer = auth.viewer_of(req)
        policy = self.forge.policy
        action = form.get("action", "")
        if action in ("edit_comment", "delete_comment"):
            return self.change_comment(view, issue, account, viewer, form, files)
        if action not in ("comment", "close", "reopen", "edit"):
            raise BadRequest(f"unknown action {action[:40]!r}")
        if not policy.may_take_part(viewer, view.level):
            raise Forbidden("you may not comment here")
        if action != "comment" and not policy.may_change_issue(viewer, view.level, issue.author_id):
            raise Forbidden("only its author and those who may push may close, reopen or edit it")
        self.refuse(subject, action)
        target = self.target(view, issue)
        try:
            if action == "comment":
                comment = self.forge.issues.comment(issue, account, form.get("body", ""))
                self.claim(view, account, files, issue.id, comment)
                target = self.target(view, issue, comment)
            elif action == "close":
                self.forge.issues.close(issue, account, form.get("reason", "completed"))
            elif action == "reopen":
                self.forge.issues.reopen(issue, account)
            else:
                self.forge.issues.edit(issue, account, form.get("title", ""), form.get("body", ""))
                self.claim(view, account, files, issue.id)
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, view, subject, form={**form, "failed": action}, error=str(exc))
            return None
        return target


class IssueDetail(Conversation[Issue]):
    """An issue's page and its actions."""

    template = "issue.html"

    def find(self, req: falcon.Request, view: RepoView, number: str) -> Issue:
        """The issue; a pull request's number is sent to the pull request's page (as Forgejo
        does), with one statement more only when the number is not an issue's."""
        issues_on(view)
        repo = view.repo
        found = issue_number(number)
        try:
            return self.forge.issues.get(repo.owner, repo.name, found)
        except NotFound:
            if req.method in ("GET", "HEAD") and self.forge.issues.kind_of(
                repo.owner, repo.name, found
            ):
                raise falcon.HTTPFound(urls.pull(repo, found)) from None
            raise

    def issue_of(self, subject: Issue) -> Issue:
        return subject

    def target(self, view: RepoView, issue: Issue, comment: int | None = None) -> str:
        return urls.issue(view.repo, issue.number, comment)
