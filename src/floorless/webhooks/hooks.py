"""What a webhook is set to: its receiver, the events it wants, its branch filter, and the
rows of its deliveries as read back.

The event names are Forgejo's (``EVENTS``); those floorless sends are ``SENT``. A hook's
branch filter is Forgejo's glob, ``{a,b}`` alternatives included (``branch_matches``).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from floorless.core.errors import BadRequest
from floorless.db import Row

KINDS = ("forgejo", "gitea", "gogs")  # the hook types whose payload is Forgejo's own
CONTENT_TYPES = ("json", "form")
# Forgejo's event names a hook may choose (those floorless sends are in ``SENT``).
EVENTS = frozenset(
    (
        "create",
        "delete",
        "fork",
        "push",
        "issues",
        "issue_assign",
        "issue_label",
        "issue_milestone",
        "issue_comment",
        "pull_request",
        "pull_request_assign",
        "pull_request_label",
        "pull_request_milestone",
        "pull_request_comment",
        "pull_request_review",
        "pull_request_review_approved",
        "pull_request_review_rejected",
        "pull_request_review_comment",
        "pull_request_sync",
        "pull_request_review_request",
        "wiki",
        "repository",
        "release",
        "package",
    )
)
SENT = (
    "push",
    "create",
    "delete",
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_sync",
    "pull_request_comment",
    "pull_request_review",
    "fork",
    "release",
)
# The ``X-Forgejo-Event`` of an event sent as ``X-Forgejo-Event-Type`` (a hook's choice).
HEADER_EVENTS = {
    "pull_request_sync": "pull_request",
    "pull_request_comment": "issue_comment",
    "pull_request_review_approved": "pull_request_approved",
    "pull_request_review_rejected": "pull_request_rejected",
    "pull_request_review_comment": "pull_request_comment",
}
# A hook's choice that stands for several events (Forgejo's API takes it so).
_CHOICES = {
    "pull_request_review": (
        "pull_request_review_approved",
        "pull_request_review_rejected",
        "pull_request_review_comment",
    )
}


@dataclass(frozen=True)
class Hook:
    id: int
    repo_id: int | None
    org_id: int | None
    kind: str
    url: str
    http_method: str
    content_type: str
    secret: str
    authorization_header: str
    events: tuple[str, ...]
    branch_filter: str
    active: bool
    created_at: float
    updated_at: float

    def wants(self, event: str, branch: str | None) -> bool:
        """Whether this hook is sent ``event`` (about ``branch``, when it is about one)."""
        if not self.active:
            return False
        if event not in self.events and not any(
            event in _CHOICES.get(choice, ()) for choice in self.events
        ):
            return False
        return branch is None or branch_matches(self.branch_filter, branch)


@dataclass(frozen=True)
class Delivery:
    id: int
    hook_id: int
    uuid: str
    event: str
    action: str
    payload: str
    request_headers: dict[str, str]
    state: str
    attempts: int
    next_at: float
    response_status: int | None
    response_headers: dict[str, str]
    response_body: str
    duration: float | None
    error: str
    created_at: float
    finished_at: float | None


def hook_of(row: Row) -> Hook:
    return Hook(
        id=row["id"],
        repo_id=row["repo_id"],
        org_id=row["org_id"],
        kind=row["kind"],
        url=row["url"],
        http_method=row["http_method"],
        content_type=row["content_type"],
        secret=row["secret"],
        authorization_header=row["authorization_header"],
        events=tuple(e for e in str(row["events"]).split(",") if e),
        branch_filter=row["branch_filter"],
        active=bool(row["active"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def delivery_of(row: Row) -> Delivery:
    return Delivery(
        id=row["id"],
        hook_id=row["hook_id"],
        uuid=row["uuid"],
        event=row["event"],
        action=row["action"],
        payload=row["payload"],
        request_headers=json.loads(row["request_headers"] or "{}"),
        state=row["state"],
        attempts=row["attempts"],
        next_at=row["next_at"],
        response_status=row["response_status"],
        response_headers=json.loads(row["response_headers"] or "{}"),
        response_body=row["response_body"],
        duration=row["duration"],
        error=row["error"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )


# -- what a hook may be set to ----------------------------------------------------------------


def _expand(pattern: str) -> list[str]:
    """``{a,b}`` alternatives (Forgejo's branch filter glob) as separate patterns."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for choice in match.group(1).split(",") for p in _expand(head + choice + tail)]


def branch_matches(branch_filter: str, branch: str) -> bool:
    """Forgejo's branch filter: empty or ``*`` is every branch; else a glob (``*``, ``?``,
    ``[...]``, ``{a,b}``) the whole branch name must match."""
    if branch_filter in ("", "*"):
        return True
    return any(fnmatch.fnmatchcase(branch, p) for p in _expand(branch_filter)[:64])


def check_url(url: str) -> str:
    """A receiver's URL as a hook may be saved with: http or https, with a host."""
    url = url.strip()
    if len(url) > 2048:
        raise BadRequest("the URL is over 2048 characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        raise BadRequest(f"the URL is not valid: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise BadRequest("the URL must start with http:// or https://")
    if not parts.hostname:
        raise BadRequest("the URL has no host")
    if any(c in url for c in "\r\n\t "):
        raise BadRequest("the URL may not contain spaces or line breaks")
    return url


def check_events(events: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(e.strip() for e in events if e.strip()))
    unknown = [e for e in chosen if e not in EVENTS]
    if unknown:
        raise BadRequest(f"unknown event(s): {', '.join(sorted(unknown))[:200]}")
    return chosen or ("push",)
