"""``/blame/{kind}/{ref}/{path}``: lines grouped by the commit that last changed them."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, cast

import falcon
import pygit2
from markupsafe import Markup

from floorless.errors import NotFound
from floorless.git import objects
from floorless.git.blame import BlameCommit, BlameLine, run_blame
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.markup import highlight_lines, numbered_rows
from floorless.web.render import text
from floorless.web.views.base import RefPage
from floorless.web.views.source import crumbs


class Blame(RefPage):
    page = "blame"

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> None:
        commit = view.commit(resolved)
        blob, mode = objects.lookup(view.handle, commit, resolved.path)
        if not isinstance(blob, pygit2.Blob) or mode == objects.MODE_LINK:
            raise NotFound("blame needs a file")
        size = objects.object_size(view.handle, blob.id)
        if size is None:  # unreadable: reading the blob says why
            size = blob.size
        # a large blob is not read (that would hold the interpreter) nor blamed
        too_large = size > min(self.settings.max_blame_bytes, self.settings.max_blob_page_bytes)
        binary = not too_large and blob.is_binary
        groups: list[dict[str, Any]] = []
        if not binary and not too_large:
            name = text(resolved.path.rsplit(b"/", 1)[-1])
            enabled = size <= self.settings.max_highlight

            def make() -> list[dict[str, Any]]:  # only when the rendered groups are not cached
                lines, commits = self._blame(
                    view.repo.id, view.repo.path, str(commit.id), resolved.path
                )
                # every line ends with a newline, so an empty last line keeps its fragment
                source = b"".join(line.text + b"\n" for line in lines).decode("utf-8", "replace")
                html = highlight_lines(name, source, enabled) if lines else []
                return _groups(lines, commits, html)

            key = (str(blob.id), name, enabled, str(commit.id), "blame")
            groups = cast(
                list[dict[str, Any]], self.renderer.caches["highlight"].get_or_make(key, make)
            )
        req.context.final_page = True
        self.html(
            resp,
            "blame.html",
            **view.template_context(
                resolved=resolved,
                crumbs=crumbs(resolved.path),
                groups=groups,
                binary=binary,
                too_large=too_large,
                size=size,
            ),
        )

    def _blame(
        self, repo_id: int, git_dir: Any, commit: str, path: bytes
    ) -> tuple[list[BlameLine], dict[str, BlameCommit]]:
        answers = self.forge.indexer.answers
        key = bytes.fromhex(commit) + b"\0" + path
        cached = answers.get(repo_id, "blame", key)
        if cached is not None:
            data = json.loads(cached)
            lines = [BlameLine(c, o, n, bytes.fromhex(t)) for c, o, n, t in data["lines"]]
            commits = {k: BlameCommit(**v) for k, v in data["commits"].items()}
            return lines, commits
        if not self.forge.git_slots.acquire(blocking=False):  # each may run blame_timeout
            raise falcon.HTTPServiceUnavailable(
                description="too many files are being blamed; try again in a moment",
                retry_after=5,
            )
        try:
            lines, commits = run_blame(
                self.forge.git, git_dir, commit, path, self.settings.blame_timeout
            )
        finally:
            self.forge.git_slots.release()
        answers.put(
            repo_id,
            "blame",
            key,
            json.dumps(
                {
                    "lines": [(x.commit, x.original_line, x.line, x.text.hex()) for x in lines],
                    "commits": {k: asdict(v) for k, v in commits.items()},
                }
            ),
        )
        return lines, commits


def _groups(
    lines: list[BlameLine], commits: dict[str, BlameCommit], html: list[str]
) -> list[dict[str, Any]]:
    """Runs of lines that share a commit: the first line apart (its row carries the commit's
    cell), the rest as ready-made rows."""
    runs: list[tuple[str, list[tuple[int, str]]]] = []
    for line, fragment in zip(lines, html, strict=False):
        if not runs or runs[-1][0] != line.commit:
            runs.append((line.commit, []))
        runs[-1][1].append((line.line, fragment))
    return [
        {
            "commit": commits[commit],
            "first": members[0][0],
            "first_html": Markup(members[0][1]),  # noqa: S704 - Pygments output, escaped
            "rest": numbered_rows([f for _, f in members[1:]], members[0][0] + 1),
            "count": len(members),
        }
        for commit, members in runs
    ]
