"""Who may clone, fetch and push a repository through git, whatever the transport.

A caller is a person (their ``Viewer``: an account and the reach of their credential) or a
repository's deploy key. A person reads what the access policy lets them read and pushes where
it lets them write; whoever may only read may still propose changes (``refs/for/``), which the
push's hooks check once they have read the updates. A deploy key reads its own repository,
and pushes to it unless it is read-only; every other repository does not exist for it. A
repository the caller may not read is refused exactly as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.keys import SshKey
from floorless.core.errors import Forbidden, NotFound
from floorless.repos.registry import Registry, Repo

UPLOAD = "git-upload-pack"
RECEIVE = "git-receive-pack"


@dataclass(frozen=True)
class Caller:
    """Who asks. For a deploy key, ``viewer`` is the person who added it (a push's author in
    the webhooks and the one branch protection weighs), and ``deploy`` the key."""

    viewer: Viewer
    deploy: SshKey | None = None


def authorize(
    registry: Registry, policy: Policy, caller: Caller, owner: str, name: str, service: str
) -> tuple[Repo, Level]:
    """The repository and the caller's level on it, if they may use ``service`` on it."""
    try:
        repo: Repo | None = registry.get(owner, name)
    except NotFound:
        repo = None
    key = caller.deploy
    if key is not None:
        if repo is None or repo.id != key.repo_id:
            raise NotFound("repository not found")
        if service == RECEIVE and key.read_only:
            raise Forbidden("this deploy key is read-only: it may clone and fetch, not push")
        return repo, Level.READ if key.read_only else Level.WRITE
    viewer = caller.viewer
    level = policy.require(viewer, repo, Level.READ)
    assert repo is not None
    may_push_or_propose(policy, viewer, repo, level, service)
    return repo, level


def may_push_or_propose(
    policy: Policy, viewer: Viewer, repo: Repo, level: Level, service: str
) -> None:
    """For a push by ``viewer``, who reads ``repo`` at ``level``: writing, or proposing changes
    (``refs/for/``, which the hooks check once they have read the updates); otherwise the
    policy's 401 or 403."""
    if service == RECEIVE and level < Level.WRITE and not policy.may_propose(viewer, level):
        policy.require(viewer, repo, Level.WRITE)
