"""A repository's settings: description, visibility, what it offers (issues, pull requests,
the ways to merge), name, collaborators, deletion.

Only those the policy gives ADMIN reach this page; anyone who may read the repository but not
administer it gets 403, anyone else the same 404 as for a repository that does not exist.
"""

from __future__ import annotations

import falcon

from floorless.access import ROLES, Level
from floorless.errors import BadRequest, FloorlessError
from floorless.pulls import MERGE_STYLES, Features
from floorless.repos import Repo
from floorless.web import auth, urls
from floorless.web.context import find_repo
from floorless.web.views.account import FormView, login_url


class Settings(FormView):
    def repo(self, req: falcon.Request, owner: str, name: str) -> Repo:
        if auth.viewer_of(req).anonymous:
            raise falcon.HTTPSeeOther(login_url(req))
        repo, _ = find_repo(self.forge, req, owner, name, Level.ADMIN)
        return repo

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        self.show(resp, self.repo(req, owner, repo))

    def show(self, resp: falcon.Response, repo: Repo, error: str = "", done: str = "") -> None:
        self.html(
            resp,
            "repo_settings.html",
            repo=repo,
            collaborators=self.forge.policy.collaborators(repo),
            features=self.forge.pulls.features(repo.owner, repo.name),
            merge_styles=MERGE_STYLES,
            roles=ROLES,
            error=error,
            done=done,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        found = self.repo(req, owner, repo)
        form = self.form(req)
        action = form.get("action", "")
        handlers = {
            "update": self.do_update,
            "features": self.do_features,
            "rename": self.do_rename,
            "delete": self.do_delete,
            "collaborator": self.do_collaborator,
            "remove-collaborator": self.do_remove_collaborator,
        }
        handler = handlers.get(action)
        if handler is None:
            raise BadRequest(f"unknown action {action[:40]!r}")
        try:
            handler(found, form)
        except FloorlessError as exc:
            resp.status = exc.status
            self.show(resp, self.forge.registry.get(found.owner, found.name), error=str(exc))

    def do_update(self, repo: Repo, form: dict[str, str]) -> None:
        self.forge.set_private(repo, form.get("visibility") == "private")
        self.forge.registry.set_description(repo, form.get("description", ""))
        raise falcon.HTTPSeeOther(urls.settings(repo))

    def do_features(self, repo: Repo, form: dict[str, str]) -> None:
        """Issues and pull requests on or off, and the ways to merge allowed (each a checkbox
        named ``merge-{style}``) with the default one."""
        styles = tuple(style for style in MERGE_STYLES if form.get(f"merge-{style}") == "on")
        features = Features(
            issues=form.get("issues") == "on",
            pulls=form.get("pulls") == "on",
            merge_styles=styles,
            default_merge=form.get("default_merge", ""),
        )
        self.forge.pulls.set_features(repo.owner, repo.name, features)
        raise falcon.HTTPSeeOther(urls.settings(repo))

    def do_rename(self, repo: Repo, form: dict[str, str]) -> None:
        renamed = self.forge.rename(repo, form.get("name", "").strip())
        raise falcon.HTTPSeeOther(urls.settings(renamed))

    def do_delete(self, repo: Repo, form: dict[str, str]) -> None:
        if form.get("confirm", "").strip() != repo.full_name:
            raise BadRequest(f"type {repo.full_name} to confirm the deletion")
        self.forge.delete(repo)
        raise falcon.HTTPSeeOther(urls.owner(repo.owner))

    def do_collaborator(self, repo: Repo, form: dict[str, str]) -> None:
        person = self.forge.accounts.require(form.get("user", "").strip())
        role = form.get("role", "")
        if person.is_org or role not in ROLES:
            raise BadRequest("a collaborator is a person, with the role read, write or admin")
        self.forge.policy.set_collaborator(repo, person, role)
        raise falcon.HTTPSeeOther(urls.settings(repo))

    def do_remove_collaborator(self, repo: Repo, form: dict[str, str]) -> None:
        person = self.forge.accounts.require(form.get("user", "").strip())
        self.forge.policy.remove_collaborator(repo, person)
        raise falcon.HTTPSeeOther(urls.settings(repo))
