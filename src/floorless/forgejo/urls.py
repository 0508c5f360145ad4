"""Every URL floorless emits is built here, and every route's path tail is read here.

Building: one function per kind of page. Refs and paths are bytes (a name need not be UTF-8)
and keep every byte, percent-encoded where a URL needs it; a ref's slashes stay slashes (the
router finds the longest ref that prefixes the tail), any other character that would end or
change the path (``%``, ``?``, ``#``, a space, a byte past ASCII) is escaped. Views call these
functions; templates reach them as the ``urls`` global and never join URL pieces themselves.

Parsing: the router matches a route and hands each view its parameters; the one that needs
exact bytes, a ``{tail:path}`` (or ``{kind}`` and what follows it), is read by
``exact_tail`` from the request's ``PATH_INFO``, which holds the percent-decoded path as
latin-1 text, so that every byte comes back as the client sent it. (The router's own ``tail``
has been decoded as UTF-8, with replacement: not byte-exact.) ``exact_tail`` counts segments
from the matched route's own template, so no view counts them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import quote

import falcon

from floorless.collab.filters import IssueFilter
from floorless.core.errors import BadRequest

PAGES = ("src", "raw", "media", "blame", "commits", "find")  # pages of a {kind}/{ref}/{path}
KINDS = ("branch", "tag", "commit")
FEEDS = ("atom", "rss")
ARCHIVES = (".tar.gz", ".tar", ".zip")

Query = Mapping[str, str | bytes | int | None]


class Named(Protocol):
    """A repository as URLs need it (``floorless.repos.registry.Repo`` is one)."""

    @property
    def owner(self) -> str: ...

    @property
    def name(self) -> str: ...


# --------------------------------------------------------------------------------- pieces


# A page writes the same few names (its owner, repository, ref, paths) into dozens of links:
# each is quoted once (``quote`` takes 1-2 µs a call, ~75 calls on a commit page), the last
# 1,024 of each kind kept, each of them at most CACHED_NAME long (so at most a few MB in all);
# a longer name is quoted on each call.
CACHED_NAME = 512


@functools.lru_cache(maxsize=1024)
def _segment(value: str | bytes) -> str:
    return quote(value, safe="")


@functools.lru_cache(maxsize=1024)
def _path(value: str | bytes) -> str:
    return quote(value, safe="/")


def segment(value: str | bytes) -> str:
    """One path segment: every byte kept, ``/`` escaped too."""
    return _segment(value) if len(value) <= CACHED_NAME else quote(value, safe="")


def path(value: str | bytes) -> str:
    """A ref or a path inside a URL: every byte kept, its slashes kept as slashes."""
    return _path(value) if len(value) <= CACHED_NAME else quote(value, safe="/")


def query(params: Query | None) -> str:
    """``?name=value&...`` of the parameters that are not None (values' exact bytes kept),
    or "" when there are none."""
    if not params:
        return ""
    pairs = [
        f"{segment(k)}={segment(str(v) if isinstance(v, int) else v)}"
        for k, v in params.items()
        if v is not None
    ]
    return "?" + "&".join(pairs) if pairs else ""


def _hex(oid: str | bytes) -> str:
    """An object id for a URL: hex text as given, or a binary id in hex."""
    if isinstance(oid, bytes):
        return oid.hex()
    return oid


def _below(url: str, rest: str | bytes) -> str:
    """``url`` followed by ``/rest`` when ``rest`` names something (a ref's or a path's
    leading and trailing slashes are no part of it)."""
    trimmed = rest.strip(b"/") if isinstance(rest, bytes) else rest.strip("/")
    return f"{url}/{path(trimmed)}" if trimmed else url


# ------------------------------------------------------------------------ site-wide pages


def same_page(**params: str | bytes | None) -> str:
    """This very page with other query parameters (``?`` alone: with none), for a pager: the
    page's path stays as the client sent it."""
    return query(params) or "?"


def explore(q: str = "", sort: str = "", page: int = 1) -> str:
    return "/" + query({"q": q or None, "sort": sort or None, "page": page if page > 1 else None})


def owner(name: str, q: str = "", sort: str = "", page: int = 1) -> str:
    return f"/{segment(name)}" + query(
        {"q": q or None, "sort": sort or None, "page": page if page > 1 else None}
    )


def code_search(q: str = "", mode: str = "", page: int = 1) -> str:
    """Code search across every repository its reader may read."""
    return "/-/search" + query(
        {"q": q or None, "mode": mode or None, "page": page if page > 1 else None}
    )


def login(next: str | None = None) -> str:
    return "/-/login" + query({"next": next})


def logout() -> str:
    return "/-/logout"


def tokens() -> str:
    return "/-/tokens"


def ssh_keys() -> str:
    """The signed-in person's SSH keys."""
    return "/-/keys"


def public_keys(name: str) -> str:
    """A person's public SSH keys as plain text, one a line (``/{name}.keys``, as GitHub's)."""
    return f"/{segment(name)}.keys"


def new_repo() -> str:
    return "/-/new"


def static(name: str) -> str:
    return f"/-/static/{segment(name)}"


# -------------------------------------------------------------------------- a repository


def home(repo: Named) -> str:
    """The repository's home page; every other page of it is below this."""
    return f"/{segment(repo.owner)}/{segment(repo.name)}"


def repo_search(
    repo: Named, q: str = "", mode: str = "", page: int = 1, ref: str | bytes = b""
) -> str:
    """Code search in one repository: its default branch, or the branch or tag ``ref``."""
    return f"{home(repo)}/search" + query(
        {
            "ref": ref or None,
            "q": q or None,
            "mode": mode or None,
            "page": page if page > 1 else None,
        }
    )


def line(repo: Named, commit: str | bytes, at: str | bytes, number: int) -> str:
    """Line ``number`` of the file ``at`` of a commit (a permanent link)."""
    return src(repo, "commit", _hex(commit), at) + f"#L{number}"


def clone(repo: Named) -> str:
    """The path git clones from (after the forge's public base URL)."""
    return home(repo) + ".git"


def ref_page(
    page: str,
    repo: Named,
    kind: str,
    ref: str | bytes,
    at: str | bytes = b"",
    **params: str | bytes | None,
) -> str:
    """``/{owner}/{repo}/{page}/{kind}/{ref}[/{path}]`` for ``page`` in src, raw, blame and
    commits; ``ref`` is a branch or tag name, or a commit id in hex."""
    if page not in PAGES:
        raise ValueError(f"no ref page {page!r}")
    if kind not in KINDS:
        raise ValueError(f"no ref kind {kind!r}")
    base = _below(f"{home(repo)}/{page}/{kind}", ref)
    return _below(base, at) + query(params)


def src(
    repo: Named, kind: str, ref: str | bytes, at: str | bytes = b"", **params: str | bytes | None
) -> str:
    return ref_page("src", repo, kind, ref, at, **params)


def raw(repo: Named, kind: str, ref: str | bytes, at: str | bytes = b"") -> str:
    return ref_page("raw", repo, kind, ref, at)


def media(repo: Named, kind: str, ref: str | bytes, at: str | bytes = b"") -> str:
    """A file's bytes as ``raw``, but a Git LFS pointer's object in its place."""
    return ref_page("media", repo, kind, ref, at)


def blame(
    repo: Named, kind: str, ref: str | bytes, at: str | bytes = b"", **params: str | None
) -> str:
    return ref_page("blame", repo, kind, ref, at, **params)


def commits(
    repo: Named, kind: str, ref: str | bytes, at: str | bytes = b"", **params: str | bytes | None
) -> str:
    return ref_page("commits", repo, kind, ref, at, **params)


def find(repo: Named, kind: str, ref: str | bytes, q: str | None = None) -> str:
    """The file finder of a ref as a page (the paths matching ``q``)."""
    return ref_page("find", repo, kind, ref, q=q or None)


def paths(repo: Named, tree: str | bytes) -> str:
    """Every path of tree ``tree`` (in hex, or binary) as JSON, for the file finder."""
    return f"{home(repo)}/-/paths/{_hex(tree)}"


def default_page(repo: Named, page: str) -> str:
    """``/src`` or ``/commits`` without a ref: the default branch's page."""
    if page not in PAGES:
        raise ValueError(f"no ref page {page!r}")
    return f"{home(repo)}/{page}"


def raw_blob(repo: Named, blob: str | bytes) -> str:
    return f"{home(repo)}/raw/blob/{_hex(blob)}"


def commit(repo: Named, oid: str | bytes, variant: str = "") -> str:
    """A commit's page, or its ``diff`` or ``patch`` (``oid`` in hex, or binary)."""
    if variant not in ("", "diff", "patch"):
        raise ValueError(f"no commit variant {variant!r}")
    return f"{home(repo)}/commit/{_hex(oid)}" + (f".{variant}" if variant else "")


def diff_lines(repo: Named, oid: str | bytes, at: str | bytes, **params: str | None) -> str:
    """Lines of file ``at`` as commit ``oid`` has it, as diff rows of context (the lines a
    diff hides between its hunks), with ``?start=&end=&delta=&style=``."""
    return _below(f"{home(repo)}/commit/{_hex(oid)}/-/lines", at) + query(params)


def diff_file(repo: Named, oid: str | bytes, at: str | bytes, **params: str | None) -> str:
    """One changed file's diff in commit ``oid``, loaded on its own (``at``: its path after
    the commit, or before it for a deleted file)."""
    return _below(f"{home(repo)}/commit/{_hex(oid)}/-/diff", at) + query(params)


def branches(repo: Named) -> str:
    return f"{home(repo)}/branches"


def tags(repo: Named) -> str:
    return f"{home(repo)}/tags"


def releases(repo: Named, page: int = 1) -> str:
    return f"{home(repo)}/releases" + query({"page": page if page > 1 else None})


def release(repo: Named, tag: str | bytes) -> str:
    return f"{home(repo)}/releases/tag/{path(tag)}"


def latest_release(repo: Named) -> str:
    """Sends to the newest release that is neither a draft nor a pre-release."""
    return f"{home(repo)}/releases/latest"


def new_release(repo: Named) -> str:
    return f"{home(repo)}/releases/new"


def edit_release(repo: Named, tag: str | bytes) -> str:
    return f"{home(repo)}/releases/edit/{path(tag)}"


def releases_feed(repo: Named, fmt: str = "atom") -> str:
    if fmt not in FEEDS:
        raise ValueError(f"no feed format {fmt!r}")
    return f"{home(repo)}/releases.{fmt}"


def tags_feed(repo: Named, fmt: str = "atom") -> str:
    if fmt not in FEEDS:
        raise ValueError(f"no feed format {fmt!r}")
    return f"{home(repo)}/tags.{fmt}"


def release_download(repo: Named, tag: str | bytes, name: str) -> str:
    """A release's file by its tag and name (``web/views/attachments.py``)."""
    return f"{home(repo)}/releases/download/{path(tag)}/{segment(name)}"


def attachment(uuid: str) -> str:
    """Any attachment by its UUID, as Forgejo's ``/attachments/{uuid}``."""
    return f"/attachments/{segment(uuid)}"


def fork(repo: Named) -> str:
    return f"{home(repo)}/fork"


def settings(repo: Named) -> str:
    return f"{home(repo)}/settings"


def org_hooks(org: str, hook_id: int | None = None) -> str:
    """An organisation's webhooks, or one of them with its deliveries."""
    return f"/-/orgs/{quote(org, safe='')}/hooks" + (f"/{hook_id}" if hook_id is not None else "")


def deploy_keys(repo: Named) -> str:
    """A repository's deploy keys in its settings."""
    return f"{home(repo)}/settings/keys"


def hooks(repo: Named, hook_id: int | None = None) -> str:
    """A repository's webhooks in its settings, or one of them with its deliveries."""
    return f"{home(repo)}/settings/hooks" + (f"/{hook_id}" if hook_id is not None else "")


def issues(
    repo: Named, state: str = "open", label: str = "", milestone: str = "", assignee: str = ""
) -> str:
    """The issue list: ``state`` open, closed or all; narrowed to a label's name, a
    milestone's title and an assignee's name (each "" for any)."""
    return listing(
        repo, IssueFilter(state, False, label=label, milestone=milestone, assignee=assignee)
    )


def listing(
    repo: Named, search: IssueFilter, before: int | None = None, after: int | None = None
) -> str:
    """The issue or pull request list (``search.pull``) as ``search`` narrows it, and a page
    of it after a cursor."""
    kind = "pulls" if search.pull else "issues"
    return f"{home(repo)}/{kind}" + query({**search.params(), "before": before, "after": after})


def triage(repo: Named, number: int) -> str:
    """Where the sidebar of issue or pull request ``number`` posts its changes."""
    return f"{home(repo)}/issues/{number}/triage"


def labels(repo: Named, q: str = "", page: int = 1) -> str:
    """The labels page: those whose name holds ``q``, a page of them at a time."""
    return f"{home(repo)}/labels" + query({"q": q or None, "page": page if page > 1 else None})


def milestones(repo: Named, state: str = "open") -> str:
    return f"{home(repo)}/milestones" + query({"state": state if state != "open" else None})


def milestone(repo: Named, milestone_id: int, state: str = "") -> str:
    """A milestone's page: its open issues, or ``state`` closed ones."""
    return f"{home(repo)}/milestone/{milestone_id}" + query({"state": state or None})


def new_issue(repo: Named) -> str:
    return f"{home(repo)}/issues/new"


def issue_attachments(repo: Named) -> str:
    """Where a file for an issue or a comment being written is uploaded (Forgejo's)."""
    return f"{home(repo)}/issues/attachments"


def issue(repo: Named, number: int, comment: int | None = None) -> str:
    """An issue's page, or one comment on it (Forgejo's ``#issuecomment-{id}`` anchor)."""
    anchor = f"#issuecomment-{comment}" if comment is not None else ""
    return f"{home(repo)}/issues/{number}{anchor}"


def pulls(
    repo: Named, state: str = "open", label: str = "", milestone: str = "", assignee: str = ""
) -> str:
    """The pull request list, shaped as the issue list."""
    return listing(
        repo, IssueFilter(state, True, label=label, milestone=milestone, assignee=assignee)
    )


def pull(repo: Named, number: int, tab: str = "", comment: int | None = None) -> str:
    """A pull request's conversation, or its ``tab`` (commits, files)."""
    anchor = f"#issuecomment-{comment}" if comment is not None else ""
    return f"{home(repo)}/pulls/{number}" + (f"/{tab}" if tab else "") + anchor


def review_comments(repo: Named, number: int) -> str:
    """Where a line comment of a review is posted (Forgejo's path)."""
    return f"{home(repo)}/pulls/{number}/files/reviews/comments"


def review_comment(repo: Named, number: int, comment: int) -> str:
    """Where a pending line comment is edited or deleted."""
    return f"{review_comments(repo, number)}/{comment}"


def review_submit(repo: Named, number: int) -> str:
    return f"{home(repo)}/pulls/{number}/files/reviews/submit"


def review_anchor(repo: Named, number: int, comment: int) -> str:
    """A line comment on the files tab (``#discussion_r{id}``: review comments are numbered
    apart from the conversation's, so they take GitHub's anchor, not ``#issuecomment-``)."""
    return f"{pull(repo, number, 'files')}#discussion_r{comment}"


def review(repo: Named, number: int, review_id: int) -> str:
    """A submitted review on the conversation."""
    return f"{pull(repo, number)}#pullrequestreview-{review_id}"


def pull_merge(repo: Named, number: int) -> str:
    """Where a pull request's merge form is posted (Forgejo's path)."""
    return f"{home(repo)}/pulls/{number}/merge"


def numbered(repo: Named, number: int, is_pull: bool) -> str:
    """An issue's or a pull request's page, whichever ``number`` is."""
    return pull(repo, number) if is_pull else issue(repo, number)


def source(where: str, kind: str) -> str:
    """Where a reference came from, as the timeline keeps it: "owner/name#M" (``kind`` issue
    or pull) or "owner/name@oid" (``kind`` commit)."""
    if kind == "commit":
        full, _, oid = where.partition("@")
        owner, _, name = full.partition("/")
        return f"/{segment(owner)}/{segment(name)}/commit/{_hex(oid)}"
    full, _, number = where.partition("#")
    owner, _, name = full.partition("/")
    page = "pulls" if kind == "pull" else "issues"
    return f"/{segment(owner)}/{segment(name)}/{page}/{int(number or 0)}"


def pull_diff(repo: Named, number: int, variant: str) -> str:
    """A pull request's whole ``diff`` (merge base to head) or ``patch`` (its commits)."""
    if variant not in ("diff", "patch"):
        raise ValueError(f"no pull request variant {variant!r}")
    return f"{home(repo)}/pulls/{number}.{variant}"


def compare(repo: Named, base: str | bytes, head: str | bytes, variant: str = "") -> str:
    """What ``head`` has that ``base`` has not: ``/compare/{base}...{head}``, where ``head``
    may be ``user:branch`` or ``user/repo:branch`` (a fork's branch); or its ``diff`` or
    ``patch``."""
    if variant not in ("", "diff", "patch"):
        raise ValueError(f"no compare variant {variant!r}")
    suffix = f".{variant}" if variant else ""
    return f"{home(repo)}/compare/{path(base)}...{path(head)}{suffix}"


def compare_choose(repo: Named) -> str:
    """The form that chooses a compare's two branches."""
    return f"{home(repo)}/compare"


def ref_switch(
    repo: Named, page: str = "src", at: str | bytes = b"", q: str | bytes | None = None
) -> str:
    """The ref switcher's list (an HTML fragment) for the ``page`` of path ``at``: each of its
    links opens that page and path on another branch or tag; ``q`` filters the names."""
    if page not in PAGES:
        raise ValueError(f"no ref page {page!r}")
    return f"{home(repo)}/-/refs" + query({"for": page, "at": at or None, "q": q or None})


def archive(repo: Named, ref: str | bytes, suffix: str = ".tar.gz") -> str:
    if suffix not in ARCHIVES:
        raise ValueError(f"no archive format {suffix!r}")
    return f"{home(repo)}/archive/{path(ref)}{suffix}"


def feed(repo: Named, branch: str | bytes, fmt: str = "atom") -> str:
    if fmt not in FEEDS:
        raise ValueError(f"no feed format {fmt!r}")
    return f"{home(repo)}/{fmt}/branch/{path(branch)}"


def last_commits(repo: Named, oid: str | bytes, at: str | bytes = b"") -> str:
    """The last-commit column of the directory ``at`` of commit ``oid``, as JSON."""
    return _below(f"{home(repo)}/-/last/{_hex(oid)}", at)


# ------------------------------------------------------------------------------- parsing


def exact_path(req: falcon.Request) -> str:
    """The request's path as latin-1 text of its exact bytes, leading slashes folded into one
    as the router folds them (``req.path`` has replaced bytes that are not UTF-8)."""
    return "/" + str(req.env.get("PATH_INFO", "")).lstrip("/")


def exact_tail(req: falcon.Request, field: str = "tail") -> bytes:
    """The exact bytes of the matched route's path from its ``{field}`` segment to the end
    (``b""`` when the route has no such segment, as ``/src/{kind}`` has no tail)."""
    template = (req.uri_template or "").strip("/").split("/")
    index = next(
        (i for i, part in enumerate(template) if part in (f"{{{field}}}", f"{{{field}:path}}")),
        None,
    )
    if index is None:
        return b""
    raw = exact_path(req).encode("latin-1", "replace").lstrip(b"/")
    if b"\0" in raw:
        raise BadRequest("NUL byte in URL")
    return b"/".join(raw.split(b"/")[index:])


# -------------------------------------------------------------------------- the API


def api_repo(repo: Named, *parts: str | bytes) -> str:
    """``/api/v1/repos/{owner}/{repo}[/part/...]``: each part a path below it (a ref's or a
    file's slashes stay slashes; every other byte that needs it is escaped)."""
    url = f"/api/v1/repos/{segment(repo.owner)}/{segment(repo.name)}"
    for part in parts:
        url = _below(url, part)
    return url


def api_contents(repo: Named, at: str | bytes, ref: str | bytes) -> str:
    """The API's ``contents/{path}?ref=REF`` of a file or directory."""
    return api_repo(repo, "contents", at) + query({"ref": ref})
