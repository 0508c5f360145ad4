"""``/releases/new`` and ``/releases/edit/{tag}``: the forms that make, change and delete a
release, for those who may push (anyone else who may read the repository gets 403, and an
anonymous visitor the sign-in page first, as on the other writers' pages).

A form with files is ``multipart/form-data``, read part by part (``web/uploads.py``): its
CSRF token comes first, and is checked before the first file is stored; each file is
streamed into the content store as it is read, recorded as uploaded ahead, and given its
release once the release is saved. A form refused after its files were stored takes them
away again, so that nothing is left of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import falcon

from floorless.accounts.access import Level
from floorless.accounts.accounts import Account
from floorless.collab.releases import Release
from floorless.core.errors import BadRequest, Conflict, Forbidden, NotFound
from floorless.files.attachments import Attachment
from floorless.forgejo import urls
from floorless.web.context import RepoView
from floorless.web.uploads import Sent, form_of, multipart
from floorless.web.views.account import MAX_FORM, last_values
from floorless.web.views.releases import ReleasePage

TITLE_MAX = 255
NOTE_MAX = 50_000


@dataclass
class Posted:
    """A release form as sent: its text fields and the files stored from it."""

    fields: dict[str, str]
    lists: dict[str, list[str]] = field(default_factory=dict)
    files: list[Attachment] = field(default_factory=list)

    def flag(self, name: str) -> bool:
        return self.fields.get(name) == "on"


class ReleaseForm(ReleasePage):
    def allowed(self, req: falcon.Request, view: RepoView) -> Account:
        """The writer asking; anyone else is refused (403), or sent to sign in first."""
        account = self.signed_in(req)
        if view.level < Level.WRITE:
            raise Forbidden("only those who may push may make and change releases")
        return account

    def posted(self, req: falcon.Request, view: RepoView, account: Account) -> Posted:
        """The form, its CSRF token checked before any file is stored; a urlencoded form
        (one without files) is read as every other form is."""
        if not multipart(req):
            return Posted(self.form(req))
        stored: list[Attachment] = []

        def keep(before: dict[str, list[str]], sent: Sent) -> None:
            if not stored:  # the token comes before the first file
                self.auth.check_csrf(req, last_values(before))
            stored.append(
                self.forge.attachments.upload(view.repo.id, account.id, sent.name, sent.read)
            )

        try:
            lists = form_of(req, "files", keep, MAX_FORM)
            values = last_values(lists)
            self.auth.check_csrf(req, values)
        except BaseException:
            self.discard(stored)
            raise
        return Posted(values, lists, stored)

    def checked(self, posted: Posted) -> Posted:
        title = posted.fields.get("title", "").strip()
        if len(title) > TITLE_MAX:
            raise BadRequest(f"a title is at most {TITLE_MAX} characters")
        if len(posted.fields.get("note", "")) > NOTE_MAX:
            raise BadRequest(f"notes are at most {NOTE_MAX} characters")
        return posted

    def form_page(
        self,
        resp: falcon.Response,
        view: RepoView,
        form: dict[str, str],
        release: Release | None = None,
        error: str = "",
    ) -> None:
        resp.cache_control = ["no-store"]
        assets = self.forge.attachments.of_releases([release.id])[release.id] if release else []
        self.page(
            resp,
            view,
            "release_form.html",
            form=form,
            release=release,
            assets=assets,
            action=urls.edit_release(view.repo, release.tag_name)
            if release
            else urls.new_release(view.repo),
            error=error,
        )

    def refused(
        self,
        resp: falcon.Response,
        view: RepoView,
        posted: Posted,
        exc: BadRequest | Conflict | NotFound,
        release: Release | None = None,
    ) -> None:
        """The form again with what was wrong, its files taken away (they would have to be
        chosen again): 422 for a target that names nothing, the error's own status else."""
        self.discard(posted.files)
        resp.status = 422 if isinstance(exc, NotFound) else exc.status
        self.form_page(resp, view, posted.fields, release, str(exc))

    def attach(self, release: Release, files: list[Attachment]) -> None:
        for attachment in files:
            self.forge.attachments.attach(attachment, release_id=release.id)


class NewRelease(ReleaseForm):
    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        self.allowed(req, view)
        default = view.snapshot.default_branch
        target = default.decode("utf-8", "replace") if default else ""
        self.form_page(resp, view, {"target": target})

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        account = self.allowed(req, view)
        posted = self.posted(req, view, account)
        form = posted.fields
        try:
            self.checked(posted)
            release = self.forge.releases.create(
                view.repo,
                account.id,
                form.get("tag_name", "").strip(),
                target=form.get("target", "").strip(),
                title=form.get("title", "").strip(),
                note=form.get("note", ""),
                draft=posted.flag("draft"),
                prerelease=posted.flag("prerelease"),
                actor=account,
            )
        except (BadRequest, Conflict, NotFound) as exc:
            self.refused(resp, view, posted, exc)
            return
        self.attach(release, posted.files)
        raise falcon.HTTPSeeOther(urls.release(view.repo, release.tag_name))


class EditRelease(ReleaseForm):
    """The edit form, and its actions: ``save`` (the fields, files added, and the files
    ticked in ``delete_file`` removed) and ``delete`` (the release and its files, its tag
    kept; ``confirm`` must be ticked)."""

    def release(self, req: falcon.Request, view: RepoView) -> Release:
        try:
            tag = urls.exact_tail(req).decode()
        except UnicodeDecodeError:
            tag = ""
        found = self.forge.releases.by_tag(view.repo.id, tag) if tag else None
        if found is None:
            raise NotFound("no such release")
        return found

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str) -> None:
        self.allowed(req, view)
        release = self.release(req, view)
        self.form_page(resp, view, self.kept_fields(release), release)

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str
    ) -> None:
        account = self.allowed(req, view)
        release = self.release(req, view)
        posted = self.posted(req, view, account)
        form = posted.fields
        action = form.get("action", "save")
        if action == "delete":
            self.discard(posted.files)
            if not posted.flag("confirm"):
                resp.status = falcon.HTTP_400
                self.form_page(
                    resp,
                    view,
                    self.kept_fields(release),
                    release,
                    "tick the box to confirm the release's deletion",
                )
                return
            self.forge.releases.delete(release, actor=account)
            raise falcon.HTTPSeeOther(urls.releases(view.repo))
        if action != "save":
            self.discard(posted.files)
            raise BadRequest(f"unknown action {action[:40]!r}")
        try:
            self.checked(posted)
            changed = self.forge.releases.edit(
                view.repo,
                release,
                tag_name=form.get("tag_name", release.tag_name).strip(),
                target=form.get("target", release.target).strip(),
                title=form.get("title", release.title).strip(),
                note=form.get("note", release.note),
                draft=posted.flag("draft"),
                prerelease=posted.flag("prerelease"),
                actor=account,
            )
        except (BadRequest, Conflict, NotFound) as exc:
            self.refused(resp, view, posted, exc, release)
            return
        gone = set(posted.lists.get("delete_file", []))
        for attachment in self.forge.attachments.of_releases([release.id])[release.id]:
            if attachment.uuid in gone:
                self.forge.attachments.delete(attachment)
        self.attach(changed, posted.files)
        raise falcon.HTTPSeeOther(urls.release(view.repo, changed.tag_name))

    def kept_fields(self, release: Release) -> dict[str, str]:
        return {
            "tag_name": release.tag_name,
            "target": release.target,
            "title": release.title,
            "note": release.note,
            "draft": "on" if release.draft else "",
            "prerelease": "on" if release.prerelease else "",
        }
