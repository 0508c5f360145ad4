"""Webhooks: what they are set to, the queue and log of their deliveries, and the sending.

An event (``emit``) only writes rows: one delivery per hook that wants it, ``queued``. A push
or a merge never waits for a receiver. Worker threads (``WORKERS`` per node) send them:

- A worker claims a due delivery with a conditional ``UPDATE`` (its state and attempt count
  as they were read), so two workers, on this node or another sharing the database, never
  send one delivery at the same time. The claim lasts until ``next_at``: a few receiver
  timeouts (``LEASE_TIMEOUTS``). A node that dies mid-delivery leaves the row ``sending``;
  once the claim lapses any node claims it again, so it is sent again at most once more.
- An attempt that fails (no answer within ``webhook_timeout``, a refused connection, an
  answer other than 2xx) is tried again after ``webhook_retry_seconds``, doubled each time,
  up to ``MAX_ATTEMPTS`` in all. A redirect is not followed (its target was never checked),
  and a receiver refused by ``webhook_allowed_hosts`` is not tried again: both fail at once.
- Before each attempt the receiver's host is resolved and every address it has is checked
  against ``webhook_allowed_hosts`` (``HostRules``); the connection is then made to the
  address checked, never by a second lookup, so a name that changes its answer in between
  (DNS rebinding) reaches nothing that was not allowed.

The request is Forgejo's: its event and delivery headers under the Forgejo, Gitea and Gogs
names, the body signed with the hook's secret (hex HMAC-SHA256 of the JSON payload, also as
GitHub's ``X-Hub-Signature-256``), JSON or ``payload=`` form-encoded.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from floorless.core import background
from floorless.core.config import Settings
from floorless.core.errors import BadRequest, FloorlessError, NotFound
from floorless.db import Database
from floorless.webhooks.guard import Connection, HostRules, Refused, TLSConnection, resolve
from floorless.webhooks.hooks import (
    CONTENT_TYPES,
    HEADER_EVENTS,
    KINDS,
    Delivery,
    Hook,
    check_events,
    check_url,
    delivery_of,
    hook_of,
)

log = logging.getLogger(__name__)

WORKERS = 4  # deliveries sent at once by one node: a receiver that hangs holds one of them
MAX_ATTEMPTS = 5
# A claim lasts this many receiver timeouts (and a second): an attempt is bounded by about
# three (connecting, sending, the answer's last byte: ``post``), so no live attempt outlasts it.
LEASE_TIMEOUTS = 4
IDLE_POLL = 1.0  # seconds between looks at the queue when nothing here woke a worker
KEPT_BODY = 16 * 1024  # bytes of a receiver's answer kept in the log
KEPT_DELIVERIES = 200  # finished deliveries kept per hook: older ones go as new ones come
MAX_PAYLOAD = 4 << 20  # bytes of JSON an event may send


# -- the hooks and their deliveries -----------------------------------------------------------


class Webhooks:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.rules = HostRules(settings.webhook_allowed_hosts)
        self._wake = threading.Condition()
        self._woken = 0
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._sending = 0

    # -- hooks ------------------------------------------------------------------------------

    def hooks(self, repo_id: int | None = None, org_id: int | None = None) -> list[Hook]:
        column = "repo_id" if repo_id is not None else "org_id"
        rows = self.db.query(
            f"SELECT * FROM webhooks WHERE {column} = ? ORDER BY id",  # noqa: S608
            (repo_id if repo_id is not None else org_id,),
        )
        return [hook_of(r) for r in rows]

    def hook(self, hook_id: int, repo_id: int | None = None, org_id: int | None = None) -> Hook:
        """The hook ``hook_id`` of that repository or organisation: any other is missing."""
        row = self.db.one("SELECT * FROM webhooks WHERE id = ?", (hook_id,))
        if row is None or (row["repo_id"], row["org_id"]) != (repo_id, org_id):
            raise NotFound(f"webhook does not exist [id: {hook_id}]")
        return hook_of(row)

    def create(
        self,
        repo_id: int | None,
        org_id: int | None,
        *,
        url: str,
        kind: str = "forgejo",
        content_type: str = "json",
        http_method: str = "POST",
        secret: str = "",
        authorization_header: str = "",
        events: Iterable[str] = ("push",),
        branch_filter: str = "",
        active: bool = True,
    ) -> Hook:
        fields = _checked(
            url, kind, content_type, http_method, secret, authorization_header, branch_filter
        )
        now = time.time()
        row = self.db.one(
            "INSERT INTO webhooks (repo_id, org_id, kind, url, http_method, content_type, secret,"
            " authorization_header, events, branch_filter, active, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                repo_id,
                org_id,
                *fields,
                ",".join(check_events(events)),
                branch_filter.strip(),
                1 if active else 0,
                now,
                now,
            ),
        )
        assert row is not None
        return self.hook(row["id"], repo_id, org_id)

    def update(self, hook: Hook, **changes: Any) -> Hook:
        """``hook`` with ``changes`` (its fields by name; ``secret`` too), checked first."""
        merged = {**hook.__dict__, **changes}
        fields = _checked(
            merged["url"],
            merged["kind"],
            merged["content_type"],
            merged["http_method"],
            merged["secret"],
            merged["authorization_header"],
            merged["branch_filter"],
        )
        self.db.execute(
            "UPDATE webhooks SET kind = ?, url = ?, http_method = ?, content_type = ?, secret = ?,"
            " authorization_header = ?, events = ?, branch_filter = ?, active = ?,"
            " updated_at = ? WHERE id = ?",
            (
                *fields,
                ",".join(check_events(merged["events"])),
                str(merged["branch_filter"]).strip(),
                1 if merged["active"] else 0,
                time.time(),
                hook.id,
            ),
        )
        return self.hook(hook.id, hook.repo_id, hook.org_id)

    def delete(self, hook: Hook) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM webhook_deliveries WHERE hook_id = ?", (hook.id,))
            self.db.execute("DELETE FROM webhooks WHERE id = ?", (hook.id,))

    # -- events -----------------------------------------------------------------------------

    def targets(self, repo_id: int, org_id: int | None) -> list[Hook]:
        """The hooks of a repository and of the organisation owning it."""
        rows = self.db.query(
            "SELECT * FROM webhooks WHERE repo_id = ? OR org_id = ? ORDER BY id",
            (repo_id, org_id if org_id is not None else -1),
        )
        return [hook_of(r) for r in rows]

    def emit(
        self,
        hooks: Iterable[Hook],
        event: str,
        payload: Mapping[str, Any],
        action: str = "",
        branch: str | None = None,
        forced: bool = False,
    ) -> list[int]:
        """Queue ``payload`` for every hook of ``hooks`` that wants ``event`` (or each of them,
        ``forced``: a test delivery); the ids of the deliveries queued."""
        chosen = [h for h in hooks if forced or h.wants(event, branch)]
        if not chosen:
            return []
        text = json.dumps(payload, ensure_ascii=False, indent=2)
        if len(text) > MAX_PAYLOAD:
            log.warning("a %s payload of %d bytes is not sent", event, len(text))
            return []
        return self._queue([(h.id, event, action, text) for h in chosen])

    def redeliver(self, delivery: Delivery) -> int:
        """Send a delivery's payload again, as a new delivery (Forgejo's replay)."""
        return self._queue([(delivery.hook_id, delivery.event, delivery.action, delivery.payload)])[
            0
        ]

    def _queue(self, items: list[tuple[int, str, str, str]]) -> list[int]:
        now = time.time()
        made = []
        with self.db.transaction():
            for hook_id, event, action, text in items:
                row = self.db.one(
                    "INSERT INTO webhook_deliveries (hook_id, uuid, event, action, payload,"
                    " request_headers, state, attempts, next_at, response_status,"
                    " response_headers, response_body, duration, error, created_at, finished_at)"
                    " VALUES (?, ?, ?, ?, ?, '{}', 'queued', 0, ?, NULL, '{}', '', NULL, '', ?,"
                    " NULL) RETURNING id",
                    (hook_id, str(uuid.uuid4()), event, action, text, now, now),
                )
                assert row is not None
                made.append(int(row["id"]))
                self.db.execute(
                    "DELETE FROM webhook_deliveries WHERE hook_id = ?"
                    " AND state IN ('delivered', 'failed') AND id <= (SELECT id FROM"
                    " webhook_deliveries WHERE hook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                    (hook_id, hook_id, KEPT_DELIVERIES),
                )
        self.wake()
        return made

    def deliveries(self, hook: Hook, limit: int = 20) -> list[Delivery]:
        rows = self.db.query(
            "SELECT * FROM webhook_deliveries WHERE hook_id = ? ORDER BY id DESC LIMIT ?",
            (hook.id, limit),
        )
        return [delivery_of(r) for r in rows]

    def delivery(self, delivery_id: int) -> Delivery | None:
        row = self.db.one("SELECT * FROM webhook_deliveries WHERE id = ?", (delivery_id,))
        return delivery_of(row) if row is not None else None

    # -- the workers ------------------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        self._threads = [background.start(self._work, f"hooks-{n}") for n in range(WORKERS)]

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        # one bound for all: a worker inside an attempt ends it within a few timeouts
        deadline = time.monotonic() + LEASE_TIMEOUTS * self.settings.webhook_timeout + 1
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._threads = []

    def wake(self) -> None:
        with self._wake:
            self._woken += 1
            self._wake.notify_all()

    def idle(self) -> bool:
        """Nothing due in the queue and nothing being sent here (for tests)."""
        with self._wake:
            if self._sending:
                return False
        row = self.db.one(
            "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE state IN ('queued', 'sending')"
            " AND next_at <= ?",
            (time.time(),),
        )
        return row is None or not row["n"]

    def _work(self) -> None:
        while True:
            with self._wake:
                if self._stopping:
                    return
                seen = self._woken
            try:
                claimed = self.claim()
            except FloorlessError as exc:
                log.warning("webhooks: %s", exc)
                claimed = None
            if claimed is None:
                with self._wake:
                    if self._woken == seen and not self._stopping:
                        self._wake.wait(IDLE_POLL)
                continue
            with self._wake:
                self._sending += 1
            try:
                self.send(claimed)
            except FloorlessError as exc:
                log.warning("webhooks: delivery %d: %s", claimed.id, exc)
            finally:
                with self._wake:
                    self._sending -= 1

    def claim(self) -> Delivery | None:
        """A due delivery, now ``sending`` and counted as one more attempt, or None. Several
        nodes may look at once: only the one whose update finds the row as it read it has it."""
        now = time.time()
        rows = self.db.query(
            "SELECT id, state, attempts FROM webhook_deliveries"
            " WHERE state IN ('queued', 'sending') AND next_at <= ? ORDER BY next_at, id LIMIT 8",
            (now,),
        )
        lease = now + LEASE_TIMEOUTS * self.settings.webhook_timeout + 1
        for row in rows:
            taken = self.db.execute(
                "UPDATE webhook_deliveries SET state = 'sending', attempts = attempts + 1,"
                " next_at = ? WHERE id = ? AND state = ? AND attempts = ?",
                (lease, row["id"], row["state"], row["attempts"]),
            )
            if taken == 1:
                return self.delivery(row["id"])
        return None

    def send(self, delivery: Delivery) -> None:
        """One attempt at ``delivery`` (claimed): sent, then its outcome recorded."""
        row = self.db.one("SELECT * FROM webhooks WHERE id = ?", (delivery.hook_id,))
        if row is None:
            return  # deleted with its deliveries
        hook = hook_of(row)
        if delivery.attempts > MAX_ATTEMPTS:  # claimed again after dying mid-attempt
            self._finish(delivery, "failed", error="given up: no answer after every attempt")
            return
        body, headers = request(hook, delivery)
        started = time.monotonic()
        try:
            status, answer_headers, answer = self.post(hook, body, headers)
        except Refused as exc:
            self._finish(delivery, "failed", headers=headers, error=str(exc))
            return
        except (OSError, http.client.HTTPException, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(exc, TimeoutError | socket.timeout):
                error = f"no answer within {self.settings.webhook_timeout:g} seconds"
            self._retry(delivery, headers, time.monotonic() - started, error)
            return
        duration = time.monotonic() - started
        outcome: dict[str, Any] = dict(
            headers=headers,
            status=status,
            answer_headers=answer_headers,
            answer=answer,
            duration=duration,
        )
        if 200 <= status < 300:
            self._finish(delivery, "delivered", **outcome)
        elif 300 <= status < 400:
            target = answer_headers.get("Location", "")[:300]
            self._finish(
                delivery,
                "failed",
                error=f"the receiver redirected to {target!r}: redirects are not followed",
                **outcome,
            )
        else:
            self._retry(delivery, headers, duration, f"the receiver answered {status}", outcome)

    def post(
        self, hook: Hook, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request to the hook's receiver: its status, headers and (the start of)
        its body. Raises ``Refused`` for a host not allowed."""
        parts = urlsplit(hook.url)
        host = parts.hostname or ""
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        infos = resolve(self.rules, host, port)
        timeout = self.settings.webhook_timeout
        kind = TLSConnection if tls else Connection
        conn = kind(host, port, infos[0], timeout)
        try:
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            conn.request(hook.http_method, target, body=body, headers=headers)
            answer = conn.getresponse()
            deadline = time.monotonic() + timeout
            data = b""
            while len(data) < KEPT_BODY:  # a receiver trickling bytes is cut off, too
                piece = answer.read1(KEPT_BODY - len(data))
                if not piece:
                    break
                data += piece
                if time.monotonic() > deadline:
                    break
            return answer.status, dict(answer.getheaders()), data
        finally:
            conn.close()

    def _retry(
        self,
        delivery: Delivery,
        headers: dict[str, str],
        duration: float,
        error: str,
        outcome: dict[str, Any] | None = None,
    ) -> None:
        outcome = dict(outcome or {}, headers=headers, duration=duration)
        if delivery.attempts >= MAX_ATTEMPTS:
            self._finish(delivery, "failed", error=f"{error}; given up after {delivery.attempts}"
                         " attempts", **outcome)  # fmt: skip
            return
        wait = self.settings.webhook_retry_seconds * 2 ** (delivery.attempts - 1)
        self._finish(delivery, "queued", error=error, next_at=time.time() + wait, **outcome)

    def _finish(
        self,
        delivery: Delivery,
        state: str,
        *,
        headers: dict[str, str] | None = None,
        status: int | None = None,
        answer_headers: dict[str, str] | None = None,
        answer: bytes = b"",
        duration: float | None = None,
        error: str = "",
        next_at: float | None = None,
    ) -> None:
        """Record an attempt's outcome, if the delivery is still this attempt's."""
        now = time.time()
        self.db.execute(
            "UPDATE webhook_deliveries SET state = ?, request_headers = ?, response_status = ?,"
            " response_headers = ?, response_body = ?, duration = ?, error = ?, next_at = ?,"
            " finished_at = ? WHERE id = ? AND state = 'sending' AND attempts = ?",
            (
                state,
                json.dumps(headers or {}),
                status,
                json.dumps(answer_headers or {}),
                answer[:KEPT_BODY].decode("utf-8", "replace"),
                duration,
                error[:1000],
                next_at if next_at is not None else now,
                None if state == "queued" else now,
                delivery.id,
                delivery.attempts,
            ),
        )
        if state == "queued":
            self.wake()


def _checked(
    url: str,
    kind: str,
    content_type: str,
    http_method: str,
    secret: str,
    authorization_header: str,
    branch_filter: str,
) -> tuple[str, str, str, str, str, str]:
    """The fields a hook is stored with, in the table's order (kind first), each checked."""
    if kind not in KINDS:
        raise BadRequest(f"hook type {kind!r} is not supported here: {', '.join(KINDS)}")
    if content_type not in CONTENT_TYPES:
        raise BadRequest("content_type must be json or form")
    method = http_method.upper() or "POST"
    if method not in ("POST", "PUT", "PATCH", "GET"):
        raise BadRequest("http_method must be POST, PUT, PATCH or GET")
    if len(secret) > 512 or len(branch_filter) > 512 or len(authorization_header) > 2048:
        raise BadRequest("the secret, branch filter or authorization header is too long")
    if any(c in authorization_header for c in "\r\n"):
        raise BadRequest("the authorization header may not contain line breaks")
    return (kind, check_url(url), method, content_type, secret, authorization_header)


def request(hook: Hook, delivery: Delivery) -> tuple[bytes, dict[str, str]]:
    """The body and headers Forgejo sends for ``delivery`` to ``hook``."""
    payload = delivery.payload.encode()
    signature = hmac.new(hook.secret.encode(), payload, hashlib.sha256).hexdigest()
    sha1 = hmac.new(hook.secret.encode(), payload, hashlib.sha1).hexdigest()
    event_type = delivery.event
    event = HEADER_EVENTS.get(event_type, event_type)
    if hook.content_type == "form":
        body = urlencode({"payload": delivery.payload}).encode()
        content_type = "application/x-www-form-urlencoded"
    else:
        body, content_type = payload, "application/json"
    headers = {
        "Content-Type": content_type,
        "User-Agent": "floorless-webhook",
        "X-Forgejo-Delivery": delivery.uuid,
        "X-Forgejo-Event": event,
        "X-Forgejo-Event-Type": event_type,
        "X-Forgejo-Signature": signature,
        "X-Gitea-Delivery": delivery.uuid,
        "X-Gitea-Event": event,
        "X-Gitea-Event-Type": event_type,
        "X-Gitea-Signature": signature,
        "X-Gogs-Delivery": delivery.uuid,
        "X-Gogs-Event": event,
        "X-Gogs-Event-Type": event_type,
        "X-Gogs-Signature": signature,
        "X-GitHub-Delivery": delivery.uuid,
        "X-GitHub-Event": event,
        "X-GitHub-Event-Type": event_type,
        "X-Hub-Signature": f"sha1={sha1}",
        "X-Hub-Signature-256": f"sha256={signature}",
    }
    if hook.authorization_header:
        headers["Authorization"] = hook.authorization_header
    return body, headers
