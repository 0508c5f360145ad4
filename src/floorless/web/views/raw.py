"""Raw bytes: ``/raw/{kind}/{ref}/{path}`` and ``/raw/blob/{sha}``, sent by ``web/blobs.py``
(never as HTML, an SVG as an image only to an image fetch: its docstring tells why); and
``/media/{kind}/{ref}/{path}``, the same but for a Git LFS pointer, whose object it sends
from the content store when the repository holds it (as Forgejo's ``/media/``)."""

from __future__ import annotations

from typing import Any

import falcon
import pygit2

from floorless.core.errors import NotFound
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.oid import parse_full
from floorless.lfs.objects import pointer_at
from floorless.web.blobs import answer, image_type, send_blob, send_file
from floorless.web.context import RepoView
from floorless.web.views.base import RepoPage


class Raw(RepoPage):
    media = False  # /media/: a pointer's object rather than the pointer

    def before(self, req: falcon.Request, params: dict[str, Any]) -> None:
        req.context.plain = True

    def on_get(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        view: RepoView,
        kind: str,
        tail: str = "",
    ) -> None:
        budget = self.settings.max_raw_in_process_bytes
        blob: pygit2.Object | None
        size: int | None
        if kind == "blob":
            wanted = parse_full(urls.exact_tail(req))
            if wanted is None:
                raise NotFound("not a blob id")
            header = objects.object_header(view.handle, objects.to_oid(wanted))
            if header is None or header[0] != pygit2.enums.ObjectType.BLOB:
                raise NotFound("no such blob")
            view.reachable(pygit2.enums.ObjectType.BLOB, wanted)
            blob_id, size = wanted.hex(), header[1]
            blob = None  # a large blob is never read in-process
            if size <= budget:
                blob = view.handle.get(objects.to_oid(wanted))
            name = b""
            immutable = True
        else:
            resolved = view.resolve_url(req, "raw", kind)
            commit = view.commit(resolved)
            found, _mode = objects.lookup(view.handle, commit, resolved.path)
            if not isinstance(found, pygit2.Blob):
                raise NotFound("not a file")
            name = resolved.path.rsplit(b"/", 1)[-1]
            if self.media and self.send_object(req, resp, view, found, name):
                return
            send_blob(self.forge, req, resp, view, found, name, kind == "commit")
            return
        answer(self.forge, req, resp, view, blob, blob_id, size, name, immutable)

    on_head = on_get

    def send_object(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, blob: pygit2.Blob,
        name: bytes,
    ) -> bool:  # fmt: skip
        """Send the object ``blob`` points to, if it is a pointer whose object the repository
        holds; whether it did."""
        pointer = pointer_at(view.handle, blob.id)
        if pointer is None or self.forge.lfs.size(view.repo.id, pointer.oid) != pointer.size:
            return False
        image = image_type(name)
        kind = image if image is not None and not name.lower().endswith(b".svg") else None
        opened = self.forge.store.open(pointer.oid)
        filename = name.decode("utf-8", "replace")
        send_file(
            req, resp, opened, pointer.size, pointer.oid, filename, view.repo.private,
            kind or "application/octet-stream",
        )  # fmt: skip
        return True


class Media(Raw):
    media = True
