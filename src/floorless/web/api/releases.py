"""Releases and their files through the API, in Forgejo's paths and shapes.

Reading takes read access; a draft is its repository's writers' alone (404 to anyone else, as
a missing release). Making, editing and deleting take write access. A tag name that is not a
valid ref, or a target that names no branch, tag or commit, is a 422 saying so; a second
release of one tag is a 409. A file is uploaded as Forgejo's clients send it, the form field
``attachment`` of a ``multipart/form-data`` body (or the body itself, as
``application/octet-stream``), named by ``?name=`` or its file name, and streamed into the
content store as it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Required, TypedDict

import falcon

from floorless.accounts.access import Level
from floorless.collab.releases import Release
from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.files.attachments import Attachment as AttachmentRow
from floorless.forgejo.issues import Attachment, attachment_json
from floorless.forgejo.releases import Release as ReleaseShape
from floorless.forgejo.releases import releases_json
from floorless.forgejo.schema import Doc
from floorless.web.api.base import Operation, Paged, Unprocessable, query_flag
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url
from floorless.web.uploads import attach_sent

RELEASE = "repository"


class CreateReleaseOption(TypedDict, total=False):
    """Forgejo's ``CreateReleaseOption``."""

    tag_name: Required[Annotated[str, Doc("the tag: made at target_commitish if missing")]]
    target_commitish: Annotated[str, Doc("the branch or commit a new tag is made at")]
    name: Annotated[str, Doc("the release's title")]
    body: Annotated[str, Doc("its notes, in Markdown")]
    draft: Annotated[bool, Doc("a draft: no tag is made until it is published")]
    prerelease: Annotated[bool, Doc("a pre-release")]


class EditReleaseOption(TypedDict, total=False):
    """Forgejo's ``EditReleaseOption``."""

    tag_name: Annotated[str, Doc("the tag")]
    target_commitish: Annotated[str, Doc("the branch or commit a new tag is made at")]
    name: Annotated[str, Doc("the release's title")]
    body: Annotated[str, Doc("its notes, in Markdown")]
    draft: Annotated[bool, Doc("a draft (false: publish it)")]
    prerelease: Annotated[bool, Doc("a pre-release")]


class EditAttachmentOptions(TypedDict, total=False):
    """Forgejo's ``EditAttachmentOptions``."""

    name: Annotated[str, Doc("the file's new name")]


class ReleaseListQuery(Paged, total=False):
    draft: Annotated[bool, Doc("only drafts, or only published releases")]
    pre_release: Annotated[bool, Doc("only pre-releases, or only full releases")]


class AssetQuery(TypedDict, total=False):
    name: Annotated[str, Doc("the file's name (the uploaded file's own when not given)")]


def _number(text: str, missing: str) -> int:
    number = int(text) if text.isascii() and text.isdigit() and len(text) < 18 else 0
    if number <= 0:
        raise NotFound(missing)
    return number


def _refusing(make: Callable[[], Release]) -> Release:
    """A release made or changed, its refusals in Forgejo's statuses: 422 for a bad tag or
    target, 409 for a tag that has a release already."""
    try:
        return make()
    except NotFound as exc:
        raise Unprocessable(str(exc)) from exc
    except Conflict:
        raise
    except BadRequest as exc:
        raise Unprocessable(str(exc)) from exc


class ReleaseResource(RepoResource):
    def shaped(
        self, req: falcon.Request, target: Target, releases: list[Release]
    ) -> list[ReleaseShape]:
        public = public_url(self.forge.settings, req)
        return releases_json(self.forge, self.viewer(req), target.repo, releases, public)

    def one(self, req: falcon.Request, target: Target, release: Release) -> ReleaseShape:
        return self.shaped(req, target, [release])[0]

    def release(self, target: Target, id: str) -> Release:
        found = self.forge.releases.by_id(target.repo.id, _number(id, "release not found"))
        return self.visible(target, found)

    def visible(self, target: Target, release: Release | None) -> Release:
        if release is None or (release.draft and target.level < Level.WRITE):
            raise NotFound("release not found")
        return release


class Releases(ReleaseResource):
    operations = {
        "get": Operation(
            "a repository's releases, newest first",
            list[ReleaseShape],
            query=ReleaseListQuery,
            paged=True,
            operation_id="repoListReleases",
            tag=RELEASE,
        ),
        "post": Operation(
            "make a release (and its tag, when it does not exist)",
            ReleaseShape,
            status=201,
            body=CreateReleaseOption,
            signed_in=True,
            operation_id="repoCreateRelease",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        paging = self.paging(req)
        writer = target.level >= Level.WRITE
        draft = query_flag(req, "draft")
        prerelease = query_flag(req, "pre-release")
        found = self.forge.releases.list(
            target.repo.id,
            drafts=writer,
            draft=draft if writer or not draft else None,
            prerelease=prerelease,
            page=paging.page,
            limit=paging.limit + 1,
        )
        if draft and not writer:
            found = []
        more = len(found) > paging.limit
        shown = found[: paging.limit]
        total = paging.offset + len(shown) + (1 if more else 0)
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, self.shaped(req, target, shown))

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        account = self.writer(req)
        body = self.body(req)
        made = _refusing(
            lambda: self.forge.releases.create(
                target.repo,
                account.id,
                str(body["tag_name"]).strip(),
                target=str(body.get("target_commitish") or ""),
                title=str(body.get("name") or ""),
                note=str(body.get("body") or ""),
                draft=bool(body.get("draft")),
                prerelease=bool(body.get("prerelease")),
                actor=account,
            )
        )
        self.send(resp, self.one(req, target, made), 201)


class OneRelease(ReleaseResource):
    operations = {
        "get": Operation("one release", ReleaseShape, operation_id="repoGetRelease", tag=RELEASE),
        "patch": Operation(
            "edit a release (false draft: publish it, making its tag)",
            ReleaseShape,
            body=EditReleaseOption,
            signed_in=True,
            operation_id="repoEditRelease",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
        "delete": Operation(
            "delete a release and its files (its tag stays)",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDeleteRelease",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        self.send(resp, self.one(req, target, self.release(target, id)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        account = self.writer(req)
        release = self.release(target, id)
        body = self.body(req)

        def text(field: str) -> str | None:
            value = body.get(field)
            return None if value is None else str(value)

        def flag(field: str) -> bool | None:
            value = body.get(field)
            return None if value is None else bool(value)

        changed = _refusing(
            lambda: self.forge.releases.edit(
                target.repo,
                release,
                tag_name=text("tag_name"),
                target=text("target_commitish"),
                title=text("name"),
                note=text("body"),
                draft=flag("draft"),
                prerelease=flag("prerelease"),
                actor=account,
            )
        )
        self.send(resp, self.one(req, target, changed))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        account = self.writer(req)
        self.forge.releases.delete(self.release(target, id), actor=account)
        self.nothing(resp)


class LatestRelease(ReleaseResource):
    operations = {
        "get": Operation(
            "the newest release that is neither a draft nor a pre-release",
            ReleaseShape,
            operation_id="repoGetLatestRelease",
            tag=RELEASE,
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = self.forge.releases.latest(target.repo.id)
        self.send(resp, self.one(req, target, self.visible(target, found)))


class ReleaseByTag(ReleaseResource):
    operations = {
        "get": Operation(
            "the release of a tag", ReleaseShape, operation_id="repoGetReleaseByTag", tag=RELEASE
        ),
        "delete": Operation(
            "delete the release of a tag (the tag stays)",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDeleteReleaseByTag",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tag: str) -> None:
        found = self.forge.releases.by_tag(target.repo.id, tag)
        self.send(resp, self.one(req, target, self.visible(target, found)))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tag: str
    ) -> None:
        account = self.writer(req)
        found = self.forge.releases.by_tag(target.repo.id, tag)
        self.forge.releases.delete(self.visible(target, found), actor=account)
        self.nothing(resp)


class AssetResource(ReleaseResource):
    def asset_json(
        self, req: falcon.Request, target: Target, release: Release, found: AttachmentRow
    ) -> Attachment:
        public = public_url(self.forge.settings, req)
        return attachment_json(found, public, target.repo, release.tag_name)

    def asset(self, target: Target, release: Release, id: str) -> AttachmentRow:
        found = self.forge.attachments.by_id(_number(id, "attachment not found"))
        if found is None or found.release_id != release.id:
            raise NotFound("attachment not found")
        return found


class Assets(AssetResource):
    operations = {
        "get": Operation(
            "a release's files",
            list[Attachment],
            operation_id="repoListReleaseAttachments",
            tag=RELEASE,
        ),
        "post": Operation(
            "attach a file to a release (multipart field attachment, streamed)",
            Attachment,
            status=201,
            query=AssetQuery,
            signed_in=True,
            operation_id="repoCreateReleaseAttachment",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        release = self.release(target, id)
        found = self.forge.attachments.of_releases([release.id])[release.id]
        self.send(resp, [self.asset_json(req, target, release, a) for a in found])

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        account = self.writer(req)
        release = self.release(target, id)
        stored = attach_sent(
            req, self.forge.attachments, target.repo.id, account.id, Unprocessable,
            release_id=release.id,
        )  # fmt: skip
        self.send(resp, self.asset_json(req, target, release, stored), 201)


class OneAsset(AssetResource):
    operations = {
        "get": Operation(
            "one of a release's files",
            Attachment,
            operation_id="repoGetReleaseAttachment",
            tag=RELEASE,
        ),
        "patch": Operation(
            "rename one of a release's files",
            Attachment,
            body=EditAttachmentOptions,
            signed_in=True,
            operation_id="repoEditReleaseAttachment",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
        "delete": Operation(
            "delete one of a release's files",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDeleteReleaseAttachment",
            needs=Level.WRITE,
            first="writer",
            tag=RELEASE,
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        release = self.release(target, id)
        self.send(resp, self.asset_json(req, target, release, self.asset(target, release, asset)))

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        self.writer(req)
        release = self.release(target, id)
        found = self.asset(target, release, asset)
        name = self.body(req).get("name")
        if name:
            found = self.forge.attachments.rename(found, str(name))
        self.send(resp, self.asset_json(req, target, release, found))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str, asset: str
    ) -> None:
        self.writer(req)
        release = self.release(target, id)
        self.forge.attachments.delete(self.asset(target, release, asset))
        self.nothing(resp)
