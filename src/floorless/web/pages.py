"""Rendered pages, kept while nothing they show can have changed.

A page's key names everything it shows: the view, the repository row (name, description,
visibility), the URL, and who asks (their session, whose CSRF token the page carries, and
their access level). Its value is valid only with the very ref snapshot it was rendered from:
any ref change makes a new snapshot, so a hit can never show an old branch. What else ages, the
relative dates, ages at most ``page_cache_seconds``. Only pages whose content is final say so
(``req.context.final_page``): not a tree whose last-commit column the index has yet to fill.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import falcon

from floorless.access import Viewer
from floorless.git.refs import RefSnapshot
from floorless.repos import Repo

Key = tuple[object, ...]


def page_etag(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class _Entry:
    snapshot: RefSnapshot
    text: str
    etag: str
    expires: float


class PageCache:
    def __init__(self, entries: int, seconds: float) -> None:
        self.entries = entries
        self.seconds = seconds
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[Key, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(
        view: str, repo: Repo, req: falcon.Request, viewer: Viewer, level: int
    ) -> tuple[object, ...]:
        # the host too: a page's links and clone URL follow the address it was asked at
        where = (req.scheme, req.netloc, req.relative_uri)
        return (view, repo, *where, viewer.session, viewer.name, viewer.scope, level)

    def serve(self, key: Key, snapshot: RefSnapshot, resp: falcon.Response) -> bool:
        """Answer from the cache if it holds this page for this snapshot; True if it did."""
        if not self.entries:
            return False
        with self._lock:
            entry = self._data.get(key)
            if (
                entry is not None
                and entry.snapshot is snapshot
                and entry.expires > time.monotonic()
            ):
                self._data.move_to_end(key)
                self.hits += 1
            else:
                entry = None
                self.misses += 1
        if entry is None:
            return False
        resp.content_type = "text/html; charset=utf-8"
        resp.text = entry.text
        resp.etag = entry.etag
        return True

    def keep(
        self,
        key: tuple[object, ...],
        snapshot: RefSnapshot,
        req: falcon.Request,
        resp: falcon.Response,
    ) -> None:
        """Keep the page just rendered, if its view said it is final."""
        if not self.entries or not req.context.get("final_page") or resp.status_code != 200:
            return
        if not isinstance(resp.text, str):
            return
        resp.etag = page_etag(resp.text)
        entry = _Entry(snapshot, resp.text, resp.etag, time.monotonic() + self.seconds)
        with self._lock:
            self._data[key] = entry
            while len(self._data) > self.entries:
                self._data.popitem(last=False)
