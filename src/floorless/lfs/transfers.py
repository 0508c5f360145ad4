"""The header a Git LFS transfer carries instead of the caller's credentials.

``git lfs`` sends its credentials to the batch endpoint only; the URLs a batch answer names
for each object, and the endpoint ``git-lfs-authenticate`` names over SSH, are reached with
the headers the answer gives (and it asks for no credentials when they hold an
``Authorization``). Those carry ``Authorization: Bearer lfs.ACCOUNT.SCOPE.EXPIRES.MAC``: an
HMAC, under the forge's key, of the repository, the person, their credential's reach, the
operation and the object, good for an hour. Whoever presents one asks as that person, whose
access is then checked as if they had asked themselves (a collaborator removed meanwhile is
refused); it opens nothing else: no other repository, object or operation.
"""

from __future__ import annotations

import hmac
import time

from floorless.accounts.accounts import SecretKey

HEADER = "Authorization"
PREFIX = "Bearer lfs."
LIFETIME = 3600  # seconds
SCOPES = ("read", "write")


def _message(
    repo_id: int, account_id: int, scope: str, operation: str, oid: str, expires: int
) -> str:
    return f"{repo_id}:{account_id}:{scope}:{operation}:{oid}:{expires}"


def make(
    key: SecretKey, repo_id: int, account_id: int, scope: str, operation: str, oid: str = ""
) -> dict[str, str]:
    """The header for ``operation`` (download, upload, verify; batch-download, batch-upload
    for a whole batch) on the object ``oid`` of the repository, by the account."""
    expires = int(time.time()) + LIFETIME
    mac = key.sign(_message(repo_id, account_id, scope, operation, oid, expires), "lfs")
    return {HEADER: f"{PREFIX}{account_id}.{scope}.{expires}.{mac}"}


def carried(text: str | None) -> bool:
    """Whether an ``Authorization`` header's value is a transfer's (not a person's own)."""
    return text is not None and text.startswith(PREFIX)


def read(
    key: SecretKey, text: str, repo_id: int, operation: str, oid: str = ""
) -> tuple[int, str] | None:
    """The account and scope ``text`` (a header's value) speaks for, if this forge made it for
    this repository, operation and object and it has not expired; else None."""
    if not text.startswith(PREFIX):
        return None
    parts = text.removeprefix(PREFIX).split(".")
    if len(parts) != 4:
        return None
    account, scope, expires, mac = parts
    if not (account.isascii() and account.isdigit() and len(account) <= 18):
        return None
    if scope not in SCOPES or not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
        return None
    if int(expires) < time.time():
        return None
    expected = key.sign(_message(repo_id, int(account), scope, operation, oid, int(expires)), "lfs")
    if not hmac.compare_digest(expected, mac):
        return None
    return int(account), scope
