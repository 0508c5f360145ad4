"""SSH keys as Forgejo's API shows them: a person's (``PublicKey``) and a repository's deploy
keys (``DeployKey``).

A person's keys are public (``/users/{name}/keys``, as ``/{name}.keys``); what only the person
and a site administrator see, as on Forgejo, is whose key it is and its kind (``user``,
``key_type`` and ``read_only``): to anyone else those fields are left out.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from floorless.accounts.keys import SshKey
from floorless.forgejo import urls
from floorless.forgejo.people import Repository, User, rfc3339
from floorless.forgejo.schema import DateTime
from floorless.repos.registry import Repo


class PublicKey(TypedDict):
    """Forgejo's ``PublicKey``."""

    id: int
    key: str
    url: str
    title: str
    fingerprint: str
    created_at: DateTime
    user: NotRequired[User]
    read_only: NotRequired[bool]
    key_type: NotRequired[str]


class DeployKey(TypedDict):
    """Forgejo's ``DeployKey``."""

    id: int
    key_id: int
    key: str
    url: str
    title: str
    fingerprint: str
    created_at: DateTime
    read_only: bool
    repository: Repository


def user_key_url(public: str, key_id: int) -> str:
    """Where Forgejo says a person's key is (``/user/keys/{id}``, its owner's own view)."""
    return f"{public}/api/v1/user/keys/{key_id}"


def key_json(key: SshKey, user: User | None, public: str) -> PublicKey:
    """Forgejo's ``PublicKey``; with ``user`` (its owner's ``User`` as the caller sees it)
    when the caller is the owner or an administrator, without whose key it is otherwise."""
    shown: PublicKey = {
        "id": key.id,
        "key": key.content,
        "url": user_key_url(public, key.id),
        "title": key.title,
        "fingerprint": key.fingerprint,
        "created_at": rfc3339(key.created_at),
    }
    if user is not None:
        shown["user"] = user
        shown["read_only"] = key.read_only
        shown["key_type"] = "user"
    return shown


def deploy_key_json(key: SshKey, repo: Repo, repository: Repository, public: str) -> DeployKey:
    """Forgejo's ``DeployKey``: ``key_id`` is the key's own id (floorless keeps one row for a
    deploy key where Forgejo keeps two)."""
    return {
        "id": key.id,
        "key_id": key.id,
        "key": key.content,
        "url": public + urls.api_repo(repo, "keys", str(key.id)),
        "title": key.title,
        "fingerprint": key.fingerprint,
        "created_at": rfc3339(key.created_at),
        "read_only": key.read_only,
        "repository": repository,
    }
