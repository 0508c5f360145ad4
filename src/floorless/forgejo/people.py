"""Floorless's accounts and repositories as Forgejo's API shows them (``User``,
``Organization``, ``Repository``, ``AccessToken``), a page of them at a time.

What a page of repositories needs besides their rows (their owners, features, open issue and
pull request totals, parents, the caller's permissions) is read for the whole page at once,
a few statements whatever its length, never one per repository.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypedDict
from urllib.parse import urlsplit

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.accounts import Token
from floorless.collab.pulls import MERGE_STYLES, Features
from floorless.core.config import Settings
from floorless.core.errors import NotFound
from floorless.db import Database, Row
from floorless.forgejo import urls
from floorless.forgejo.schema import DateTime
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Registry, Repo

# Forgejo's scope categories: a floorless token is read or write over all of them.
SCOPE_CATEGORIES = (
    "activitypub",
    "admin",
    "issue",
    "misc",
    "notification",
    "organization",
    "package",
    "repository",
    "user",
)


def rfc3339(seconds: float | None) -> str:
    """A time as Forgejo writes it (``2024-05-01T12:00:00Z``); the epoch for an unknown one."""
    moment = datetime.fromtimestamp(seconds or 0, UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Person:
    """An account as the API shows it: a ``Viewer`` sees more than its ``Account`` holds."""

    id: int
    name: str
    kind: str
    email: str
    is_admin: bool
    created_at: float | None

    @property
    def is_org(self) -> bool:
        return self.kind == "org"


_PERSON = "SELECT id, name, kind, email, is_admin, created_at FROM accounts"


def people(db: Database, names: Iterable[str]) -> dict[str, Person]:
    """The accounts named ``names`` (matched without regard to case), by lower-cased name."""
    wanted = sorted({name.lower() for name in names})
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    rows = db.query(f"{_PERSON} WHERE lower(name) IN ({marks})", wanted)
    return {str(row["name"]).lower(): _person(row) for row in rows}


def person(db: Database, name: str) -> Person | None:
    return people(db, [name]).get(name.lower())


def _person(row: Row) -> Person:
    return Person(
        id=row["id"],
        name=row["name"],
        kind=row["kind"],
        email=row["email"] or "",
        is_admin=bool(row["is_admin"]),
        created_at=row["created_at"],
    )


def user_json(who: Person, viewer: Viewer, public: str) -> User:
    """Forgejo's ``User``: the address only to the person and an administrator, as Forgejo
    keeps it private by default; others see a placeholder that reaches no one."""
    me = viewer.account
    own = me is not None and (me.id == who.id or me.is_admin)
    host = urlsplit(public).hostname or "localhost"
    return {
        "id": who.id,
        "login": who.name,
        "login_name": "",
        "source_id": 0,
        "full_name": "",
        "email": who.email if own and who.email else f"{who.name.lower()}@noreply.{host}",
        "avatar_url": "",
        "html_url": public + urls.owner(who.name),
        "language": "",
        "is_admin": who.is_admin if own else False,
        "last_login": rfc3339(None),
        "created": rfc3339(who.created_at),
        "restricted": False,
        "active": True,
        "prohibit_login": False,
        "location": "",
        "pronouns": "",
        "website": "",
        "description": "",
        "visibility": "public",
        "followers_count": 0,
        "following_count": 0,
        "starred_repos_count": 0,
        "username": who.name,
    }


def org_json(org: Person, public: str) -> Organization:
    """Forgejo's ``Organization``."""
    return {
        "id": org.id,
        "name": org.name,
        "username": org.name,
        "full_name": "",
        "email": "",
        "avatar_url": "",
        "description": "",
        "website": "",
        "location": "",
        "visibility": "public",
        "repo_admin_change_team_access": False,
    }


def token_json(token: Token, plain: str = "") -> AccessToken:
    """Forgejo's ``AccessToken``: ``sha1`` (the token itself) only when it is made."""
    return {
        "id": token.id,
        "name": token.name,
        "sha1": plain,
        "token_last_eight": plain[-8:] if plain else "",
        "scopes": scopes_of(token.scope),
        "created_at": rfc3339(token.created_at),
        "last_used_at": rfc3339(token.last_used_at),
    }


def scopes_of(scope: str) -> list[str]:
    """A floorless scope (read or write) as the Forgejo scopes it stands for."""
    return [f"{scope}:{category}" for category in SCOPE_CATEGORIES]


def scope_from(scopes: Sequence[str]) -> str | None:
    """The floorless scope nearest to Forgejo's ``scopes``: write if any of them writes
    (floorless has no finer scopes: a token that may write somewhere may write everywhere the
    person may), read if all only read, None if none is known."""
    known = [s for s in scopes if s == "all" or s.partition(":")[2] in SCOPE_CATEGORIES]
    if not known:
        return None
    if any(s == "all" or s.startswith("write:") for s in known):
        return "write"
    if all(s.startswith("read:") for s in known):
        return "read"
    return None


class RepoSources(Protocol):
    """What a page of repositories' JSON reads: the rows, the settings (the SSH clone URL),
    who may do what, and each repository's refs. The forge (``forge.py``) is one; taken by
    structure, so that the wire shapes need no more of it than this."""

    @property
    def db(self) -> Database: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def registry(self) -> Registry: ...

    def snapshot(self, repo: Repo) -> RefSnapshot: ...


class RepoFacts:
    """What the ``Repository`` JSON of a page of repositories needs, read for the page."""

    def __init__(self, forge: RepoSources, viewer: Viewer, repos: Sequence[Repo]) -> None:
        self.forge = forge
        self.viewer = viewer
        db = forge.db
        keys = sorted({(r.owner, r.name) for r in repos})
        where, params = _pairs(keys)
        self.features: dict[tuple[str, str], Features] = {}
        self.open: dict[tuple[str, str, bool], int] = {}
        self.parents: dict[tuple[str, str], tuple[str, str]] = {}
        self.forks: dict[tuple[str, str], int] = {}  # how many forks of each the viewer sees
        if keys:
            for row in db.query(f"SELECT * FROM repo_features WHERE {where}", params):  # noqa: S608
                styles = str(row["merge_styles"]).split(",")
                self.features[(row["owner"], row["name"])] = Features(
                    bool(row["issues"]),
                    bool(row["pulls"]),
                    tuple(s for s in styles if s in MERGE_STYLES),
                    row["default_merge"],
                )
            for row in db.query(
                "SELECT owner, name, is_pull, total FROM issue_totals"  # noqa: S608
                f" WHERE state = 'open' AND ({where})",
                params,
            ):
                self.open[(row["owner"], row["name"], bool(row["is_pull"]))] = int(row["total"])
            for row in db.query(f"SELECT * FROM forks WHERE {where}", params):  # noqa: S608
                self.parents[(row["owner"], row["name"])] = (
                    row["parent_owner"],
                    row["parent_name"],
                )
            # forks the viewer may see, as ``forks`` lists them: a private one is not counted
            # for who may not read it (its number would tell that it exists)
            of, _ = _pairs(keys, "parent_")
            visible, seen = forge.policy.visible_clause(viewer)
            for row in db.query(
                "SELECT parent_owner, parent_name, COUNT(*) AS n FROM ("  # noqa: S608
                " SELECT f.owner, f.name, f.parent_owner, f.parent_name,"
                " COALESCE(a.private, 0) AS private FROM forks f LEFT JOIN repo_access a"
                " ON a.owner = f.owner AND a.name = f.name) AS repos"
                f" WHERE ({of}) AND {visible} GROUP BY parent_owner, parent_name",
                [*params, *seen],
            ):
                self.forks[(row["parent_owner"], row["parent_name"])] = int(row["n"])
        self.owners = people(db, [r.owner for r in repos])
        self.levels = forge.policy.levels(viewer, repos)

    def level(self, repo: Repo) -> Level:
        found = self.levels.get(repo.id)
        return found if found is not None else self.forge.policy.level(self.viewer, repo)

    def parent(self, repo: Repo) -> Repo | None:
        """The repository ``repo`` was forked from, if the caller may read it."""
        names = self.parents.get((repo.owner, repo.name))
        if names is None:
            return None
        try:
            parent = self.forge.registry.get(*names)
        except NotFound:
            return None
        return parent if self.level(parent) >= Level.READ else None


def _pairs(keys: Sequence[tuple[str, str]], prefix: str = "") -> tuple[str, list[object]]:
    pair = f"({prefix}owner = ? AND {prefix}name = ?)"
    clause = " OR ".join(pair for _ in keys) or "1 = 0"
    return clause, [part for key in keys for part in key]


def repo_json(repo: Repo, facts: RepoFacts, public: str, nested: bool = False) -> Repository:
    """Forgejo's ``Repository`` for ``repo``, with the caller's permissions on it."""
    forge = facts.forge
    snapshot = forge.snapshot(repo)
    features = facts.features.get((repo.owner, repo.name), Features())
    level = facts.level(repo)
    owner = facts.owners.get(repo.owner.lower())
    owner_json = (
        user_json(owner, facts.viewer, public)
        if owner is not None
        else user_json(Person(0, repo.owner, "user", "", False, None), facts.viewer, public)
    )
    home = public + urls.home(repo)
    parent = None if nested else facts.parent(repo)
    updated = rfc3339(repo.updated_at or time.time())
    default = snapshot.default_branch or b"main"
    styles = set(features.merge_styles)
    return {
        "id": repo.id,
        "owner": owner_json,
        "name": repo.name,
        "full_name": repo.full_name,
        "description": repo.description,
        "empty": not snapshot.branches,
        "private": repo.private,
        "fork": (repo.owner, repo.name) in facts.parents,
        "template": False,
        "parent": repo_json(parent, RepoFacts(forge, facts.viewer, [parent]), public, True)
        if parent is not None
        else None,
        "mirror": False,
        "size": 0,
        "language": "",
        "languages_url": public + urls.api_repo(repo, "languages"),
        "html_url": home,
        "url": public + urls.api_repo(repo),
        "link": "",
        "ssh_url": forge.settings.ssh_clone_url(public, repo.full_name),
        "clone_url": public + urls.clone(repo),
        "original_url": "",
        "website": "",
        "stars_count": 0,
        "forks_count": facts.forks.get((repo.owner, repo.name), 0),
        "watchers_count": 0,
        "open_issues_count": facts.open.get((repo.owner, repo.name, False), 0),
        "open_pr_counter": facts.open.get((repo.owner, repo.name, True), 0),
        "release_counter": 0,
        "default_branch": default.decode("utf-8", "replace"),
        "archived": False,
        "created_at": updated,
        "updated_at": updated,
        "archived_at": rfc3339(None),
        "permissions": {
            "admin": level >= Level.ADMIN,
            "push": level >= Level.WRITE,
            "pull": level >= Level.READ,
        },
        "has_issues": features.issues,
        "has_wiki": False,
        "has_pull_requests": features.pulls,
        "has_projects": False,
        "has_releases": False,
        "has_packages": False,
        "has_actions": False,
        "ignore_whitespace_conflicts": False,
        "allow_merge_commits": "merge" in styles,
        "allow_rebase": "rebase" in styles,
        "allow_rebase_explicit": False,
        "allow_squash_merge": "squash" in styles,
        "allow_fast_forward_only_merge": "fast-forward-only" in styles,
        "allow_rebase_update": False,
        "default_delete_branch_after_merge": False,
        "default_merge_style": features.default_merge,
        "default_allow_maintainer_edit": False,
        "avatar_url": "",
        "internal": False,
        "mirror_interval": "",
        "object_format_name": "sha1",
        "topics": [],
    }


class User(TypedDict):
    """Forgejo's ``User``."""

    id: int
    source_id: int
    followers_count: int
    following_count: int
    starred_repos_count: int
    login: str
    login_name: str
    full_name: str
    email: str
    avatar_url: str
    html_url: str
    language: str
    location: str
    pronouns: str
    website: str
    description: str
    visibility: str
    username: str
    last_login: DateTime
    created: DateTime
    is_admin: bool
    restricted: bool
    active: bool
    prohibit_login: bool


class Organization(TypedDict):
    """Forgejo's ``Organization``."""

    id: int
    repo_admin_change_team_access: bool
    name: str
    username: str
    full_name: str
    email: str
    avatar_url: str
    description: str
    website: str
    location: str
    visibility: str


class AccessToken(TypedDict):
    """Forgejo's ``AccessToken``."""

    id: int
    name: str
    sha1: str
    token_last_eight: str
    scopes: list[str]
    created_at: DateTime
    last_used_at: DateTime


class Permission(TypedDict):
    """Forgejo's ``Permission``."""

    admin: bool
    push: bool
    pull: bool


class Repository(TypedDict):
    """Forgejo's ``Repository``."""

    owner: User
    parent: Repository | None
    permissions: Permission
    topics: list[str]
    id: int
    size: int
    stars_count: int
    forks_count: int
    watchers_count: int
    open_issues_count: int
    open_pr_counter: int
    release_counter: int
    name: str
    full_name: str
    description: str
    language: str
    languages_url: str
    html_url: str
    url: str
    link: str
    ssh_url: str
    clone_url: str
    original_url: str
    website: str
    default_branch: str
    default_merge_style: str
    avatar_url: str
    mirror_interval: str
    object_format_name: str
    created_at: DateTime
    updated_at: DateTime
    archived_at: DateTime
    empty: bool
    private: bool
    fork: bool
    template: bool
    mirror: bool
    archived: bool
    has_issues: bool
    has_wiki: bool
    has_pull_requests: bool
    has_projects: bool
    has_releases: bool
    has_packages: bool
    has_actions: bool
    ignore_whitespace_conflicts: bool
    allow_merge_commits: bool
    allow_rebase: bool
    allow_rebase_explicit: bool
    allow_squash_merge: bool
    allow_fast_forward_only_merge: bool
    allow_rebase_update: bool
    default_delete_branch_after_merge: bool
    default_allow_maintainer_edit: bool
    internal: bool
