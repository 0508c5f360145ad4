"""Who is asking: a signed session cookie, HTTP Basic (a name with a token or password), or an
``Authorization: token``/``Bearer`` header. Also CSRF tokens and cookies.

Anonymous requests cost nothing here; a session or token costs one query; a password costs one
argon2 verification, remembered for a few minutes so a ``git clone``'s several requests pay it
once, and only on a route that asks who is asking (never for a static file or the metrics). A
token is always tried as a token, never as a password, so it is neither throttled nor made to
wait by failed passwords (``web/throttle.py``). Wrong credentials are a 401 (git then asks
again), never a silent anonymous request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import falcon

from floorless.accounts.access import ANONYMOUS, Viewer
from floorless.accounts.accounts import TOKEN_PREFIX, Account
from floorless.core.caches import Cache
from floorless.core.errors import FloorlessError, Forbidden, NotFound, Unauthorized
from floorless.forge import Forge
from floorless.lfs import transfers
from floorless.web.proxies import Proxies
from floorless.web.throttle import Failures, SigninThrottle

SESSION_COOKIE = "floorless_session"
CSRF_COOKIE = "floorless_csrf"
CSRF_FIELD = "csrf"
_PASSWORD_MEMORY = 300.0  # seconds a verified password is remembered
_PASSWORD_MEMORY_SIZE = 1024


@dataclass(frozen=True)
class RequestAuth:
    viewer: Viewer
    csrf: str  # the token forms must carry back ("" when the request has no session)


_NOBODY = RequestAuth(ANONYMOUS, "")
_current: ContextVar[RequestAuth | None] = ContextVar("floorless_auth", default=None)


def current() -> RequestAuth:
    """The requesting viewer and their CSRF token, for templates."""
    return _current.get() or _NOBODY


def viewer_of(req: falcon.Request) -> Viewer:
    viewer = req.context.get("viewer")
    return viewer if isinstance(viewer, Viewer) else ANONYMOUS


_LFS_OBJECT = re.compile(
    r"\A/(?P<owner>[^/]+)/(?P<name>[^/]+)/info/lfs/objects/(?P<oid>[0-9a-f]{64})\Z"
)


class Authenticator:
    """Turns a request's credentials into a ``Viewer``; shared by the middleware and sign-in."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge
        self.accounts = forge.accounts
        settings = forge.settings
        self.proxies = Proxies(settings.trusted_proxies)
        self.throttle = SigninThrottle(
            settings.signin_attempts,
            settings.signin_address_attempts,
            settings.signin_account_attempts,
            Failures(forge.db, forge.secret.get, settings.signin_window),
            forge.accounts,
        )
        # verified passwords: (account id, its password hash then), for _PASSWORD_MEMORY seconds
        self._verified: Cache[bytes, tuple[int, str]] = Cache.lru_ttl(
            _PASSWORD_MEMORY_SIZE, _PASSWORD_MEMORY
        )

    def identify(self, req: falcon.Request) -> Viewer:
        header = req.get_header("Authorization")
        if header:
            viewer = self._from_header(req, header)
            req.context.auth_method = req.context.get("auth_method") or "token"
        else:
            cookie = req.cookies.get(SESSION_COOKIE)
            if not cookie:
                return ANONYMOUS
            account = self.accounts.session_user(cookie)
            if account is None:
                req.context.stale_session = True
                return ANONYMOUS
            viewer = Viewer(account, "write", session=cookie.partition(".")[0])
            req.context.auth_method = "session"
        # where this person has been is where a flood of wrong passwords never stops them
        self.throttle.seen(viewer.name, self.proxies.client_address(req))
        return viewer

    def may_send(self, environ: dict[str, Any]) -> bool:
        """Whether the request of ``environ`` (its headers; no body yet) comes from someone
        known: a session, a token or a password, or a Git LFS transfer header this forge
        made for the object it names. The gateway asks before it reads a large body."""
        req = falcon.Request(environ)
        header = req.get_header("Authorization")
        if transfers.carried(header):
            assert header is not None
            found = _LFS_OBJECT.match(req.path)
            if found is None:
                return False
            try:
                repo = self.forge.registry.get(found["owner"], found["name"])
            except NotFound:
                return False
            oid = found["oid"]
            return transfers.read(self.forge.secret, header, repo.id, "upload", oid) is not None
        try:
            return self.identify(req).account is not None
        except FloorlessError:
            return False

    def _from_header(self, req: falcon.Request, header: str) -> Viewer:
        scheme, _, value = header.strip().partition(" ")
        scheme = scheme.lower()
        if scheme in ("token", "bearer"):
            return self._token(value.strip(), None)
        if scheme != "basic":
            raise Unauthorized("unsupported Authorization scheme: use Basic, token or Bearer")
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise Unauthorized("malformed Basic credentials") from exc
        name, _, secret = decoded.partition(":")
        if secret.startswith(TOKEN_PREFIX):
            return self._token(secret, name)
        if name.startswith(TOKEN_PREFIX) and secret in ("", "x-oauth-basic"):
            return self._token(name, None)
        account = self.password(req, name, secret)
        req.context.auth_method = "password"
        return Viewer(account, "write")

    def identify_api(self, req: falcon.Request) -> Viewer:
        """Who is asking under ``/api/v1``, as Forgejo takes it: an ``Authorization`` header
        (where ``token`` with nothing after it is anonymous, as pyforgejo sends it without a
        key), a ``?token=`` or ``?access_token=`` parameter, or the web session, which only a
        request from this site may use, and which writes only with the CSRF token in an
        ``X-Csrf-Token`` header: a token is sent on purpose, a cookie by any page."""
        header = (req.get_header("Authorization") or "").strip()
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("token", "bearer") and not value.strip():
            return ANONYMOUS
        if not header:
            for param in ("token", "access_token"):
                plain = req.get_param(param)
                if plain:
                    req.context.auth_method = "token"
                    return self._token(plain, None)
            if not req.cookies.get(SESSION_COOKIE):
                return ANONYMOUS
            if (req.get_header("Sec-Fetch-Site") or "same-origin") not in (
                "same-origin",
                "none",
            ):
                return ANONYMOUS  # another site's page may not act as its visitor here
        viewer = self.identify(req)
        if viewer.session and req.method not in ("GET", "HEAD", "OPTIONS"):
            origin = req.get_header("Origin")
            if origin and origin != "null" and urlsplit(origin).netloc != req.netloc:
                raise Forbidden("this request was sent from another site")
            sent = (req.get_header("X-Csrf-Token") or "").encode("utf-8", "replace")
            if not hmac.compare_digest(sent, self.csrf_for(viewer).encode()):
                raise Forbidden("a write with the session cookie needs its X-Csrf-Token header")
        return viewer

    def _token(self, plain: str, name: str | None) -> Viewer:
        found = self.accounts.check_token(plain)
        if found is None:
            raise Unauthorized("this token is unknown, expired or revoked")
        account, scope = found
        if name and name.lower() != account.name.lower():
            raise Unauthorized("this token belongs to another user")
        return Viewer(account, scope)

    def password(self, req: falcon.Request, name: str, password: str) -> Account:
        """The account if ``password`` is ``name``'s; ``Throttled`` when this address must wait
        for this account (``web/throttle.py``), ``Busy`` when every argon2 slot is taken."""
        address = self.proxies.client_address(req)
        # before the memory too: else a guesser who must wait could go on guessing against it
        pair_failed = self.throttle.check(name, address)
        remembered = self._remembered(name, password)
        if remembered is not None:
            return remembered
        found = self.accounts.verify_password(name, password)
        if found is None:
            self.throttle.failed(name, address)
            raise Unauthorized("wrong user name or password")
        self.throttle.succeeded(name, address, pair_failed)
        self._remember(name, password, *found)
        return found[0]

    def _memory_key(self, name: str, password: str) -> bytes:
        return hmac.new(
            self.forge.secret.get(), f"{name.lower()}\0{password}".encode(), hashlib.sha256
        ).digest()

    def _remembered(self, name: str, password: str) -> Account | None:
        key = self._memory_key(name, password)
        entry = self._verified.get(key)
        if entry is None:
            return None
        # a password changed since (by any process) no longer matches the hash it had
        account = self.accounts.with_password_hash(entry[0], entry[1])
        if account is None or account.name.lower() != name.lower():
            return None
        return account

    def _remember(self, name: str, password: str, account: Account, stored: str) -> None:
        key = self._memory_key(name, password)
        self._verified.put(key, (account.id, stored))

    # -- CSRF ---------------------------------------------------------------------------------

    def csrf_for(self, viewer: Viewer, anonymous_cookie: str = "") -> str:
        if viewer.session:
            return self.forge.secret.sign(viewer.session, "csrf")
        if anonymous_cookie:
            return self.forge.secret.sign(anonymous_cookie, "csrf-anonymous")
        return ""

    def check_csrf(self, req: falcon.Request, form: dict[str, str]) -> None:
        """Refuse a form post that does not carry this browser's token, or that another site
        sent (its ``Origin`` names another host)."""
        origin = req.get_header("Origin")
        if origin and origin != "null" and urlsplit(origin).netloc != req.netloc:
            raise Forbidden("this form was sent from another site")
        viewer = viewer_of(req)
        expected = self.csrf_for(viewer, req.cookies.get(CSRF_COOKIE, ""))
        sent = form.get(CSRF_FIELD, "").encode("utf-8", "replace")
        if not expected or not hmac.compare_digest(sent, expected.encode()):
            raise Forbidden("the form has expired; reload the page and send it again")


class AuthMiddleware:
    """Resolves the client behind trusted proxies for every request, and who is asking once
    the route is known: a resource with ``identifies = False`` (static files, metrics) is
    answered without looking at credentials at all."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.auth_reset = _current.set(_NOBODY)
        req.context.scheme = self.auth.proxies.scheme(req)

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        if not getattr(resource, "identifies", True):
            return
        api = getattr(resource, "api", False)
        viewer = self.auth.identify_api(req) if api else self.auth.identify(req)
        req.context.viewer = viewer
        _current.set(RequestAuth(viewer, self.auth.csrf_for(viewer)))

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if req.context.get("stale_session"):
            clear_cookie(resp, SESSION_COOKIE)
        if viewer_of(req).account is not None or req.get_header("Authorization"):
            # What a signed-in person sees is theirs alone: no shared cache may keep it.
            current = (resp.get_header("Cache-Control") or "no-cache").split(",")
            directives = [d.strip() for d in current if d.strip() not in ("public", "private")]
            resp.cache_control = ["private", *directives]
        resp.append_header("Vary", "Cookie, Authorization")  # after a view's own (raw SVGs')
        reset = req.context.get("auth_reset")
        if reset is not None:
            _current.reset(reset)


def secure(req: falcon.Request, forge: Forge) -> bool:
    mode = forge.settings.secure_cookies
    if mode != "auto":
        return mode == "always"
    scheme = req.context.get("scheme") or req.scheme  # behind a trusted proxy, the client's
    return scheme == "https" or forge.settings.base_url.startswith("https://")


def set_cookie(
    req: falcon.Request, resp: falcon.Response, forge: Forge, name: str, value: str, seconds: int
) -> None:
    resp.set_cookie(
        name,
        value,
        max_age=seconds,
        path="/",
        secure=secure(req, forge),
        http_only=True,
        same_site="Lax",
    )


def clear_cookie(resp: falcon.Response, name: str) -> None:
    resp.unset_cookie(name, path="/")
