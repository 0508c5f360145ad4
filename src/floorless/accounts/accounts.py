"""Accounts: people and organisations, passwords, personal access tokens, sign-in sessions.

People and organisations share one namespace (an owner name is either), matched without
regard to case. Passwords are stored as argon2id hashes, and checked a few at a time: each check
takes 64 MiB and a core for tens of milliseconds, so a flood of guesses is answered "busy" at
once instead of taking every thread and the memory with it. Tokens and session ids are random
and stored only as their SHA-256: whoever reads the database cannot use them. A session
cookie is the session id and an HMAC of it under the forge's secret key, so a forged or
truncated cookie is turned away before the database is asked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from floorless.core.errors import BadRequest, Busy, Conflict, NotFound
from floorless.db import Database, IntegrityError, Row
from floorless.repos.registry import RESERVED, valid_name

TOKEN_PREFIX = "flt_"  # noqa: S105 (a prefix, not a secret)
SCOPES = ("read", "write")
MIN_PASSWORD = 8
_DAY = 86_400.0
_SECRET_KEY = "secret_key"  # noqa: S105 (the name of the meta row that holds it)
_LAST_USED_RESOLUTION = 60.0  # seconds: a token used all day is not a write per request


@dataclass(frozen=True)
class Account:
    id: int
    name: str
    kind: str  # "user" or "org"
    email: str
    is_admin: bool

    @property
    def is_org(self) -> bool:
        return self.kind == "org"


@dataclass(frozen=True)
class Token:
    id: int
    name: str
    prefix: str
    scope: str
    created_at: float
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None

    def active(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def _sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


class SecretKey:
    """The forge's HMAC key: 32 random bytes in a file of the data directory, made once.

    Nodes sharing a PostgreSQL database share the key too, or a cookie one node signed
    would be turned away by the next: there it is kept in the database (``meta``), where the
    first node to start puts its own (the one in its data directory, if it has one: moving
    an installation onto PostgreSQL keeps its sessions)."""

    def __init__(self, path: Path, db: Database | None = None) -> None:
        self.path = path
        self.db = db if db is not None and db.dialect == "postgresql" else None
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def get(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._shared() if self.db is not None else self._load()
            return self._key

    def _shared(self) -> bytes:
        assert self.db is not None
        row = self.db.one("SELECT value FROM meta WHERE key = ?", (_SECRET_KEY,))
        if row is None:
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                (_SECRET_KEY, self._load().hex()),
            )
            row = self.db.one("SELECT value FROM meta WHERE key = ?", (_SECRET_KEY,))
            assert row is not None
        return bytes.fromhex(row["value"])

    def _load(self) -> bytes:
        try:
            key = self.path.read_bytes()
        except FileNotFoundError:
            key = b""
        if len(key) >= 32:
            return key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = secrets.token_bytes(32)
        try:  # O_EXCL: a second process starting at the same moment keeps the first key
            with self.path.open("xb") as fh:
                self.path.chmod(0o600)
                fh.write(fresh)
            return fresh
        except FileExistsError:
            return self.path.read_bytes()

    def sign(self, value: str, purpose: str) -> str:
        digest = hmac.new(self.get(), f"{purpose}:{value}".encode(), hashlib.sha256)
        return digest.hexdigest()[:40]


class Accounts:
    def __init__(
        self,
        db: Database,
        key: SecretKey,
        session_days: float = 30.0,
        reserved: frozenset[str] = frozenset(),
        password_checks: int = 2,
    ) -> None:
        self.db = db
        # Owner names the forge gives itself (``default_owner``): no account may take them.
        self.reserved = frozenset(n.lower() for n in reserved) | RESERVED
        self.key = key
        self.session_seconds = session_days * _DAY
        self.hasher = PasswordHasher()
        self._checks = threading.BoundedSemaphore(password_checks)
        # Verifying against a real hash when the name is unknown costs the same time, so the
        # answer's timing does not tell which names exist.
        self._decoy = self.hasher.hash(secrets.token_hex(16))
        self._have_users = False

    # -- people and organisations -------------------------------------------------------------

    def create_user(self, name: str, email: str, password: str, admin: bool = False) -> Account:
        check_password_strength(password)
        return self._create(name, "user", email, self.hasher.hash(password), admin)

    def create_org(self, name: str, owner: Account) -> Account:
        if owner.is_org:
            raise BadRequest(f"{owner.name} is an organisation; an owner must be a person")
        with self.db.transaction():
            org = self._create(name, "org", "", None, False)
            self.db.execute(
                "INSERT INTO org_members (org_id, user_id, role) VALUES (?, ?, 'owner')",
                (org.id, owner.id),
            )
        return org

    def _create(
        self, name: str, kind: str, email: str, password_hash: str | None, admin: bool
    ) -> Account:
        if name.lower() in self.reserved:
            raise BadRequest(f"{name!r} is reserved for the forge's own pages")
        if name.lower().endswith(".keys"):  # /{name}.keys is a person's public SSH keys
            raise BadRequest(f"{name!r} is not a valid name: it may not end in .keys")
        if not valid_name(name):
            raise BadRequest(
                f"{name!r} is not a valid name: letters, digits, '.', '-' and '_', "
                "starting with a letter or digit, at most 100 characters"
            )
        if email and ("@" not in email or len(email) > 254 or any(c.isspace() for c in email)):
            raise BadRequest(f"{email!r} is not an email address")
        try:
            self.db.execute(
                "INSERT INTO accounts (name, kind, email, password_hash, is_admin, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (name, kind, email, password_hash, int(admin), time.time()),
            )
        except IntegrityError as exc:
            raise Conflict(f"the name {name!r} is already taken") from exc
        account = self.get(name)
        assert account is not None
        return account

    def get(self, name: str) -> Account | None:
        row = self.db.one("SELECT * FROM accounts WHERE name = ?", (name,))
        return None if row is None else _account(row)

    def existing_names(self, names: set[str]) -> dict[str, str]:
        """Which of ``names`` are accounts (matched without regard to case): each found, as
        given, to the account's own spelling."""
        if not names:
            return {}
        marks = ", ".join("lower(?)" for _ in names)
        rows = self.db.query(
            f"SELECT name FROM accounts WHERE lower(name) IN ({marks})",  # noqa: S608
            sorted(names),
        )
        spelled = {str(row["name"]).lower(): str(row["name"]) for row in rows}
        return {name: spelled[name.lower()] for name in names if name.lower() in spelled}

    def require(self, name: str) -> Account:
        account = self.get(name)
        if account is None:
            raise NotFound(f"no user or organisation named {name!r}")
        return account

    def by_id(self, account_id: int) -> Account | None:
        row = self.db.one("SELECT * FROM accounts WHERE id = ?", (account_id,))
        return None if row is None else _account(row)

    def by_ids(self, account_ids: Iterable[int]) -> dict[int, Account]:
        """The accounts of ``account_ids`` that exist, by id: one statement."""
        wanted = sorted(set(account_ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.query(f"SELECT * FROM accounts WHERE id IN ({marks})", wanted)  # noqa: S608
        return {int(row["id"]): _account(row) for row in rows}

    def user_count(self) -> int:
        row = self.db.one("SELECT COUNT(*) AS n FROM accounts WHERE kind = 'user'")
        return int(row["n"]) if row else 0

    def first_run(self) -> bool:
        """No one has an account yet (asked until someone has; then never again)."""
        if not self._have_users:
            self._have_users = self.user_count() > 0
        return not self._have_users

    def set_password(self, user: Account, password: str) -> None:
        check_password_strength(password)
        self.db.execute(
            "UPDATE accounts SET password_hash = ? WHERE id = ?",
            (self.hasher.hash(password), user.id),
        )

    def check_password(self, name: str, password: str) -> Account | None:
        found = self.verify_password(name, password)
        return None if found is None else found[0]

    def verify_password(self, name: str, password: str) -> tuple[Account, str] | None:
        """The person named ``name`` and their stored hash if ``password`` is theirs; the same
        work either way. ``Busy`` when every password-check slot is taken."""
        row = self.db.one("SELECT * FROM accounts WHERE name = ? AND kind = 'user'", (name,))
        stored = row["password_hash"] if row is not None else None
        if not self._checks.acquire(blocking=False):
            raise Busy("too many sign-ins are being checked at once; try again in a moment", 1)
        try:
            self.hasher.verify(stored or self._decoy, password)
        except (VerificationError, InvalidHashError):
            return None
        finally:
            self._checks.release()
        return (_account(row), stored) if row is not None and stored else None

    def with_password_hash(self, account_id: int, stored: str) -> Account | None:
        """The account, if its password is still the one whose hash was ``stored``."""
        row = self.db.one(
            "SELECT * FROM accounts WHERE id = ? AND password_hash = ?", (account_id, stored)
        )
        return None if row is None else _account(row)

    # -- organisations ------------------------------------------------------------------------

    def add_member(self, org: Account, user: Account, role: str = "member") -> None:
        if not org.is_org or user.is_org or role not in ("owner", "member"):
            raise BadRequest("members are people, added to an organisation as owner or member")
        self.db.execute(
            "INSERT INTO org_members (org_id, user_id, role) VALUES (?, ?, ?)"
            " ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role",
            (org.id, user.id, role),
        )

    def owned_orgs(self, user: Account) -> list[Account]:
        """Organisations in which ``user`` may create repositories."""
        rows = self.db.query(
            "SELECT a.* FROM accounts a JOIN org_members m ON m.org_id = a.id"
            " WHERE m.user_id = ? AND m.role = 'owner' ORDER BY a.name",
            (user.id,),
        )
        return [_account(r) for r in rows]

    # -- tokens -------------------------------------------------------------------------------

    def create_token(
        self, user: Account, scope: str, name: str = "", expires_days: float | None = None
    ) -> tuple[str, Token]:
        """A new token for ``user``; the token itself is returned here and never again."""
        if user.is_org:
            raise BadRequest("tokens belong to people, not organisations")
        if scope not in SCOPES:
            raise BadRequest(f"scope must be one of {', '.join(SCOPES)}")
        if expires_days is not None and not 0 < expires_days <= 3650:
            raise BadRequest("a token expires after 1 to 3650 days")
        name = name.strip()[:100] or f"token-{secrets.token_hex(3)}"
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = time.time()
        expires = now + expires_days * _DAY if expires_days is not None else None
        self.db.execute(
            "INSERT INTO tokens (user_id, name, hash, prefix, scope, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (user.id, name, _sha256(plain), plain[:8], scope, now, expires),
        )
        row = self.db.one("SELECT * FROM tokens WHERE hash = ?", (_sha256(plain),))
        assert row is not None
        return plain, _token(row)

    def check_token(self, plain: str) -> tuple[Account, str] | None:
        """The owner of an active token and its scope, or None."""
        if not plain.startswith(TOKEN_PREFIX) or len(plain) > 200:
            return None
        digest = _sha256(plain)
        row = self.db.one(
            "SELECT t.id AS token_id, t.hash, t.scope, t.expires_at, t.revoked_at,"
            " t.last_used_at, a.* FROM tokens t JOIN accounts a ON a.id = t.user_id"
            " WHERE t.hash = ?",
            (digest,),
        )
        # The lookup is by a hash the caller cannot steer; the comparison is constant-time.
        if row is None or not hmac.compare_digest(bytes(row["hash"]), digest):
            return None
        now = time.time()
        if row["revoked_at"] is not None or (
            row["expires_at"] is not None and row["expires_at"] <= now
        ):
            return None
        if row["last_used_at"] is None or now - row["last_used_at"] > _LAST_USED_RESOLUTION:
            self.db.execute(
                "UPDATE tokens SET last_used_at = ? WHERE id = ?", (now, row["token_id"])
            )
        return _account(row), row["scope"]

    def tokens(self, user: Account) -> list[Token]:
        rows = self.db.query(
            "SELECT * FROM tokens WHERE user_id = ? ORDER BY created_at DESC, id DESC",
            (user.id,),
        )
        return [_token(r) for r in rows]

    def revoke_token(self, user: Account, token_id: int) -> None:
        changed = self.db.execute(
            "UPDATE tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL",
            (time.time(), token_id, user.id),
        )
        if not changed:
            raise NotFound("no such active token")

    # -- sessions -----------------------------------------------------------------------------

    # -- where people sign in from (sign-in throttling never slows them there) -----------------

    def places(self, name: str) -> list[str]:
        """The places ``name``'s person signed in from, least recently seen first."""
        rows = self.db.query(
            "SELECT place FROM signin_places WHERE name = ? ORDER BY seen_at", (name,)
        )
        return [row["place"] for row in rows]

    def remember_place(self, name: str, place: str, keep: int) -> None:
        """Record ``place`` for ``name``, keeping the ``keep`` most recently seen."""
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO signin_places (name, place, seen_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name, place) DO UPDATE SET seen_at = excluded.seen_at",
                (name, place, time.time()),
            )
            self.db.execute(
                "DELETE FROM signin_places WHERE name = ? AND place NOT IN"
                " (SELECT place FROM signin_places WHERE name = ? ORDER BY seen_at DESC LIMIT ?)",
                (name, name, keep),
            )

    def start_session(self, user: Account) -> str:
        """A new session for ``user``; returns the cookie value."""
        session_id = secrets.token_urlsafe(32)
        now = time.time()
        self.db.execute("DELETE FROM sessions WHERE expires_at <= ?", (now,))
        self.db.execute(
            "INSERT INTO sessions (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (_sha256(session_id), user.id, now, now + self.session_seconds),
        )
        return f"{session_id}.{self.key.sign(session_id, 'session')}"

    def session_user(self, cookie: str) -> Account | None:
        session_id = self._session_id(cookie)
        if session_id is None:
            return None
        rows = self.db.remembered(
            "SELECT a.*, s.expires_at AS session_expires_at FROM sessions s"
            " JOIN accounts a ON a.id = s.user_id WHERE s.hash = ?",
            (_sha256(session_id),),
            ("sessions", "accounts"),
        )
        if not rows or rows[0]["session_expires_at"] <= time.time():
            return None
        return _account(rows[0])

    def end_session(self, cookie: str) -> None:
        session_id = self._session_id(cookie)
        if session_id is not None:
            self.db.execute("DELETE FROM sessions WHERE hash = ?", (_sha256(session_id),))

    def end_sessions(self, user: Account) -> None:
        self.db.execute("DELETE FROM sessions WHERE user_id = ?", (user.id,))

    def _session_id(self, cookie: str) -> str | None:
        session_id, _, signature = cookie.partition(".")
        if not session_id or len(cookie) > 200:
            return None
        expected = self.key.sign(session_id, "session").encode()
        if not hmac.compare_digest(signature.encode("utf-8", "replace"), expected):
            return None
        return session_id


def check_password_strength(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise BadRequest(f"a password needs at least {MIN_PASSWORD} characters")
    if len(password) > 1024:
        raise BadRequest("a password may have at most 1024 characters")


def _account(row: Row) -> Account:
    return Account(
        id=row["id"],
        name=row["name"],
        kind=row["kind"],
        email=row["email"],
        is_admin=bool(row["is_admin"]),
    )


def _token(row: Row) -> Token:
    return Token(
        id=row["id"],
        name=row["name"],
        prefix=row["prefix"],
        scope=row["scope"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )
