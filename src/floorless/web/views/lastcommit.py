"""``/-/last/{commit}/{path}``: a directory's last-commit column as JSON, for pages that were
rendered before the index could answer."""

from __future__ import annotations

from typing import Any

import falcon
import pygit2

from floorless.core.errors import NotFound, RepositoryBroken
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.oid import is_full
from floorless.web.context import RepoView
from floorless.web.render import exact, reltime
from floorless.web.views.base import RepoPage


class LastCommits(RepoPage):
    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        if not is_full(params["sha"]):
            raise NotFound("not a commit id")

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        sha: str,
        tail: str = "",
    ) -> None:
        resolved = view.resolve("commit", urls.exact_tail(req, "sha"))
        commit = view.commit(resolved)
        tree, _ = objects.lookup(view.handle, commit, resolved.path)
        if not isinstance(tree, pygit2.Tree):
            raise NotFound("not a directory")
        if len(tree) > self.settings.max_tree_entries:  # listed in pages, without last commits
            resp.content_type = falcon.MEDIA_JSON
            resp.media = {"ready": True, "entries": {}}
            return
        entries = objects.list_tree(tree, resolved.path)
        last = self.forge.answers.last_commits(
            view.repo, resolved.commit, resolved.path, [e.name for e in entries]
        )
        body: dict[str, Any] = {"ready": last is not None, "entries": {}}
        if last is not None:
            for name, oid in last.items():
                if oid is None:
                    continue
                info = objects.commit_info(objects.get_commit(view.handle, oid))
                body["entries"][name.hex()] = {
                    "id": info.id,
                    "summary": info.summary,
                    "when": info.time.isoformat(),
                    "ago": reltime(info.time),
                    "exact": exact(info.time),
                    "url": urls.commit(view.repo, info.id),
                }
            resp.cache_control = ["public", "max-age=300"]  # "3 days ago" ages
        else:
            failure = self.forge.indexer.failures.get(view.repo.id)
            if (
                failure is not None
                and self.forge.indexer.ready(view.repo.id, commit.id.raw) is None
            ):
                raise RepositoryBroken(f"this repository cannot be indexed: {failure}")
            resp.status = falcon.HTTP_202
            progress = self.forge.indexer.progress(view.repo.id)
            if progress is not None:  # (commits indexed, commits known)
                body["progress"] = progress
            resp.cache_control = ["no-store"]
        resp.content_type = falcon.MEDIA_JSON
        resp.media = body
