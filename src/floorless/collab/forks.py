"""Forking as someone's act: who may fork a repository, into whose name, and its event.

What a fork is (a repository that borrows its parent's objects) and how one is made, renamed
and deleted are the repository layer's (``repos/forks.py``, ``repos/lifecycle.py``). This is
the part that asks who is forking: the web's fork form and the API's ``POST .../forks``
alike make one here, and the parent's webhooks hear of it (a ``Forked`` change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.accounts import Account, Accounts
from floorless.core.errors import Forbidden
from floorless.repos.lifecycle import Lifecycle
from floorless.repos.registry import Repo


@dataclass(frozen=True)
class Forked:
    """``account`` forked ``parent`` as ``fork``: for ``Forge.changed``."""

    parent: Repo
    fork: Repo
    account: Account


class Forking:
    def __init__(
        self,
        accounts: Accounts,
        policy: Policy,
        lifecycle: Lifecycle,
        changed: Callable[[Forked], None],
    ) -> None:
        self.accounts = accounts
        self.policy = policy
        self.lifecycle = lifecycle
        self.changed = changed  # the parent's webhooks' fork event

    def owners_for(self, account: Account) -> list[str]:
        """Who ``account`` may fork into: themselves, and each organisation they own."""
        return [account.name] + [org.name for org in self.accounts.owned_orgs(account)]

    def fork_for(self, viewer: Viewer, level: Level, parent: Repo, owner: str, name: str) -> Repo:
        """The fork ``viewer`` (at ``level`` on ``parent``) asks for, through the web's form or
        the API alike: into their own name or an organisation they own, named as the parent
        unless they name it. Refused (Forbidden) before anything is written when the policy
        does not let them fork, or ``owner`` is no one they may create repositories for."""
        account = viewer.account
        if account is None or not self.policy.may_fork(viewer, level):
            raise Forbidden("you may not fork this repository")
        if owner not in self.owners_for(account):
            raise Forbidden(f"you cannot create repositories for {owner[:100]!r}")
        made = self.lifecycle.fork(parent, owner, name.strip() or parent.name)
        self.changed(Forked(parent, made, account))
        return made
