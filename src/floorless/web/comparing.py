"""What comparing two commits takes, for the compare page (``views/compare.py``), the pull
request pages and the API alike, beside them so that neither imports the other: a compare's
two sides (``Spec``, ``Sides``), its commits and range kept by the pair of commit ids (in
a page's ``Renderer`` or the API's own caches: a ``Caching``), its ``.diff`` and
``.patch``, and the pull request it opens (a fork's head copied in, ``copy_objects``).
``diff_limits`` is what any diff may cost in git work, from the settings.
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
from floorless.core.errors import BadRequest, NotFound
from floorless.forge import Forge
from floorless.git import compare as gitcompare
from floorless.git import diff as gitdiff
from floorless.git import objects, transport
from floorless.git.lenient import AnyCommit
from floorless.repos.registry import Repo
from floorless.web.context import RepoView, repo_view
from floorless.web.diffrows import Options


def diff_limits(settings: Settings, options: Options | None = None) -> gitdiff.Limits:
    return gitdiff.Limits(
        settings.max_diff_files,
        settings.max_diff_lines,
        settings.max_diff_total_lines,
        settings.max_diff_listed,
        settings.max_diff_file_bytes,
        settings.max_diff_bytes,
        ignore_whitespace=options.ignore_whitespace if options else False,
    )


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


# What a pull request's merge check found, in words: the merge box's and the API's refusals
STATE_WORDS = {
    "checking": "Checking whether this can be merged…",
    "mergeable": "This branch has no conflicts with the base branch.",
    "conflict": "This branch has conflicts that must be resolved.",
    "empty": "This branch brings no changes the base branch lacks.",
    "unrelated": "The branches share no history: they cannot be merged.",
    "head_gone": "The head branch is gone: it cannot be merged.",
    "base_gone": "The base branch is gone: it cannot be merged.",
    "closed": "This pull request is closed.",
}
