"""A pull request's pages: its conversation, its commits and files tabs, and its ``.diff`` and
``.patch`` (their list is the issue list's, ``IssueList``, of the other kind).

A pull request is an issue, so the conversation is the issue page's (``Conversation``) with a
pull request's header, tabs and URLs; its actions (comment, close, reopen, edit) are theirs
too. The commits and the diff are those between the merge base and the head as the reviews
anchor their line comments (``anchors_of``), read from this repository's handle, where
``refs/pull/{n}/head`` keeps the head (after its branch is deleted, and for a head from a
fork), and kept by that pair of commit ids.

Every route is a page of its repository (404 for whoever may not read it); a repository with
pull requests turned off answers 404 on all of them.
"""

from __future__ import annotations

import re
from typing import Any

import falcon
import pygit2

from floorless.collab.issues import Entry, Issue
from floorless.collab.pulls import Pull
from floorless.core.errors import BadRequest, NotFound
from floorless.forgejo import urls
from floorless.git.compare import COMMITS_LIMIT
from floorless.web import auth, diffrows
from floorless.web.comparing import cached_commits, send_diff
from floorless.web.context import RepoView
from floorless.web.render import text
from floorless.web.views.commit import diff_options
from floorless.web.views.compare import cached_diff
from floorless.web.views.issues import Conversation, IssueView, pulls_on
from floorless.web.views.merge import merge_box
from floorless.web.views.reviews import (
    anchors_of,
    comment_rows,
    review_context,
    rows_with_comments,
)

_NUMBERED = re.compile(r"([0-9]{1,9})(\.diff|\.patch)?")
PUSH_LIMIT = 100  # commits a "pushed N commits" event counts (then "100+")


class PullDetail(Conversation[Pull]):
    """``/pulls/{n}``: the conversation; ``/pulls/{n}.diff`` and ``.patch``."""

    template = "pull.html"

    def find(self, req: falcon.Request, view: RepoView, number: str) -> Pull:
        """The pull request; an issue's number is sent to the issue's page."""
        pulls_on(view)
        found = _NUMBERED.fullmatch(number)
        if found is None or found.group(2):
            raise NotFound(f"no pull request {number[:20]!r}")
        return pull_or_issue(self, req, view, int(found.group(1)))

    def issue_of(self, subject: Pull) -> Issue:
        return subject.issue

    def target(self, view: RepoView, issue: Issue, comment: int | None = None) -> str:
        return urls.pull(view.repo, issue.number, comment=comment)

    def refuse(self, subject: Pull, action: str) -> None:
        if action == "reopen" and subject.merged:
            raise BadRequest("a merged pull request cannot be reopened")

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        found = _NUMBERED.fullmatch(number)
        if found is not None and found.group(2):
            pulls_on(view)
            pull = pull_or_issue(self, req, view, int(found.group(1)))
            merge_base = tab_anchors(self, view, pull)[0]
            if not merge_base:
                raise BadRequest("the base branch of this pull request is gone")
            send_diff(
                self.forge,
                req,
                resp,
                view.repo,
                view.handle,
                merge_base,
                pull.head_oid,
                found.group(2)[1:],
                self.renderer,
            )
            return
        super().on_get(req, resp, view, number)

    def more(
        self, req: falcon.Request, view: RepoView, subject: Pull, timeline: list[Entry]
    ) -> dict[str, Any]:
        context = {
            **pull_context(self, req, view, subject, "conversation"),
            "pushes": self.pushes(view, timeline),
            **merge_box(self.forge, view, subject, auth.viewer_of(req)),
        }
        context["final"] = context.get("final", True) and context["merge_state"] != "checking"
        return context

    def pushes(self, view: RepoView, timeline: list[Entry]) -> dict[int, str]:
        """How many commits each ``pushed`` event of the page added (a walk from the new head
        to the old one, at most PUSH_LIMIT, kept by the pair of commit ids)."""
        counts: dict[int, str] = {}
        for entry in timeline:
            if entry.kind != "pushed" or not entry.old_value or not entry.body:
                continue
            try:
                commits, more = cached_commits(
                    self.renderer, view.handle, entry.old_value, entry.body, PUSH_LIMIT
                )
            except (KeyError, ValueError, pygit2.GitError):
                continue  # a commit no longer here: the event says "pushed" alone
            counts[entry.id] = f"{len(commits)}{'+' if more else ''}"
        return counts


def pull_or_issue(view: IssueView, req: falcon.Request, repo_view_: RepoView, number: int) -> Pull:
    """Pull request ``number``; an issue's number is sent (on a GET) to the issue's page."""
    repo = repo_view_.repo
    try:
        return view.forge.pulls.get(repo.owner, repo.name, number)
    except NotFound:
        if (
            req.method in ("GET", "HEAD")
            and view.forge.issues.kind_of(repo.owner, repo.name, number) is False
        ):
            raise falcon.HTTPFound(urls.issue(repo, number)) from None
        raise


def tab_anchors(view: IssueView, repo_view_: RepoView, pull: Pull) -> tuple[str, str]:
    """The merge base and head the pull request's commits and diff are shown between (the
    merge base "" when the base branch is gone and the pull request was never checked)."""
    try:
        anchors = anchors_of(view.forge, repo_view_, pull)
    except BadRequest:
        return "", pull.head_oid
    return anchors.merge_base, anchors.head


def pull_context(
    view: IssueView, req: falcon.Request, repo_view_: RepoView, pull: Pull, tab: str
) -> dict[str, Any]:
    """What every page of a pull request shows above its tab: the pull request, how many
    commits it has (bounded), and the reviews' part (``review_context``)."""
    merge_base, head = tab_anchors(view, repo_view_, pull)
    commits: list[Any] = []
    more = False
    if merge_base:
        try:
            commits, more = cached_commits(
                view.renderer, repo_view_.handle, merge_base, head, COMMITS_LIMIT
            )
        except (KeyError, ValueError, pygit2.GitError):
            merge_base = ""
    reviews: dict[str, Any] = {}
    if merge_base:
        reviews = review_context(
            view.forge,
            req,
            repo_view_,
            pull,
            lambda texts: view.markdown(repo_view_, texts),
            files_tab=tab == "files",
        )
    return {
        "pull": pull,
        "tab": tab,
        "range_base": merge_base,
        "commits": list(reversed(commits)),
        "commit_count": f"{len(commits)}{'+' if more else ''}" if merge_base else "",
        **reviews,
    }


class PullCommits(IssueView):
    """``/pulls/{n}/commits``: the commits of the pull request, oldest first."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        pulls_on(view)
        self.kept_page(req, resp, view, lambda: self.show(req, resp, view, number))

    def show(self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str) -> bool:
        pull = pull_or_issue(self, req, view, pull_number(number))
        context = pull_context(self, req, view, pull, "commits")
        self.page(resp, view, "pull_commits.html", **context)
        return bool(context.get("final", True))


class PullFiles(IssueView):
    """``/pulls/{n}/files``: the diff of the merge base to the head, as the compare page shows
    it, with the reviews' line comments under their lines (in the unified style; the split
    style lists them under their file)."""

    query = ("style", "w")

    def variant(self, req: falcon.Request) -> object:
        return diff_options(req)

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        pulls_on(view)
        diff_options(req, resp)  # remembers a style chosen
        self.kept_page(req, resp, view, lambda: self.show(req, resp, view, number))

    def show(self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str) -> bool:
        pull = pull_or_issue(self, req, view, pull_number(number))
        context = pull_context(self, req, view, pull, "files")
        merge_base = context["range_base"]
        options = diff_options(req)
        diff, rows, rest = None, {}, {}
        if merge_base:
            shown = cached_diff(
                self.renderer, view.handle, self.settings, merge_base, pull.head_oid, options
            )
            diff, rows = shown.diff, dict(shown.rows)
            anchored = context.get("anchored") or {}
            html = context.get("comment_html") or {}
            for i, markup in shown.rows.items():
                path, old_path = text(diff.files[i].new_path), text(diff.files[i].old_path)
                rows[i], unplaced = rows_with_comments(
                    markup, path, anchored, lambda found: comment_rows(found, html), old_path
                )
                if unplaced:
                    rest[i] = comment_rows(unplaced, html)
        self.page(
            resp,
            view,
            "pull_files.html",
            diff=diff,
            rows=rows,
            unplaced=rest,
            head_repo=view.repo,
            head_commit=pull.head_oid,
            merge_base=merge_base,
            options=options,
            with_file_url=diffrows.with_file_url,
            full_diff=urls.pull_diff(view.repo, pull.number, "diff"),
            **context,
        )
        return bool(context.get("final", True))


def pull_number(text_: str) -> int:
    if not re.fullmatch(r"[0-9]{1,9}", text_):
        raise NotFound(f"no pull request {text_[:20]!r}")
    return int(text_)
