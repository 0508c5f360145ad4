"""A pull request's reviews on the web: posting a line comment, editing or deleting a pending
one, submitting a review; and what the files tab and the conversation show of them.

One form serves every line of the files tab: its path, side and line fields are typed by
hand, or filled by a few lines of script when a line number is clicked (the diff's rows
carry their path, side and line). A form per line would weigh on every line of a large
diff; one ``<details>`` form per file, filled in place, weighs the same on a diff of ten
lines or ten thousand, and works without script.

Every route first finds the repository as any page of it does (404 for whoever may not read
it), then the pull request; who may review and who may give a verdict is the access policy's
(``may_review``, ``may_judge``). Nothing here runs git beyond reading the diff's files
through the open handle, in-process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import falcon
from markupsafe import Markup, escape

from floorless.accounts.accounts import Account
from floorless.collab.pulls import Pull
from floorless.collab.reviews import VERDICTS, Anchors, ReviewComment
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.web import auth
from floorless.web.context import RepoView
from floorless.web.views.issues import IssueView, issue_number

_LINE = re.compile(r"[0-9]{1,9}")
VERDICT_WORDS = {
    "comment": "reviewed",
    "approve": "approved these changes",
    "request_changes": "requested changes",
}


def line_number(text: str, name: str = "line") -> int:
    if not _LINE.fullmatch(text.strip()):
        raise BadRequest(f"{name} is a line number")
    return int(text)


def anchors_of(forge: Forge, view: RepoView, pull: Pull) -> Anchors:
    """The commits the pull request's diff is shown between, with the base branch as the
    page's refs have it."""
    tip = view.snapshot.branches.get(pull.base_branch.encode())
    return forge.reviews.anchors(view.handle, pull, None if tip is None else tip.hex())


def review_context(
    forge: Forge,
    req: falcon.Request,
    view: RepoView,
    pull: Pull,
    markdown: Callable[[list[str]], list[Markup]],
    files_tab: bool = False,
) -> dict[str, Any]:
    """What the conversation and the files tab need of the reviews (two statements for all of
    them, one more for the viewer's last look; on the files tab, one upsert of it): the
    reviews and their comments with their Markdown, the comments to anchor under lines,
    each reviewer's verdict, the commits new since the viewer last looked, and what the
    viewer may do. A comment not yet followed to the head shown wakes the thread that does."""
    viewer = auth.viewer_of(req)
    account = viewer.account if viewer.session is not None else None
    anchors = anchors_of(forge, view, pull)
    found = forge.reviews.of_pull(pull, account)
    behind = found.behind(anchors)
    if behind:
        forge.reviews.follow_pull_soon(pull)
    htmls = markdown([r.body for r in found.reviews.values()] + [c.body for c in found.comments])
    review_html = dict(zip(found.reviews, htmls, strict=False))
    comment_html = dict(
        zip((c.id for c in found.comments), htmls[len(found.reviews) :], strict=True)
    )
    news = None
    looked = False  # the files tab recorded this look: the next one shows nothing new
    if account is not None:
        seen = forge.reviews.last_seen(pull, account)
        news = forge.reviews.new_since(view.handle, pull, anchors, seen)
        if files_tab and seen != anchors.head:
            forge.reviews.saw(pull, account, anchors.head)
            looked = True
    policy = forge.policy
    return {
        "reviews": found,
        "review_html": review_html,
        "comment_html": comment_html,
        "anchored": found.anchored(anchors),
        "anchors": anchors,
        "verdicts": found.verdicts(),
        "verdict_words": VERDICT_WORDS,
        "news": news,
        "pending_review": found.pending(account.id if account else None),
        "may_review": policy.may_review(viewer, view.level),
        "may_judge": policy.may_judge(viewer, view.level, pull.issue.author_id),
        # what the page shows stays true until a write moves the activity version or a
        # push the refs: not while comments are being followed or new commits counted, nor
        # a page that says what is new since a look (the next look makes it old)
        "final": not behind and news is None and not looked,
    }


# a diff row's old and new line numbers: side by side (unified), or each before its side's
# code (split, ``diffrows``)
_ROW = re.compile(
    r'<tr class="[^"]*"><td class="ln"(?: data-side="old")?>(\d*)</td>'
    r'(?:<td class="code[^"]*">(?:<pre>.*?</pre>)?</td>)?'
    r'<td class="ln"(?: data-side="new")?>(\d*)</td>'
)


def rows_with_comments(
    rows: Markup,
    path: str,
    anchored: dict[tuple[str, str, int], list[ReviewComment]],
    render: Callable[[list[ReviewComment]], str],
    old_path: str | None = None,
) -> tuple[Markup, list[ReviewComment]]:
    """A file's diff rows (``views/commit.py``'s, cached as they are) with the comments on
    its lines after the rows they name, and the comments on lines the rows do not show. Only
    files with comments are split, row by row. ``old_path``: the file's name on the old side
    when it was renamed."""
    names = {"new": path, "old": path if old_path is None else old_path}
    mine = {(side, line): c for (p, side, line), c in anchored.items() if names[side] == p}
    if not mine:
        return rows, []
    parts = str(rows).split("</tr>")
    placed: set[tuple[str, int]] = set()
    out: list[str] = []
    for part in parts[:-1]:
        out.append(part + "</tr>")
        found = _ROW.match(part)
        if found is None:
            continue
        old, new = found.group(1), found.group(2)
        keys = ([("old", int(old))] if old else []) + ([("new", int(new))] if new else [])
        for key in keys:
            if key in mine and key not in placed:
                placed.add(key)
                out.append(render(mine[key]))
    out.append(parts[-1])
    rest = [c for key, comments in sorted(mine.items()) if key not in placed for c in comments]
    return Markup("".join(out)), rest  # noqa: S704 - the rows' own HTML and escaped comments


class ReviewView(IssueView):
    def reviewing(self, req: falcon.Request, view: RepoView, number: str) -> tuple[Account, Pull]:
        """The reviewer (anyone not signed in is sent to sign in; one who may not review is
        refused) and the pull request, in the repository (found first: 404 for whoever may
        not read it)."""
        if not view.repo.has_pulls:
            raise NotFound("pull requests are turned off here")
        account = self.signed_in(req)
        if not self.forge.policy.may_review(auth.viewer_of(req), view.level):
            raise Forbidden("you may not review here")
        pull = self.forge.pulls.get(view.repo.owner, view.repo.name, issue_number(number))
        return account, pull


class ReviewComments(ReviewView):
    """POST a line comment (path, side, line, optional start_line, body; old_path, a renamed
    file's old name, for the old side) into one's pending review; back to the files tab at
    the comment."""

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        account, pull = self.reviewing(req, view, number)
        form = self.form(req)
        line = line_number(form.get("line", ""))
        start = line_number(form.get("start_line") or str(line), "start_line")
        side = form.get("side", "new")
        path = form.get("path", "")
        if side == "old" and form.get("old_path"):  # a renamed file's name before
            path = form["old_path"]
        comment = self.forge.reviews.add_comment(
            view.handle,
            pull,
            anchors_of(self.forge, view, pull),
            account,
            path,
            side,
            start,
            line,
            form.get("body", ""),
        )
        raise falcon.HTTPSeeOther(urls.review_anchor(view.repo, pull.number, comment.id))


class ReviewCommentChange(ReviewView):
    """POST ``action`` edit (with ``body``) or delete to one's own pending comment."""

    def on_post(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        number: str,
        comment: str,
    ) -> None:
        account, pull = self.reviewing(req, view, number)
        form = self.form(req)
        if not _LINE.fullmatch(comment):
            raise NotFound("no such comment")
        comment_id = int(comment)
        action = form.get("action", "")
        if action == "edit":
            self.forge.reviews.edit_comment(pull, account, comment_id, form.get("body", ""))
            raise falcon.HTTPSeeOther(urls.review_anchor(view.repo, pull.number, comment_id))
        if action == "delete":
            self.forge.reviews.delete_comment(pull, account, comment_id)
            raise falcon.HTTPSeeOther(urls.pull(view.repo, pull.number, "files"))
        raise BadRequest(f"unknown action {action[:40]!r}")


class ReviewSubmit(ReviewView):
    """POST ``verdict`` (comment, approve, request_changes) and ``body``: the pending review
    (or one without line comments) submitted; to the conversation at the review."""

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        account, pull = self.reviewing(req, view, number)
        form = self.form(req)
        verdict = form.get("verdict", "comment")
        if verdict not in VERDICTS:
            raise BadRequest("a review is a comment, an approval or a request for changes")
        if verdict != "comment" and not self.forge.policy.may_judge(
            auth.viewer_of(req), view.level, pull.issue.author_id
        ):
            raise Forbidden("the author of a pull request may only comment on it")
        review = self.forge.reviews.submit(pull, account, verdict, form.get("body", ""))
        raise falcon.HTTPSeeOther(urls.review(view.repo, pull.number, review.id))


def comment_rows(comments: list[ReviewComment], html: dict[int, Markup], colspan: int = 3) -> str:
    """Table rows holding the comments on one line, for the files tab."""
    parts = []
    for c in comments:
        who = escape(c.author) if c.author else "A deleted account"
        pending = ' <span class="label">pending</span>' if c.pending else ""
        parts.append(
            f'<tr class="review-comment" id="discussion_r{c.id}"><td colspan="{colspan}">'
            f'<p class="muted"><b>{who}</b>{pending}</p>'
            f'<div class="markdown">{html.get(c.id, "")}</div></td></tr>'
        )
    return "".join(parts)


def annotate(
    context: dict[str, Any], path: str, rows: Markup
) -> tuple[Markup, list[ReviewComment]]:
    """For the files tab: a file's rows with the comments of ``review_context`` under their
    lines, and those on lines the rows do not show (to list beside the file)."""
    html: dict[int, Markup] = context["comment_html"]
    return rows_with_comments(rows, path, context["anchored"], lambda cs: comment_rows(cs, html))
