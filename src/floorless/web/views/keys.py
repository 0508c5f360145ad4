"""SSH keys in the browser: a person's own (``/-/keys``), a repository's deploy keys (in its
settings, for its administrators), and anyone's public keys as plain text (``/{name}.keys``,
what GitHub and Forgejo serve there, for ``curl >> authorized_keys``).

A key is checked when it is added (``accounts/keys.py``): one that is not an SSH public key,
that floorless refuses, or that is already used anywhere is not added, and the page says why.
"""

from __future__ import annotations

import falcon

from floorless.accounts.accounts import Account
from floorless.accounts.keys import SshKey
from floorless.core.errors import BadRequest, FloorlessError, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.forgejo.people import person
from floorless.repos.registry import Repo
from floorless.web.render import Renderer
from floorless.web.views import explore
from floorless.web.views.account import FormView
from floorless.web.views.base import View
from floorless.web.views.settings import Settings


def _key_id(value: str | None) -> int:
    text = value or ""
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise BadRequest("no such key")
    return int(text)


class SshKeys(FormView):
    """The signed-in person's SSH keys: listed with their fingerprints and last use, added
    (a title and the key), deleted."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.show(resp, self.signed_in(req))

    def show(
        self,
        resp: falcon.Response,
        account: Account,
        error: str = "",
        form: dict[str, str] | None = None,
    ) -> None:
        resp.cache_control = ["no-store"]
        self.html(
            resp,
            "keys.html",
            keys=self.forge.keys.of_user(account.id),
            error=error,
            form=form or {},
            public_keys=urls.public_keys(account.name),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.signed_in(req)
        form = self.form(req)
        action = form.get("action", "")
        keys = self.forge.keys
        try:
            if action == "add":
                keys.add_user_key(account, form.get("key", ""), form.get("title", ""))
            elif action == "delete":
                keys.delete(keys.user_key(account.id, _key_id(form.get("id"))))
            else:
                raise BadRequest(f"unknown action {action[:40]!r}")
        except FloorlessError as exc:
            resp.status = exc.status
            self.show(resp, account, str(exc), form if action == "add" else None)
            return
        raise falcon.HTTPSeeOther(urls.ssh_keys())


class DeployKeys(Settings):
    """A repository's deploy keys (``/settings/keys``): listed, added (read-only unless
    "may push" is ticked, as on Forgejo), deleted. As the rest of the settings: its
    administrators only (others who may read it: 403; anyone else: 404)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        self.show_keys(resp, self.repo(req, owner, repo))

    def show_keys(
        self, resp: falcon.Response, repo: Repo, error: str = "", form: dict[str, str] | None = None
    ) -> None:
        resp.cache_control = ["no-store"]
        keys = self.forge.keys.of_repo(repo.id)
        self.html(
            resp,
            "deploy_keys.html",
            repo=repo,
            keys=keys,
            adders=self._adders(keys),
            error=error,
            form=form or {},
        )

    def _adders(self, keys: list[SshKey]) -> dict[int, str]:
        """Who added each key, by account id."""
        names: dict[int, str] = {}
        for key in keys:
            if key.added_by is not None and key.added_by not in names:
                found = self.forge.accounts.by_id(key.added_by)
                names[key.added_by] = found.name if found is not None else ""
        return names

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        found = self.repo(req, owner, repo)
        form = self.form(req)
        action = form.get("action", "")
        keys = self.forge.keys
        try:
            if action == "add":
                account = self.signed_in(req)
                keys.add_deploy_key(
                    found.id,
                    form.get("key", ""),
                    form.get("title", ""),
                    read_only=form.get("write") != "on",
                    added_by=account,
                )
            elif action == "delete":
                keys.delete(keys.deploy_key(found.id, _key_id(form.get("id"))))
            else:
                raise BadRequest(f"unknown action {action[:40]!r}")
        except FloorlessError as exc:
            resp.status = exc.status
            self.show_keys(resp, found, str(exc), form if action == "add" else None)
            return
        raise falcon.HTTPSeeOther(urls.deploy_keys(found))


class PublicKeys(View):
    """``/{name}.keys``: a person's public keys, one a line, as OpenSSH's
    ``authorized_keys`` takes them; 404 for a name that is no one's, or an organisation's.
    No new name ends in ``.keys``; an account already named so (adopted from the
    repositories directory) keeps its page here when ``name`` is no one's."""

    def __init__(self, forge: Forge, renderer: Renderer) -> None:
        super().__init__(forge, renderer)
        self.owner_page = explore.Owner(forge, renderer)

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str) -> None:
        who = person(self.forge.db, owner)
        if who is None and person(self.forge.db, f"{owner}.keys") is not None:
            self.owner_page.on_get(req, resp, owner=f"{owner}.keys")
            return
        req.context.plain = True
        if who is None or who.is_org:
            raise NotFound(f"no user {owner[:100]!r}")
        resp.content_type = "text/plain; charset=utf-8"
        resp.text = "".join(f"{key.content}\n" for key in self.forge.keys.of_user(who.id))
