"""Labels, milestones and assignees on the web: the labels page, the milestones pages, and
the sidebar of an issue's (and a pull request's) page with the forms that change it.

The sidebar is one function, ``issues.sidebar``, and one partial, ``_issue_sidebar.html``, so that
the pull request page shows the same; its forms post to one route for both kinds,
``/{owner}/{repo}/issues/{n}/triage``, which answers with the page of whichever it is. Each
change is one transaction with its timeline event (``triage.py``). Its statements are a fixed
few whatever the number of labels, assignees or milestones (one per list).

A repository with issues and pull requests both turned off has no labels or milestones
pages (404, as for a page that does not exist).
"""

from __future__ import annotations

import re

import falcon

from floorless.collab.filters import IssueFilter
from floorless.collab.triage import LABELS_PER_PAGE
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forgejo import urls
from floorless.web import auth
from floorless.web.context import RepoView
from floorless.web.views.issues import QUERY_MAX, STATES, IssueView, issue_number

_ID = re.compile(r"[0-9]{1,12}")
MAX_PAGE = 1_000_000  # a page past any list, and an offset every database can hold


def _id(text: str, what: str) -> int:
    if not _ID.fullmatch(text):
        raise BadRequest(f"no such {what}")
    return int(text)


def sorting_on(view: RepoView) -> None:
    """Labels and milestones exist while issues or pull requests do."""
    if not (view.repo.has_issues or view.repo.has_pulls):
        raise NotFound("this repository has no issues")


class TriageChange(IssueView):
    """POST ``/{owner}/{repo}/issues/{n}/triage``: ``action`` label (``label`` an id, ``on``
    1 or 0), assign (``user``, ``on``) or milestone (``milestone`` an id, or "" for none)."""

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        found = issue_number(number)
        is_pull = self.forge.issues.kind_of(view.repo.owner, view.repo.name, found)
        if is_pull is None or not (view.repo.has_pulls if is_pull else view.repo.has_issues):
            raise NotFound(f"no issue #{found}")
        issue = self.forge.issues.get(view.repo.owner, view.repo.name, found, pull=is_pull)
        account = self.signed_in(req)
        form = self.form(req)
        viewer = auth.viewer_of(req)
        policy = self.forge.policy
        triage = self.forge.triage
        action = form.get("action", "")
        on = form.get("on", "1") == "1"
        if action == "label" or action == "milestone":
            if not policy.may_label(viewer, view.level):
                raise Forbidden("only those who may push may label and set milestones")
            if action == "label":
                triage.set_label(issue, account, _id(form.get("label", ""), "label"), on)
            else:
                chosen = form.get("milestone", "")
                triage.set_milestone(issue, account, _id(chosen, "milestone") if chosen else None)
        elif action == "assign":
            if not policy.may_assign(viewer, view.level):
                raise Forbidden("only those who may push may assign")
            name = form.get("user", "").strip()
            by_lower = {n.lower(): n for n in policy.assignable(view.repo)}
            if name.lower() not in by_lower:
                raise BadRequest(f"{name[:40]!r} may not be assigned here")
            person = self.forge.accounts.require(by_lower[name.lower()])
            triage.set_assignee(issue, account, person, on)
        else:
            raise BadRequest(f"unknown action {action[:40]!r}")
        raise falcon.HTTPSeeOther(urls.numbered(view.repo, issue.number, is_pull))


class Labels(IssueView):
    """``/{owner}/{repo}/labels``: the labels with their open issues, ``LABELS_PER_PAGE`` a
    page (``?page=``), those whose name holds ``?q=`` when it is given; writers create, edit
    and delete them (``action`` create, edit, delete)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        sorting_on(view)
        self.show(req, resp, view)

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, error: str = ""
    ) -> None:
        raw = req.get_param("page") or "1"
        if not _ID.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE:
            raise BadRequest("page is a whole number from 1")
        page = int(raw)
        q = " ".join((req.get_param("q") or "").split())[:QUERY_MAX]
        labels, total = self.forge.triage.listing(
            view.repo.owner,
            view.repo.name,
            (page - 1) * LABELS_PER_PAGE,
            LABELS_PER_PAGE,
            q,
            counted=True,
        )
        pages = max(1, -(-total // LABELS_PER_PAGE))
        self.page(
            resp,
            view,
            "labels.html",
            labels=labels,
            total=total,
            query=q,
            page=page,
            pages=pages,
            prev_url=urls.labels(view.repo, q, page - 1) if page > 1 else None,
            next_url=urls.labels(view.repo, q, page + 1) if page < pages else None,
            may_manage=self.forge.policy.may_label(auth.viewer_of(req), view.level),
            error=error,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        sorting_on(view)
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_label(auth.viewer_of(req), view.level):
            raise Forbidden(f"{account.name} may not change the labels here")
        triage = self.forge.triage
        owner, name = view.repo.owner, view.repo.name
        action = form.get("action", "")
        text, color = form.get("name", ""), form.get("color", "")
        description = form.get("description", "")
        try:
            if action == "create":
                triage.create_label(owner, name, text, color, description)
            elif action == "edit":
                label_id = _id(form.get("id", ""), "label")
                triage.edit_label(owner, name, label_id, text, color, description)
            elif action == "delete":
                triage.delete_label(owner, name, _id(form.get("id", ""), "label"))
            else:
                raise BadRequest(f"unknown action {action[:40]!r}")
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, view, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.labels(view.repo))


class Milestones(IssueView):
    """``/{owner}/{repo}/milestones``: open or closed milestones with their progress;
    writers create them here."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        sorting_on(view)
        self.show(req, resp, view)

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, error: str = ""
    ) -> None:
        state = req.get_param("state") or "open"
        if state not in ("open", "closed"):
            raise BadRequest("state is open or closed")
        every = self.forge.triage.milestones(view.repo.owner, view.repo.name)
        self.page(
            resp,
            view,
            "milestones.html",
            milestones=[m for m in every if m.state == state],
            counts={s: sum(1 for m in every if m.state == s) for s in ("open", "closed")},
            state=state,
            may_manage=self.forge.policy.may_label(auth.viewer_of(req), view.level),
            error=error,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        sorting_on(view)
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_label(auth.viewer_of(req), view.level):
            raise Forbidden(f"{account.name} may not change the milestones here")
        try:
            made = self.forge.triage.save_milestone(
                view.repo.owner,
                view.repo.name,
                None,
                form.get("title", ""),
                form.get("description", ""),
                form.get("due", ""),
            )
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, view, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.milestone(view.repo, made))


class MilestoneDetail(IssueView):
    """``/{owner}/{repo}/milestone/{id}``: a milestone and its issues; writers edit, close,
    reopen or delete it (``action``)."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, milestone: str
    ) -> None:
        sorting_on(view)
        self.show(req, resp, view, _id(milestone, "milestone"))

    def show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        milestone_id: int,
        error: str = "",
    ) -> None:
        owner, name = view.repo.owner, view.repo.name
        found = self.forge.triage.milestone(owner, name, milestone_id)
        state = req.get_param("state") or "open"
        if state not in STATES:
            raise BadRequest("state is open, closed or all")
        issues = self.forge.issues.page(owner, name, IssueFilter(state, milestone=found.title))
        self.page(
            resp,
            view,
            "milestone.html",
            milestone=found,
            found=issues,
            state=state,
            may_manage=self.forge.policy.may_label(auth.viewer_of(req), view.level),
            error=error,
        )

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, milestone: str
    ) -> None:
        sorting_on(view)
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_label(auth.viewer_of(req), view.level):
            raise Forbidden(f"{account.name} may not change the milestones here")
        triage = self.forge.triage
        owner, name = view.repo.owner, view.repo.name
        milestone_id = _id(milestone, "milestone")
        action = form.get("action", "")
        try:
            if action == "edit":
                triage.save_milestone(
                    owner,
                    name,
                    milestone_id,
                    form.get("title", ""),
                    form.get("description", ""),
                    form.get("due", ""),
                )
            elif action in ("close", "reopen"):
                state = "closed" if action == "close" else "open"
                triage.set_milestone_state(owner, name, milestone_id, state)
            elif action == "delete":
                triage.delete_milestone(owner, name, milestone_id)
                raise falcon.HTTPSeeOther(urls.milestones(view.repo))
            else:
                raise BadRequest(f"unknown action {action[:40]!r}")
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, view, milestone_id, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.milestone(view.repo, milestone_id))
