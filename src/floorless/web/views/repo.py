"""The repository home page (and ``?go-get=1``), or the empty repository's own page; and the
shortcuts to the default branch."""

from __future__ import annotations

import falcon

from floorless.core.errors import NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.render import Renderer
from floorless.web.views.base import RepoPage
from floorless.web.views.tree import tree_context


class Home(RepoPage):
    query = ("go-get",)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        if req.get_param("go-get") == "1":
            public = self.public_url(req)
            host = public.split("://", 1)[-1]
            clone_url = public + urls.clone(view.repo)
            prefix = host + urls.home(view.repo)
            self.html(resp, "goget.html", prefix=prefix, clone_url=clone_url, repo=view.repo)
            return
        # the page is cached for every Host: cached_page fills in the public URL and the SSH
        # clone URL (none when the forge has no SSH port)
        pages = self.renderer.pages
        clone_url = pages.public_mark + urls.clone(view.repo)
        has_ssh = self.settings.ssh_clone_url(self.public_url(req), view.repo.full_name)
        ssh_url = pages.ssh_mark if has_ssh else ""
        self.cached_page(req, resp, view, lambda: self.page(resp, view, clone_url, ssh_url))

    def page(self, resp: falcon.Response, view: RepoView, clone_url: str, ssh_url: str) -> bool:
        """The home page, or the empty repository's; whether it is final."""
        home = view.snapshot.home
        if home is None:
            self.html(
                resp, "empty.html", **view.template_context(clone_url=clone_url, ssh_url=ssh_url)
            )
            return False
        kind, ref, head = home
        resolved = Resolved(kind, ref, head, b"")
        commit = objects.get_commit(view.handle, head)
        context = tree_context(view, resolved, commit.tree, self.renderer.caches["readme"])
        count = self.forge.answers.known_commit_count(view.repo.id, head)
        tree = commit.tree_id
        languages = (
            None
            if tree is None
            else self.renderer.languages.get(view.handle, view.repo.path, tree.raw)
        )
        self.html(
            resp,
            "tree.html",
            **view.template_context(
                clone_url=clone_url,
                ssh_url=ssh_url,
                resolved=resolved,
                home=True,
                latest=objects.commit_info(commit),
                commit_count=count,
                languages=languages,
                crumbs=[],
                **context,
            ),
        )
        # kept once everything it shows is known; before, the next view asks again
        return context["final"] and count is not None and (tree is None or languages is not None)


class DefaultBranch(RepoPage):
    """``/src`` and ``/commits`` without a ref: the page of what the home page shows."""

    def __init__(self, forge: Forge, renderer: Renderer, page: str) -> None:
        super().__init__(forge, renderer)
        self.page = page

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        home = view.snapshot.home
        if home is None:
            raise NotFound("this repository is empty")
        kind, ref, _ = home
        raise falcon.HTTPFound(urls.ref_page(self.page, view.repo, kind, ref))
