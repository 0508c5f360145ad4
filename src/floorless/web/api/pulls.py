"""Pull requests through the API: list, open, read, edit; their ``.diff`` and ``.patch``,
commits and files; whether merged, and merging.

Everything here calls the layer the web's pages call: opening is the compare page's
(``views/compare.py``: the same checks, the same records, the same ``refs/pull/{n}/head``),
the commits and the diff are those between the merge base and the head that the pull
request's tabs show (``views/pulls.py``'s anchors, the same cached walks and diffs), and
merging is ``forge.merger``'s, by compare-and-swap. Refusals are Forgejo's: 409 for a second
pull request of the same head and base and for a head that moved since the caller looked,
422 for branches that cannot make one, 405 for a pull request that cannot be merged (closed,
merged, in conflict, a way of merging the repository does not allow).

Every read is in-process: no process is started to answer one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Required, TypedDict

import falcon
import pygit2

from floorless.accounts.accounts import Account
from floorless.collab.filters import IssueFilter
from floorless.collab.issues import clean_body, clean_title
from floorless.collab.merging import NAMES
from floorless.collab.protections import DisallowedToMerge
from floorless.collab.pulls import Pull
from floorless.collab.triage import Label, Milestone
from floorless.core.errors import BadRequest, Conflict, FloorlessError, Forbidden, NotFound
from floorless.forgejo import pulls as shapes
from floorless.forgejo import urls
from floorless.forgejo.git import Commit, Links
from floorless.forgejo.git import commit as commit_json
from floorless.forgejo.pulls import ChangedFile, PullRequest
from floorless.forgejo.schema import Doc
from floorless.git import merge as engine
from floorless.git.compare import COMMITS_LIMIT
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.gitbase import GitApi
from floorless.web.api.issues import IssueResource
from floorless.web.api.repository import Target
from floorless.web.comparing import (
    STATE_WORDS,
    Spec,
    branch_name,
    cached_commits,
    cached_range,
    open_pull,
    refusal,
    resolve_sides,
    send_diff,
)
from floorless.web.context import RepoView
from floorless.web.public import public_url


class PullListQuery(Paged, total=False):
    """What ``GET`` of ``PullList`` reads from its query."""

    state: Annotated[str, Doc("open, closed or all (open when not given)")]
    sort: Annotated[str, Doc("oldest, recentupdate, leastupdate, mostcomment or leastcomment")]
    milestone: Annotated[int, Doc("a milestone's id")]
    labels: Annotated[int, Doc("a label's id (repeat for all of several)")]
    poster: Annotated[str, Doc("the author's name")]


class CreatePullRequestOption(TypedDict, total=False):
    """What ``POST`` of ``PullList`` takes (Forgejo's ``CreatePullRequestOption``)."""

    head: Required[Annotated[str, Doc("the head: a branch, or owner:branch for a fork's")]]
    base: Required[Annotated[str, Doc("the branch to merge into")]]
    title: Required[Annotated[str, Doc("the pull request's title")]]
    body: Annotated[str, Doc("its description")]
    labels: Annotated[list[int], Doc("label ids (on an edit: all the labels it keeps)")]
    milestone: Annotated[int, Doc("a milestone's id (0: none)")]
    assignees: Annotated[list[str], Doc("the names of those it is assigned to")]
    assignee: Annotated[str, Doc("one more of them (Forgejo's older field)")]


class EditPullRequestOption(TypedDict, total=False):
    """What ``PATCH`` of ``OnePull`` takes (Forgejo's ``EditPullRequestOption``)."""

    base: Annotated[str, Doc("another branch to merge into")]
    title: Annotated[str, Doc("a new title")]
    body: Annotated[str, Doc("a new description")]
    state: Annotated[str, Doc("open or closed")]
    labels: Annotated[list[int], Doc("label ids (on an edit: all the labels it keeps)")]
    milestone: Annotated[int, Doc("a milestone's id (0: none)")]
    assignees: Annotated[list[str], Doc("the names of those it is assigned to")]
    assignee: Annotated[str, Doc("one more of them (Forgejo's older field)")]


class PullCommitsQuery(TypedDict, total=False):
    """What ``GET`` of ``PullCommits`` reads from its query."""

    page: Annotated[int, Doc("page number of results to return (1-based)")]
    limit: Annotated[int, Doc("page size of results (at most 50)")]
    verification: Annotated[bool, Doc("include verification")]
    files: Annotated[bool, Doc("include the files each changes")]


class MergePullRequestOption(TypedDict, total=False):
    """What ``POST`` of ``PullMerge`` takes (Forgejo's ``MergePullRequestOption``)."""

    Do: Required[Annotated[str, Doc("merge, rebase, squash or fast-forward-only")]]
    MergeTitleField: Annotated[str, Doc("the merge or squash commit's first line")]
    MergeMessageField: Annotated[str, Doc("the rest of its message")]
    head_commit_id: Annotated[str, Doc("the head the caller saw: 409 if it moved since")]
    delete_branch_after_merge: Annotated[bool, Doc("delete the head branch once merged")]
    force_merge: Annotated[
        bool, Doc("an administrator merges past the base's required status checks")
    ]
    merge_when_checks_succeed: Annotated[
        bool, Doc("schedule the merge for when the required checks pass (201) if they do not yet")
    ]


_NUMBER = re.compile(r"[0-9]{1,9}")
_OWNER_BRANCH = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,99}):(.+)")
# Forgejo's ``Do`` of a merge, as floorless names the way (rebase-merge it has not)
STYLES = {
    "merge": "merge",
    "rebase": "rebase",
    "squash": "squash",
    "fast-forward-only": "fast-forward-only",
}
FORGEJO_STYLES = (
    "merge",
    "rebase",
    "rebase-merge",
    "squash",
    "fast-forward-only",
    "manually-merged",
)
# Set by those who may label and assign (ignored from others, as Forgejo ignores them)


@dataclass(frozen=True)
class Triage:
    """What a body asks of a pull request's labels, milestone and assignees (None: leave
    them as they are)."""

    labels: list[Label] | None = None
    milestone: Milestone | None = None
    set_milestone: bool = False
    assignees: list[Account] | None = None


def pull_number(text: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise NotFound(f"no pull request {text[:20]!r}")
    return int(text)


class PullApi(GitApi, IssueResource):
    """What every pull request resource shares: the repository (404 for whoever may not
    read it, and where pull requests are turned off), its pull requests, their JSON; and the
    issues' ways of reading labels, a milestone and assignees from a body (``IssueResource``:
    a pull request's are its issue's)."""

    def pulls_view(self, target: Target) -> tuple[RepoView, Links]:
        """The repository's refs and links, where pull requests are on."""
        if not target.repo.has_pulls:
            raise NotFound("pull requests are turned off here")
        return target.view, target.links

    def pull(self, view: RepoView, number: str) -> Pull:
        return self.forge.pulls.get(view.repo.owner, view.repo.name, pull_number(number))

    def pull_facts(
        self, req: falcon.Request, view: RepoView, pulls: list[Pull], names: Sequence[str] = ()
    ) -> shapes.PullFacts:
        """What the JSON of ``pulls`` needs, and of the people ``names`` (their reviewers)."""
        return shapes.PullFacts(
            self.forge,
            self.viewer(req),
            view.repo,
            view.snapshot,
            view.handle,
            pulls,
            public_url(self.forge.settings, req),
            names,
        )

    def shown(self, req: falcon.Request, view: RepoView, pulls: list[Pull]) -> list[Any]:
        facts = self.pull_facts(req, view, pulls)
        return [shapes.pull_json(facts, pull) for pull in pulls]

    def triage_of(self, req: falcon.Request, view: RepoView, body: dict[str, Any]) -> Triage:
        """The labels, milestone and assignees ``body`` names, all checked (422 for one the
        repository has not, before anything is written); nothing from one who may not set
        them."""
        if not self.may_sort(req, view.level):
            return Triage()
        repo = view.repo
        return Triage(
            self.labels_named(repo, body["labels"]) if "labels" in body else None,
            self.milestone_of(repo, body["milestone"]) if "milestone" in body else None,
            "milestone" in body,
            self.assignees(repo, body),
        )

    def sort(self, pull: Pull, actor: Account, triage: Triage) -> None:
        """Set what ``triage_of`` read: the labels (all of them: others come off), the
        milestone, the assignees; an event for each change."""
        issue, sorting = pull.issue, self.forge.triage
        if triage.labels is not None:
            current = {label.id for label in sorting.labels_of([issue.id]).get(issue.id, [])}
            wanted = {label.id for label in triage.labels}
            with self.forge.db.transaction():
                for label_id in sorted(current - wanted):
                    sorting.set_label(issue, actor, label_id, False)
                for label_id in sorted(wanted - current):
                    sorting.set_label(issue, actor, label_id, True)
        if triage.set_milestone:
            sorting.set_milestone(issue, actor, triage.milestone.id if triage.milestone else None)
        if triage.assignees is not None:
            self.assign(issue, actor, triage.assignees)

    def anchors(self, view: RepoView, pull: Pull) -> tuple[str, str]:
        """The merge base and head the pull request's commits and diff are between (as its
        pages show them)."""
        tip = view.snapshot.branches.get(pull.base_branch.encode())
        try:
            found = self.forge.reviews.anchors(
                view.handle, pull, None if tip is None else tip.hex()
            )
        except BadRequest as exc:
            raise NotFound(str(exc)) from exc
        return found.merge_base, found.head


class PullList(PullApi):
    """``GET/POST repos/{owner}/{repo}/pulls``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list pull requests",
            list[PullRequest],
            query=PullListQuery,
            paged=True,
            operation_id="repoListPullRequests",
            tag="repository",
        ),
        "post": Operation(
            "open a pull request",
            PullRequest,
            201,
            body=CreatePullRequestOption,
            operation_id="repoCreatePullRequest",
            tag="repository",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view = self.pulls_view(target)[0]
        paging = self.paging(req)
        state = req.get_param("state") or "open"
        if state not in ("open", "closed", "all"):
            raise Unprocessable("state is open, closed or all")
        milestone = req.get_param("milestone")
        if milestone is not None and not _NUMBER.fullmatch(milestone):
            raise Unprocessable("milestone is a milestone's id")
        labels = req.get_param_as_list("labels") or []
        if not all(_NUMBER.fullmatch(label) for label in labels) or len(labels) > 20:
            raise Unprocessable("labels are label ids")
        search = IssueFilter(
            state=state,
            pull=True,
            author=(req.get_param("poster") or "")[:100],
            label_ids=tuple(int(label) for label in labels),
            milestone_ids=(int(milestone),) if milestone else (),
            sort=req.get_param("sort") or "",
        )
        pulls, total = self.forge.pulls.listing(
            view.repo.owner, view.repo.name, search, paging.offset, paging.limit
        )
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, self.shown(req, view, pulls))

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view = self.pulls_view(target)[0]
        account = self.writer(req)
        if not self.forge.policy.may_take_part(self.viewer(req), view.level):
            raise Forbidden("you may not open pull requests here")
        body = self.body(req)
        head, base = str(body["head"]), str(body["base"])
        try:
            title = clean_title(str(body["title"]))
            text = clean_body(str(body.get("body", "")), "a description")
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        triage = self.triage_of(req, view, body)
        head_owner = ""
        found = _OWNER_BRANCH.fullmatch(head)
        if found is not None and not _branch_ok(head):
            head_owner, head = found.group(1), found.group(2)
        try:
            spec = Spec(branch_name(base), branch_name(head), head_owner)
            sides = resolve_sides(self.forge, req, view, spec)
        except (BadRequest, NotFound) as exc:
            raise Unprocessable(str(exc)) from exc
        compared = cached_range(
            self.forge.shapes, sides.head_view.handle, sides.base_oid, sides.head_oid
        )
        refused = refusal(self.forge, sides, compared)
        if refused is not None:
            message, existing = refused
            if existing is not None:
                raise Conflict(message)
            raise Unprocessable(message)
        pull = open_pull(self.forge, account, title, text, sides, compared)
        self.sort(pull, account, triage)
        pull = self.forge.pulls.get(pull.owner, pull.name, pull.number)
        self.send(resp, self.shown(req, view, [pull])[0], 201)


def _branch_ok(name: str) -> bool:
    """Whether ``name`` is a branch name as it stands (``owner:branch`` is not one: git
    allows no ``:`` in a ref)."""
    return pygit2.reference_is_valid_name(f"refs/heads/{name}")


class OnePull(PullApi):
    """``GET/PATCH repos/{owner}/{repo}/pulls/{index}``."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a pull request", PullRequest, operation_id="repoGetPullRequest", tag="repository"
        ),
        "patch": Operation(
            "edit a pull request",
            PullRequest,
            201,
            body=EditPullRequestOption,
            operation_id="repoEditPullRequest",
            tag="repository",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        self.send(resp, self.shown(req, view, [self.pull(view, index)])[0])

    def on_patch(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.writer(req)
        pull = self.pull(view, index)
        body = self.body(req)
        issues, issue = self.forge.issues, pull.issue
        if not self.forge.policy.may_change_issue(self.viewer(req), view.level, issue.author_id):
            raise Forbidden("only its author and those who may push may edit a pull request")
        state = body.get("state")
        if state is not None and state not in ("open", "closed"):
            raise Unprocessable("state is open or closed")
        if state == "open" and pull.merged:
            raise Conflict("a merged pull request cannot be reopened")
        triage = self.triage_of(req, view, body)
        try:  # checked before anything is written
            clean_title(body.get("title", issue.title))
            clean_body(body.get("body", issue.body), "a description")
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        base = body.get("base") or pull.base_branch
        if base != pull.base_branch:
            self.retarget(view, pull, account, base)
        if "title" in body or "body" in body:
            try:
                issues.edit(
                    issue, account, body.get("title", issue.title), body.get("body", issue.body)
                )
            except BadRequest as exc:
                raise Unprocessable(str(exc)) from exc
        self.sort(pull, account, triage)
        if state == "closed" and issue.state == "open":
            issues.close(issue, account, "completed")
        elif state == "open" and issue.state == "closed":
            issues.reopen(issue, account)
        self.send(resp, self.shown(req, view, [self.pull(view, index)])[0], 201)

    def retarget(self, view: RepoView, pull: Pull, actor: Account, base: str) -> None:
        """Forgejo's change of the base branch: 404 for a branch the repository has not, 409
        for a merged pull request or one of the same head into that base, 422 for a closed
        one or the head's own branch; then checked again in the background."""
        if pull.merged:
            raise Conflict("the pull request is merged")
        if pull.issue.state != "open":
            raise Unprocessable("the pull request is closed")
        try:
            branch_name(base)
        except BadRequest as exc:
            raise Unprocessable(str(exc)) from exc
        if base.encode() not in view.snapshot.branches:
            raise NotFound(f"no branch {base[:80]!r}")
        if pull.same_repo and base == pull.head_branch:
            raise Unprocessable("the base and the head are the same branch")
        self.forge.pulls.retarget(pull, actor, base)
        self.forge.merger.queue(view.repo)
        self.forge.reviews.follow_soon(view.repo.owner, view.repo.name)


class PullDiff(PullApi):
    """``GET repos/{owner}/{repo}/pulls/{index}.{diff_type}``: the bytes the web's
    ``.diff`` and ``.patch`` of the pull request are."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "a pull request's diff or patch",
            None,
            operation_id="repoDownloadPullDiffOrPatch",
            tag="repository",
        ),
    }

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        diff_type: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        if diff_type not in ("diff", "patch"):
            raise NotFound("a pull request is read as .diff or .patch")
        pull = self.pull(view, index)
        merge_base, head = self.anchors(view, pull)
        send_diff(
            self.forge,
            req,
            resp,
            view.repo,
            view.handle,
            merge_base,
            head,
            diff_type,
            self.forge.shapes,
        )


class PullCommits(PullApi):
    """``GET repos/{owner}/{repo}/pulls/{index}/commits``: its commits, oldest first (as
    Forgejo lists them), as many as its commits tab counts."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "a pull request's commits",
            list[Commit],
            query=PullCommitsQuery,
            paged=True,
            operation_id="repoGetPullRequestCommits",
            tag="repository",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view, links = self.pulls_view(target)
        pull = self.pull(view, index)
        merge_base, head = self.anchors(view, pull)
        listed, _ = cached_commits(self.forge.shapes, view.handle, merge_base, head, COMMITS_LIMIT)
        oldest_first = list(reversed(listed))
        paging = self.paging(req)
        asked = self.query(req)
        files = asked.get("files", True)
        verification = asked.get("verification", True)
        shown: list[Any] = []
        for info in oldest_first[paging.offset : paging.offset + paging.limit]:
            found = view.handle.get(pygit2.Oid(hex=info.id))
            assert isinstance(found, pygit2.Commit)
            shown.append(
                commit_json(
                    self.forge.shapes,
                    links,
                    view.handle,
                    found,
                    files=files,
                    verification=verification,
                )
            )
        self.paged(req, resp, self.forge, paging, len(oldest_first))
        self.send(resp, shown)


class PullFiles(PullApi):
    """``GET repos/{owner}/{repo}/pulls/{index}/files``: what it changes, from the merge base
    to the head (Forgejo's ``ChangedFile``s)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "a pull request's changed files",
            list[ChangedFile],
            query=Paged,
            paged=True,
            operation_id="repoGetPullRequestFiles",
            tag="repository",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        pull = self.pull(view, index)
        merge_base, head = self.anchors(view, pull)
        changes = shapes.range_changes(self.forge.shapes, view.handle, merge_base, head)
        paging = self.paging(req)
        public = public_url(self.forge.settings, req)
        page = changes.files[paging.offset : paging.offset + paging.limit]
        self.paged(req, resp, self.forge, paging, len(changes.files))
        self.send(resp, [shapes.changed_file(public, view.repo, head, f) for f in page])


class PullByBranches(PullApi):
    """``GET repos/{owner}/{repo}/pulls/{base}/{head}``: the newest pull request of the
    branch ``head`` of this repository into ``base`` (Forgejo's route names its first
    part ``index``, as the router wants it named alike)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "the pull request of a head into a base",
            PullRequest,
            operation_id="repoGetPullRequestByBaseHead",
            tag="repository",
        ),
    }

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        index: str,
        head: str,
    ) -> None:
        view = self.pulls_view(target)[0]
        found = self.forge.pulls.open_between(
            (view.repo.owner, view.repo.name, index), (view.repo.owner, view.repo.name, head)
        )
        if found is None:
            raise NotFound(f"no open pull request of {head[:80]!r} into {index[:80]!r}")
        self.send(resp, self.shown(req, view, [found])[0])


class PullMerge(PullApi):
    """``GET repos/{owner}/{repo}/pulls/{index}/merge`` (204 merged, 404 not), ``POST``:
    merge it (Forgejo's ``MergePullRequestOption``), or with ``merge_when_checks_succeed``
    schedule the merge when the base's protection still waits for something (201, as
    Forgejo; a second schedule is 409), and ``DELETE``: cancel the scheduled merge (204; 404
    when there is none; 403 to anyone but the one who scheduled it and those who may
    merge), all as ``automerge.py`` keeps them."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "whether a pull request is merged",
            None,
            204,
            operation_id="repoPullRequestIsMerged",
            tag="repository",
        ),
        "post": Operation(
            "merge a pull request, or schedule its merge",
            None,
            body=MergePullRequestOption,
            operation_id="repoMergePullRequest",
            tag="repository",
        ),
        "delete": Operation(
            "cancel a pull request's scheduled merge",
            None,
            204,
            signed_in=True,
            operation_id="repoCancelScheduledAutoMerge",
            tag="repository",
        ),
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        if not self.pull(view, index).merged:
            raise NotFound("the pull request is not merged")
        self.nothing(resp)

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.writer(req)
        pull = self.pull(view, index)
        body = self.body(req)
        if not self.forge.policy.may_merge(self.viewer(req), view.level):
            raise Forbidden(f"only those who may push to {view.repo.full_name} may merge")
        if body["Do"] not in FORGEJO_STYLES:
            raise Unprocessable(f"Do is one of {', '.join(FORGEJO_STYLES)}")
        style = STYLES.get(str(body["Do"]))
        features = self.forge.pulls.features(view.repo.owner, view.repo.name)
        if style is None or style not in features.merge_styles:
            raise NotAllowed(f"this repository does not allow merging by {body['Do']!r}"[:200])
        if pull.merged:
            raise NotAllowed("the pull request is merged already")
        if pull.issue.state != "open":
            raise NotAllowed("the pull request is closed")
        expected = str(body.get("head_commit_id") or "").lower()
        if expected and expected != pull.head_oid:
            raise Conflict("the head has moved since: look again, then merge")
        snapshot = self.forge.live.snapshot(view.repo)
        state = self.forge.merger.check(view.repo, pull, snapshot)
        pull = self.pull(view, index)
        if pull.merged or state == "merged":
            raise NotAllowed("the pull request is merged already")
        if state != "mergeable":
            words = STATE_WORDS.get(state or "base_gone", "")
            if pull.conflicts and state == "conflict":
                words += " Conflicting files: " + ", ".join(pull.conflicts[:20])
            raise NotAllowed(words or "the pull request cannot be merged now")
        tip = snapshot.branches.get(pull.base_branch.encode())
        if style == "fast-forward-only" and (tip is None or pull.merge_base != tip.hex()):
            raise NotAllowed(f"{NAMES[style]}: the base has commits the head lacks")
        message = _message(body)
        url = public_url(self.forge.settings, req) + urls.pull(view.repo, pull.number)
        delete_branch = bool(body.get("delete_branch_after_merge"))
        scheduling = bool(body.get("merge_when_checks_succeed"))
        automerge = self.forge.automerge
        if scheduling and automerge.of(pull) is not None:
            raise Conflict(f"pull request #{pull.number} is scheduled to merge already")
        try:
            self.forge.merger.merge(
                view.repo,
                pull,
                account,
                style,
                expected_head=expected,
                delete_branch=delete_branch,
                url=url,
                message=message,
                force=bool(body.get("force_merge")) and not scheduling,
            )
        except DisallowedToMerge:
            if not scheduling or not self._may_ever_merge(view, pull, account):
                raise
            automerge.schedule(pull, account, style, message, delete_branch, url)
            resp.status = falcon.HTTP_201
            resp.text = None
            return
        except BadRequest as exc:
            raise NotAllowed(str(exc)) from exc
        except engine.MergeRefused as exc:
            raise NotAllowed(str(exc)) from exc
        resp.status = falcon.HTTP_200
        resp.text = None

    def _may_ever_merge(self, view: RepoView, pull: Pull, account: Account) -> bool:
        """Whether the base's rule lets ``account`` merge at all, whatever its checks say: a
        rule listing who may merge refuses the others (Forgejo's 405) rather than schedule
        a merge that could never be done."""
        rule = self.forge.protections.for_branch(view.repo, pull.base_branch)
        if rule is None or not rule.enable_merge_whitelist:
            return True
        return account.name.lower() in (n.lower() for n in rule.merge_whitelist_usernames)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, index: str
    ) -> None:
        view = self.pulls_view(target)[0]
        account = self.writer(req)
        pull = self.pull(view, index)
        schedule = self.forge.automerge.of(pull)
        if schedule is None:
            raise NotFound(f"pull request #{pull.number} has no scheduled merge")
        viewer = self.viewer(req)
        if schedule.doer_id != account.id and not self.forge.policy.may_merge(viewer, view.level):
            raise Forbidden("only who scheduled the merge and those who may merge may cancel it")
        self.forge.automerge.cancel(pull, account)
        self.nothing(resp)


def _message(body: dict[str, Any]) -> str:
    """The commit message the caller gave (title, then the rest), or "" for Forgejo's."""
    title = str(body.get("MergeTitleField") or "").strip()
    rest = str(body.get("MergeMessageField") or "").strip()
    if not title and not rest:
        return ""
    return f"{title}\n\n{rest}\n" if rest else f"{title}\n"


class NotAllowed(FloorlessError):
    """Forgejo's 405 for a merge it refuses: closed, merged, in conflict, a style the
    repository does not allow."""

    status = 405
