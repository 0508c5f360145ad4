"""Leases: work that many nodes could do, done by one (the history index of a repository).

A lease is a row of ``leases``: its name, the node holding it and when it expires. A node
takes a lease with one upsert that succeeds only if no one holds it or its holder let it
expire; a background thread renews every lease this node holds, each ``seconds / 3``; a
node done with the work deletes its row. A node killed mid-work renews nothing, and once
its lease has expired another node takes it and goes on from what was stored.

Every write made under a lease is fenced: ``guard`` runs inside the writing transaction
and renews the lease there, raising ``LeaseLost`` when another node has taken it meanwhile
(this node was stopped longer than the lease lasts, say); the transaction then stores
nothing. Write transactions are serialized (``Database.transaction``), so a write never
lands after another node took the lease.

Expiry times are the nodes' clocks: nodes keep them in step (NTP) well within the lease.
On SQLite the processes sharing the file (the workers of one server, two servers) take
leases as nodes do.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time

from floorless.core import background
from floorless.core.errors import FloorlessError
from floorless.db.store import Database

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0  # how long a lease lasts unless renewed (the ``lease_seconds`` setting)


def node_name() -> str:
    """A name for this process no other node (nor this one after a restart) has."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class LeaseLost(FloorlessError):
    """Another node took a lease this node held: the work under it stops, unstored."""


class Leases:
    def __init__(self, db: Database, node: str, seconds: float) -> None:
        self.db = db
        self.node = node
        self.seconds = seconds
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self, name: str) -> bool:
        """Take the lease ``name`` if it is free, expired or already this node's."""
        now = time.time()
        taken = self.db.execute(
            "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
            " expires_at = excluded.expires_at"
            " WHERE leases.expires_at < ? OR leases.holder = excluded.holder",
            (name, self.node, now + self.seconds, now),
        )
        if taken:
            with self._lock:
                self._held.add(name)
            self._start()
        return bool(taken)

    def expires(self, name: str) -> float:
        """When the lease ``name`` expires unless renewed (now if no one holds it)."""
        row = self.db.one("SELECT expires_at FROM leases WHERE name = ?", (name,))
        return time.time() if row is None else float(row["expires_at"])

    def holds(self, name: str) -> bool:
        with self._lock:
            return name in self._held

    def release(self, name: str) -> None:
        with self._lock:
            if name not in self._held:
                return
            self._held.discard(name)
        self.db.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, self.node))

    def guard(self, name: str) -> None:
        """Inside a write transaction: renew the lease ``name``, or raise ``LeaseLost``."""
        renewed = self.db.execute(
            "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
            (time.time() + self.seconds, name, self.node),
        )
        if not renewed:
            with self._lock:
                self._held.discard(name)
            raise LeaseLost(f"another node took the lease {name!r}")

    def renew(self) -> int:
        """Renew every lease this node holds; how many it still holds."""
        with self._lock:
            if not self._held:
                return 0
        self.db.execute(
            "UPDATE leases SET expires_at = ? WHERE holder = ?",
            (time.time() + self.seconds, self.node),
        )
        with self._lock:
            return len(self._held)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = background.start(self._renewing, "leases")

    def _renewing(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except FloorlessError as exc:  # the database is away: the leases may expire
                log.warning("renewing leases: %s", exc)

    def stop(self) -> None:
        """Stop renewing, and let go of every lease held (a clean stop need not wait for
        them to expire)."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
            held, self._held = sorted(self._held), set()
        if thread is not None:
            thread.join(timeout=10)
        for name in held:
            try:
                self.db.execute(
                    "DELETE FROM leases WHERE name = ? AND holder = ?", (name, self.node)
                )
            except FloorlessError as exc:
                log.warning("releasing the lease %s: %s", name, exc)
