"""``/commit/{sha}`` with ``.diff`` and ``.patch`` variants; one changed file's diff on its
own, and lines a diff hides between its hunks.

How a diff is shown (unified or split, whitespace changes left out or not: ``diff_options``)
is part of the diff cache's keys and of the page cache's (``DiffPage.variant``): the style
may come from a cookie the URL does not name."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, cast

import falcon
import pygit2
from markupsafe import Markup

from floorless.core import timing
from floorless.core.config import Settings
from floorless.core.errors import BadRequest, NotFound, UnknownRevision
from floorless.forgejo import urls
from floorless.git import diff as gitdiff
from floorless.git import objects, oid, transport
from floorless.git.refs import Resolved
from floorless.web import diffrows
from floorless.web.comparing import diff_limits
from floorless.web.context import RepoView
from floorless.web.diffrows import Options
from floorless.web.marks import mark
from floorless.web.markup import highlight_lines
from floorless.web.render import text
from floorless.web.views.base import RepoPage

STYLE_COOKIE = "diff_style"
STYLE_SECONDS = 365 * 86_400


def diff_options(req: falcon.Request, resp: falcon.Response | None = None) -> Options:
    """How this request shows diffs: ``?style=split|unified`` (remembered in a cookie when
    given, so the next diff shows the same way, with or without script), else the cookie's;
    ``?w=1`` leaves out changes in whitespace alone. Anything else is the default."""
    style = req.get_param("style") or ""
    if style in diffrows.STYLES:
        if resp is not None and req.cookies.get(STYLE_COOKIE) != style:
            resp.set_cookie(
                STYLE_COOKIE,
                style,
                max_age=STYLE_SECONDS,
                path="/",
                secure=False,
                http_only=True,
                same_site="Lax",
            )
    else:
        style = req.cookies.get(STYLE_COOKIE, "")
        style = style if style in diffrows.STYLES else "unified"
    return Options(style, req.get_param("w") in ("1", "true", "yes"))


class DiffPage(RepoPage):
    """A page that shows diffs: kept in the page cache per way of showing them (the style may
    come from a cookie, which the URL does not name)."""

    query: tuple[str, ...] = ("style", "w")

    def variant(self, req: falcon.Request) -> object:
        return diff_options(req)

    def of_commit(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        sha: str,
        show: Callable[[RepoView, Resolved, Options], bool],
        remember: bool = True,
    ) -> None:
        """The page ``show`` makes of the commit ``sha`` (an id, not a ref: these pages are
        asked for by the commit's own page), kept in the page cache; ``remember``: a
        ``?style=`` becomes the reader's (a fragment's style is the page's, already theirs)."""
        resolved = view.resolve("commit", sha.encode("utf-8", "replace"))
        if resolved.path:
            raise NotFound("no such commit")
        options = diff_options(req, resp if remember else None)
        self.cached_page(req, resp, view, lambda: show(view, resolved, options))


def diff_budget(settings: Settings) -> Budget:
    return Budget(settings.max_diff_highlight_lines, settings.max_diff_page_bytes)


class Budget(NamedTuple):
    """What a page spends on showing diffs, beyond the git work ``gitdiff.Limits`` bounds."""

    highlight_lines: int  # lines given to a lexer (each side of a file's hunks once)
    page_bytes: int  # HTML of the diffs shown on a commit page


@dataclass
class Shown:
    """A diff as a page shows it: its files (their lines dropped once made rows) and the HTML
    rows of each file shown, by its place in ``diff.files``."""

    diff: gitdiff.CommitDiff
    rows: dict[int, Markup]


def shown_diff(
    changes: gitdiff.CommitDiff, budget: Budget, page: bool = True, split: bool = False
) -> Shown:
    """The rows of each file ``changes`` shows, highlighted while ``budget.highlight_lines``
    lasts (plain text after). On a commit ``page``, a file whose rows would take the page past
    ``budget.page_bytes`` is not shown (its entry loads it on request), and one after it that
    fits is; what a file cannot take less than (its text) is counted before it is rendered.
    Its time is the request's ``render`` phase (``Server-Timing``), as the template's is: the
    showing of what git found, apart from the finding."""
    with timing.phase("render"):
        return _shown(changes, budget, page, split)


def _shown(changes: gitdiff.CommitDiff, budget: Budget, page: bool, split: bool) -> Shown:
    rows: dict[int, Markup] = {}
    highlight_left, used = budget.highlight_lines, 0
    for i, f in enumerate(changes.files):
        if not f.shown or not f.hunks:
            continue
        if page and used + diffrows.least_bytes(f) > budget.page_bytes:
            f.shown, f.hunks, changes.truncated = False, [], True
            continue
        html, lexed = diffrows.rows(f, highlight_left, split)
        highlight_left -= lexed
        f.hunks = []  # kept as rows: a cached diff holds its HTML, not a Line per line
        if page and used + len(html) > budget.page_bytes:
            f.shown, changes.truncated = False, True
            continue
        used += len(html)
        rows[i] = html
    return Shown(changes, rows)


def _one_file(fd: gitdiff.FileDiff | None, budget: Budget, split: bool) -> Shown | None:
    if fd is None:
        return None
    return shown_diff(gitdiff.CommitDiff([fd], 0, 0, 1, False), budget, page=False, split=split)


class Commit(DiffPage):
    shows_statuses = True

    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        if params["sha"].endswith((".diff", ".patch")):
            req.context.plain = True

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, sha: str) -> None:
        variant = ""
        for suffix in (".diff", ".patch"):
            if sha.endswith(suffix):
                sha, variant = sha[: -len(suffix)], suffix[1:]
        try:
            resolved = view.resolve("commit", sha.encode("utf-8", "replace"))
        except UnknownRevision:
            # a branch or tag where a commit id belongs (``/commit/main``, as GitHub takes):
            # to the page of the commit it names now
            raise falcon.HTTPFound(
                urls.commit(view.repo, ref_commit(view, sha.encode("utf-8", "replace")), variant)
            ) from None
        if resolved.path:
            raise NotFound("no such commit")
        if not variant:
            options = diff_options(req, resp)
            self.cached_page(req, resp, view, lambda: self.page(req, resp, view, resolved, options))
            return
        commit = view.commit(resolved)
        resp.cache_control = ["public", "max-age=31536000", "immutable"]
        resp.content_type = "text/plain; charset=utf-8"
        resp.set_header("X-Content-Type-Options", "nosniff")
        limits = diff_limits(self.settings)
        diff = gitdiff.fits_in_process(view.handle, commit, limits)
        if diff is not None:
            resp.data = (
                gitdiff.patch_text(view.handle, commit, limits, diff)
                if variant == "diff"
                else gitdiff.format_patch(view.handle, commit, limits, diff)
            )
            return
        # past the budget, git makes it in its own process: the whole diff, never cut short,
        # as tools that apply it need (not for HEAD, which sends no body)
        if req.method == "HEAD":
            return
        stream = transport.start(
            self.forge.git,
            view.repo.path,
            gitdiff.git_diff_args(commit, stat=variant == "patch"),
            self.forge.git_slots,
            "large diffs",
        )
        resp.stream = (
            stream
            if variant == "diff"
            else transport.Framed(
                stream, prefix=gitdiff.mail_header(commit), suffix=gitdiff.MAIL_END
            )
        )

    def page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        resolved: Resolved,
        options: Options,
    ) -> bool:
        commit = view.commit(resolved)
        limits, budget = diff_limits(self.settings, options), diff_budget(self.settings)
        shown = cast(
            Shown,
            self.renderer.caches["diff"].get_or_make(
                (str(commit.id), limits, budget, options.style),
                lambda: shown_diff(
                    gitdiff.commit_diff(view.handle, commit, limits), budget, split=options.split
                ),
            ),
        )
        info = objects.commit_info(commit)
        parents = [objects.commit_info(p) for p in commit.parents]
        statuses = self.forge.statuses.latest(view.repo, info.id)
        self.html(
            resp,
            "commit.html",
            **view.template_context(
                commit=info,
                parents=parents,
                diff=shown.diff,
                rows=shown.rows,
                mark=mark(statuses),
                options=options,
                with_file_url=diffrows.with_file_url,
            ),
        )
        return True


def ref_commit(view: RepoView, name: bytes) -> bytes:
    """The commit the branch or tag ``name`` (exactly that name) points at."""
    for kind in ("branch", "tag"):
        try:
            resolved = view.resolve(kind, name)
        except UnknownRevision:
            continue
        if not resolved.path:
            return resolved.commit
    raise UnknownRevision("no such commit, branch or tag")


class CommitFile(DiffPage):
    """``/commit/{sha}/-/diff/{path}``: one changed file's diff, for a file the commit's page
    lists without it (``?base=``: changed since that commit rather than since the first
    parent, for a compare's or a pull request's files). The page's script puts its
    ``section.file-diff`` in the place of the file's; without the script, the file's link
    opens it as a page."""

    query = ("style", "w", "base")

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, sha: str, tail: str
    ) -> None:
        self.of_commit(req, resp, view, sha, partial(self.file, req, resp))

    def file(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        resolved: Resolved,
        options: Options,
    ) -> bool:
        commit = view.commit(resolved)
        base_id = req.get_param("base") or ""
        base = None
        if base_id:
            if not oid.is_full(base_id.encode()):
                raise BadRequest("base is a full commit id")
            base = view.commit(view.resolve("commit", base_id.encode()))
        path = urls.exact_tail(req)
        limits, budget = diff_limits(self.settings, options), diff_budget(self.settings)
        shown = cast(
            Shown | None,
            self.renderer.caches["diff"].get_or_make(
                (str(commit.id), base_id, path, limits, budget, options.style),
                lambda: _one_file(
                    gitdiff.file_diff(view.handle, commit, path, limits, base),
                    budget,
                    options.split,
                ),
            ),
        )
        if shown is None:
            raise NotFound("this commit does not change that file")
        self.html(
            resp,
            "commit_file.html",
            **view.template_context(
                commit=objects.commit_info(commit),
                since=objects.commit_info(base) if base is not None else None,
                f=shown.diff.files[0],
                rows=shown.rows.get(0),
                options=options,
                with_file_url=diffrows.with_file_url,
            ),
        )
        return True


LINES_MAX = 500  # lines of context one request gives at most
_NUMBER = re.compile(r"-?[0-9]{1,9}")


class DiffLines(DiffPage):
    """``/commit/{sha}/-/lines/{path}?start=&end=&delta=``: lines ``start`` to ``end`` (0:
    as many as ``LINES_MAX`` allows) of a file as the commit has it, as diff rows of context
    whose old numbers are ``delta`` behind the new: what a diff hides between its hunks,
    loaded in place by the page's script. Read from the blob in-process (highlighted from the
    cache the file and blame pages share), never by a process."""

    query = ("style", "start", "end", "delta")

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, sha: str, tail: str
    ) -> None:
        self.of_commit(req, resp, view, sha, partial(self.lines, req, resp), remember=False)

    def lines(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        resolved: Resolved,
        options: Options,
    ) -> bool:
        start, end, delta = (_number(req, name) for name in ("start", "end", "delta"))
        if start < 1 or end < 0 or (end and end < start):
            raise BadRequest("start is a line number, end 0 or one at or after it")
        end = start + LINES_MAX - 1 if not end else min(end, start + LINES_MAX - 1)
        commit = view.commit(resolved)
        path = urls.exact_tail(req)
        blob, mode = objects.lookup(view.handle, commit, path)
        if not isinstance(blob, pygit2.Blob) or mode == objects.MODE_LINK:
            raise NotFound("no such file")
        size = objects.object_size(view.handle, blob.id) or 0
        if size > self.settings.max_diff_file_bytes or blob.is_binary:
            raise NotFound("this file's lines are not shown here")
        data = objects.blob_bytes(blob)
        name = text(path.rsplit(b"/", 1)[-1])
        enabled = size <= self.settings.max_blame_highlight

        def highlighted() -> list[str]:
            return highlight_lines(name, data.decode("utf-8", "replace"), enabled)

        if enabled:
            key = (str(blob.id), name, "lines")
            every = cast(list[str], self.renderer.caches["highlight"].get_or_make(key, highlighted))
        else:
            every = highlighted()
        wanted = every[start - 1 : end] if data else []
        self.html(
            resp,
            "diff_lines.html",
            **view.template_context(
                rows=diffrows.context_rows(wanted, start, delta, options.split),
                first=start,
                count=len(wanted),
            ),
        )
        return True


def _number(req: falcon.Request, name: str) -> int:
    value = req.get_param(name) or "0"
    if not _NUMBER.fullmatch(value):
        raise BadRequest(f"{name} is a whole number")
    return int(value)
