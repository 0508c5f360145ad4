"""What every view shares: the forge, the renderer, and an HTML response helper; and what
every page of a repository shares: its repository, found before the view runs.

A repository's page (``RepoPage``) never looks its repository up itself: ``FindRepository``
does, once a request, before the responder, and hands it the ``RepoView`` in place of the
route's ``owner`` and ``repo`` (404 for whoever may not read it, exactly as a missing one).
A page that may be kept says so by what it renders: ``cached_page``'s ``render`` returns
whether the page is final."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import falcon

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.git.refs import Resolved
from floorless.web.auth import viewer_of
from floorless.web.context import RepoView, repo_view
from floorless.web.public import public_url
from floorless.web.render import Renderer


def admin_program() -> str:
    """How to run this very installation's ``floorless`` from a shell: the script beside the
    running interpreter, else the interpreter with ``-m floorless``."""
    script = Path(sys.executable).parent / "floorless"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m floorless"


def admin_command(settings: Settings) -> str:
    """The command that creates the first administrator, as it can be pasted on this server:
    the ``floorless`` beside the running interpreter (``./run`` installs it in a virtual
    environment, not on ``PATH``) and this forge's own data directory, so that it writes to
    the database this server reads. A database set apart from the data directory is named
    as such (``DATABASE_URL``, like NAME and EMAIL, is for the reader to fill in), never
    spelled out: its URL may hold a password."""
    command = (
        f"{admin_program()} admin user create NAME --email EMAIL --admin --password-stdin"
        f" --data {shlex.quote(str(settings.data))}"
    )
    if settings.database != str(settings.data / "floorless.sqlite3"):
        command += " --database DATABASE_URL"
    return command


class View:
    # The query parameters the view reads: the page cache keys its pages by these alone, so
    # that ``?v=1`` and ``?v=2`` are one page.
    query: tuple[str, ...] = ()
    # Whether the page shows commit statuses: then it is kept while the repository's statuses
    # are as they were (``Statuses.version``, in its stamp), and a new one shows at the next view.
    shows_statuses = False

    def __init__(self, forge: Forge, renderer: Renderer) -> None:
        self.forge = forge
        self.renderer = renderer
        self.settings = forge.settings

    def html(self, resp: falcon.Response, template: str, **context: Any) -> None:
        resp.content_type = "text/html; charset=utf-8"
        resp.text = self.renderer.page(template, **context)

    def cached_page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        render: Callable[[], bool],
        stamp: object = None,
    ) -> None:
        """Answer from the page cache; otherwise ``render``, and keep the page if it says
        the page is final (True: nothing it shows is still to come). A page shows the public
        URL as ``self.renderer.pages.public_mark`` and its repository's SSH clone URL as
        ``ssh_mark``, both filled in here for each request.
        ``stamp`` names what the page shows besides refs (``web/pages.py``), read before
        rendering."""
        pages = self.renderer.pages
        key = pages.key(type(self).__name__, view.repo, req, self.query, viewer_of(req), view.level)
        variant = self.variant(req)
        if variant is not None:  # what else the page depends on that its URL may not name
            key = (*key, variant)
        if self.shows_statuses:  # part of what the page shows: a stamp, replaced when it moves
            stamp = (stamp, self.forge.statuses.version(view.repo))
        public = self.public_url(req)
        ssh = self.settings.ssh_clone_url(public, view.repo.full_name)
        if pages.serve(key, view.snapshot, resp, public, stamp, ssh=ssh):
            return
        final = render()
        pages.keep(key, view.snapshot, resp, public, stamp, final, ssh=ssh)

    def public_url(self, req: falcon.Request) -> str:
        return public_url(self.settings, req)

    def variant(self, req: falcon.Request) -> object:
        """What the page depends on besides its URL's path and ``query`` (a diff's style,
        which a cookie may choose), part of its key in the page cache; None for nothing."""
        return None


class RepoPage(View):
    """A page of one repository, routed under ``/{owner}/{repo}``: its responders take the
    repository's ``view`` where the route names ``owner`` and ``repo`` (``FindRepository``
    finds it first)."""

    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        """What the URL alone settles, before the repository is looked up: whether errors
        answer in plain text (``req.context.plain``, which ``errors.py`` reads), so that a
        missing repository's do too; a malformed id, refused before anything is read."""


class FindRepository:
    """Middleware: the repository of a ``RepoPage``, found before its responder runs and
    passed to it as ``view`` (``repo_view``: who may not read it gets 404). It comes after
    ``AuthMiddleware``, which knows who asks by then. A method the page has no responder
    for is left to falcon (405, OPTIONS), which looks nothing up."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        if not isinstance(resource, RepoPage) or not hasattr(resource, f"on_{req.method.lower()}"):
            return
        resource.before(req, params)
        params["view"] = repo_view(self.forge, req, params.pop("owner"), params.pop("repo"))


class RefPage(RepoPage):
    """A page at ``/{owner}/{repo}/{page}/{kind}/{ref}/{path}``: finds the ref and the path,
    then hands them to ``show``."""

    page: str  # which page of a ref it is: src, blame or commits (urls.PAGES)

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, kind: str, tail: str = ""
    ) -> None:
        self.cached_page(
            req,
            resp,
            view,
            lambda: self.show(req, resp, view, view.resolve_url(req, self.page, kind)),
        )

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> bool:
        """Render the page of ``resolved``; whether it is final (kept in the page cache)."""
        raise NotImplementedError
