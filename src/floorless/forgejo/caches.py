"""The API's memory of what cannot change: answers and their parts keyed by object ids.

A commit's changed files, a commit's JSON (by where it is shown and its id), the diff of a
pair of commits and a tree's listing never change, so they are kept without invalidation,
bounded in bytes. One owner for the four, built by the composition root (webhook payloads
use them too), sized as the caches of fragments keyed by object ids (``render_cache_bytes``
each; the changed files, which are small, half of it), and listed with them in the metrics.
"""

from __future__ import annotations

from collections.abc import Hashable

from floorless.core.caches import Cache, approximate_size
from floorless.core.metrics import HitCounting
from floorless.git import objects


class ShapeCaches:
    """The caches of ``forgejo/git.py``, ``forgejo/pulls.py`` and the tree listings of
    ``web/api/git.py``; also what ``views/compare.py`` calls a ``Caching`` (its diffs and
    compared commits are kept in ``caches["diff"]``)."""

    def __init__(self, size_bytes: int = 32 << 20) -> None:
        # a commit's changed files: as many as it changes (thousands for a big merge), so
        # bounded in bytes rather than in commits
        self.changes: Cache[bytes, object] = Cache.lru(size_bytes // 2, approximate_size)
        # a commit's JSON, by the forge's URL, the repository's name and its id: building one
        # (a dozen quoted URLs, its parents' dates) took a commits answer of 50 ten times as
        # long as the commits page
        self.commits: Cache[Hashable, object] = Cache.lru(size_bytes, approximate_size)
        # the diffs and commits of compares and pull requests, by their commit ids
        self.diffs: Cache[Hashable, object] = Cache.lru(size_bytes, approximate_size)
        # a tree's listing, by the tree's id: the pages of a recursive listing walk it once
        # (about 120 bytes an entry)
        self.listings: Cache[tuple[bytes, bool], list[objects.Entry]] = Cache.lru(
            size_bytes, lambda entries: 120 * len(entries) + 64
        )

    @property
    def caches(self) -> dict[str, Cache[Hashable, object]]:
        """As a page's ``Renderer`` offers them to ``views/compare.py``."""
        return {"diff": self.diffs}

    def named(self) -> dict[str, HitCounting]:
        """Each cache by its name in the metrics."""
        return {
            "api-changes": self.changes,
            "api-commits": self.commits,
            "api-diffs": self.diffs,
            "api-trees": self.listings,
        }
