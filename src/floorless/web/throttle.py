"""Sign-in throttling that nobody elsewhere can turn into a lockout of the owner.

Failed password sign-ins are counted in three sliding windows of ``signin_window`` seconds:

    one account from one address     signin_attempts           that address waits for it
    one address, whatever account    signin_address_attempts   that address waits
    one account, from anywhere       signin_account_attempts   the account is slowed

Past the third, an address the account's person has used before (a right password, one of
their tokens or a session of theirs, remembered by this process) signs in as if nothing had
happened; every other address shares what the window frees, one attempt each time a failure
ages out. Guessing is held to ``signin_account_attempts`` a window however many addresses
the guesser has, the owner is never locked out where they have been, and a new place waits at
most one window. Tokens are never counted nor refused here: they cannot be guessed, and cost a
SHA-256 rather than an argon2 check. An IPv6 address counts as its /64, which one host often
holds whole. The failures are kept in the database (``Failures``), so that a throttle cannot be
dodged by asking another node, nor by waiting for a restart; the places a person has used are
also written to the database (``Places``), the first time this process sees each, so that a
restart (or a worker started again) does not hand an attacker the lockout.

What a sign-in costs here: a check reads the three windows in one query; a failure adds its
three rows (and prunes the old) in one transaction; a success clears its pair in one statement
(none when the check found the pair clean).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from floorless.core.errors import Throttled
from floorless.db import Database

_MAX_PLACES = 32  # addresses remembered per person, the least recently seen dropped first


def address_key(address: str) -> str:
    """The unit an address is counted in: itself, or its /64 for IPv6."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class Failures:
    """Failed sign-ins in the database: every node counts those made through every other, and a
    restart forgets none. A row per failure and key, at its wall-clock time (nodes share no
    monotonic clock); rows older than the window are pruned as failures are added, so the
    table holds at most a window of failures, which argon2's pace bounds.

    A key is stored as an HMAC under the forge's secret key, never as text: a password typed
    into the name field is not kept readable. Nodes that share a database share the secret key
    already (their session cookies are signed with it).
    """

    def __init__(self, db: Database, secret: Callable[[], bytes], seconds: float) -> None:
        self.db = db
        self.secret = secret
        self.seconds = seconds

    def digest(self, key: str) -> bytes:
        return hmac.new(self.secret(), key.encode(), hashlib.sha256).digest()[:16]

    def recent(self, keys: dict[str, bytes], now: float) -> dict[str, list[float]]:
        """The times of the failures of each key within the window, oldest first: one query."""
        found: dict[str, list[float]] = {kind: [] for kind in keys}
        kinds = {digest: kind for kind, digest in keys.items()}
        marks = ", ".join("?" for _ in keys)
        rows = self.db.query(
            f"SELECT key, at FROM signin_failures WHERE key IN ({marks}) AND at > ?"  # noqa: S608
            " ORDER BY at",
            [*keys.values(), now - self.seconds],
        )
        for row in rows:
            found[kinds[bytes(row["key"])]].append(float(row["at"]))
        return found

    def add(self, keys: Iterable[bytes], now: float) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM signin_failures WHERE at <= ?", (now - self.seconds,))
            self.db.executemany(
                "INSERT INTO signin_failures (key, at) VALUES (?, ?)", [(k, now) for k in keys]
            )

    def clear(self, key: bytes) -> None:
        self.db.execute("DELETE FROM signin_failures WHERE key = ?", (key,))


class Places(Protocol):
    """Where the places people sign in from are kept beyond this process."""

    def places(self, name: str) -> list[str]: ...

    def remember_place(self, name: str, place: str, keep: int) -> None: ...


class SigninThrottle:
    def __init__(
        self,
        pair_attempts: int,
        address_attempts: int,
        account_attempts: int,
        failures: Failures,
        places: Places | None = None,
    ) -> None:
        self.limits = {"pair": pair_attempts, "addr": address_attempts, "name": account_attempts}
        self.failures = failures
        self.places = places
        # name -> the addresses that person has used, least recently seen first
        self._known: dict[str, dict[str, None]] = {}
        self._lock = threading.Lock()

    def _keys(self, name: str, address: str) -> dict[str, bytes]:
        name, address = name.lower(), address_key(address)
        digest = self.failures.digest
        return {
            "pair": digest(f"pair:{name}\0{address}"),
            "addr": digest(f"addr:{address}"),
            "name": digest(f"name:{name}"),
        }

    def check(self, name: str, address: str) -> bool:
        """Raise ``Throttled`` if an attempt at ``name`` from ``address`` must wait; else say
        whether the pair has failures in the window (a success then has them to clear)."""
        keys = self._keys(name, address)
        known = self.is_known(name, address)
        now = time.time()
        recent = self.failures.recent(keys, now)
        for kind, times in recent.items():
            if kind == "name" and known:
                continue
            if len(times) >= self.limits[kind]:
                # the wait until enough failures age out for one more attempt
                free = times[len(times) - self.limits[kind]]
                wait = max(int(free + self.failures.seconds - now) + 1, 1)
                raise Throttled(f"too many failed sign-ins; try again in {wait} seconds", wait)
        return bool(recent["pair"])

    def failed(self, name: str, address: str) -> None:
        self.failures.add(self._keys(name, address).values(), time.time())

    def succeeded(self, name: str, address: str, pair_failed: bool = True) -> None:
        """A right password: that pair starts afresh and the address is the person's. The
        address's and the account's counts stand (signing in to one's own account must not
        buy more guesses at another's). ``pair_failed`` False: the check found none to clear."""
        if pair_failed:
            self.failures.clear(self._keys(name, address)["pair"])
        self.seen(name, address)

    def seen(self, name: str, address: str) -> None:
        """``name``'s person proved who they are from ``address`` (password, token, session).
        Kept per person, so nobody can push another person's places out."""
        key = address_key(address)
        places = self._places(name)
        with self._lock:
            new = key not in places
            places.pop(key, None)
            places[key] = None
            while len(places) > _MAX_PLACES:
                del places[next(iter(places))]
        if new and self.places is not None:  # once a place a process: no write a request
            self.places.remember_place(name.lower(), key, _MAX_PLACES)

    def is_known(self, name: str, address: str) -> bool:
        places = self._places(name, keep=False)
        with self._lock:
            return address_key(address) in places

    def _places(self, name: str, keep: bool = True) -> dict[str, None]:
        """The person's places, read from the database the first time this process asks.
        Kept in memory for people seen signed in, and for names that have places: a guesser
        trying made-up names fills nothing."""
        name = name.lower()
        with self._lock:
            places = self._known.get(name)
        if places is not None:
            return places
        stored = dict.fromkeys(self.places.places(name)[-_MAX_PLACES:]) if self.places else {}
        if not keep and not stored:
            return stored
        with self._lock:
            return self._known.setdefault(name, stored)
