"""Attachments downloaded: ``/attachments/{uuid}`` (Forgejo's address of any attachment) and
``/{owner}/{repo}/releases/download/{tag}/{name}`` (a release's file by its tag and name).

Who may not read the repository an attachment belongs to gets 404, as for an attachment that
does not exist; a draft release's files are its writers' alone. The bytes come from the
content store, streamed (``web/blobs.py``'s ``send_file``), and each download that starts at the
first byte is counted.
"""

from __future__ import annotations

import falcon

from floorless.accounts.access import Level
from floorless.core.errors import NotFound
from floorless.files.attachments import Attachment
from floorless.forgejo import urls
from floorless.repos.registry import Repo
from floorless.web.auth import viewer_of
from floorless.web.blobs import send_file
from floorless.web.context import RepoView
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
            req, resp, opened, attachment.size, attachment.oid, name, private, immutable
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
        try:
            self.forge.policy.require(viewer_of(req), repo, Level.READ)
        except NotFound:
            raise NotFound(_MISSING) from None
        if attachment is None or repo is None:
            raise NotFound(_MISSING)
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
