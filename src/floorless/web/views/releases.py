"""``/releases``, ``/releases/tag/{tag}`` and ``/releases/latest``: a repository's releases as
Forgejo shows them.

The list merges two kinds of entry, newest first: release records (``collab/releases.py``:
a title, Markdown notes rendered and cross-referenced as an issue's text is, draft and
pre-release badges, the files with their sizes and download counts) and annotated tags that
have no record, shown as before (the message's first line as the title, the rest as
Markdown: a tag object's HTML is kept by its id). Lightweight tags carry no message or date:
the tags page lists them, and each has a page of its own here. A draft is its repository's
writers' alone; to anyone else it is as if it did not exist (its tag, once made, shows as a
tag). The pages are kept in the page cache while the refs and the repository's activity
version (which every write to ``releases`` and ``attachments`` moves) are as they were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

import falcon
import pygit2
from markupsafe import Markup

from floorless.accounts.access import Level
from floorless.collab.references import names_others
from floorless.collab.releases import Release
from floorless.core.dates import moment
from floorless.core.errors import BadRequest, NotFound
from floorless.files.attachments import Attachment
from floorless.forgejo import urls
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.markup import render_markdown
from floorless.web.views.issues import IssueView
from floorless.web.views.tree import markdown_links

PER_PAGE = 10
MAX_PAGE = 1_000_000
MAX_MESSAGE = 64 * 1024  # past this a tag's message is not rendered


@dataclass(frozen=True)
class Shown:
    """One entry as the templates show it: a release record (``release``), or a tag."""

    tag: str | bytes  # a record's tag name, or a tag's exact bytes
    title: str
    when: datetime | None
    author: str  # who published the release, or tagged the tag
    author_url: str | None
    commit: str  # the tag's commit (a draft's target) in hex; "" when not known
    html: Markup
    release: Release | None = None
    assets: list[Attachment] = field(default_factory=list)
    tagged: bool = True  # the tag exists: its source archives can be downloaded
    notes: str = ""  # the Markdown the HTML was rendered from (a record's notes)


def _annotated(view: RepoView) -> list[tuple[float, bytes, pygit2.Tag, bytes]]:
    """Every annotated tag of a commit, newest first: (time, name, tag object, commit)."""
    found = []
    for name, tag in view.snapshot.tags.items():
        if not tag.annotated or tag.commit is None:
            continue
        obj = view.handle.get(pygit2.Oid(raw=tag.target))
        if not isinstance(obj, pygit2.Tag):
            continue
        when = float(obj.tagger.time) if obj.tagger is not None else 0.0
        found.append((when, name, obj, tag.commit))
    found.sort(key=lambda row: (-row[0], row[1]))
    return found


def _date(when: float) -> datetime:
    return moment(when).when  # clamped: git allows year 10000


class ReleasePage(IssueView):
    """What the release pages share: who may see drafts, the entries of a page, rendered."""

    def writer(self, view: RepoView) -> bool:
        return view.level >= Level.WRITE

    def tag_entry(
        self, view: RepoView, name: bytes, commit: bytes, obj: pygit2.Tag | None
    ) -> Shown:
        """A tag without a (visible) record: an annotated tag's message, or a lightweight
        tag's commit alone."""
        if obj is None:
            return Shown(name, "", None, "", None, commit.hex(), Markup(""))
        message = obj.message or ""
        title, _, body = message.strip().partition("\n")
        resolved = Resolved("tag", name, commit, b"")

        def make() -> str:
            if len(body) > MAX_MESSAGE:
                return ""
            return render_markdown(body.strip(), markdown_links(view, resolved))

        key = ("release", str(obj.id), urls.home(view.repo))  # its links are the repository's
        html = cast(str, self.renderer.caches["markdown"].get_or_make(key, make))
        tagger = obj.tagger
        return Shown(
            name,
            title,
            _date(float(tagger.time)) if tagger is not None else None,
            tagger.name if tagger is not None else "",
            None,
            commit.hex(),
            Markup(html),  # noqa: S704 - sanitized by nh3
        )

    def records(self, view: RepoView, releases: Iterable[Release]) -> dict[int, Shown]:
        """Each release record as shown, by id: its notes rendered (cross-referenced, all in
        one pass), its files and its publisher (a statement or two for a page)."""
        found = list(releases)
        htmls = self.markdown(view, [r.note for r in found])
        assets = self.forge.attachments.of_releases(r.id for r in found)
        publishers = self.forge.accounts.by_ids(
            r.publisher_id for r in found if r.publisher_id is not None
        )
        names = {account_id: account.name for account_id, account in publishers.items()}
        shown = {}
        for release, html in zip(found, htmls, strict=True):
            name = names.get(release.publisher_id or 0, "")
            tagged = release.tag_name.encode() in view.snapshot.tags
            shown[release.id] = Shown(
                release.tag_name,
                release.title or release.tag_name,
                _date(release.created_at),
                name or "Ghost",
                urls.owner(name) if name else None,
                release.commit_id or "",
                html,
                release,
                assets[release.id],
                tagged and not release.draft,
                release.note,
            )
        return shown

    def entries(self, view: RepoView, start: int, stop: int) -> tuple[list[Shown], int]:
        """The entries ``start`` to ``stop`` of the merged list, and how many there are."""
        marks = self.forge.releases.listing(view.repo.id, drafts=self.writer(view))
        recorded = {tag.encode() for _, tag, _ in marks}
        merged: list[tuple[float, bytes, int, tuple[bytes, bytes, pygit2.Tag] | None]] = [
            (when, tag.encode(), release_id, None) for release_id, tag, when in marks
        ]
        merged += [
            (when, name, 0, (name, commit, obj))
            for when, name, obj, commit in _annotated(view)
            if name not in recorded
        ]
        merged.sort(key=lambda row: (-row[0], row[1]))
        page = merged[start:stop]
        records = self.forge.releases.by_ids(view.repo.id, [r[2] for r in page if r[2]])
        shown = self.records(view, records.values())
        entries = []
        for _, _, release_id, tag in page:
            if tag is not None:
                entries.append(self.tag_entry(view, *tag))
            elif release_id in shown:  # (deleted between the two statements: left out)
                entries.append(shown[release_id])
        return entries, len(merged)

    def show(
        self, resp: falcon.Response, view: RepoView, entries: list[Shown], **more: object
    ) -> bool:
        """Render ``releases.html``; whether the page is final: notes that name another
        repository's issues follow its visibility too, so such a page is rendered each time."""
        self.page(
            resp,
            view,
            "releases.html",
            entries=entries,
            may_write=self.writer(view),
            **more,
        )
        return not names_others(view.repo, [], [e.notes for e in entries])


class Releases(ReleasePage):
    """``/releases``: the merged list, ``PER_PAGE`` entries a page."""

    query = ("page",)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        raw = req.get_param("page", default="1")
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_PAGE:
            raise BadRequest("page is a whole number from 1")
        page = int(raw)
        self.kept_page(req, resp, view, lambda: self.listed(resp, view, page))

    def listed(self, resp: falcon.Response, view: RepoView, page: int) -> bool:
        entries, total = self.entries(view, (page - 1) * PER_PAGE, page * PER_PAGE)
        pages = max(1, -(-total // PER_PAGE))
        return self.show(
            resp,
            view,
            entries,
            single=False,
            total=total,
            page=page,
            pages=pages,
            prev_url=urls.releases(view.repo, page - 1) if page > 1 else None,
            next_url=urls.releases(view.repo, page + 1) if page < pages else None,
        )


class ReleaseTag(ReleasePage):
    """``/releases/tag/{tag}``: one release, or the tag when it has no record (a draft
    hidden from its reader counts as none); 404 when there is neither."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str) -> None:
        name = urls.exact_tail(req)
        self.kept_page(req, resp, view, lambda: self.one(resp, view, name))

    def one(self, resp: falcon.Response, view: RepoView, name: bytes) -> bool:
        try:
            release = self.forge.releases.by_tag(view.repo.id, name.decode())
        except UnicodeDecodeError:
            release = None
        if release is not None and (self.writer(view) or not release.draft):
            entry = self.records(view, [release])[release.id]
        elif name in view.snapshot.tags:
            tag = view.snapshot.tags[name]
            if tag.commit is None:
                raise NotFound("this tag names no commit")
            obj = view.handle.get(pygit2.Oid(raw=tag.target)) if tag.annotated else None
            entry = self.tag_entry(
                view, name, tag.commit, obj if isinstance(obj, pygit2.Tag) else None
            )
        else:
            raise NotFound("no such release")
        return self.show(resp, view, [entry], single=True, total=1, page=1, pages=1)


class LatestRelease(ReleasePage):
    """``/releases/latest``: to the newest release that is neither a draft nor a
    pre-release; 404 when there is none."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        latest = self.forge.releases.latest(view.repo.id)
        if latest is None:
            raise NotFound("this repository has no release yet")
        raise falcon.HTTPFound(urls.release(view.repo, latest.tag_name))
