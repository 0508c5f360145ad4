"""Atom and RSS feeds, one template each: a branch's latest commits, a repository's latest
releases, its latest tags (Forgejo's ``releases.rss``, ``tags.atom``, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import falcon
import pygit2

from floorless.core.dates import moment
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import objects
from floorless.web.auth import Authenticator
from floorless.web.context import RepoView
from floorless.web.history import libgit2_page
from floorless.web.public import public_url
from floorless.web.render import Renderer
from floorless.web.views.base import RepoPage
from floorless.web.views.releases import ReleasePage

ENTRIES = 20


@dataclass(frozen=True)
class FeedEntry:
    title: str
    url: str  # a path of the site: the templates put the public address before it
    when: datetime
    author: str
    email: str
    content: str
    content_type: str = "text"  # or "html" (escaped in the feed, as both formats want it)


def send_feed(
    renderer: Renderer,
    req: falcon.Request,
    resp: falcon.Response,
    view: RepoView,
    fmt: str,
    entries: list[FeedEntry],
    **about: object,
) -> None:
    """The feed of ``entries`` in ``fmt``; ``about``: its ``title``, ``description``,
    ``self_url`` and ``alternate`` page."""
    atom = fmt == "atom"
    resp.content_type = (
        "application/atom+xml; charset=utf-8" if atom else "application/rss+xml; charset=utf-8"
    )
    resp.text = renderer.page(
        "feed.atom" if atom else "feed.rss",
        **view.template_context(
            entries=entries, public=public_url(view.forge.settings, req), **about
        ),
    )


def _format(fmt: str) -> str:
    if fmt not in urls.FEEDS:
        raise ValueError(f"no feed format {fmt!r}")
    return fmt


class Feeding(RepoPage):
    """A feed in ``fmt`` (atom or rss)."""

    def __init__(self, forge: Forge, renderer: Renderer, fmt: str) -> None:
        super().__init__(forge, renderer)
        self.fmt = _format(fmt)

    def feed(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        entries: list[FeedEntry],
        **about: object,
    ) -> None:
        send_feed(self.renderer, req, resp, view, self.fmt, entries, **about)


class Feed(Feeding):
    """``/atom/branch/{branch}`` or ``/rss/branch/{branch}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, tail: str) -> None:
        resolved = view.resolve("branch", urls.exact_tail(req))
        page = libgit2_page(view.handle, [resolved.commit], ENTRIES)
        commits = [objects.commit_info(objects.get_commit(view.handle, c)) for c in page.commits]
        branch = resolved.ref.decode("utf-8", "replace")
        entries = [
            FeedEntry(
                c.summary,
                urls.commit(view.repo, c.id),
                c.time,
                c.author.name,
                c.author.email,
                c.message,
            )
            for c in commits
        ]
        self.feed(
            req,
            resp,
            view,
            entries,
            title=f"{view.repo.full_name}: commits on {branch}",
            description=f"Latest commits on {branch}",
            self_url=urls.feed(view.repo, resolved.ref, self.fmt),
            alternate=urls.commits(view.repo, "branch", resolved.ref),
        )


class ReleaseFeed(ReleasePage):
    """``/releases.{atom,rss}``: the latest published releases (no drafts, as on Forgejo),
    their notes as HTML (cross-referenced as on the page)."""

    def __init__(
        self, forge: Forge, renderer: Renderer, authenticator: Authenticator, fmt: str
    ) -> None:
        super().__init__(forge, renderer, authenticator)
        self.fmt = _format(fmt)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        found = self.forge.releases.list(view.repo.id, limit=ENTRIES)
        shown = self.records(view, found)
        entries = [
            FeedEntry(
                s.title,
                urls.release(view.repo, s.tag),
                s.when or moment(0).when,
                s.author,
                "",
                str(s.html),
                "html",
            )
            for s in (shown[r.id] for r in found)
        ]
        send_feed(
            self.renderer,
            req,
            resp,
            view,
            self.fmt,
            entries,
            title=f"Latest releases of {view.repo.full_name}",
            description=f"Latest releases of {view.repo.full_name}",
            self_url=urls.releases_feed(view.repo, self.fmt),
            alternate=urls.releases(view.repo),
        )


class TagFeed(Feeding):
    """``/tags.{atom,rss}``: the latest tags, in the tags page's order (when each was made),
    each linked to its release page."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        committed, tagged = objects.ref_dates(view.handle)
        _, names = view.snapshot.newest_first(committed, tagged)
        entries = []
        for name in names[:ENTRIES]:
            tag = view.snapshot.tags[name]
            if tag.commit is None:
                continue
            info = objects.commit_info(objects.get_commit(view.handle, tag.commit))
            obj = view.handle.get(pygit2.Oid(raw=tag.target)) if tag.annotated else None
            if isinstance(obj, pygit2.Tag) and obj.tagger is not None:
                who = obj.tagger
                when = moment(who.time, who.offset).when
                author, email, message = who.name, who.email, obj.message or ""
            else:
                when, author, email, message = (
                    info.time,
                    info.author.name,
                    info.author.email,
                    info.message,
                )
            entries.append(
                FeedEntry(
                    name.decode("utf-8", "replace"),
                    urls.release(view.repo, name),
                    when,
                    author,
                    email,
                    message,
                )
            )
        self.feed(
            req,
            resp,
            view,
            entries,
            title=f"Latest tags of {view.repo.full_name}",
            description=f"Latest tags of {view.repo.full_name}",
            self_url=urls.tags_feed(view.repo, self.fmt),
            alternate=urls.tags(view.repo),
        )
