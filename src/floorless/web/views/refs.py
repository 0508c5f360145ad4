"""``/branches`` and ``/tags``, each with its latest commit."""

from __future__ import annotations

import falcon

from floorless.git import objects
from floorless.web.context import repo_view
from floorless.web.views.base import View


class Branches(View):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        view = repo_view(self.forge, owner, repo)
        default = view.snapshot.default_branch
        rows = []
        for name, oid in view.snapshot.branches.items():
            info = objects.commit_info(objects.get_commit(view.handle, oid))
            rows.append({"name": name, "commit": info, "default": name == default})
        rows.sort(key=lambda r: (not r["default"], -r["commit"].time.timestamp(), r["name"]))
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="branches"))


class Tags(View):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        view = repo_view(self.forge, owner, repo)
        rows = []
        for name, tag in view.snapshot.tags.items():
            info = (objects.commit_info(objects.get_commit(view.handle, tag.commit))
                    if tag.commit else None)
            rows.append({"name": name, "commit": info, "annotated": tag.annotated,
                         "default": False})
        rows.sort(key=lambda r: (-(r["commit"].time.timestamp() if r["commit"] else 0),
                                 r["name"]))
        self.html(resp, "refs.html", **view.template_context(rows=rows, what="tags"))
