"""Repositories: lists (the caller's, a person's, an organisation's, a search), creation,
and one repository read, edited and deleted; organisations made and read.

Who may see what is the access policy's (``access.py``): a list carries its ``visible``
condition, one repository is found through ``find_repo`` (a private one the caller may not
read is a 404, exactly as a missing one), and changes need ADMIN on it, as on Forgejo.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Required, TypedDict

import falcon
import pygit2

from floorless.accounts.access import Level
from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Conflict, Forbidden, NotFound
from floorless.forgejo.people import (
    Organization,
    RepoFacts,
    Repository,
    org_json,
    person,
    repo_json,
)
from floorless.forgejo.schema import Doc
from floorless.repos.registry import Repo
from floorless.web.api.base import (
    Operation,
    Paged,
    Resource,
    Unprocessable,
)
from floorless.web.api.repository import RepoResource, Target
from floorless.web.public import public_url


# Forgejo's switch for each way of merging floorless has (rebase-merge it has not).
class SearchResults(TypedDict):
    """Forgejo's ``SearchResults``."""

    ok: bool
    data: list[Repository]


class CreateRepoOption(TypedDict, total=False):
    """What ``POST`` of ``MyRepos`` takes (Forgejo's ``CreateRepoOption``)."""

    name: Required[Annotated[str, Doc("the repository's name")]]
    description: Annotated[str, Doc("a line about it")]
    private: Annotated[bool, Doc("whether only its owner and collaborators may see it")]
    default_branch: Annotated[str, Doc("the branch HEAD names (main when not given)")]
    auto_init: Annotated[bool, Doc("not supported: push the first commit instead")]


class CreateOrgOption(TypedDict, total=False):
    """What ``POST`` of ``Orgs`` takes (Forgejo's ``CreateOrgOption``)."""

    username: Required[Annotated[str, Doc("the organisation's name")]]
    full_name: Annotated[str, Doc("not kept")]
    description: Annotated[str, Doc("not kept")]
    visibility: Annotated[str, Doc("public only")]


class RepoSearchQuery(Paged, total=False):
    """What ``GET`` of ``RepoSearch`` reads from its query."""

    q: Annotated[str, Doc("keyword, in the owner's or the repository's name")]
    uid: Annotated[int, Doc("only those owned by this account id")]
    private: Annotated[bool, Doc("include the private ones the caller may see (true)")]
    is_private: Annotated[bool, Doc("only private (true) or public (false) ones")]
    sort: Annotated[str, Doc("alpha (the default) or updated")]
    order: Annotated[str, Doc("asc or desc (of updated; desc by default)")]


class EditRepoOption(TypedDict, total=False):
    """What ``PATCH`` of ``OneRepo`` takes (Forgejo's ``EditRepoOption``)."""

    name: Annotated[str, Doc("a new name (a rename)")]
    description: Annotated[str, Doc("a line about it")]
    private: Annotated[bool, Doc("whether only its owner and collaborators may see it")]
    default_branch: Annotated[str, Doc("an existing branch to be the default")]
    has_issues: Annotated[bool, Doc("whether issues are on")]
    has_pull_requests: Annotated[bool, Doc("whether pull requests are on")]
    allow_merge_commits: Annotated[
        bool, Doc("whether pull requests may be merged with a merge commit")
    ]
    allow_rebase: Annotated[bool, Doc("... rebased onto the base")]
    allow_squash_merge: Annotated[bool, Doc("... squashed into one commit")]
    allow_fast_forward_only_merge: Annotated[bool, Doc("... fast-forwarded only")]
    default_merge_style: Annotated[str, Doc("merge, rebase, squash or fast-forward-only")]


_STYLE_SWITCHES = {
    "allow_merge_commits": "merge",
    "allow_rebase": "rebase",
    "allow_squash_merge": "squash",
    "allow_fast_forward_only_merge": "fast-forward-only",
}
LIST = Operation("list repositories", list[Repository], query=Paged, paged=True)


class Repositories(Resource):
    """Shared by every resource that answers repositories."""

    def page_of(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        owner: str | None = None,
        query: str = "",
        mine: bool = False,
        private: bool | None = None,
        sort: str = "name",
        parent: tuple[str, str] | None = None,
    ) -> list[Repository]:
        """One page of the repositories the caller may see (of ``owner``; matching
        ``query``; ``mine``: only those they own or were given; forks of ``parent``), with
        the paging headers."""
        paging = self.paging(req)
        viewer = self.viewer(req)
        clause, params = self.forge.policy.visible_clause(viewer)
        if mine:
            clause, params = self.forge.policy.shared_clause(viewer)
        if private is not None:
            clause = f"({clause}) AND private = ?"
            params = [*params, int(private)]
        repos, total = self.forge.registry.listing(
            query,
            owner=owner,
            sort=sort,
            offset=paging.offset,
            limit=paging.limit,
            visible=(clause, params),
            parent=parent,
        )
        self.paged(req, resp, self.forge, paging, total)
        return self.shown(req, repos)

    def shown(self, req: falcon.Request, repos: list[Repo]) -> list[Repository]:
        facts = RepoFacts(self.forge, self.viewer(req), repos)
        public = public_url(self.forge.settings, req)
        return [repo_json(repo, facts, public) for repo in repos]

    def create(self, req: falcon.Request, resp: falcon.Response, owner: Account) -> None:
        body = self.body(req)
        if body.get("auto_init"):
            raise Unprocessable("auto_init is not supported: push the first commit instead")
        branch = body.get("default_branch") or "main"
        _check_branch_name(branch)
        repo = self.forge.registry.create(
            owner.name,
            str(body["name"]).strip(),
            bool(body.get("private", False)),
            str(body.get("description", "")),
        )
        if branch != "main":
            self.forge.live.open(repo).create_reference_symbolic(
                "HEAD", f"refs/heads/{branch}", True
            )
            self.forge.moves.refs_moved(repo)
        self.send(resp, self.shown(req, [repo])[0], 201)


def _check_branch_name(branch: str) -> None:
    if not pygit2.reference_is_valid_name(f"refs/heads/{branch}"):
        raise Unprocessable(f"{branch!r} is not a valid branch name")


class MyRepos(Repositories):
    operations = {
        "get": replace(
            LIST,
            summary="the repositories the caller owns or was given",
            signed_in=True,
            operation_id="userCurrentListRepos",
            tag="user",
        ),
        "post": Operation(
            "create a repository",
            Repository,
            status=201,
            body=CreateRepoOption,
            signed_in=True,
            operation_id="createCurrentUserRepo",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.caller(req)
        self.send(resp, self.page_of(req, resp, mine=True))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.create(req, resp, self.writer(req))


class UserRepos(Repositories):
    operations = {
        "get": replace(
            LIST,
            summary="a person's repositories the caller may see",
            operation_id="userListRepos",
            tag="user",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        who = person(self.forge.db, name)
        if who is None:
            raise NotFound(f"user does not exist [name: {name}]")
        self.send(resp, self.page_of(req, resp, owner=who.name))


class OrgRepos(Repositories):
    operations = {
        "get": replace(
            LIST,
            summary="an organisation's repositories the caller may see",
            operation_id="orgListRepos",
            tag="organization",
        ),
        "post": Operation(
            "create a repository in an organisation",
            Repository,
            status=201,
            body=CreateRepoOption,
            signed_in=True,
            operation_id="createOrgRepo",
            tag="organization",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        found = _org(self, org)
        self.send(resp, self.page_of(req, resp, owner=found.name))

    def on_post(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        account = self.writer(req)
        found = self.forge.accounts.get(_org(self, org).name)
        assert found is not None
        owned = {o.id for o in self.forge.accounts.owned_orgs(account)}
        if found.id not in owned and not account.is_admin:
            raise Forbidden(f"{account.name} may not create repositories in {found.name}")
        self.create(req, resp, found)


def _org(resource: Resource, name: str) -> Any:
    found = person(resource.forge.db, name)
    if found is None or not found.is_org:
        raise NotFound(f"organisation does not exist [name: {name}]")
    return found


class RepoSearch(Repositories):
    operations = {
        "get": Operation(
            "search repositories the caller may see (answers {ok, data})",
            SearchResults,
            query=RepoSearchQuery,
            paged=True,
            operation_id="repoSearch",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        owner = None
        uid = req.get_param("uid")
        if uid and uid != "0":
            if not (uid.isascii() and uid.isdigit()) or len(uid) > 18:
                raise BadRequest("uid must be a number")
            account = self.forge.accounts.by_id(int(uid))
            if account is None:
                raise NotFound("no account has that id")
            owner = account.name
        asked = self.query(req)
        data = self.page_of(
            req,
            resp,
            owner=owner,
            query=(req.get_param("q") or "").strip(),
            private=False if asked.get("private") is False else asked.get("is_private"),
            sort=_sort(req),
        )
        self.send(resp, {"ok": True, "data": data})


def _sort(req: falcon.Request) -> str:
    """Forgejo's ``sort`` and ``order`` as the orders a listing has: by name, or by the last
    push either way; an order floorless does not keep (size, stars) is refused."""
    sort = req.get_param("sort") or "alpha"
    order = req.get_param("order") or ""
    if order not in ("", "asc", "desc"):
        raise Unprocessable("order must be asc or desc")
    if sort == "alpha":
        return "name"
    if sort == "updated":
        return "oldest" if order == "asc" else "recent"
    raise Unprocessable(f"cannot sort by {sort!r} here: alpha or updated")


class OneRepo(RepoResource, Repositories):
    operations = {
        "get": Operation("a repository", Repository, operation_id="repoGet", tag="repository"),
        "patch": Operation(
            "edit a repository (its admins)",
            Repository,
            body=EditRepoOption,
            signed_in=True,
            operation_id="repoEdit",
            tag="repository",
            needs=Level.ADMIN,
            first="writer",
        ),
        "delete": Operation(
            "delete a repository (its admins)",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDelete",
            tag="repository",
            needs=Level.ADMIN,
            first="writer",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        self.send(resp, self.shown(req, [target.repo])[0])

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = target.repo
        body = self.body(req)
        forge = self.forge
        branch = body.get("default_branch")
        if branch is not None and branch.encode() != forge.live.snapshot(found).default_branch:
            _check_branch_name(branch)
            if (
                forge.live.snapshot(found).branches
                and branch.encode() not in forge.live.snapshot(found).branches
            ):
                raise Unprocessable(f"there is no branch {branch!r} to be the default")
        features = forge.pulls.features(found.owner, found.name)
        changed = replace(
            features,
            issues=bool(body.get("has_issues", features.issues)),
            pulls=bool(body.get("has_pull_requests", features.pulls)),
            merge_styles=tuple(
                style
                for switch, style in _STYLE_SWITCHES.items()
                if body.get(switch, style in features.merge_styles)
            ),
            default_merge=str(body.get("default_merge_style", features.default_merge)),
        )
        if changed.default_merge not in _STYLE_SWITCHES.values():
            raise Unprocessable(f"no merge style {changed.default_merge!r} here")
        if not changed.merge_styles:
            raise Unprocessable("allow at least one way to merge")
        if changed.default_merge not in changed.merge_styles:
            raise Unprocessable("the default merge style must be one of those allowed")
        if body.get("private") is False:  # checked before anything changes
            forge.lifecycle.check_public(found)
        if "name" in body and body["name"] != found.name:
            found = forge.lifecycle.rename(found, str(body["name"]).strip())
        if "description" in body:
            forge.registry.set_description(found, str(body["description"]))
        if "private" in body:
            forge.lifecycle.set_private(found, bool(body["private"]))
        if changed != features:
            forge.pulls.set_features(found.owner, found.name, changed)
        if branch is not None and branch.encode() != forge.live.snapshot(found).default_branch:
            forge.live.open(found).create_reference_symbolic("HEAD", f"refs/heads/{branch}", True)
            forge.moves.refs_moved(found)
        self.send(resp, self.shown(req, [forge.registry.get(found.owner, found.name)])[0])

    def on_delete(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found = target.repo
        self.forge.lifecycle.delete(found)
        self.nothing(resp)


class Orgs(Resource):
    operations = {
        "post": Operation(
            "create an organisation, owned by the caller",
            Organization,
            status=201,
            body=CreateOrgOption,
            signed_in=True,
            operation_id="orgCreate",
            tag="organization",
        )
    }

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account = self.writer(req)
        body = self.body(req)
        if body.get("visibility", "public") != "public":
            raise Unprocessable("only public organisations exist here")
        try:
            org = self.forge.accounts.create_org(str(body["username"]).strip(), account)
        except Conflict as exc:
            raise Unprocessable(str(exc)) from exc
        found = person(self.forge.db, org.name)
        assert found is not None
        self.send(resp, org_json(found, public_url(self.forge.settings, req)), 201)


class Org(Resource):
    operations = {
        "get": Operation("an organisation", Organization, operation_id="orgGet", tag="organization")
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, org: str) -> None:
        self.send(resp, org_json(_org(self, org), public_url(self.forge.settings, req)))
