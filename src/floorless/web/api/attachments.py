"""An issue's files and a comment's through the API, in Forgejo's paths and shapes
(``/issues/{index}/assets`` and ``/issues/comments/{id}/assets``).

Whoever may read the repository lists and reads them. As on Forgejo, attaching, renaming and
deleting an issue's files is for its author and those who may push, and a comment's for its
author and those who may push (``Policy.may_change_issue``, ``may_edit_comment``); both need
a credential that may write. A file is uploaded as a release's is (``web/uploads.py``): the
form field ``attachment`` of a multipart body, or the body itself, named by ``?name=`` or its
file name; the size limit and the types allowed are the ``attachment_*`` settings (413, 415).
An issue's files are its own, not its comments': each is reached by its own path only (any
other answers 404, as a file that does not exist).
"""

from __future__ import annotations

from typing import ClassVar

import falcon

from floorless.collab.issues import Comment, Issue
from floorless.core.errors import Forbidden, NotFound
from floorless.files.attachments import Attachment as AttachmentRow
from floorless.forgejo.issues import Attachment, attachment_json
from floorless.web.api.base import Operation, Unprocessable
from floorless.web.api.issues import IssueResource, number_of
from floorless.web.api.releases import AssetQuery, EditAttachmentOptions
from floorless.web.api.repository import Target
from floorless.web.uploads import attach_sent

_MISSING = "attachment not found"


class FileResource(IssueResource):
    """What the four resources share: the files' JSON, one file found, one uploaded."""

    def shaped(self, req: falcon.Request, target: Target, found: AttachmentRow) -> Attachment:
        return attachment_json(found, self.public(req), target.repo)

    def listed(
        self, req: falcon.Request, resp: falcon.Response, target: Target, files: list[AttachmentRow]
    ) -> None:
        self.send(resp, [self.shaped(req, target, found) for found in files])

    def one(self, issue: Issue, comment: Comment | None, attachment_id: str) -> AttachmentRow:
        """File ``attachment_id`` if it is the issue's own (or, ``comment``, that comment's)."""
        found = self.forge.attachments.by_id(number_of(attachment_id, "attachment"))
        if found is None or found.issue_id != issue.id:
            raise NotFound(_MISSING)
        if found.comment_id != (comment.id if comment is not None else None):
            raise NotFound(_MISSING)
        return found

    def upload(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        issue: Issue,
        comment: Comment | None = None,
    ) -> None:
        account = self.writer(req)
        stored = attach_sent(
            req,
            self.forge.attachments,
            target.repo.id,
            account.id,
            Unprocessable,
            issue_id=issue.id,
            comment_id=comment.id if comment is not None else None,
        )
        self.send(resp, self.shaped(req, target, stored), 201)

    def rename(
        self, req: falcon.Request, resp: falcon.Response, target: Target, found: AttachmentRow
    ) -> None:
        name = self.body(req).get("name")
        if name:
            found = self.forge.attachments.rename(found, str(name))
        self.send(resp, self.shaped(req, target, found), 201)  # as Forgejo answers


class IssueFiles(FileResource):
    """What an issue's files take: the issue, and who may change them."""

    def changing(self, req: falcon.Request, target: Target, index: str) -> Issue:
        self.writer(req)
        issue = self.issue(target.repo, index)
        if not self.forge.policy.may_change_issue(self.viewer(req), target.level, issue.author_id):
            raise Forbidden("only its author and those who may push may change its files")
        return issue


class IssueAssets(IssueFiles):
    """``/repos/{owner}/{repo}/issues/{index}/assets``: list an issue's files, attach one."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list an issue's files",
            list[Attachment],
            operation_id="issueListIssueAttachments",
            tag="issue",
        ),
        "post": Operation(
            "attach a file to an issue (multipart field attachment, streamed)",
            Attachment,
            status=201,
            query=AssetQuery,
            operation_id="issueCreateIssueAttachment",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        issue = self.issue(target.repo, index)
        files, _ = self.forge.attachments.of_issues([issue.id])
        self.listed(req, resp, target, files[issue.id])

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        self.upload(req, resp, target, self.changing(req, target, index))


class IssueAsset(IssueFiles):
    """``/repos/{owner}/{repo}/issues/{index}/assets/{asset}``: one of an issue's files."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "one of an issue's files",
            Attachment,
            operation_id="issueGetIssueAttachment",
            tag="issue",
        ),
        "patch": Operation(
            "rename one of an issue's files",
            Attachment,
            status=201,  # as Forgejo answers
            body=EditAttachmentOptions,
            operation_id="issueEditIssueAttachment",
            tag="issue",
        ),
        "delete": Operation(
            "delete one of an issue's files",
            None,
            status=204,
            operation_id="issueDeleteIssueAttachment",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str, asset: str
    ) -> None:
        issue = self.issue(target.repo, index)
        self.send(resp, self.shaped(req, target, self.one(issue, None, asset)))

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str, asset: str
    ) -> None:
        issue = self.changing(req, target, index)
        self.rename(req, resp, target, self.one(issue, None, asset))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str, asset: str
    ) -> None:
        issue = self.changing(req, target, index)
        self.forge.attachments.delete(self.one(issue, None, asset))
        self.nothing(resp)


class CommentFiles(FileResource):
    """What a comment's files take: the comment, its issue, and who may change them."""

    def of(self, target: Target, id: str) -> tuple[Comment, Issue]:
        comment = self.comment(target.repo, id)
        return comment, self.forge.issues.find(target.repo.owner, target.repo.name, comment.number)

    def changing(self, req: falcon.Request, target: Target, id: str) -> tuple[Comment, Issue]:
        self.writer(req)
        comment, issue = self.of(target, id)
        if not self.forge.policy.may_edit_comment(
            self.viewer(req), target.level, comment.author_id
        ):
            raise Forbidden("only its author and those who may push may change its files")
        return comment, issue


class CommentAssets(CommentFiles):
    """``/repos/{owner}/{repo}/issues/comments/{id}/assets``: a comment's files."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a comment's files",
            list[Attachment],
            operation_id="issueListIssueCommentAttachments",
            tag="issue",
        ),
        "post": Operation(
            "attach a file to a comment (multipart field attachment, streamed)",
            Attachment,
            status=201,
            query=AssetQuery,
            operation_id="issueCreateIssueCommentAttachment",
            tag="issue",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        comment, _ = self.of(target, id)
        _, files = self.forge.attachments.of_issues((), [comment.id])
        self.listed(req, resp, target, files[comment.id])

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        comment, issue = self.changing(req, target, id)
        self.upload(req, resp, target, issue, comment)


class CommentAsset(CommentFiles):
    """``/repos/{owner}/{repo}/issues/comments/{id}/assets/{asset}``: one of its files."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "one of a comment's files",
            Attachment,
            operation_id="issueGetIssueCommentAttachment",
            tag="issue",
        ),
        "patch": Operation(
            "rename one of a comment's files",
            Attachment,
            status=201,  # as Forgejo answers
            body=EditAttachmentOptions,
            operation_id="issueEditIssueCommentAttachment",
            tag="issue",
        ),
        "delete": Operation(
            "delete one of a comment's files",
            None,
            status=204,
            operation_id="issueDeleteIssueCommentAttachment",
            tag="issue",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        comment, issue = self.of(target, id)
        self.send(resp, self.shaped(req, target, self.one(issue, comment, asset)))

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        comment, issue = self.changing(req, target, id)
        self.rename(req, resp, target, self.one(issue, comment, asset))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        comment, issue = self.changing(req, target, id)
        self.forge.attachments.delete(self.one(issue, comment, asset))
        self.nothing(resp)
