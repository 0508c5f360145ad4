"""``/compare/{base}...{head}``: what a branch has that another has not, and the form that
opens a pull request of it; ``/compare`` alone: a form to choose the two branches.

``head`` may name a branch of this repository (``branch``), or of a fork of it
(``user:branch``, ``user/repo:branch``). A fork's objects include its parent's (alternates),
so a compare across forks is computed in the fork's handle; a pull request from a fork has
its head's objects copied into this repository (``copy_objects``), so that
``refs/pull/{n}/head`` holds it whatever happens to the fork.

The commits and the diff are kept by the pair of commit ids (the merge base and the head), as
the commit page keeps its diff by the commit's: a page shown again walks nothing and diffs
nothing, and nothing here starts a process (a ``.diff`` or ``.patch`` past the in-process
budget is git's, as the commit page's is).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol, cast

import falcon
import pygit2
from pygit2.enums import ObjectType, SortMode

from floorless.accounts.accounts import Account
from floorless.collab.pulls import BRANCH_MAX, Pull
from floorless.core import timing
from floorless.core.caches import Cache
from floorless.core.config import Settings
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.git import compare as gitcompare
from floorless.git import diff as gitdiff
from floorless.git import objects, transport
from floorless.git.lenient import AnyCommit
from floorless.repos.registry import Repo
from floorless.web import auth, diffrows
from floorless.web.context import RepoView, repo_view
from floorless.web.diffrows import Options
from floorless.web.render import text
from floorless.web.views.commit import (
    Shown,
    diff_budget,
    diff_limits,
    diff_options,
    shown_diff,
)
from floorless.web.views.issues import IssueView

VARIANTS = (".diff", ".patch")
PATCH_COMMITS = 100  # commits a .patch mails in-process; more, and git mails them
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")


class Caching(Protocol):
    """What keeps a compare's commits and diffs: a page's ``Renderer``, or the API's own
    caches (it renders no page); only ``caches["diff"]`` is used."""

    @property
    def caches(self) -> dict[str, Cache[Hashable, object]]: ...


@dataclass(frozen=True)
class Spec:
    """A compare as its URL names it: the base branch of this repository, and the head
    branch, in this repository (``head_owner`` "") or in a fork of it."""

    base_branch: str
    head: str
    head_owner: str = ""
    head_name: str = ""  # "" with an owner: that owner's fork of this repository


def branch_name(name: str) -> str:
    """A branch name as git allows it, or a clear refusal (``..``, a space, a control
    character, ``:`` and the like name no branch)."""
    if (
        not name
        or len(name.encode()) > BRANCH_MAX
        or not pygit2.reference_is_valid_name(f"refs/heads/{name}")
    ):
        raise BadRequest(f"not a branch name: {name[:80]!r}")
    return name


def parse_spec(raw: bytes, default_branch: str) -> Spec:
    """``base...head`` (or ``head`` alone, against the default branch), each side checked."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("a branch name in a compare is UTF-8") from None
    if "..." in text:
        base, head = text.split("...", 1)
    else:
        base, head = default_branch, text
    owner = name = ""
    if ":" in head:
        who, head = head.split(":", 1)
        owner, _, name = who.partition("/")
        if not _OWNER.fullmatch(owner) or (name and not _OWNER.fullmatch(name)):
            raise BadRequest(f"not a user or repository: {who[:80]!r}")
    return Spec(branch_name(base), branch_name(head), owner, name)


def cached_range(
    renderer: Caching, handle: pygit2.Repository, base: str, head: str
) -> gitcompare.Range:
    """The merge base and the commits between, kept by the pair of commit ids."""
    return cast(
        gitcompare.Range,
        renderer.caches["diff"].get_or_make(
            ("range", base, head), lambda: gitcompare.commit_range(handle, base, head)
        ),
    )


def cached_commits(
    renderer: Caching, handle: pygit2.Repository, hide: str, head: str, limit: int
) -> tuple[list[objects.CommitInfo], bool]:
    """The commits of ``head`` not in ``hide``, newest first, at most ``limit``, and whether
    there are more (kept by the pair of commit ids)."""
    return cast(
        tuple[list[objects.CommitInfo], bool],
        renderer.caches["diff"].get_or_make(
            ("commits", hide, head, limit),
            lambda: gitcompare.commits_between(handle, hide, head, limit),
        ),
    )


def cached_diff(
    renderer: Caching,
    handle: pygit2.Repository,
    settings: Settings,
    old: str,
    new: str,
    options: Options | None = None,
) -> Shown:
    """The diff of ``old`` to ``new`` (a merge base and a head) as a page shows it, kept by
    the pair of commit ids, the budgets and how it is shown."""
    options = options or Options()
    limits, budget = diff_limits(settings, options), diff_budget(settings)

    def make() -> Shown:
        changes = gitdiff.range_diff(handle, commit_of(handle, old), commit_of(handle, new), limits)
        return shown_diff(changes, budget, split=options.split)

    key = ("range-diff", old, new, limits, budget, options.style)
    return cast(Shown, renderer.caches["diff"].get_or_make(key, make))


def commit_of(handle: pygit2.Repository, hex_id: str) -> AnyCommit:
    return objects.get_commit(handle, bytes.fromhex(hex_id))


def send_diff(
    forge: Forge,
    req: falcon.Request,
    resp: falcon.Response,
    repo: Repo,
    handle: pygit2.Repository,
    merge_base: str,
    head: str,
    variant: str,
    renderer: Caching,
) -> None:
    """The ``.diff`` (merge base to head) or ``.patch`` (each commit mailed, oldest first) of
    a compare or a pull request: made in-process within the commit page's budget, by git
    past it (as the commit page's are). Keyed by commit ids, so cached for good."""
    req.context.plain = True
    resp.content_type = "text/plain; charset=utf-8"
    resp.set_header("X-Content-Type-Options", "nosniff")
    limits = diff_limits(forge.settings)
    args: list[str]
    if variant == "diff":
        old, new = commit_of(handle, merge_base), commit_of(handle, head)
        diff = gitdiff.range_fits_in_process(handle, old, new, limits)
        if diff is not None:
            resp.data = gitdiff.range_patch_text(handle, old, new, limits, diff)
            return
        args = gitdiff.git_range_args(merge_base, head)
    else:
        commits, more = cached_commits(renderer, handle, merge_base, head, PATCH_COMMITS)
        mails = None if more else _mails(handle, list(reversed(commits)), limits)
        if mails is not None:
            resp.data = b"".join(mails)
            return
        args = ["format-patch", "--stdout", "--no-color", f"{merge_base}..{head}"]
    if req.method == "HEAD":
        return
    resp.stream = transport.start(forge.git, repo.path, args, forge.git_slots, "large diffs")


def _mails(
    handle: pygit2.Repository, commits: list[objects.CommitInfo], limits: gitdiff.Limits
) -> list[bytes] | None:
    """Each commit (oldest first) as ``git format-patch`` mails it, or None when one of them
    is past the in-process budget. Merges are left out, as git leaves them out."""
    mails = []
    for info in commits:
        if len(info.parents) > 1:
            continue
        commit = commit_of(handle, info.id)
        diff = gitdiff.fits_in_process(handle, commit, limits)
        if diff is None:
            return None
        mails.append(gitdiff.format_patch(handle, commit, limits, diff))
    return mails


def copy_objects(source: pygit2.Repository, target: pygit2.Repository, head: str, stop: str) -> int:
    """Write into ``target`` the objects of the commits from ``head`` down to ``stop`` (a
    merge base both have) that it lacks: a pull request's head from a fork, so that the base
    repository holds it. A tree ``target`` has is not entered (its objects are all there), so
    the work is the new objects, not the history. How many objects were written."""
    written = 0
    source_odb, target_odb = source.odb, target.odb

    def copy(oid: pygit2.Oid) -> bool:
        nonlocal written
        if oid in target_odb:
            return False
        kind, data = source_odb.read(oid)
        target_odb.write(kind, data)
        written += 1
        return True

    def tree(oid: pygit2.Oid) -> None:
        stack = [oid]
        while stack:
            current = stack.pop()
            if not copy(current):
                continue
            found = source.get(current)
            if not isinstance(found, pygit2.Tree):
                continue
            for entry in found:
                if entry.filemode == objects.MODE_SUBMODULE:
                    continue
                if entry.type == ObjectType.TREE:
                    stack.append(entry.id)
                else:
                    copy(entry.id)

    with timing.phase("git"):
        walker = source.walk(pygit2.Oid(hex=head), SortMode.TOPOLOGICAL | SortMode.REVERSE)
        if stop:
            walker.hide(pygit2.Oid(hex=stop))
        for commit in walker:
            if commit.id in target_odb:
                continue
            tree(commit.tree_id)
            copy(commit.id)
    return written


# ------------------------------------------------------------------------------- views

_FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def tip(view: RepoView, name: str) -> str:
    """The commit (hex) branch ``name`` of the view's repository points at; or, for a full
    commit id no branch is named after (a timeline's ``old..new`` of a push), that commit,
    if a branch or tag reaches it."""
    found = view.snapshot.branches.get(name.encode())
    if found is not None:
        return found.hex()
    if _FULL_ID.fullmatch(name):
        try:
            view.resolve("commit", name.encode())
        except NotFound:
            pass
        else:
            return name
    raise NotFound(f"no branch {name!r} in {view.repo.full_name}")


@dataclass
class Sides:
    """A compare resolved: the head's repository (its view; the base's own view when the head
    is in it) and the two branches' tips."""

    spec: Spec
    base_view: RepoView
    head_view: RepoView
    base_oid: str
    head_oid: str

    @property
    def same_repo(self) -> bool:
        return self.head_view.repo.id == self.base_view.repo.id

    @property
    def head_label(self) -> str:
        """As a pull request's ``head_label``: ``branch``, or ``user:branch`` in a fork."""
        if self.same_repo:
            return self.spec.head
        return f"{self.head_view.repo.owner}:{self.spec.head}"

    @property
    def head_spec(self) -> str:
        """The head as a compare URL names it."""
        if self.same_repo:
            return self.spec.head
        repo = self.head_view.repo
        return f"{repo.owner}/{repo.name}:{self.spec.head}"


def resolve_sides(forge: Forge, req: falcon.Request, view: RepoView, spec: Spec) -> Sides:
    """The two branches ``spec`` names, the head's in this repository or in a fork of it (a
    fork the requester may not read, or none, is refused as a missing one: 404)."""
    head_view = view
    repo = view.repo
    if spec.head_owner and (spec.head_owner, spec.head_name or repo.name) != (
        repo.owner,
        repo.name,
    ):
        fork = forge.pulls.fork_of(repo.owner, repo.name, spec.head_owner, spec.head_name)
        if fork is None:
            # as for a fork the reader may not see: not a word more
            raise NotFound("repository not found")
        head_view = repo_view(forge, req, *fork)  # 404 for whoever may not read it
    return Sides(spec, view, head_view, tip(view, spec.base_branch), tip(head_view, spec.head))


def refusal(forge: Forge, sides: Sides, found: gitcompare.Range) -> tuple[str, Pull | None] | None:
    """Why no pull request can be opened of this compare (and the one already open of it, if
    that is why); None when one can."""
    if sides.same_repo and sides.spec.base_branch == sides.spec.head:
        return "choose two different branches to compare", None
    if found.unrelated:
        return "these branches have no history in common: there is nothing to merge", None
    if not found.commits:
        return f"{sides.spec.base_branch} already has every commit of {sides.head_label}", None
    head_repo, base_repo = sides.head_view.repo, sides.base_view.repo
    pull = forge.pulls.open_between(
        (base_repo.owner, base_repo.name, sides.spec.base_branch),
        (head_repo.owner, head_repo.name, sides.spec.head),
    )
    if pull is not None:
        return f"pull request #{pull.number} already asks for this", pull
    return None


def open_pull(
    forge: Forge, author: Account, title: str, body: str, sides: Sides, found: gitcompare.Range
) -> Pull:
    """Open a pull request of ``sides`` (which ``refusal`` let through): its records, a
    fork's head objects copied into the base repository, and ``refs/pull/{n}/head``."""
    base = sides.base_view
    pull = forge.pulls.create(
        base.repo.owner,
        base.repo.name,
        author,
        title,
        body,
        sides.spec.base_branch,
        (sides.head_view.repo.owner, sides.head_view.repo.name, sides.spec.head),
        sides.head_oid,
    )
    if not sides.same_repo:
        copy_objects(sides.head_view.handle, base.handle, sides.head_oid, found.merge_base)
    forge.moves.set_pull_ref(base.repo, pull.number, sides.head_oid)
    return pull


class CompareChoose(IssueView):
    """``/compare``: two branches to choose (``?base=&head=`` goes to their compare)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        base = req.get_param("base") or ""
        head = req.get_param("head") or ""
        if base and head:
            branch_name(base)
            if ":" not in head:
                branch_name(head)
            raise falcon.HTTPSeeOther(urls.compare(view.repo, base, head))
        default = view.snapshot.default_branch
        self.page(
            resp,
            view,
            "compare_choose.html",
            default=text(default) if default else "",
            names=[text(name) for name in view.snapshot.sorted_branches],
        )


class Compare(IssueView):
    """``/compare/{base}...{head}`` (and its ``.diff`` and ``.patch``): the commits and the
    diff, and for whoever may, the form that opens a pull request of them."""

    query = ("style", "w")

    def variant(self, req: falcon.Request) -> object:
        return diff_options(req)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, spec: str) -> None:
        sides, variant = self.sides(req, view)
        if variant:
            found = cached_range(
                self.renderer, sides.head_view.handle, sides.base_oid, sides.head_oid
            )
            if found.unrelated:
                raise BadRequest("these branches have no history in common")
            send_diff(
                self.forge,
                req,
                resp,
                sides.head_view.repo,
                sides.head_view.handle,
                found.merge_base,
                sides.head_oid,
                variant,
                self.renderer,
            )
            return
        diff_options(req, resp)  # remembers a style chosen
        if sides.same_repo:  # what it shows is the repository's refs and pull requests
            self.kept_page(req, resp, view, lambda: self.show(req, resp, sides, {}, ""))
        else:  # and the fork's refs too, which the page cache does not watch
            self.show(req, resp, sides, {}, "")

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, spec: str
    ) -> None:
        if not view.repo.has_pulls:
            raise NotFound("pull requests are turned off here")
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_take_part(auth.viewer_of(req), view.level):
            raise Forbidden("you may not open pull requests here")
        sides, variant = self.sides(req, view)
        if variant:
            raise NotFound("open a pull request from the compare page")
        found = cached_range(self.renderer, sides.head_view.handle, sides.base_oid, sides.head_oid)
        refused = refusal(self.forge, sides, found)
        if refused is not None:
            raise BadRequest(refused[0])
        try:
            pull = open_pull(
                self.forge, account, form.get("title", ""), form.get("body", ""), sides, found
            )
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, sides, form, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.pull(view.repo, pull.number))

    def sides(self, req: falcon.Request, view: RepoView) -> tuple[Sides, str]:
        """The compare the URL names, and its variant ("", diff, patch); a head branch whose
        own name ends in ``.diff`` is that branch's compare."""
        raw = urls.exact_tail(req, "spec")
        for suffix in VARIANTS:
            if raw.endswith(suffix.encode()):
                try:
                    return self.resolve(req, view, raw), ""
                except (NotFound, BadRequest):
                    return self.resolve(req, view, raw[: -len(suffix)]), suffix[1:]
        return self.resolve(req, view, raw), ""

    def resolve(self, req: falcon.Request, view: RepoView, raw: bytes) -> Sides:
        default = view.snapshot.default_branch
        return resolve_sides(
            self.forge, req, view, parse_spec(raw, text(default) if default else "")
        )

    def show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        sides: Sides,
        form: dict[str, str],
        error: str,
    ) -> bool:
        """Render the compare; whether the page is final (kept, for a compare within the
        repository)."""
        view = sides.base_view
        handle = sides.head_view.handle
        found = cached_range(self.renderer, handle, sides.base_oid, sides.head_oid)
        refused = refusal(self.forge, sides, found)
        shown = None
        options = diff_options(req)
        if not found.unrelated and found.commits:
            shown = cached_diff(
                self.renderer, handle, self.settings, found.merge_base, sides.head_oid, options
            )
        viewer = auth.viewer_of(req)
        title = found.commits[0].summary if len(found.commits) == 1 else sides.spec.head
        compare_url = urls.compare(view.repo, sides.spec.base_branch, sides.head_spec)
        self.page(
            resp,
            view,
            "compare.html",
            sides=sides,
            found=found,
            refusal=refused,
            diff=shown.diff if shown else None,
            rows=shown.rows if shown else {},
            head_repo=sides.head_view.repo,
            head_commit=sides.head_oid,
            merge_base=found.merge_base,
            options=options,
            with_file_url=diffrows.with_file_url,
            full_diff=urls.compare(view.repo, sides.spec.base_branch, sides.head_spec, "diff"),
            full_patch=urls.compare(view.repo, sides.spec.base_branch, sides.head_spec, "patch"),
            compare_url=compare_url,
            may_open=view.repo.has_pulls
            and self.forge.policy.may_take_part(viewer, view.level)
            and viewer.session is not None,
            pulls_on=view.repo.has_pulls,
            form=form,
            title=form.get("title", title),
            error=error,
            here=urls.exact_path(req),
            names=[text(name) for name in view.snapshot.sorted_branches],
        )
        return True
