"""Rendered pages, kept while nothing they show can have changed.

A page's key names everything it shows: the view, the repository row (name, description,
visibility), the canonical URL, and who asks (their session, whose CSRF token the page
carries, and their access level). The canonical URL is the exact path and only the query
parameters the view reads (``View.query``): ``?v=1`` and ``?v=2`` are one page, served from
one entry. The Host header is no part of it; the two things a page shows that follow the
address it was asked at, the forge's public URL (in the clone URL) and the repository's SSH
clone URL (whose host is the request's unless ``ssh_domain`` or ``base_url`` names one), are
marks in the stored page, filled in for each request.

Its value is valid only with the very ref snapshot it was rendered from: any ref change makes
a new snapshot, so a hit can never show an old branch. A page that shows more than refs names
what else it shows by a stamp read before it is rendered (issues and pull requests: their
repository's activity version, which the database moves on every write to them), and is
valid only while the stamp is the same. What else ages, the relative dates,
ages at most ``page_cache_seconds``. Only pages whose content is final are kept (their view's
render says so): not a tree whose last-commit column the index has yet to fill.
The cache holds at most ``page_cache_bytes`` of pages, least recently used leaving first; a
repository's pages leave with it when its state is forgotten (``floorless.repos.state``: the app
attaches its page cache to the forge's repository states).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote_plus, unquote_to_bytes

import falcon

from floorless.accounts.access import Viewer
from floorless.core.caches import Cache
from floorless.forgejo import urls
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Repo

Key = tuple[object, ...]

# What an entry costs beyond its text: its key, the entry and the cache's own bookkeeping.
ENTRY_OVERHEAD = 1024


def page_etag(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class _Entry:
    snapshot: RefSnapshot
    stamp: object  # what else the page shows, in one value (None: refs alone)
    parts: tuple[str, ...]  # the page split at each mark, the marks kept (at odd indices)
    etag: str  # of the page with its marks

    @property
    def size(self) -> int:
        return ENTRY_OVERHEAD + sum(sys.getsizeof(part) for part in self.parts)


def _filled(parts: tuple[str, ...], etag: str, fills: dict[str, str]) -> tuple[str, str]:
    """The page with each mark replaced by what ``fills`` gives for it (this request's public
    URL and SSH clone URL), and its ETag."""
    if len(parts) == 1:
        return parts[0], etag
    text = "".join(fills[part] if odd else part for odd, part in _alternating(parts))
    return text, page_etag("\0".join((etag, *fills.values())))


def _alternating(parts: tuple[str, ...]) -> Iterable[tuple[int, str]]:
    """Each part with whether it is a mark (every other one, from the second)."""
    return ((i & 1, part) for i, part in enumerate(parts))


class PageCache:
    def __init__(self, size_bytes: int, seconds: float) -> None:
        self.entries: Cache[Key, _Entry] = Cache.lru_ttl(
            size_bytes, max(seconds, 0.0), getsizeof=lambda entry: entry.size
        )
        # Stand for the public URL and for the repository's SSH clone URL in a rendered
        # page: random, so no repository content can contain them (and have a URL put in
        # their place).
        secret = secrets.token_hex(12)
        self.public_mark = f"floorless-public-{secret}"
        self.ssh_mark = f"floorless-ssh-{secret}"
        self._marks = re.compile(f"({self.public_mark}|{self.ssh_mark})")

    @property
    def hits(self) -> int:
        return self.entries.hits

    @property
    def misses(self) -> int:
        return self.entries.misses

    by_bytes = True  # (its entries are kept by their size)

    @property
    def currsize(self) -> float:
        return self.entries.currsize

    def forget_repository(self, repo_id: int) -> None:
        """Drop every page of the repository ``repo_id`` (``RepoState.forget`` calls this)."""
        self.entries.drop_where(lambda key: _repo_id(key) == repo_id)

    def held(self, repo_id: int) -> int:
        """How many pages of the repository are kept."""
        return self.entries.count_where(lambda key: _repo_id(key) == repo_id)

    @staticmethod
    def key(
        view: str,
        repo: Repo,
        req: falcon.Request,
        query: Iterable[str],
        viewer: Viewer,
        level: int,
    ) -> Key:
        """The page's canonical key. ``query`` names the parameters the view reads: no other
        parameter can change the page, so none other is in the key."""
        path = urls.exact_path(req)  # exact bytes: ``req.path`` replaced what is not UTF-8
        params = _params(req, frozenset(query)) if req.query_string else ()
        return (view, repo, path, params, viewer.session, viewer.name, viewer.scope, level)

    def serve(
        self,
        key: Key,
        snapshot: RefSnapshot,
        resp: falcon.Response,
        public: str,
        stamp: object = None,
        ssh: str = "",
    ) -> bool:
        """Answer from the cache if it holds this page for this snapshot and stamp; True if it
        did. ``public`` and ``ssh``: this request's public URL and the repository's SSH clone
        URL, for the page's marks."""
        if not self.entries.maxsize:
            return False
        entry = self.entries.get(
            key, valid=lambda entry: entry.snapshot is snapshot and entry.stamp == stamp
        )
        if entry is None:
            return False
        resp.content_type = "text/html; charset=utf-8"
        resp.text, resp.etag = _filled(entry.parts, entry.etag, self._fills(public, ssh))
        return True

    def _fills(self, public: str, ssh: str) -> dict[str, str]:
        return {self.public_mark: public, self.ssh_mark: ssh}

    def keep(
        self,
        key: Key,
        snapshot: RefSnapshot,
        resp: falcon.Response,
        public: str,
        stamp: object = None,
        final: bool = False,
        ssh: str = "",
    ) -> None:
        """Fill in the public URL and the SSH clone URL of the page just rendered, and keep
        the page if its view said it is ``final`` (and it answered 200)."""
        text = resp.text
        if not isinstance(text, str):
            return
        parts = tuple(self._marks.split(text))
        fills = self._fills(public, ssh)
        if not (final and resp.status_code == 200) or not self.entries.maxsize:
            resp.text = _filled(parts, "", fills)[0]
            return
        etag = page_etag(text)
        resp.text, resp.etag = _filled(parts, etag, fills)
        self.entries.put(key, _Entry(snapshot, stamp, parts, etag))


def _repo_id(key: Key) -> int | None:
    """The row id of the repository a page key names (``PageCache.key`` puts it second)."""
    repo = key[1] if len(key) > 1 else None
    return repo.id if isinstance(repo, Repo) else None


def _params(req: falcon.Request, names: frozenset[str]) -> tuple[tuple[str, bytes], ...]:
    """Each parameter named in ``names``, in order, with the exact bytes of its value: two
    values that differ only in bytes that are not UTF-8 are different pages (``req.params``
    has replaced those bytes)."""
    found = []
    for part in req.query_string.split("&"):
        name, _, value = part.partition("=")
        name = unquote_plus(name)
        if name in names:
            found.append((name, unquote_to_bytes(value.replace("+", " "))))
    return tuple(found)
