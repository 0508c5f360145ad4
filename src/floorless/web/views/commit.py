"""``/commit/{sha}`` with ``.diff`` and ``.patch`` variants."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, cast

import falcon
from markupsafe import Markup, escape

from floorless.config import Settings
from floorless.errors import NotFound
from floorless.git import diff as gitdiff
from floorless.git import objects, transport
from floorless.git.refs import Resolved
from floorless.web import urls
from floorless.web.context import RepoView, repo_view
from floorless.web.marks import mark
from floorless.web.markup import highlight_lines
from floorless.web.render import text
from floorless.web.views.base import View


class Commit(View):
    shows_statuses = True

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, sha: str
    ) -> None:
        variant = ""
        for suffix in (".diff", ".patch"):
            if sha.endswith(suffix):
                sha, variant = sha[: -len(suffix)], suffix[1:]
                req.context.plain = True
        view = repo_view(self.forge, req, owner, repo)
        resolved = view.resolve("commit", sha.encode("utf-8", "replace"))
        if resolved.path:
            raise NotFound("no such commit")
        if not variant:
            self.cached_page(req, resp, view, lambda: self.page(req, resp, view, resolved))
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
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        commit = view.commit(resolved)
        limits, budget = diff_limits(self.settings), diff_budget(self.settings)
        shown = cast(
            Shown,
            self.renderer.caches["diff"].get_or_make(
                (str(commit.id), limits, budget),
                lambda: shown_diff(gitdiff.commit_diff(view.handle, commit, limits), budget),
            ),
        )
        info = objects.commit_info(commit)
        parents = [objects.commit_info(p) for p in commit.parents]
        statuses = self.forge.statuses.latest(view.repo, info.id)
        req.context.final_page = True
        self.html(
            resp,
            "commit.html",
            **view.template_context(
                commit=info,
                parents=parents,
                diff=shown.diff,
                rows=shown.rows,
                mark=mark(statuses),
            ),
        )


class CommitFile(View):
    """``/commit/{sha}/-/diff/{path}``: one changed file's diff, for a file the commit's page
    lists without it. The page's script puts its ``section.file-diff`` under the file's entry;
    without the script, the entry's link opens it as a page."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, sha: str, tail: str
    ) -> None:
        view = repo_view(self.forge, req, owner, repo)
        resolved = view.resolve("commit", sha.encode("utf-8", "replace"))
        if resolved.path:
            raise NotFound("no such commit")
        self.cached_page(req, resp, view, lambda: self.file(req, resp, view, resolved))

    def file(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        commit = view.commit(resolved)
        path = urls.exact_tail(req)
        limits, budget = diff_limits(self.settings), diff_budget(self.settings)
        shown = cast(
            Shown | None,
            self.renderer.caches["diff"].get_or_make(
                (str(commit.id), path, limits, budget),
                lambda: _one_file(gitdiff.file_diff(view.handle, commit, path, limits), budget),
            ),
        )
        if shown is None:
            raise NotFound("this commit does not change that file")
        req.context.final_page = True
        self.html(
            resp,
            "commit_file.html",
            **view.template_context(
                commit=objects.commit_info(commit), f=shown.diff.files[0], rows=shown.rows.get(0)
            ),
        )


def diff_limits(settings: Settings) -> gitdiff.Limits:
    return gitdiff.Limits(
        settings.max_diff_files,
        settings.max_diff_lines,
        settings.max_diff_total_lines,
        settings.max_diff_listed,
        settings.max_diff_file_bytes,
        settings.max_diff_bytes,
    )


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


def shown_diff(changes: gitdiff.CommitDiff, budget: Budget, page: bool = True) -> Shown:
    """The rows of each file ``changes`` shows, highlighted while ``budget.highlight_lines``
    lasts (plain text after). On a commit ``page``, a file whose rows would take the page past
    ``budget.page_bytes`` is not shown (its entry loads it on request), and one after it that
    fits is; what a file cannot take less than (its text) is counted before it is rendered."""
    rows: dict[int, Markup] = {}
    highlight_left, used = budget.highlight_lines, 0
    for i, f in enumerate(changes.files):
        if not f.shown or not f.hunks:
            continue
        if page and used + _least_bytes(f) > budget.page_bytes:
            f.shown, f.hunks, changes.truncated = False, [], True
            continue
        html, lexed = _rows(f, highlight_left)
        highlight_left -= lexed
        f.hunks = []  # kept as rows: a cached diff holds its HTML, not a Line per line
        if page and used + len(html) > budget.page_bytes:
            f.shown, changes.truncated = False, True
            continue
        used += len(html)
        rows[i] = html
    return Shown(changes, rows)


def _one_file(fd: gitdiff.FileDiff | None, budget: Budget) -> Shown | None:
    if fd is None:
        return None
    return shown_diff(gitdiff.CommitDiff([fd], 0, 0, 1, False), budget, page=False)


ROW_CLASS = {"+": "add", "-": "del", " ": "ctx"}
# the markup of a row without its numbers and text
_ROW_BYTES = len(
    '<tr class="ctx"><td class="ln"></td><td class="ln"></td><td class="code"><pre></pre></td></tr>'
)


def _least_bytes(f: gitdiff.FileDiff) -> int:
    """Bytes a file's rows take at the least: their text, unescaped and unhighlighted."""
    return sum(len(h.header) + _ROW_BYTES for h in f.hunks) + sum(
        len(line.text) + _ROW_BYTES for h in f.hunks for line in h.lines
    )


def _rows(f: gitdiff.FileDiff, highlight_left: int) -> tuple[Markup, int]:
    """A file's table rows, hunk headers included, as one string, and the lines lexed. Each
    side of the change is highlighted as one text (the lines before it, by the old name, and
    the lines after it, by the new), so that a token spanning lines keeps its colour and a
    removed line never colours an added one; a file that does not fit in ``highlight_left``
    lines is shown as plain text."""
    lines = [line for h in f.hunks for line in h.lines]
    before = [line.text for line in lines if line.kind in " -"]
    after = [line.text for line in lines if line.kind in " +"]
    lexed = len(before) + len(after)
    if lexed > highlight_left:
        old: Iterator[str] = iter(())
        new: Iterator[str] = iter(())
        lexed = 0
    else:
        old = iter(highlight_lines(text(f.old_path), "\n".join(before) + "\n") if before else ())
        new = iter(highlight_lines(text(f.new_path), "\n".join(after) + "\n") if after else ())
    parts = []
    for h in f.hunks:
        parts.append(
            '<tr class="hunk"><td class="ln"></td><td class="ln"></td>'
            f"<td><pre>{escape(h.header)}</pre></td></tr>"
        )
        for line in h.lines:
            if line.kind == "-":
                html = next(old, None)
            elif line.kind == "+":
                html = next(new, None)
            elif line.kind == " ":
                next(old, None)
                html = next(new, None)
            else:
                html = None
            parts.append(_row(line, str(escape(line.text)) if html is None else html))
    return Markup("".join(parts)), lexed  # noqa: S704 - escaped text and Pygments' HTML


def _row(line: gitdiff.Line, html: str) -> str:
    if line.kind == "\\":  # "No newline at end of file"
        content = str(escape(line.text))
    else:
        content = f'<span class="mark">{line.kind}</span>{html}'
    return (
        f'<tr class="{ROW_CLASS.get(line.kind, "meta")}"><td class="ln">{line.old or ""}</td>'
        f'<td class="ln">{line.new or ""}</td><td class="code"><pre>{content}</pre></td></tr>'
    )
