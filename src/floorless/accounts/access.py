"""The access policy: who may read, write and administer each repository. The only one.

Every route that shows or changes a repository -- pages, raw files, archives, feeds, go-get,
the explore list and its search, git over HTTP -- asks this module, and nothing else decides.

    level(viewer, repo):
        site administrator                        ADMIN
        the repository's owner (a person)         ADMIN
        an owner of the owning organisation       ADMIN
        a member of the owning organisation       WRITE
        a collaborator                            their role: READ, WRITE or ADMIN
        anyone else, the repository public        READ
        anyone else, the repository private       NONE
    then capped at READ for a read-scoped token.

Through the API (``web/api/``), on a repository the viewer may read:
    create one (their own; an organisation's)  signed in, write scope; an owner of the org
    edit, rename, delete one                   ADMIN, write scope
    list "my repositories"                     their own, their organisations', shared ones

Issues, on a repository the viewer may read:
    open one, comment                         any signed-in person
    close, reopen, edit its title and body    WRITE, or the person who opened it
    edit or delete a comment                  WRITE, or the comment's author
    label, assign, set the milestone          WRITE
    manage labels and milestones              WRITE

Reviews of pull requests, on a repository the viewer may read:
    comment on lines, submit a review         any signed-in person (as Forgejo allows)
    approve, request changes                  the same, but not the pull request's author

Pull requests, on a repository the viewer may read:
    open one by an AGit push (refs/for/...)   any signed-in person, write-scoped credential
    merge one (and delete its head branch)    WRITE, signed in with a write-scoped credential

Forks, of a repository the viewer may read (a private one's fork is private):
    fork it, as their own or an organisation's  any signed-in person; an owner of the org

Collaborators (the settings page, and the API's ``collaborators``), of a repository the
viewer may read:
    list them, ask whether someone is one      any signed-in person (as Forgejo)
    add, change, remove one                    ADMIN, write scope
    ask what someone's access is               ADMIN, a site administrator, or that person

A repository someone may not read does not exist for them: ``require`` answers as for an
unknown name (404), or asks for credentials (401) when there are none, whichever name it is,
and after the same lookups, so that not even the time taken tells the two apart.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Forbidden, NotFound, Unauthorized
from floorless.db import Database
from floorless.repos.registry import Repo

ROLES = ("read", "write", "admin")


class Level(enum.IntEnum):
    NONE = 0
    READ = 1
    WRITE = 2
    ADMIN = 3


_ROLE_LEVEL = {"read": Level.READ, "write": Level.WRITE, "admin": Level.ADMIN}
_ORG_LEVEL = {"owner": Level.ADMIN, "member": Level.WRITE}


@dataclass(frozen=True)
class Viewer:
    """Who is asking: an account (None when anonymous), and how far their credential reaches."""

    account: Account | None = None
    scope: str = "write"  # "read" for a read-scoped token
    session: str | None = None  # the session id behind a signed-in browser, for CSRF tokens

    @property
    def anonymous(self) -> bool:
        return self.account is None

    @property
    def name(self) -> str:
        return self.account.name if self.account is not None else ""


ANONYMOUS = Viewer()

# Stands in for a name that does not exist, so that it is weighed with the same queries as a
# private repository (no account has the empty name).
_ABSENT = Repo(
    id=0, owner="", name="", path=Path(), bare=True, description="", updated_at=None, private=True
)


@dataclass(frozen=True)
class Collaborator:
    name: str
    role: str


class Policy:
    def __init__(self, db: Database) -> None:
        self.db = db

    def level(self, viewer: Viewer, repo: Repo) -> Level:
        found = self._level(viewer.account, repo)
        if viewer.scope == "read":
            found = min(found, Level.READ)
        return Level(found)

    def _level(self, account: Account | None, repo: Repo) -> Level:
        public = Level.NONE if repo.private else Level.READ
        if account is None or account.is_org:
            return public
        if account.is_admin or account.name.lower() == repo.owner.lower():
            return Level.ADMIN
        rows = self.db.remembered(
            "SELECT (SELECT m.role FROM org_members m JOIN accounts o ON o.id = m.org_id"
            "        WHERE o.name = ? AND m.user_id = ?) AS org_role,"
            "       (SELECT role FROM collaborators"
            "        WHERE owner = ? AND name = ? AND user_id = ?) AS role",
            (repo.owner, account.id, repo.owner, repo.name, account.id),
            ("org_members", "accounts", "collaborators"),
        )
        levels = [public]
        for row in rows:
            levels.append(_ORG_LEVEL.get(row["org_role"], Level.NONE))
            levels.append(_ROLE_LEVEL.get(row["role"], Level.NONE))
        return max(levels)

    def levels(self, viewer: Viewer, repos: Sequence[Repo]) -> dict[int, Level]:
        """``level`` for each of ``repos`` (by id), in two statements whatever their number:
        the same rules, for a page of a list."""
        account = viewer.account
        found: dict[int, Level] = {}
        roles: dict[tuple[str, str], Level] = {}
        orgs: dict[str, Level] = {}
        if account is not None and not account.is_org and not account.is_admin and repos:
            owners = sorted({r.owner for r in repos})
            marks = ", ".join("?" for _ in owners)
            for row in self.db.query(
                "SELECT o.name, m.role FROM org_members m JOIN accounts o ON o.id = m.org_id"  # noqa: S608
                f" WHERE m.user_id = ? AND o.name IN ({marks})",
                [account.id, *owners],
            ):
                orgs[row["name"]] = _ORG_LEVEL.get(row["role"], Level.NONE)
            for row in self.db.query(
                "SELECT owner, name, role FROM collaborators"  # noqa: S608
                f" WHERE user_id = ? AND owner IN ({marks})",
                [account.id, *owners],
            ):
                roles[(row["owner"], row["name"])] = _ROLE_LEVEL.get(row["role"], Level.NONE)
        for repo in repos:
            level = Level.NONE if repo.private else Level.READ
            if account is not None and not account.is_org:
                if account.is_admin or account.name.lower() == repo.owner.lower():
                    level = Level.ADMIN
                else:
                    level = max(
                        level,
                        orgs.get(repo.owner, Level.NONE),
                        roles.get((repo.owner, repo.name), Level.NONE),
                    )
            if viewer.scope == "read":
                level = min(level, Level.READ)
            found[repo.id] = Level(level)
        return found

    def require(self, viewer: Viewer, repo: Repo | None, needed: Level) -> Level:
        """``viewer``'s level on ``repo`` if it reaches ``needed``; otherwise the refusal.

        ``repo`` is None for a name that does not exist: refused exactly like a private
        repository, so the answer never tells the two apart.
        """
        if repo is None:
            self.level(viewer, _ABSENT)  # the work a private repository's answer takes
            level = Level.NONE
        else:
            level = self.level(viewer, repo)
        if level >= needed:
            return level
        if level == Level.NONE:
            if viewer.anonymous and needed > Level.READ:
                raise Unauthorized("sign in to push")
            raise NotFound("repository not found")
        if viewer.anonymous:
            raise Unauthorized("sign in to push")
        assert repo is not None
        if viewer.scope == "read":
            raise Forbidden("this token has read scope; pushing needs a token with write scope")
        word = "administer" if needed == Level.ADMIN else "push to"
        raise Forbidden(f"{viewer.name} may read but not {word} {repo.full_name}")

    def visible_clause(self, viewer: Viewer) -> tuple[str, list[object]]:
        """An SQL condition on a ``repos`` table with a ``private`` column that keeps exactly
        the repositories ``viewer`` may read."""
        account = viewer.account
        if account is None or account.is_org:
            return "private = 0", []
        if account.is_admin:
            return "1 = 1", []
        return (
            "(private = 0 OR lower(repos.owner) = lower(?)"
            " OR EXISTS (SELECT 1 FROM org_members m JOIN accounts o ON o.id = m.org_id"
            "   WHERE m.user_id = ? AND lower(o.name) = lower(repos.owner))"
            " OR EXISTS (SELECT 1 FROM collaborators c"
            "   WHERE c.owner = repos.owner AND c.name = repos.name AND c.user_id = ?))",
            [account.name, account.id, account.id],
        )

    def shared_clause(self, viewer: Viewer) -> tuple[str, list[object]]:
        """As ``visible_clause``, but only the repositories that are ``viewer``'s own or shared
        with them (as owner, organisation member or collaborator), public or not: "my
        repositories" (the API's ``/user/repos``), never every public one."""
        account = viewer.account
        if account is None or account.is_org:
            return "1 = 0", []
        return (
            "(lower(repos.owner) = lower(?)"
            " OR EXISTS (SELECT 1 FROM org_members m JOIN accounts o ON o.id = m.org_id"
            "   WHERE m.user_id = ? AND lower(o.name) = lower(repos.owner))"
            " OR EXISTS (SELECT 1 FROM collaborators c"
            "   WHERE c.owner = repos.owner AND c.name = repos.name AND c.user_id = ?))",
            [account.name, account.id, account.id],
        )

    # -- issues -------------------------------------------------------------------------------

    def may_take_part(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` (at ``level`` on a repository) may open issues and comment."""
        account = viewer.account
        if account is None or account.is_org or viewer.scope == "read":
            return False
        return level >= Level.READ

    def may_propose(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may push to ``refs/for/`` (the AGit flow: a pull request with
        no fork): anyone signed in who may read, with a write-scoped credential, as on
        Forgejo. Other refs need ``Level.WRITE``."""
        return self.may_fork(viewer, level)

    def may_fork(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` (at ``level`` on a repository) may fork it."""
        account = viewer.account
        if account is None or account.is_org or viewer.scope == "read":
            return False
        return level >= Level.READ

    def may_change_issue(self, viewer: Viewer, level: Level, author_id: int | None) -> bool:
        """Whether ``viewer`` may close, reopen and edit an issue opened by ``author_id``."""
        if not self.may_take_part(viewer, level):
            return False
        assert viewer.account is not None
        return level >= Level.WRITE or viewer.account.id == author_id

    def may_edit_comment(self, viewer: Viewer, level: Level, author_id: int | None) -> bool:
        """Whether ``viewer`` may edit or delete a comment written by ``author_id``: its
        author, or whoever may push (to tidy a conversation, as on Forgejo)."""
        return self.may_change_issue(viewer, level, author_id)

    def may_label(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may label issues and pull requests, set their milestone, and
        create, change and delete the repository's labels and milestones."""
        return self.may_merge(viewer, level)

    def may_assign(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may assign issues and pull requests to people."""
        return self.may_merge(viewer, level)

    def may_review(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may comment on a pull request's lines and submit reviews."""
        return self.may_take_part(viewer, level)

    def may_judge(self, viewer: Viewer, level: Level, author_id: int | None) -> bool:
        """Whether ``viewer`` may approve, or request changes to, a pull request opened by
        ``author_id``: a reviewer, not its author (who may only comment), as on Forgejo."""
        if not self.may_review(viewer, level):
            return False
        assert viewer.account is not None
        return viewer.account.id != author_id

    def may_merge(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` (at ``level`` on the base repository) may merge its pull
        requests: whoever may push to the base branch anyway."""
        account = viewer.account
        if account is None or account.is_org or viewer.scope == "read":
            return False
        return level >= Level.WRITE

    # -- commit statuses and branch protection ------------------------------------------------

    def may_post_status(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may post a commit status: whoever may push (a CI's account
        is a collaborator with write), as on Forgejo."""
        return self.may_merge(viewer, level)

    def may_protect(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` may see and change the branch protection rules: the
        repository's administrators, as on Forgejo."""
        account = viewer.account
        if account is None or account.is_org or viewer.scope == "read":
            return False
        return level >= Level.ADMIN

    def may_force_merge(self, viewer: Viewer, level: Level, applies_to_admins: bool) -> bool:
        """Whether ``viewer`` may merge past a protection rule's required checks, when they
        ask to: an administrator of the repository, unless the rule applies to them too
        (Forgejo's ``force_merge`` and ``apply_to_admins``)."""
        return not applies_to_admins and self.may_protect(viewer, level)

    def assignable(self, repo: Repo) -> list[str]:
        """Who an issue or pull request of ``repo`` may be assigned to: those who may read it
        by more than its being public (its owner when a person, its collaborators, the
        members of its owning organisation), by name, in one statement."""
        rows = self.db.query(
            "SELECT a.name FROM accounts a WHERE lower(a.name) = lower(?) AND a.kind = 'user'"
            " UNION SELECT a.name FROM collaborators c JOIN accounts a ON a.id = c.user_id"
            " WHERE c.owner = ? AND c.name = ?"
            " UNION SELECT a.name FROM org_members m JOIN accounts o ON o.id = m.org_id"
            " JOIN accounts a ON a.id = m.user_id WHERE lower(o.name) = lower(?)",
            (repo.owner, repo.owner, repo.name, repo.owner),
        )
        return sorted((str(row["name"]) for row in rows), key=str.lower)

    # -- webhooks -----------------------------------------------------------------------------

    def may_manage_hooks(self, viewer: Viewer, level: Level) -> bool:
        """Whether ``viewer`` (at ``level`` on a repository) may see and change its webhooks:
        its administrators only, as their secrets and deliveries say what the code does."""
        account = viewer.account
        if account is None or viewer.scope == "read":
            return False
        return level >= Level.ADMIN

    def may_manage_org_hooks(self, viewer: Viewer, org_id: int) -> bool:
        """Whether ``viewer`` may see and change the webhooks of the organisation ``org_id``
        (sent for every repository it owns): its owners and site administrators."""
        account = viewer.account
        if account is None or viewer.scope == "read":
            return False
        if account.is_admin:
            return True
        row = self.db.one(
            "SELECT role FROM org_members WHERE org_id = ? AND user_id = ?", (org_id, account.id)
        )
        return row is not None and row["role"] == "owner"

    # -- visibility ---------------------------------------------------------------------------

    def may_publish(self, ancestors: list[Repo | None]) -> bool:
        """Whether a fork whose parents (nearest first; None for one gone or unknown) are
        ``ancestors`` may be made public: not while any of them is private, or a reader of a
        private repository could publish it by forking it."""
        return all(parent is not None and not parent.private for parent in ancestors)

    # -- collaborators ------------------------------------------------------------------------

    def collaborators(
        self, repo: Repo, offset: int = 0, limit: int | None = None
    ) -> list[Collaborator]:
        """``repo``'s collaborators by name; ``limit`` of them from ``offset`` for a page."""
        sql = (
            "SELECT a.name, c.role FROM collaborators c JOIN accounts a ON a.id = c.user_id"
            " WHERE c.owner = ? AND c.name = ? ORDER BY a.name"
        )
        params: list[object] = [repo.owner, repo.name]
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [Collaborator(r["name"], r["role"]) for r in self.db.query(sql, params)]

    def collaborator_count(self, repo: Repo) -> int:
        row = self.db.one(
            "SELECT COUNT(*) AS n FROM collaborators WHERE owner = ? AND name = ?",
            (repo.owner, repo.name),
        )
        return int(row["n"]) if row else 0

    def role(self, repo: Repo, user: Account) -> str | None:
        """``user``'s role as a collaborator on ``repo`` (read, write, admin); None when they
        are none."""
        row = self.db.one(
            "SELECT role FROM collaborators WHERE owner = ? AND name = ? AND user_id = ?",
            (repo.owner, repo.name, user.id),
        )
        return None if row is None else str(row["role"])

    def access_mode(self, repo: Repo, user: Account) -> str:
        """What ``user`` may do with ``repo`` in Forgejo's words (its access modes): owner for
        the repository's owner and the owners of its organisation, then admin, write, read or
        none, as ``level`` gives it to a credential that may write."""
        level = self._level(user, repo)
        if level == Level.ADMIN and not user.is_org:
            if user.name.lower() == repo.owner.lower():
                return "owner"
            owner = self.db.one(
                "SELECT 1 AS found FROM org_members m JOIN accounts o ON o.id = m.org_id"
                " WHERE o.name = ? AND m.user_id = ? AND m.role = 'owner'",
                (repo.owner, user.id),
            )
            if owner is not None:
                return "owner"
        return level.name.lower()

    def set_collaborator(self, repo: Repo, user: Account, role: str) -> None:
        """Make ``user`` a collaborator of ``repo`` with ``role``; its owner is refused (they
        have every right already, and a row would outlive a change of hands)."""
        if role not in ROLES:
            raise ValueError(role)
        if user.name.lower() == repo.owner.lower():
            raise BadRequest(f"{user.name} owns {repo.full_name}: an owner is no collaborator")
        self.db.execute(
            "INSERT INTO collaborators (owner, name, user_id, role) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (owner, name, user_id) DO UPDATE SET role = excluded.role",
            (repo.owner, repo.name, user.id, role),
        )

    def remove_collaborator(self, repo: Repo, user: Account) -> None:
        self.db.execute(
            "DELETE FROM collaborators WHERE owner = ? AND name = ? AND user_id = ?",
            (repo.owner, repo.name, user.id),
        )
