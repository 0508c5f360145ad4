"""``/releases``: a release for each annotated tag, newest first (by its tagger's date), its
message rendered as Markdown and its archives beside it, as GitHub shows a tag that has no
release record of its own. Lightweight tags carry no message or date: the tags page lists
them. Reading a tag object is a few microseconds, so the list costs O(tags), not O(history);
each message's HTML is kept by the tag object's id."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

import falcon
import pygit2

from floorless.core.errors import BadRequest
from floorless.forgejo import urls
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.markup import render_markdown
from floorless.web.views.base import RepoPage
from floorless.web.views.tree import markdown_links

PER_PAGE = 10
MAX_MESSAGE = 64 * 1024  # past this a message is shown as plain text


@dataclass(frozen=True)
class Release:
    name: bytes
    commit: bytes
    title: str  # the message's first line
    when: datetime | None
    tagger: str
    html: str  # the rest of the message, rendered


def _tags(view: RepoView) -> list[tuple[float, bytes, pygit2.Tag, bytes]]:
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


class Releases(RepoPage):
    query = ("page",)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        raw = req.get_param("page", default="1")
        if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
            raise BadRequest("page is a whole number from 1")
        page = int(raw)
        self.cached_page(req, resp, view, lambda: self.page(req, resp, view, page))

    def page(self, req: falcon.Request, resp: falcon.Response, view: RepoView, page: int) -> bool:
        tags = _tags(view)
        shown = tags[(page - 1) * PER_PAGE : page * PER_PAGE]
        cache = self.renderer.caches["markdown"]
        releases = []
        for when, name, obj, commit in shown:
            message = obj.message or ""
            title, _, body = message.strip().partition("\n")
            resolved = Resolved("tag", name, commit, b"")

            def make(body: str = body, resolved: Resolved = resolved) -> str:
                if len(body) > MAX_MESSAGE:
                    return ""
                return render_markdown(body.strip(), markdown_links(view, resolved))

            key = ("release", str(obj.id), urls.home(view.repo))  # its links are the repository's
            html = cast(str, cache.get_or_make(key, make))
            releases.append(
                Release(
                    name,
                    commit,
                    title,
                    datetime.fromtimestamp(when, UTC) if obj.tagger is not None else None,
                    obj.tagger.name if obj.tagger is not None else "",
                    html,
                )
            )
        pages = max(1, -(-len(tags) // PER_PAGE))
        self.html(
            resp,
            "releases.html",
            **view.template_context(
                releases=releases,
                total=len(tags),
                page=page,
                pages=pages,
                prev_url=urls.releases(view.repo, page - 1) if page > 1 else None,
                next_url=urls.releases(view.repo, page + 1) if page < pages else None,
            ),
        )
        return True
