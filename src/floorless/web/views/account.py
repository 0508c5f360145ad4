"""Signing in and out, personal access tokens, and making repositories, in the browser.

Every form carries a CSRF token bound to the browser's session (or, before sign-in, to a
cookie of its own) and is refused without it, or when another site sent it.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from typing import Any
from urllib.parse import quote, urlsplit

import falcon

from floorless.accounts.access import ANONYMOUS
from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, FloorlessError, Throttled, TooLarge, Unauthorized
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.web import auth
from floorless.web.render import Renderer
from floorless.web.views.base import View, admin_command

MAX_FORM = 64 * 1024
_PAST_ASCII = re.compile(r"[^\x00-\x7f]+")


def read_form(req: falcon.Request) -> dict[str, str]:
    """A posted form's fields (the last of repeated names), at most 64 KiB of it."""
    return last_values(read_fields(req))


def last_values(fields: dict[str, list[str]]) -> dict[str, str]:
    return {k: v[-1] for k, v in fields.items() if v}


def read_fields(req: falcon.Request) -> dict[str, list[str]]:
    """A posted form's fields, each name's values in order, at most 64 KiB of it."""
    if (req.content_length or 0) > MAX_FORM:
        raise TooLarge("the form is too large")
    if (req.content_type or "").split(";")[0].strip() != falcon.MEDIA_URLENCODED:
        raise BadRequest("expected a form")
    raw = req.bounded_stream.read(MAX_FORM + 1)
    if len(raw) > MAX_FORM:
        raise TooLarge("the form is too large")
    form = falcon.uri.parse_query_string(raw.decode("utf-8", "replace"), keep_blank=True)
    return {k: v if isinstance(v, list) else [v] for k, v in form.items()}


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path on this site, never another site. Browsers drop
    tabs and newlines from URLs and read a backslash as a slash, so any control character,
    space or backslash makes it "/". What is left past ASCII is percent-encoded as UTF-8: a
    ``Location`` header is Latin-1 at most, and an encoded character can only be a path's."""
    if not value or len(value) > 2000 or not value.startswith("/"):
        return "/"
    if value.startswith("//") or any(c <= " " or c in "\\\x7f" for c in value):
        return "/"
    value = _PAST_ASCII.sub(lambda m: quote(m.group(), safe="", errors="replace"), value)
    parts = urlsplit(value)
    return value if not parts.scheme and not parts.netloc else "/"


def login_url(req: falcon.Request) -> str:
    """The sign-in page, coming back to this very URL (its exact bytes, percent-encoded)."""
    here = urls.path(urls.exact_path(req).encode("latin-1"))
    return urls.login(next=here + (f"?{req.query_string}" if req.query_string else ""))


class FormView(View):
    def __init__(self, forge: Forge, renderer: Renderer, authenticator: auth.Authenticator) -> None:
        super().__init__(forge, renderer)
        self.auth = authenticator

    def form(self, req: falcon.Request) -> dict[str, str]:
        form = read_form(req)
        self.auth.check_csrf(req, form)
        return form

    def signed_in(self, req: falcon.Request) -> Account:
        """The signed-in person; anyone else is sent to sign in first."""
        account = auth.viewer_of(req).account
        if account is None or auth.viewer_of(req).session is None:
            raise falcon.HTTPSeeOther(login_url(req))
        return account


class Login(FormView):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if auth.viewer_of(req).account is not None:
            raise falcon.HTTPSeeOther(safe_next(req.get_param("next")))
        self.show(req, resp, "")

    def show(self, req: falcon.Request, resp: falcon.Response, error: str, name: str = "") -> None:
        cookie = req.cookies.get(auth.CSRF_COOKIE) or secrets.token_urlsafe(24)
        auth.set_cookie(req, resp, self.forge, auth.CSRF_COOKIE, cookie, 3600)
        resp.cache_control = ["no-store"]
        self.html(
            resp,
            "login.html",
            csrf=self.auth.csrf_for(ANONYMOUS, cookie),
            next=safe_next(req.get_param("next")),
            error=error,
            name=name,
            first_run=self.forge.accounts.first_run(),
            admin_command=lambda: admin_command(self.settings),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = self.form(req)
        name = form.get("name", "").strip()[:100]
        try:
            account = self.auth.password(req, name, form.get("password", ""))
        except Throttled as exc:  # 429, or 503 when every password-check slot is taken
            resp.status = exc.status
            resp.set_header("Retry-After", str(exc.retry_after))
            self.show(req, resp, str(exc), name)
            return
        except Unauthorized as exc:
            resp.status = falcon.HTTP_401  # no WWW-Authenticate: a form, not a browser dialog
            self.show(req, resp, str(exc), name)
            return
        session = self.forge.accounts.start_session(account)
        seconds = int(self.settings.session_days * 86_400)
        auth.set_cookie(req, resp, self.forge, auth.SESSION_COOKIE, session, seconds)
        auth.clear_cookie(resp, auth.CSRF_COOKIE)
        raise falcon.HTTPSeeOther(safe_next(form.get("next")))


class Logout(FormView):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.form(req)
        cookie = req.cookies.get(auth.SESSION_COOKIE)
        if cookie:
            self.forge.accounts.end_session(cookie)
        auth.clear_cookie(resp, auth.SESSION_COOKIE)
        raise falcon.HTTPSeeOther(urls.explore())


class Tokens(FormView):
    """Tokens: a new one is handed over once, on the page the creation redirects to (so a
    reload neither shows it again nor makes another)."""

    def __init__(self, forge: Forge, renderer: Renderer, authenticator: auth.Authenticator) -> None:
        super().__init__(forge, renderer, authenticator)
        self._handover: dict[str, tuple[str, float]] = {}  # session id -> (token, deadline)
        self._lock = threading.Lock()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.signed_in(req)
        session = auth.viewer_of(req).session or ""
        with self._lock:  # a HEAD request looks without taking
            take = self._handover.pop if req.method == "GET" else self._handover.get
            created, deadline = take(session, ("", 0.0))
        self.show(resp, account, created=created if deadline > time.monotonic() else None)

    def show(self, resp: falcon.Response, account: Account, **extra: Any) -> None:
        resp.cache_control = ["no-store"]  # a new token is on this page exactly once
        extra.setdefault("error", "")
        extra.setdefault("created", None)
        self.html(resp, "tokens.html", tokens=self.forge.accounts.tokens(account), **extra)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.signed_in(req)
        form = self.form(req)
        try:
            if form.get("action") == "revoke":
                self.forge.accounts.revoke_token(account, _int(form.get("id")))
                raise falcon.HTTPSeeOther(urls.tokens())
            days = form.get("expires", "").strip()
            plain, _ = self.forge.accounts.create_token(
                account,
                form.get("scope", ""),
                form.get("name", ""),
                float(_int(days)) if days else None,
            )
        except FloorlessError as exc:
            resp.status = exc.status
            self.show(resp, account, error=str(exc))
            return
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (_, due) in self._handover.items() if due < now]:
                del self._handover[key]
            self._handover[auth.viewer_of(req).session or ""] = (plain, now + 300)
        raise falcon.HTTPSeeOther(urls.tokens())


class NewRepo(FormView):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.signed_in(req)
        self.show(resp, account, {})

    def show(
        self, resp: falcon.Response, account: Account, form: dict[str, str], error: str = ""
    ) -> None:
        owners = [account.name] + [o.name for o in self.forge.accounts.owned_orgs(account)]
        self.html(resp, "new_repo.html", owners=owners, form=form, error=error)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.signed_in(req)
        form = self.form(req)
        owners = [account.name] + [o.name for o in self.forge.accounts.owned_orgs(account)]
        owner = form.get("owner", account.name)
        try:
            if owner not in owners and not account.is_admin:
                raise BadRequest(f"you cannot create repositories for {owner!r}")
            owner_account = self.forge.accounts.require(owner)
            repo = self.forge.registry.create(
                owner_account.name,
                form.get("name", "").strip(),
                form.get("visibility") == "private",
                form.get("description", ""),
            )
        except FloorlessError as exc:
            resp.status = exc.status
            self.show(resp, account, form, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.home(repo))


def _int(value: str | None) -> int:
    if value is not None and len(value) > 9:
        raise BadRequest("that number is out of range")
    try:
        return int(value or "")
    except ValueError as exc:
        raise BadRequest(f"{value!r} is not a number") from exc
