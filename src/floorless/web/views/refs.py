"""``/branches`` and ``/tags``, each with its latest commit."""

from __future__ import annotations

from dataclasses import dataclass

import falcon

from floorless.git import objects
from floorless.web.context import repo_view
from floorless.web.views.base import View


@dataclass(frozen=True)
class RefRow:
    name: bytes
    commit: objects.CommitInfo | None
    default: bool = False
    annotated: bool = False

    @property
    def sort_time(self) -> float:
        return self.commit.time.timestamp() if self.commit else 0.0


class Branches(View):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        view = repo_view(self.forge, req, owner, repo)
        default = view.snapshot.default_branch
        rows = []
        for name, oid in view.snapshot.branches.items():
            info = objects.commit_info(objects.get_commit(view.handle, oid))
            rows.append(RefRow(name, info, default=name == default))
        rows.sort(key=lambda r: (not r.default, -r.sort_time, r.name))
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="branches"))


class Tags(View):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        view = repo_view(self.forge, req, owner, repo)
        # the ref switcher's order (newest first), kept with the ref snapshot: one order for both
        _, names = view.snapshot.newest_first(*objects.ref_dates(view.handle))
        rows = []
        for name in names:
            tag = view.snapshot.tags[name]
            info = (
                objects.commit_info(objects.get_commit(view.handle, tag.commit))
                if tag.commit
                else None
            )
            rows.append(RefRow(name, info, annotated=tag.annotated))
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="tags"))
