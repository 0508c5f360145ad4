"""A repository's settings: description, visibility, what it offers (issues, pull requests,
the ways to merge), branch protection (the status checks a merge waits for), name,
collaborators, deletion; its webhooks and their deliveries.

Only those the policy gives ADMIN reach this page; anyone who may read the repository but not
administer it gets 403, anyone else the same 404 as for a repository that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import falcon

from floorless.accounts.access import ROLES, Level
from floorless.collab.protections import clean_fields
from floorless.collab.pulls import MERGE_STYLES, Features
from floorless.core.errors import BadRequest, FloorlessError, Forbidden, NotFound
from floorless.forgejo import payloads as hookpayloads
from floorless.forgejo import urls
from floorless.forgejo.people import person
from floorless.repos.registry import Repo
from floorless.web import auth
from floorless.web.context import find_repo
from floorless.web.views.account import FormView, login_url
from floorless.webhooks.hooks import EVENTS, SENT, Hook


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
            protections=self.forge.protections.rules(repo),
            lfs=self.forge.lfs.usage(repo.id),
            locks=len(self.forge.locks.list(repo.id)[0]),
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
            "about": self.do_about,
            "delete": self.do_delete,
            "collaborator": self.do_collaborator,
            "remove-collaborator": self.do_remove_collaborator,
            "protect": self.do_protect,
            "unprotect": self.do_unprotect,
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
        self.forge.lifecycle.set_private(repo, form.get("visibility") == "private")
        self.forge.registry.set_description(repo, form.get("description", ""))
        raise falcon.HTTPSeeOther(urls.settings(repo))

    def do_about(self, repo: Repo, form: dict[str, str]) -> None:
        self.forge.registry.set_about(repo, form.get("website", ""), form.get("topics", ""))
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

    def do_protect(self, repo: Repo, form: dict[str, str]) -> None:
        """Make or change the rule named ``rule`` from its form (``rule_form``)."""
        rule = form.get("rule", "").strip()
        fields = clean_fields(rule_form(form), lambda name: person(self.forge.db, name) is not None)
        protections = self.forge.protections
        if any(r.rule == rule for r in protections.rules(repo)):
            protections.edit(repo, rule, fields)
        else:
            protections.create(repo, rule, fields)
        raise falcon.HTTPSeeOther(urls.settings(repo) + "#protection")

    def do_unprotect(self, repo: Repo, form: dict[str, str]) -> None:
        self.forge.protections.delete(repo, form.get("rule", "").strip())
        raise falcon.HTTPSeeOther(urls.settings(repo) + "#protection")

    def do_rename(self, repo: Repo, form: dict[str, str]) -> None:
        renamed = self.forge.lifecycle.rename(repo, form.get("name", "").strip())
        raise falcon.HTTPSeeOther(urls.settings(renamed))

    def do_delete(self, repo: Repo, form: dict[str, str]) -> None:
        if form.get("confirm", "").strip() != repo.full_name:
            raise BadRequest(f"type {repo.full_name} to confirm the deletion")
        self.forge.lifecycle.delete(repo)
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


@dataclass(frozen=True)
class HookPlace:
    """Whose webhooks a page shows: a repository's, or an organisation's (sent for every
    repository it owns)."""

    repo: Repo | None
    org_id: int | None
    name: str  # the organisation's name (a repository's page shows the repository)

    @property
    def repo_id(self) -> int | None:
        return self.repo.id if self.repo is not None else None

    def url(self, hook_id: int | None = None) -> str:
        if self.repo is not None:
            return urls.hooks(self.repo, hook_id)
        return urls.org_hooks(self.name, hook_id)


class HookSettings(Settings):
    """The repository's webhooks (``/settings/hooks``): listed, added; one of them
    (``/settings/hooks/{hook}``) edited, deleted, sent a test, with its recent deliveries
    (what was sent, what came back, or why nothing did) and a button to send one again.
    As the rest of the settings: its administrators only, every form with its CSRF token.
    ``OrgHookSettings`` is the same for an organisation's webhooks."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, hook: str = ""
    ) -> None:
        place = HookPlace(self.repo(req, owner, repo), None, owner)
        self.show_hooks(resp, place, self._hook(place, hook) if hook else None)

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, hook: str = ""
    ) -> None:
        self.post_hooks(req, resp, HookPlace(self.repo(req, owner, repo), None, owner), hook)

    def show_hooks(
        self, resp: falcon.Response, place: HookPlace, hook: Hook | None, error: str = ""
    ) -> None:
        hooks = self.forge.webhooks
        self.html(
            resp,
            "hooks.html",
            place=place,
            repo=place.repo,
            hooks=hooks.hooks(place.repo_id, place.org_id) if hook is None else [],
            hook=hook,
            deliveries=hooks.deliveries(hook) if hook is not None else [],
            events=sorted(EVENTS),
            sent=SENT,
            error=error,
        )

    def _hook(self, place: HookPlace, hook: str) -> Hook:
        number = int(hook) if (hook.isascii() and hook.isdigit()) and len(hook) < 18 else 0
        return self.forge.webhooks.hook(number, place.repo_id, place.org_id)

    def post_hooks(
        self, req: falcon.Request, resp: falcon.Response, place: HookPlace, hook: str
    ) -> None:
        chosen = self._hook(place, hook) if hook else None
        form = self.form(req)
        action = form.get("action", "")
        try:
            self.act(req, place, chosen, action, form)
        except FloorlessError as exc:
            resp.status = exc.status
            self.show_hooks(resp, place, chosen, error=str(exc))

    def act(
        self,
        req: falcon.Request,
        place: HookPlace,
        hook: Hook | None,
        action: str,
        form: dict[str, str],
    ) -> None:
        hooks = self.forge.webhooks
        if hook is None:
            if action != "add":
                raise BadRequest(f"unknown action {action[:40]!r}")
            made = hooks.create(place.repo_id, place.org_id, **_hook_fields(form))
            raise falcon.HTTPSeeOther(place.url(made.id))
        if action == "edit":
            fields = _hook_fields(form)
            if not fields["secret"] and form.get("clear_secret") != "on":  # never shown back
                fields["secret"] = hook.secret
            hooks.update(hook, **fields)
        elif action == "delete":
            hooks.delete(hook)
            raise falcon.HTTPSeeOther(place.url())
        elif action == "test":
            account = auth.viewer_of(req).account
            assert account is not None
            if place.repo is None:
                raise BadRequest(
                    "an organisation's webhook is tested by a push to one of its repositories"
                )
            payload = hookpayloads.test_payload(
                self.forge, place.repo, account, self.public_url(req)
            )
            if payload is None:
                raise BadRequest("the repository has no commit to send")
            hooks.emit([hook], "push", payload, forced=True)
        elif action == "redeliver":
            number = form.get("delivery", "")
            delivery = (
                hooks.delivery(int(number))
                if (number.isascii() and number.isdigit()) and len(number) < 18
                else None
            )
            if delivery is None or delivery.hook_id != hook.id:
                raise BadRequest("no such delivery of this webhook")
            hooks.redeliver(delivery)
        else:
            raise BadRequest(f"unknown action {action[:40]!r}")
        raise falcon.HTTPSeeOther(place.url(hook.id))


class OrgHookSettings(HookSettings):
    """An organisation's webhooks (``/-/orgs/{org}/hooks``), for its owners and the site's
    administrators, as through the API; the organisation's existence is public (its page),
    so whoever else asks is told 403."""

    def place(self, req: falcon.Request, org: str) -> HookPlace:
        viewer = auth.viewer_of(req)
        if viewer.anonymous:
            raise falcon.HTTPSeeOther(login_url(req))
        found = person(self.forge.db, org)
        if found is None or not found.is_org:
            raise NotFound(f"no organisation {org[:100]!r}")
        if not self.forge.policy.may_manage_org_hooks(viewer, found.id):
            raise Forbidden("only the organisation's owners may manage its webhooks")
        return HookPlace(None, found.id, found.name)

    def on_get(  # type: ignore[override]
        self, req: falcon.Request, resp: falcon.Response, org: str, hook: str = ""
    ) -> None:
        place = self.place(req, org)
        self.show_hooks(resp, place, self._hook(place, hook) if hook else None)

    def on_post(  # type: ignore[override]
        self, req: falcon.Request, resp: falcon.Response, org: str, hook: str = ""
    ) -> None:
        self.post_hooks(req, resp, self.place(req, org), hook)


def _hook_fields(form: dict[str, str]) -> dict[str, Any]:
    """A hook's fields as its form gives them (each event a checkbox ``event-{name}``)."""
    return {
        "url": form.get("url", ""),
        "content_type": form.get("content_type", "json"),
        "http_method": form.get("http_method", "POST"),
        "secret": form.get("secret", ""),
        "authorization_header": form.get("authorization_header", ""),
        "events": [e for e in EVENTS if form.get(f"event-{e}") == "on"],
        "branch_filter": form.get("branch_filter", ""),
        "active": form.get("active") == "on",
    }


def rule_form(form: dict[str, str]) -> dict[str, Any]:
    """A protection rule's fields, in Forgejo's names, from the settings page's form: the
    push choice (``push``: none, all, listed), the force-push choice (``force_push``), and
    the checkboxes, lists (one name or context a line) and patterns."""
    push = form.get("push", "none")
    force = form.get("force_push", "none")

    def names(key: str) -> list[str]:
        return [line.strip() for line in form.get(key, "").splitlines() if line.strip()]

    approvals = form.get("required_approvals", "0").strip() or "0"
    return {
        "enable_push": push in ("all", "listed"),
        "enable_push_whitelist": push == "listed",
        "push_whitelist_usernames": names("push_users"),
        "enable_force_push": force in ("all", "listed"),
        "enable_force_push_allowlist": force == "listed",
        "force_push_allowlist_usernames": names("force_push_users"),
        "enable_status_check": form.get("enable_status_check") == "on",
        "status_check_contexts": names("contexts"),
        "required_approvals": int(approvals)
        if (approvals.isascii() and approvals.isdigit())
        else -1,
        "enable_approvals_whitelist": bool(names("approvers")),
        "approvals_whitelist_username": names("approvers"),
        "dismiss_stale_approvals": form.get("dismiss_stale_approvals") == "on",
        "block_on_rejected_reviews": form.get("block_on_rejected_reviews") == "on",
        "block_on_outdated_branch": form.get("block_on_outdated_branch") == "on",
        "enable_merge_whitelist": bool(names("mergers")),
        "merge_whitelist_usernames": names("mergers"),
        "protected_file_patterns": form.get("protected_file_patterns", ""),
        "unprotected_file_patterns": form.get("unprotected_file_patterns", ""),
        "apply_to_admins": form.get("apply_to_admins") == "on",
    }
