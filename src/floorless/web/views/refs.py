"""``/branches`` and ``/tags``, each with its latest commit; a tag that has a release links
to it (a draft's only for those who may see drafts)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import falcon

from floorless.accounts.access import Level
from floorless.core.dates import moment
from floorless.git import objects
from floorless.web.context import RepoView
from floorless.web.views.base import RepoPage


@dataclass(frozen=True)
class RefRow:
    name: bytes
    commit: objects.CommitInfo | None
    default: bool = False
    annotated: bool = False
    # a tag's creation date, the one the list is sorted by: an annotated tag's tagger date,
    # else its commit's (``git for-each-ref --sort=-creatordate``); None for a branch
    created: datetime | None = None
    released: bool = False  # a tag with a release the viewer may see: linked to it

    @property
    def sort_time(self) -> float:
        return self.commit.time.timestamp() if self.commit else 0.0

    @property
    def date(self) -> datetime | None:
        """What the date column shows: when the tag was made, or the branch's last commit."""
        if self.created is not None:
            return self.created
        return self.commit.time if self.commit else None


class Branches(RepoPage):
    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        default = view.snapshot.default_branch
        rows = []
        for name, oid in view.snapshot.branches.items():
            info = objects.commit_info(objects.get_commit(view.handle, oid))
            rows.append(RefRow(name, info, default=name == default))
        rows.sort(key=lambda r: (not r.default, -r.sort_time, r.name))
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="branches"))


class Tags(RepoPage):
    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        # the ref switcher's order (newest first), kept with the ref snapshot: one order for
        # both, and the dates shown are the ones it sorts by (the same two functions)
        writer = view.level >= Level.WRITE
        released = {
            tag.encode() for _, tag, _ in self.forge.releases.listing(view.repo.id, drafts=writer)
        }
        committed, tagged = objects.ref_dates(view.handle)
        _, names = view.snapshot.newest_first(committed, tagged)
        rows = []
        for name in names:
            tag = view.snapshot.tags[name]
            info = (
                objects.commit_info(objects.get_commit(view.handle, tag.commit))
                if tag.commit
                else None
            )
            made = tagged(tag.target) if tag.annotated else None
            if made is None and tag.commit:
                made = committed(tag.commit)
            created = None if made is None else moment(made).when  # clamped: git allows year 10000
            rows.append(
                RefRow(
                    name,
                    info,
                    annotated=tag.annotated,
                    created=created,
                    released=name in released,
                )
            )
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="tags"))
