"""``/{owner}/{repo}/fork``: the form that names a fork, and the fork's creation.

The repository is found as any page of it is, so a private one that the requester may not
read answers 404 exactly as a missing one, before anything else is asked (not even whether
they are signed in). Forking copies no objects (``floorless.collab.forks``): the page runs no
process; the POST writes refs alone.
"""

from __future__ import annotations

import falcon

from floorless.accounts.accounts import Account
from floorless.core.errors import FloorlessError, Forbidden
from floorless.forgejo import urls
from floorless.web import auth
from floorless.web.context import RepoView
from floorless.web.views.account import FormView
from floorless.web.views.base import RepoPage


class Fork(FormView, RepoPage):
    def allowed(self, req: falcon.Request, view: RepoView) -> Account:
        """Who forks (the repository was found first: 404 for whoever may not read it)."""
        account = self.signed_in(req)
        if not self.forge.policy.may_fork(auth.viewer_of(req), view.level):
            raise Forbidden("you may not fork this repository")
        return account

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        account = self.allowed(req, view)
        self.show(resp, view, account, {"name": view.repo.name})

    def show(
        self,
        resp: falcon.Response,
        view: RepoView,
        account: Account,
        form: dict[str, str],
        error: str = "",
    ) -> None:
        owners = self.forge.forking.owners_for(account)
        context = view.template_context(owners=owners, form=form, error=error)
        self.html(resp, "fork.html", **context)

    def on_post(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        account = self.allowed(req, view)
        form = self.form(req)
        viewer = auth.viewer_of(req)
        target, name = form.get("owner", account.name), form.get("name", "")
        try:
            made = self.forge.forking.fork_for(viewer, view.level, view.repo, target, name)
        except FloorlessError as exc:
            resp.status = exc.status
            self.show(resp, view, account, form, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.home(made))
