"""A pull request's reviews through the API: list, create (with line comments, submitted at
once or left pending), read one, submit a pending one, delete a pending one, and a review's
line comments; in Forgejo's ``PullReview`` and ``PullReviewComment`` shapes.

The reviews are ``reviews.py``'s, as the files tab makes them: a line comment goes into its
author's pending review, which only they see, on lines of the diff of the merge base to the
head (``new_position`` a line of the head's file, ``old_position`` one of the merge base's);
submitting gives the verdict. Who may review, and who may give a verdict, is the access
policy's (``may_review``, ``may_judge``): a verdict refused is Forgejo's 422, as its refusal
of an author's approval of their own pull request is.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Required, TypedDict

import falcon

from floorless.accounts.accounts import Account
from floorless.collab.pulls import Pull
from floorless.collab.reviews import PullReviews, Review
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forgejo import pulls as shapes
from floorless.forgejo.pulls import PullReview, PullReviewComment
from floorless.forgejo.schema import Doc
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.pulls import PullApi
from floorless.web.api.repository import Target
from floorless.web.context import RepoView


# Forgejo's ReviewStateType as floorless's verdicts ("" is Forgejo's pending)
class CreatePullReviewOptions(TypedDict, total=False):
    """What ``POST`` of ``Reviews`` takes (Forgejo's ``CreatePullReviewOptions``)."""

    body: Annotated[str, Doc("the review's text")]
    event: Annotated[str, Doc("APPROVED, REQUEST_CHANGES, COMMENT or PENDING")]
    commit_id: Annotated[str, Doc("the head reviewed: the pull request's current one")]
    comments: Annotated[
        list[dict[str, Any]], Doc("line comments: path, body, new_position or old_position")
    ]


class SubmitPullReviewOptions(TypedDict, total=False):
    """What ``POST`` of ``OneReview`` takes (Forgejo's ``SubmitPullReviewOptions``)."""

    body: Annotated[str, Doc("the review's text")]
    event: Required[Annotated[str, Doc("APPROVED, REQUEST_CHANGES or COMMENT")]]


EVENTS = {
    "APPROVED": "approve",
    "REQUEST_CHANGES": "request_changes",
    "COMMENT": "comment",
    "PENDING": "pending",
    "": "pending",
}
MAX_COMMENTS = 100  # line comments one request may bring


def review_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise NotFound("no such review")
    return int(text)


class ReviewApi(PullApi):
    def reviewer(self, req: falcon.Request, view: RepoView) -> Account:
        """The caller, with a token that writes, who may review in ``view``'s repository."""
        account = self.writer(req)
        if not self.forge.policy.may_review(self.viewer(req), view.level):
            raise Forbidden("you may not review here")
        return account

    def verdict(self, req: falcon.Request, view: RepoView, pull: Pull, event: object) -> str:
        """Forgejo's ``event`` as a verdict the caller may give (422 otherwise)."""
        if not isinstance(event, str) or event.upper() not in EVENTS:
            raise Unprocessable("event is APPROVED, REQUEST_CHANGES, COMMENT or PENDING")
        verdict = EVENTS[event.upper()]
        if verdict in ("approve", "request_changes") and not self.forge.policy.may_judge(
            self.viewer(req), view.level, pull.issue.author_id
        ):
            raise Unprocessable("the author of a pull request may only comment on it")
        return verdict

    def found(self, req: falcon.Request, pull: Pull) -> PullReviews:
        """The submitted reviews and the caller's own pending ones."""
        return self.forge.reviews.of_pull(pull, self.viewer(req).account)

    def one(self, req: falcon.Request, pull: Pull, text: str) -> tuple[Review, PullReviews]:
        found = self.found(req, pull)
        review = found.reviews.get(review_id(text))
        if review is None:  # another's pending review is no review to the caller
            raise NotFound("no such review")
        return review, found

    def reviews_json(
        self,
        req: falcon.Request,
        view: RepoView,
        pull: Pull,
        reviews: list[Review],
        found: PullReviews,
    ) -> list[Any]:
        facts = self.pull_facts(req, view, [pull], [r.author for r in reviews])
        return [
            shapes.review_json(
                facts,
                pull,
                review,
                len(found.of_review(review.id)),
                stale=review.commit_oid != pull.head_oid,
            )
            for review in reviews
        ]


class Reviews(ReviewApi):
    """``GET/POST repos/{owner}/{repo}/pulls/{index}/reviews``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a pull request's reviews",
            list[PullReview],
            query=Paged,
            paged=True,
            operation_id="repoListPullReviews",
            tag="repository",
        ),
        "post": Operation(
            "review a pull request",
            PullReview,
            body=CreatePullReviewOptions,
            operation_id="repoCreatePullReview",
            tag="repository",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        pull = self.pull(view, index)
        found = self.found(req, pull)
        paging = self.paging(req)
        reviews = list(found.reviews.values())
        self.paged(req, resp, self.forge, paging, len(reviews))
        page = reviews[paging.offset : paging.offset + paging.limit]
        self.send(resp, self.reviews_json(req, view, pull, page, found))

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.reviewer(req, view)
        pull = self.pull(view, index)
        body = self.body(req)
        verdict = self.verdict(req, view, pull, body.get("event", ""))
        commit = str(body.get("commit_id") or "").lower()
        if commit and commit != pull.head_oid:
            raise Unprocessable("commit_id is not the pull request's head: review the head")
        comments = body.get("comments") or []
        if len(comments) > MAX_COMMENTS:
            raise Unprocessable(f"at most {MAX_COMMENTS} line comments at once")
        wanted = [_line_comment(each) for each in comments]
        if verdict == "pending" and not wanted:
            raise Unprocessable("a pending review starts with a line comment")
        anchors = self.anchor_points(view, pull)
        had_pending = self.found(req, pull).pending(account.id) is not None
        added: list[int] = []
        try:
            for path, side, line, text in wanted:
                made = self.forge.reviews.add_comment(
                    view.handle, pull, anchors, account, path, side, line, line, text
                )
                added.append(made.id)
            if verdict == "pending":
                review_of = self.forge.reviews.comment(pull, added[0]).review_id
            else:
                review_of = self.forge.reviews.submit(
                    pull, account, verdict, str(body.get("body", ""))
                ).id
        except BadRequest as exc:
            for comment_id in added:  # what this request added goes with its refusal
                self.forge.reviews.delete_comment(pull, account, comment_id)
            left = self.found(req, pull).pending(account.id)
            if left is not None and not had_pending:  # the pending review it started too
                self.forge.reviews.discard(pull, account, left.id)
            raise Unprocessable(str(exc)) from exc
        review, found = self.one(req, pull, str(review_of))
        self.send(resp, self.reviews_json(req, view, pull, [review], found)[0])

    def anchor_points(self, view: RepoView, pull: Pull) -> Any:
        tip = view.snapshot.branches.get(pull.base_branch.encode())
        try:
            return self.forge.reviews.anchors(view.handle, pull, None if tip is None else tip.hex())
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc


def _line_comment(raw: dict[str, Any]) -> tuple[str, str, int, str]:
    """One of Forgejo's ``CreatePullReviewComment``: (path, side, line, body)."""
    path, text = raw.get("path"), raw.get("body")
    new, old = raw.get("new_position") or 0, raw.get("old_position") or 0
    if not isinstance(path, str) or not isinstance(text, str):
        raise Unprocessable("a line comment has a path and a body")
    if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in (new, old)):
        raise Unprocessable("new_position and old_position are line numbers")
    if new:
        return path, "new", new, text
    if old:
        return path, "old", old, text
    raise Unprocessable("a line comment names new_position or old_position")


class OneReview(ReviewApi):
    """``GET/POST(submit)/DELETE repos/{owner}/{repo}/pulls/{index}/reviews/{id}``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a review", PullReview, operation_id="repoGetPullReview", tag="repository"
        ),
        "post": Operation(
            "submit a pending review",
            PullReview,
            body=SubmitPullReviewOptions,
            operation_id="repoSubmitPullReview",
            tag="repository",
        ),
        "delete": Operation(
            "delete a pending review",
            None,
            204,
            operation_id="repoDeletePullReview",
            tag="repository",
        ),
    }

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        review: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        pull = self.pull(view, index)
        shown, found = self.one(req, pull, review)
        self.send(resp, self.reviews_json(req, view, pull, [shown], found)[0])

    def on_post(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        review: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.reviewer(req, view)
        pull = self.pull(view, index)
        found, _ = self.one(req, pull, review)
        body = self.body(req)
        verdict = self.verdict(req, view, pull, body["event"])
        if verdict == "pending":
            raise Unprocessable("submit as APPROVED, REQUEST_CHANGES or COMMENT")
        if not found.pending:
            raise Unprocessable("this review is submitted already")
        try:
            submitted = self.forge.reviews.submit(pull, account, verdict, str(body.get("body", "")))
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        shown, everything = self.one(req, pull, str(submitted.id))
        self.send(resp, self.reviews_json(req, view, pull, [shown], everything)[0])

    def on_delete(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        review: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.reviewer(req, view)
        pull = self.pull(view, index)
        found, _ = self.one(req, pull, review)
        if not found.pending:
            raise Unprocessable("a submitted review stays: only a pending one can be deleted")
        self.forge.reviews.discard(pull, account, found.id)
        self.nothing(resp)


class ReviewComments(ReviewApi):
    """``GET repos/{owner}/{repo}/pulls/{index}/reviews/{id}/comments``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "a review's line comments",
            list[PullReviewComment],
            operation_id="repoGetPullReviewComments",
            tag="repository",
        ),
    }

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        review: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        pull = self.pull(view, index)
        shown, found = self.one(req, pull, review)
        comments = found.of_review(shown.id)
        facts = self.pull_facts(req, view, [pull], [c.author for c in comments])
        self.send(resp, [shapes.review_comment_json(facts, pull, c) for c in comments])
