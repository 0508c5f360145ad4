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
holds whole. The failure counts live in memory, bounded (a restart forgets them); the places
a person has used are also written to the database (``Places``), the first time this process
sees each, so that a restart (or a worker started again) does not hand an attacker the lockout.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import deque
from typing import Protocol

from floorless.errors import Throttled

_MAX_KEYS = 100_000  # failures are bounded by argon2's pace long before this
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


class Window:
    """Failure times per key within the last ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._times: dict[str, deque[float]] = {}

    def recent(self, key: str, now: float) -> deque[float]:
        times = self._times.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.seconds:
            times.popleft()
        if not times:
            del self._times[key]
        return times

    def add(self, key: str, now: float) -> None:
        self._times.setdefault(key, deque()).append(now)
        if len(self._times) > _MAX_KEYS:
            for stale in [k for k, v in self._times.items() if v[-1] <= now - self.seconds]:
                del self._times[stale]
            while len(self._times) > _MAX_KEYS:  # the oldest keys go first
                del self._times[next(iter(self._times))]

    def clear(self, key: str) -> None:
        self._times.pop(key, None)


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
        window: float,
        places: Places | None = None,
    ) -> None:
        self.limits = {"pair": pair_attempts, "addr": address_attempts, "name": account_attempts}
        self.window = Window(window)
        self.places = places
        # name -> the addresses that person has used, least recently seen first
        self._known: dict[str, dict[str, None]] = {}
        self._lock = threading.Lock()

    def _keys(self, name: str, address: str) -> dict[str, str]:
        name, address = name.lower(), address_key(address)
        return {
            "pair": f"pair:{name}\0{address}",
            "addr": f"addr:{address}",
            "name": f"name:{name}",
        }

    def check(self, name: str, address: str) -> None:
        """Raise ``Throttled`` if an attempt at ``name`` from ``address`` must wait."""
        keys = self._keys(name, address)
        known = self.is_known(name, address)
        now = time.monotonic()
        with self._lock:
            for kind, key in keys.items():
                if kind == "name" and known:
                    continue
                times = self.window.recent(key, now)
                if len(times) >= self.limits[kind]:
                    # the wait until enough failures age out for one more attempt
                    free = times[len(times) - self.limits[kind]]
                    wait = int(free + self.window.seconds - now) + 1
                    raise Throttled(f"too many failed sign-ins; try again in {wait} seconds", wait)

    def failed(self, name: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            for key in self._keys(name, address).values():
                self.window.add(key, now)

    def succeeded(self, name: str, address: str) -> None:
        """A right password: that pair starts afresh and the address is the person's. The
        address's and the account's counts stand (signing in to one's own account must not
        buy more guesses at another's)."""
        with self._lock:
            self.window.clear(self._keys(name, address)["pair"])
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
