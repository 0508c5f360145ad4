"""``/archive/{ref}.tar.gz`` and ``.zip``: one ``git archive`` child, streamed as it runs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from urllib.parse import quote

import falcon

from floorless.errors import NotFound, RepositoryBroken, UnknownRevision
from floorless.git.refs import Resolved
from floorless.web.context import RepoView, raw_tail, repo_view
from floorless.web.views.base import View

FORMATS = {
    ".tar.gz": ("tar.gz", "application/gzip"),
    ".zip": ("zip", "application/zip"),
    ".tar": ("tar", "application/x-tar"),
}
CHUNK = 64 * 1024


def resolve_any(view: RepoView, ref: bytes) -> Resolved:
    """A branch, then a tag, then a commit id, as ``git`` itself would try them."""
    for kind in ("branch", "tag", "commit"):
        try:
            resolved = view.resolve(kind, ref)
        except UnknownRevision:
            continue
        if not resolved.path:
            return resolved
    raise NotFound("no such branch, tag or commit")


class Archive(View):
    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, tail: str
    ) -> None:
        req.context.plain = True
        view = repo_view(self.forge, owner, repo)
        name = raw_tail(req, 3)
        found = next((s for s in FORMATS if name.endswith(s.encode())), None)
        if found is None:
            raise NotFound("archives are .tar.gz, .tar or .zip")
        suffix = found
        fmt, mime = FORMATS[suffix]
        ref = name[: -len(suffix)]
        resolved = resolve_any(view, ref)
        commit = resolved.commit.hex()
        label = ref.decode("utf-8", "replace").replace("/", "-")
        prefix = f"{view.repo.name}-{label}"
        proc = self.forge.git.popen(
            view.repo.path,
            ["archive", f"--format={fmt}", f"--prefix={prefix}/", commit],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        # git fails before writing anything when it cannot read the commit: say so, rather
        # than answer 200 with an empty archive
        assert proc.stdout is not None
        first = proc.stdout.read(CHUNK)
        if not first:
            proc.stdout.close()
            if proc.wait() != 0:
                raise RepositoryBroken("git archive cannot read this commit")
        resp.content_type = mime
        resp.set_header(
            "Content-Disposition", f"attachment; filename*=UTF-8''{quote(prefix + suffix, safe='')}"
        )
        if resolved.kind == "commit" and resolved.ref == ref:  # a full commit id
            resp.cache_control = ["public", "max-age=31536000", "immutable"]
        resp.stream = _stream(proc, first)


def _stream(proc: subprocess.Popen[bytes], first: bytes = b"") -> Iterator[bytes]:
    assert proc.stdout is not None
    try:
        if first:
            yield first
        while not proc.stdout.closed and (chunk := proc.stdout.read(CHUNK)):
            yield chunk
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
