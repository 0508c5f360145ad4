"""Commit statuses and branch protection rules through ``/api/v1``, in Forgejo's shapes
(``CommitStatus``, ``CombinedStatus``, ``BranchProtection``).

``statuses/{sha}`` takes a commit id as it is, as Forgejo does (a full id is not looked up:
it only selects rows); ``commits/{ref}/status`` and ``/statuses`` resolve a branch, tag or
commit id first. Posting a status needs write access and a commit the repository has; a
status's ``target_url`` must be http(s), since pages link to it. The rules need the
repository's administrator, as on Forgejo; for one who may read but not administer that is
403, for anyone else the 404 of a missing repository.

Every read is a few statements and no process: the statuses come from the database, the
ref from the repository's snapshot.
"""

from __future__ import annotations

from types import GenericAlias
from typing import Annotated, Any, ClassVar, Required, TypedDict

import falcon

from floorless.accounts.access import Level
from floorless.collab import protections
from floorless.collab.protections import Rule, clean_fields
from floorless.collab.statuses import SORTS, STATES, Status, worst
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.forgejo.git import Links
from floorless.forgejo.people import (
    Person,
    RepoFacts,
    Repository,
    User,
    people,
    person,
    repo_json,
    rfc3339,
    user_json,
)
from floorless.forgejo.schema import DateTime, Doc
from floorless.git.oid import is_full
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.gitbase import GitApi, resolve_ref
from floorless.web.api.repository import Target
from floorless.web.auth import Authenticator
from floorless.web.context import RepoView
from floorless.web.public import public_url


class CommitStatus(TypedDict):
    """Forgejo's ``CommitStatus``."""

    id: int
    status: str
    target_url: str
    description: str
    url: str
    context: str
    creator: User
    created_at: DateTime
    updated_at: DateTime


class CombinedStatus(TypedDict):
    """Forgejo's ``CombinedStatus``."""

    state: str
    sha: str
    total_count: int
    statuses: list[CommitStatus]
    repository: Repository
    commit_url: str
    url: str


# A rule's fields are those of ``protections.HELP`` (their kind and meaning, which the
# configuration reference is made from too): the shapes of a rule are made from it, at
# import, so no field is written twice. mypy cannot check a shape so made; ``protection_json``
# is held to it by the tests.
_KINDS: dict[str, Any] = {"boolean": bool, "string": str, "integer": int, "array": list[str]}
_RULE = {
    name: Annotated[_KINDS[kind], Doc(text.replace("`", ""))]
    for name, (kind, text) in protections.HELP.items()
    if name != "rule_name"
}
_Shape: Any = TypedDict  # called with a dict built above, which mypy's TypedDict refuses
# Forgejo's ``BranchProtection`` (its name in the description)
ProtectionShape: type = _Shape(
    "BranchProtection",
    {
        "branch_name": str,
        **{name: _KINDS[kind] for name, (kind, _) in protections.HELP.items()},
        "created_at": DateTime,
        "updated_at": DateTime,
    },
)
CreateBranchProtectionOption: type = _Shape(
    "CreateBranchProtectionOption",
    {
        "rule_name": Annotated[str, Doc("a branch name or a glob of them")],
        "branch_name": Annotated[str, Doc("deprecated: rule_name's old name")],
        **_RULE,
    },
    total=False,
)
EditBranchProtectionOption: type = _Shape("EditBranchProtectionOption", _RULE, total=False)


class StatusListQuery(Paged, total=False):
    """What ``GET`` of ``Statuses`` reads from its query."""

    sort: Annotated[str, Doc("oldest, recentupdate, leastupdate, leastindex or highestindex")]
    state: Annotated[str, Doc("pending, success, error, failure or warning")]


class CreateStatusOption(TypedDict, total=False):
    """What ``POST`` of ``Statuses`` takes (Forgejo's ``CreateStatusOption``)."""

    state: Required[Annotated[str, Doc("pending, success, error, failure or warning")]]
    target_url: Annotated[str, Doc("an http(s) address the status links to")]
    description: Annotated[str, Doc("a short description")]
    context: Annotated[str, Doc("what says so, e.g. ci/build")]


def status_json(
    status: Status, links: Links, creators: dict[str, Person], view: RepoView, req: falcon.Request
) -> dict[str, Any]:
    """Forgejo's ``CommitStatus``: its state is called ``status`` there."""
    who = creators.get((status.creator or "").lower())
    return {
        "id": status.id,
        "status": status.state,
        "target_url": status.target_url,
        "description": status.description,
        "url": links.api("statuses", status.sha),
        "context": status.context,
        "creator": None if who is None else user_json(who, GitApi.viewer(req), links.base),
        "created_at": rfc3339(status.created_at),
        "updated_at": rfc3339(status.updated_at),
    }


def protection_json(rule: Rule) -> dict[str, Any]:
    """Forgejo's ``BranchProtection`` (with Gitea's force-push fields)."""
    return {
        "branch_name": rule.rule,
        "rule_name": rule.rule,
        "enable_push": rule.enable_push,
        "enable_push_whitelist": rule.enable_push_whitelist,
        "push_whitelist_usernames": list(rule.push_whitelist_usernames),
        "push_whitelist_teams": [],
        "push_whitelist_deploy_keys": False,
        "enable_force_push": rule.enable_force_push,
        "enable_force_push_allowlist": rule.enable_force_push_allowlist,
        "force_push_allowlist_usernames": list(rule.force_push_allowlist_usernames),
        "force_push_allowlist_teams": [],
        "force_push_allowlist_deploy_keys": False,
        "enable_merge_whitelist": rule.enable_merge_whitelist,
        "merge_whitelist_usernames": list(rule.merge_whitelist_usernames),
        "merge_whitelist_teams": [],
        "enable_status_check": rule.enable_status_check,
        "status_check_contexts": list(rule.status_check_contexts),
        "required_approvals": rule.required_approvals,
        "enable_approvals_whitelist": rule.enable_approvals_whitelist,
        "approvals_whitelist_username": list(rule.approvals_whitelist_username),
        "approvals_whitelist_teams": [],
        "block_on_rejected_reviews": rule.block_on_rejected_reviews,
        "block_on_official_review_requests": rule.block_on_official_review_requests,
        "block_on_outdated_branch": rule.block_on_outdated_branch,
        "dismiss_stale_approvals": rule.dismiss_stale_approvals,
        "ignore_stale_approvals": rule.ignore_stale_approvals,
        "require_signed_commits": False,
        "protected_file_patterns": rule.protected_file_patterns,
        "unprotected_file_patterns": rule.unprotected_file_patterns,
        "apply_to_admins": rule.apply_to_admins,
        "created_at": rfc3339(rule.created_at),
        "updated_at": rfc3339(rule.updated_at),
    }


class _StatusApi(GitApi):
    def listing(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, links: Links, sha: str
    ) -> None:
        sort = req.get_param("sort") or ""
        state = req.get_param("state") or ""
        if sort and sort not in SORTS:
            raise Unprocessable(f"sort must be one of {', '.join(SORTS)}")
        if state and state not in STATES:
            raise Unprocessable(f"state must be one of {', '.join(STATES)}")
        paging = self.paging(req)
        found, total = self.forge.statuses.page(
            view.repo, sha, sort, state, paging.offset, paging.limit
        )
        creators = people(self.forge.db, [s.creator for s in found if s.creator])
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, [status_json(s, links, creators, view, req) for s in found])


def _sha_of(view: RepoView, raw: str) -> str:
    """A ``{sha}`` of ``statuses/{sha}``: a full commit id as it is (lower case), anything
    else resolved as a branch, tag or abbreviated id."""
    if is_full(raw.lower().encode()):
        return raw.lower()
    return resolve_ref(view, raw.encode()).commit.hex()


class Statuses(_StatusApi):
    """``GET/POST statuses/{sha}``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a commit's statuses",
            list[CommitStatus],
            query=StatusListQuery,
            paged=True,
            operation_id="repoListStatuses",
            tag="repository",
        ),
        "post": Operation(
            "create a commit status",
            CommitStatus,
            status=201,
            body=CreateStatusOption,
            signed_in=True,
            operation_id="repoCreateStatus",
            tag="repository",
            needs=Level.WRITE,
            first="writer",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, sha: str) -> None:
        view, links = target.view, target.links
        self.listing(req, resp, view, links, _sha_of(view, sha))

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target, sha: str) -> None:
        account = self.caller(req)
        view, links = target.view, target.links
        if not self.forge.policy.may_post_status(self.viewer(req), view.level):
            raise Forbidden("only those who may push may post a commit status")
        data = self.body(req)
        state = str(data.get("state", ""))
        if state not in STATES:
            raise Unprocessable(f"state must be one of {', '.join(STATES)}")
        if not sha:
            raise BadRequest("sha not given")
        commit = resolve_ref(view, sha.encode()).commit.hex()  # one the repository has
        try:
            status = self.forge.statuses.post(
                view.repo,
                commit,
                state,
                str(data.get("context", "")),
                str(data.get("target_url", "")),
                str(data.get("description", "")),
                account,
            )
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        creators = people(self.forge.db, [account.name])
        self.send(resp, status_json(status, links, creators, view, req), 201)


class RefStatuses(_StatusApi):
    """``GET commits/{ref}/statuses``: the statuses of what ``ref`` names."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list the statuses of a branch, tag or commit",
            list[CommitStatus],
            query=StatusListQuery,
            paged=True,
            operation_id="repoListStatusesByRef",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, ref: str) -> None:
        view, links = target.view, target.links
        sha = resolve_ref(view, ref.encode()).commit.hex()
        self.listing(req, resp, view, links, sha)


class Combined(GitApi):
    """``GET commits/{ref}/status``: the latest status of each context, and their combined
    state (the worst of them). No status at all is Forgejo's empty ``CombinedStatus``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "the combined status of a branch, tag or commit",
            CombinedStatus,
            query=Paged,
            paged=True,
            operation_id="repoGetCombinedStatusByRef",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, ref: str) -> None:
        view, links = target.view, target.links
        sha = resolve_ref(view, ref.encode()).commit.hex()
        latest = self.forge.statuses.latest(view.repo, sha)
        if not latest:
            self.send(resp, _EMPTY)
            return
        paging = self.paging(req)
        shown = latest[paging.offset : paging.offset + paging.limit]
        creators = people(self.forge.db, [s.creator for s in shown if s.creator])
        viewer = self.viewer(req)
        public = public_url(self.forge.settings, req)
        facts = RepoFacts(self.forge, viewer, [view.repo])
        self.paged(req, resp, self.forge, paging, len(latest))
        self.send(
            resp,
            {
                "state": worst(s.state for s in latest),
                "sha": sha,
                "total_count": len(latest),
                "statuses": [status_json(s, links, creators, view, req) for s in shown],
                "repository": repo_json(view.repo, facts, public),
                "commit_url": links.commit_api(sha),
                "url": links.api("commits", sha, "status"),
            },
        )


_EMPTY: dict[str, Any] = {
    "state": "",
    "sha": "",
    "total_count": 0,
    "statuses": None,
    "repository": None,
    "commit_url": "",
    "url": "",
}


class _ProtectionApi(GitApi):
    def admin(self, req: falcon.Request, target: Target) -> RepoView:
        """The repository, for its administrator: 401 anonymous, 404 for who may not read
        it (its operations refuse those first: ``first``), 403 for who may read it but not
        administer it (or with a read token)."""
        view = target.view
        if not self.forge.policy.may_protect(self.viewer(req), view.level):
            if self.viewer(req).scope == "read" and view.level >= Level.ADMIN:
                self.writer(req)  # the scope's own 403
            raise Forbidden(
                "user should be an owner or a collaborator with admin write of a repository"
            )
        return view

    def fields(self, data: dict[str, Any]) -> dict[str, Any]:
        """The rule's fields from a request body; a wrong one is Forgejo's 422."""
        try:
            return clean_fields(data, lambda name: person(self.forge.db, name) is not None)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc


class BranchProtections(_ProtectionApi):
    """``GET/POST branch_protections``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list branch protections",
            GenericAlias(list, (ProtectionShape,)),
            signed_in=True,
            first="caller",
            operation_id="repoListBranchProtection",
            tag="repository",
        ),
        "post": Operation(
            "create a branch protection",
            ProtectionShape,
            status=201,
            body=CreateBranchProtectionOption,
            signed_in=True,
            first="writer",
            operation_id="repoCreateBranchProtection",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view = self.admin(req, target)
        self.send(resp, [protection_json(r) for r in self.forge.protections.rules(view.repo)])

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view = self.admin(req, target)
        data = self.body(req)
        name = str(data.get("rule_name") or data.get("branch_name") or "")
        fields = self.fields(data)
        try:
            rule = self.forge.protections.create(view.repo, name, fields)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        self.send(resp, protection_json(rule), 201)


class BranchProtection(_ProtectionApi):
    """``GET/PATCH/DELETE branch_protections/{name}``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a branch protection",
            ProtectionShape,
            signed_in=True,
            first="caller",
            operation_id="repoGetBranchProtection",
            tag="repository",
        ),
        "patch": Operation(
            "edit a branch protection",
            ProtectionShape,
            body=EditBranchProtectionOption,
            signed_in=True,
            first="writer",
            operation_id="repoEditBranchProtection",
            tag="repository",
        ),
        "delete": Operation(
            "delete a branch protection",
            None,
            status=204,
            signed_in=True,
            first="writer",
            operation_id="repoDeleteBranchProtection",
            tag="repository",
        ),
    }

    def _rule_name(self, req: falcon.Request) -> str:
        raw = urls.exact_tail(req, "name")
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise NotFound("no such branch protection rule") from exc

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, name: str) -> None:
        view = self.admin(req, target)
        rule = self.forge.protections.get(view.repo, self._rule_name(req))
        self.send(resp, protection_json(rule))

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, name: str
    ) -> None:
        view = self.admin(req, target)
        rule = self.forge.protections.get(view.repo, self._rule_name(req))  # 404 before 422
        fields = self.fields(self.body(req))
        rule = self.forge.protections.edit(view.repo, rule.rule, fields)
        self.send(resp, protection_json(rule))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, name: str
    ) -> None:
        view = self.admin(req, target)
        self.forge.protections.delete(view.repo, self._rule_name(req))
        self.nothing(resp)


class SlashedRef(GitApi):
    """``commits/{ref}/status`` and ``/statuses`` for a ref with slashes, which the
    one-segment routes above cannot match: the same answers."""

    def __init__(self, forge: Forge, auth: Authenticator) -> None:
        super().__init__(forge, auth)
        self.combined = Combined(forge, auth)
        self.listed = RefStatuses(forge, auth)

    def first(self, req: falcon.Request, operation: Operation) -> None:
        """Any other path under ``commits/`` is no route: refused before a lookup."""
        ref, _, last = _tail(req).rpartition("/")
        if not ref or last not in ("status", "statuses"):
            raise NotFound("no such API path")

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        ref, _, last = tail.rpartition("/")
        if last == "status":
            self.combined.on_get(req, resp, target, ref)
        else:
            self.listed.on_get(req, resp, target, ref)


def _tail(req: falcon.Request) -> str:
    """What follows ``repos/{owner}/{repo}/commits/`` in the request's path."""
    return req.path.split("/", 6)[-1].removeprefix("commits/")
