"""Attachments downloaded: ``/attachments/{uuid}`` (Forgejo's address of any attachment) and
``/{owner}/{repo}/releases/download/{tag}/{name}`` (a release's file by its tag and name); and
uploaded for an issue or a comment: ahead, while it is being written
(``/{owner}/{repo}/issues/attachments``, Forgejo's, which the page's script posts a dropped
file to), or with the form that posts it (``FilesForm``), and claimed once it is posted.

Who may not read the repository an attachment belongs to gets 404, as for an attachment that
does not exist; a draft release's files are its writers' alone, and a file uploaded for a
comment not yet posted (``Attachment.claimed``) its uploader's and the writers'. The bytes
come from the content store, streamed (``web/blobs.py``'s ``send_file``), and each download
that starts at the first byte is counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import falcon

from floorless.accounts.access import Level
from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.files.attachments import Attachment
from floorless.forgejo import urls
from floorless.repos.registry import Repo
from floorless.web.auth import viewer_of
from floorless.web.blobs import send_file
from floorless.web.context import RepoView
from floorless.web.uploads import Sent, form_of, multipart
from floorless.web.views.account import MAX_FORM, FormView, last_values, read_fields
from floorless.web.views.base import RepoPage, View

_MISSING = "no such attachment"


class _Sending(View):
    def send(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        attachment: Attachment,
        repo: Repo,
        immutable: bool = True,
    ) -> None:
        draft = attachment.release_id is not None and self._draft(attachment.release_id)
        if draft and self.forge.policy.level(viewer_of(req), repo) < Level.WRITE:
            raise NotFound(_MISSING)
        opened = self.forge.store.open(attachment.oid)
        name, private = attachment.name, repo.private
        whole = send_file(
            req, resp, opened, attachment.size, attachment.oid, name, private, immutable=immutable
        )
        if whole and req.method == "GET":
            self.forge.attachments.downloaded(attachment)

    def _draft(self, release_id: int) -> bool:
        row = self.forge.db.one("SELECT draft FROM releases WHERE id = ?", (release_id,))
        return row is None or bool(row["draft"])


class ByUuid(_Sending):
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        req.context.plain = True
        attachment = self.forge.attachments.by_uuid(uuid) if len(uuid) <= 64 else None
        # a missing attachment's repository is looked up and weighed too (id 0 is none's), so
        # that it costs what a private one's does: Server-Timing counts the statements
        repo = self.forge.registry.by_id(attachment.repo_id if attachment else 0)
        viewer = viewer_of(req)
        try:
            level = self.forge.policy.require(viewer, repo, Level.READ)
        except NotFound:
            raise NotFound(_MISSING) from None
        if attachment is None or repo is None:
            raise NotFound(_MISSING)
        uploader = viewer.account is not None and viewer.account.id == attachment.uploader_id
        if not attachment.claimed and level < Level.WRITE and not uploader:
            raise NotFound(_MISSING)  # for a comment not yet posted: its writer's alone
        self.send(req, resp, attachment, repo)

    on_head = on_get


class ReleaseDownload(_Sending, RepoPage):
    def before(self, req: falcon.Request, params: dict[str, object]) -> None:
        req.context.plain = True

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str = ""
    ) -> None:
        tag, _, name = urls.exact_tail(req).decode("utf-8", "replace").rpartition("/")
        attachment = self.forge.attachments.of_release_tag(view.repo.id, tag, name)
        if attachment is None:
            raise NotFound(_MISSING)
        self.send(req, resp, attachment, view.repo, immutable=False)  # another may take its name

    on_head = on_get


class FilesForm(FormView, RepoPage):
    """A page whose forms may carry files for an issue or a comment: a ``multipart/form-data``
    form's ``file`` fields, and the ``files`` fields naming files uploaded ahead (by UUID).
    A file it carries is kept as its sender's upload, not yet claimed, once the CSRF token
    before it is checked; what the form posts then claims them (``claim``), or, when it
    fails, they are deleted (``discard``)."""

    def form_and_files(
        self, req: falcon.Request, view: RepoView, account: Account
    ) -> tuple[dict[str, str], list[str], list[Attachment]]:
        """The form's fields, the UUIDs of the files it names or carries, and those of the
        latter kept."""
        if not multipart(req):
            fields = read_fields(req)
            form = last_values(fields)
            self.auth.check_csrf(req, form)
            return form, fields.get("files", []), []
        uploaded: list[Attachment] = []
        viewer = viewer_of(req)

        def keep(before: dict[str, list[str]], sent: Sent) -> None:
            self.auth.check_csrf(req, last_values(before))
            if not self.forge.policy.may_take_part(viewer, view.level):
                raise Forbidden("you may not attach files here")
            uploaded.append(
                self.forge.attachments.upload(
                    view.repo.id,
                    account.id,
                    sent.name,
                    sent.read,
                )
            )

        try:
            fields = form_of(req, "file", keep, MAX_FORM)
            form = last_values(fields)
            self.auth.check_csrf(req, form)
        except BaseException:
            self.discard(uploaded)
            raise
        return form, [*fields.get("files", []), *(a.uuid for a in uploaded)], uploaded

    def claim(
        self,
        view: RepoView,
        account: Account,
        uuids: Iterable[str],
        issue_id: int,
        comment_id: int | None = None,
    ) -> int:
        """Give the uploads ``uuids`` names their place: only ``account``'s, in this
        repository, not yet claimed (``Attachments.claim``)."""
        return self.forge.attachments.claim(view.repo.id, account.id, uuids, issue_id, comment_id)

    def discard(self, uploaded: Iterable[Attachment]) -> None:
        """Delete those of ``uploaded`` that nothing claimed (what they were sent with failed,
        or took no files)."""
        for sent in uploaded:
            found = self.forge.attachments.by_uuid(sent.uuid)
            if found is not None and not found.claimed:
                self.forge.attachments.delete(found)


class IssueUpload(FilesForm):
    """``POST /{owner}/{repo}/issues/attachments``: one file (the field ``file``) uploaded
    while an issue or a comment is written, by someone signed in who may comment; answered
    with its UUID (``{"uuid": ...}``, as Forgejo's), which the form then names."""

    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        req.context.plain = True  # a script asks: its errors in plain words

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        if not (view.repo.has_issues or view.repo.has_pulls):
            raise NotFound("this repository has no issues")
        account = self.signed_in(req)
        if not self.forge.policy.may_take_part(viewer_of(req), view.level):
            raise Forbidden("you may not attach files here")
        if not multipart(req):
            raise BadRequest("send the file as multipart/form-data (field file)")
        _, _, uploaded = self.form_and_files(req, view, account)
        if len(uploaded) != 1:
            self.discard(uploaded)
            raise BadRequest("send one file (field file)")
        resp.content_type = "application/json"
        resp.cache_control = ["no-store"]
        resp.text = json.dumps({"uuid": uploaded[0].uuid})
