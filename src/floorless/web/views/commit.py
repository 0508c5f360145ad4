"""``/commit/{sha}`` with ``.diff`` and ``.patch`` variants."""

from __future__ import annotations

from typing import cast

import falcon
from markupsafe import Markup, escape

from floorless.errors import NotFound
from floorless.git import diff as gitdiff
from floorless.git import objects, transport
from floorless.git.refs import Resolved
from floorless.web.context import RepoView, repo_view
from floorless.web.markup import highlight_lines
from floorless.web.render import text
from floorless.web.views.base import View


class Commit(View):
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
        limits = self.limits()
        if gitdiff.fits_in_process(view.handle, commit, limits):
            resp.data = (
                gitdiff.patch_text(view.handle, commit, limits)
                if variant == "diff"
                else gitdiff.format_patch(view.handle, commit, limits)
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

    def limits(self) -> gitdiff.Limits:
        return gitdiff.Limits(
            self.settings.max_diff_files,
            self.settings.max_diff_lines,
            self.settings.max_diff_total_lines,
            self.settings.max_diff_listed,
            self.settings.max_diff_file_bytes,
            self.settings.max_diff_bytes,
        )

    def page(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        commit = view.commit(resolved)
        limits = self.limits()
        changes, highlighted = cast(
            tuple[gitdiff.CommitDiff, list[list[Markup]]],
            self.renderer.caches["diff"].get_or_make(
                (str(commit.id), limits),
                lambda: _highlighted(gitdiff.commit_diff(view.handle, commit, limits)),
            ),
        )
        info = objects.commit_info(commit)
        parents = [objects.commit_info(p) for p in commit.parents]
        req.context.final_page = True
        self.html(
            resp,
            "commit.html",
            **view.template_context(
                commit=info, parents=parents, diff=changes, highlighted=highlighted
            ),
        )


ROW_CLASS = {"+": "add", "-": "del", " ": "ctx"}


def _highlighted(changes: gitdiff.CommitDiff) -> tuple[gitdiff.CommitDiff, list[list[Markup]]]:
    """The diff, and per file, per hunk, its table rows as one string. A file's lines are
    highlighted together so that multi-line tokens keep their colour."""
    files = []
    for f in changes.files:
        lines = [line.text for hunk in f.hunks for line in hunk.lines]
        html = iter(highlight_lines(text(f.new_path or f.old_path), "\n".join(lines) + "\n"))
        files.append(
            [
                Markup("".join(_row(line, next(html, "")) for line in hunk.lines))  # noqa: S704
                for hunk in f.hunks
            ]
        )
    return changes, files


def _row(line: gitdiff.Line, html: str) -> str:
    if line.kind == "\\":  # "No newline at end of file"
        content = str(escape(line.text))
    else:
        content = f'<span class="mark">{line.kind}</span>{html}'
    return (
        f'<tr class="{ROW_CLASS.get(line.kind, "meta")}"><td class="ln">{line.old or ""}</td>'
        f'<td class="ln">{line.new or ""}</td><td class="code"><pre>{content}</pre></td></tr>'
    )
