"""``/blame/{kind}/{ref}/{path}``: each line beside the commit that last changed it.

One row a line. A group (consecutive lines last changed by one commit) shows its commit once,
in a cell spanning its rows and shaded by the commit's age at the commit blamed (a small fixed
palette of classes in style.css). Rows are built as strings, not in a template loop: a loop
over thousands of lines would cost more than the rest of the page.

The answer (groups and commits) is kept by (commit, path) in the forge's answers. On a miss,
one ``git blame --incremental`` runs and the page is streamed: its head at once, then rows in
line order as git finds their commits, so the first lines show while git still works. A page
made from a kept answer is whole, and goes to the page cache.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator
from typing import Any, cast

import falcon
import pygit2
from markupsafe import Markup, escape

from floorless.core import dates, timing
from floorless.core.errors import GitCommandError, NotFound
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.blame import BlameCommit, BlameGroup, BlameRun, ignored_revs, start_blame
from floorless.git.refs import Resolved
from floorless.repos.registry import Repo
from floorless.web.context import RepoView
from floorless.web.markup import highlight_lines
from floorless.web.render import text
from floorless.web.views.base import RefPage
from floorless.web.views.source import crumbs

log = logging.getLogger(__name__)

ROWS = "floorless-blame-rows"  # where the rows go in the rendered page
_DAY = 86_400
# The age classes a0 (newest) to a5: a line's age at the commit blamed is under AGES[i] for
# class ai, and a5 past the last.
AGES = (30 * _DAY, 91 * _DAY, 365 * _DAY, 2 * 365 * _DAY, 5 * 365 * _DAY)
SUMMARY_CHARS = 60  # more is never seen: the cell cuts it shorter


# The age classes as the page's legend names them (``AGES``' limits, then past the last).
AGE_LABELS = (
    "under a month",
    "1 to 3 months",
    "3 to 12 months",
    "1 to 2 years",
    "2 to 5 years",
    "over 5 years",
)


class Blame(RefPage):
    page = "blame"
    query = ("ignore_revs",)

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> bool:
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
        listed = ignored_revs(view.handle, commit)
        wanted = req.get_param("ignore_revs") != "0"  # on by default, as a checkout's git
        ignore = listed if listed and wanted else ()
        page = self.renderer.page(
            "blame.html",
            **view.template_context(
                resolved=resolved,
                crumbs=crumbs(resolved.path),
                binary=binary,
                too_large=too_large,
                size=size,
                rows=Markup(ROWS),  # noqa: S704 - a constant
                ignore_list=listed,
                ignoring=bool(ignore),
                ages=list(zip(range(len(AGE_LABELS)), AGE_LABELS, strict=True)),
            ),
        )
        head, _, tail = page.partition(ROWS)
        resp.content_type = "text/html; charset=utf-8"
        if binary or too_large:
            resp.text = head + tail
            return True
        data = objects.blob_bytes(blob)
        name = text(resolved.path.rsplit(b"/", 1)[-1])
        enabled = size <= self.settings.max_blame_highlight

        def highlighted() -> list[str]:
            return highlight_lines(name, data.decode("utf-8", "replace"), enabled)

        def source() -> list[str]:  # the file's lines as HTML, highlighted when small
            if not enabled:  # plain lines cost little: not kept
                return highlighted()
            key = (str(blob.id), name, "lines")
            return cast(list[str], self.renderer.caches["highlight"].get_or_make(key, highlighted))

        rows = Rows(view.repo, dates.clamp(commit.committer.time))
        commit_id = str(commit.id)
        # the answer with the listed commits passed over is another answer
        key = bytes.fromhex(commit_id) + b"\0" + resolved.path + (b"\0ignored" if ignore else b"")
        answers = self.forge.answers.cache
        kept = _loads(answers.get(view.repo.id, "blame", key))
        lines = line_count(data)
        if kept is not None or not lines:  # an empty file: git has nothing to say
            groups, commits = kept or ([], {})
            with timing.phase("render"):
                resp.text = head + rows.render(groups, commits, source()) + tail
            return True
        if req.method == "HEAD":  # no body will be sent: no git either
            resp.text = head + tail
            return False
        run = start_blame(
            self.forge.git,
            view.repo.path,
            commit_id,
            resolved.path,
            lines,
            self.settings.blame_timeout,
            self.forge.git_slots,
            ignore,
        )

        def keep(groups: list[BlameGroup]) -> None:
            answers.put(view.repo.id, "blame", key, _dumps(groups, run.commits))

        try:
            public = self.public_url(req)  # as the page cache fills it in for whole pages
            mark = self.renderer.pages.public_mark
            resp.stream = StreamedBlame(
                head.replace(mark, public), tail.replace(mark, public), run, rows, source, keep
            )
        except BaseException:
            run.close()
            raise
        return False  # streamed as git blames: kept by its answer, not as a page


def line_count(data: bytes) -> int:
    """Lines as git counts them: a last line without a newline counts too."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


class Rows:
    """The table rows of a blame page, group by group."""

    def __init__(self, repo: Repo, blamed_at: float) -> None:
        self.repo = repo
        self.blamed_at = blamed_at  # the commit blamed: ages are counted back from it
        self._cells: dict[str, tuple[str, tuple[str, str]]] = {}  # by commit

    def render(
        self, groups: list[BlameGroup], commits: dict[str, BlameCommit], lines: list[str]
    ) -> str:
        out = []
        for group in groups:
            n = group.first
            commit = commits.get(group.commit)
            opening, content = self._cell(commit)
            span = f' rowspan="{group.count}">' if group.count > 1 else ">"
            sha, rest = content
            prior = self._prior(commit, group)
            out.append(f'<tr id="L{n}">{opening}{span}{sha}{prior}{rest}{_line(n, lines)}')
            out.extend(f'<tr id="L{n}">{_line(n, lines)}' for n in range(n + 1, n + group.count))
        return "".join(out)

    def _prior(self, commit: BlameCommit | None, group: BlameGroup) -> str:
        """A link to the blame of the file as it was before the group's commit changed it:
        at the commit's parent, at the path the lines had there, near where they were."""
        if commit is None or not commit.previous:
            return ""
        path = commit.previous_path.encode("utf-8", "surrogateescape")
        url = urls.blame(self.repo, "commit", commit.previous, path)
        anchor = f"#L{group.origin}" if group.origin > 0 else ""
        return (
            f'<a class="prior" href="{escape(url)}{anchor}" '
            f'title="Blame prior to this change" aria-label="Blame prior to {commit.id[:10]}">'
            "\u27f2</a>"
        )

    def _cell(self, commit: BlameCommit | None) -> tuple[str, tuple[str, str]]:
        """The commit's cell: its opening tag without the closing ``>`` (a rowspan may come
        before it), and its content (its link, then the rest: a group's "blame prior" link
        goes between them)."""
        if commit is None:
            return '<td class="blame-commit"', ("", "")
        cell = self._cells.get(commit.id)
        if cell is None:
            when = dates.moment(commit.author_time).when
            age = self.blamed_at - dates.clamp(commit.author_time)
            shade = sum(age >= limit for limit in AGES)
            summary = commit.summary
            if len(summary) > SUMMARY_CHARS:
                summary = summary[: SUMMARY_CHARS - 1] + "\u2026"
            cell = (
                f'<td class="blame-commit a{shade}"',
                (
                    f'<a class="sha" href="{escape(urls.commit(self.repo, commit.id))}" '
                    f'title="{AGE_LABELS[shade]} old">{commit.id[:10]}</a>',
                    f" {when.year:04d}-{when:%m-%d} <b>{escape(commit.author)}</b> "
                    f"{escape(summary)}",
                ),
            )
            self._cells[commit.id] = cell
        return cell

    def stopped(self, reason: str) -> str:
        return f'<tr><td colspan="3" class="notice">Blame stopped: {escape(reason)}'


def _line(n: int, lines: list[str]) -> str:
    html = lines[n - 1] if n <= len(lines) else ""
    return f'<td><a href="#L{n}">{n}</a><td>{html}\n'


class StreamedBlame:
    """A cold blame page as a response body: its head, then rows as git finds their commits,
    then its tail. ``close()`` stops git and frees its slot, whether the page was read to the
    end or not; an answer is kept only when git ended well."""

    def __init__(
        self,
        head: str,
        tail: str,
        run: BlameRun,
        rows: Rows,
        source: Callable[[], list[str]],
        keep: Callable[[list[BlameGroup]], None],
    ) -> None:
        self.run = run
        self._pieces = self._make(head, tail, rows, source, keep)

    def __iter__(self) -> Generator[bytes, None, None]:
        return self._pieces

    def _make(
        self,
        head: str,
        tail: str,
        rows: Rows,
        source: Callable[[], list[str]],
        keep: Callable[[list[BlameGroup]], None],
    ) -> Generator[bytes, None, None]:
        try:
            yield head.encode()
            lines = source()  # while git works
            found: list[BlameGroup] = []
            try:
                for groups in self.run.groups():
                    found += groups
                    yield rows.render(groups, self.run.commits, lines).encode()
            except GitCommandError as exc:
                log.warning("blame of %s: %s", self.run.proc.args, exc)
                yield rows.stopped(str(exc)).encode()
            else:
                keep(found)
            yield tail.encode()
        finally:
            self.run.close()

    def close(self) -> None:
        self._pieces.close()
        self.run.close()


def _dumps(groups: list[BlameGroup], commits: dict[str, BlameCommit]) -> str:
    used = {group.commit for group in groups}
    return json.dumps(
        {
            "groups": [(g.commit, g.first, g.count, g.origin) for g in groups],
            "commits": {
                c.id: (c.author, c.author_time, c.summary, c.previous, c.previous_path)
                for c in commits.values()
                if c.id in used
            },
        },
        separators=(",", ":"),
    )


def _loads(value: str | None) -> tuple[list[BlameGroup], dict[str, BlameCommit]] | None:
    """A kept answer; None for none, or for one kept by an earlier version (line by line, or
    without where each commit's lines were before it: blamed again)."""
    if value is None:
        return None
    data: dict[str, Any] = json.loads(value)
    if "groups" not in data or any(len(g) != 4 for g in data["groups"][:1]):
        return None
    groups = [BlameGroup(*group) for group in data["groups"]]
    commits = {k: BlameCommit(k, *fields) for k, fields in data["commits"].items()}
    return groups, commits
