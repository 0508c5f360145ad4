"""Memory the process holds is bounded and stated, and what lives long is kept out of the
garbage collector's way: libgit2's mapped pack windows and object cache are set from the
settings, and what is alive after start-up and after an index is frozen (``heap.settle``)."""

from __future__ import annotations

import gc
import itertools
import re
import sqlite3
import urllib.request
import weakref
from pathlib import Path

import pygit2
import pytest
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import build_history, build_one
from support.serving import serving

from floorless.collab import reviews
from floorless.core import heap
from floorless.core.caches import approximate_size
from floorless.core.config import Settings
from floorless.db import store
from floorless.forge import Forge
from floorless.forgejo import git as gitshapes
from floorless.forgejo.caches import ShapeCaches
from floorless.git import env
from floorless.repos.registry import Repo


def test_libgit2_memory_is_bounded_by_the_settings(tmp_path: Path) -> None:
    forge = start_forge(
        tmp_path / "repos",
        tmp_path / "data",
        git_mapped_bytes=8 << 20,
        git_object_cache_bytes=4 << 20,
    )
    try:
        assert pygit2.settings.mwindow_mapped_limit == 8 << 20
        assert pygit2.settings.mwindow_size == 2 << 20
        assert pygit2.settings.mwindow_file_limit == env.MAPPED_FILE_LIMIT
        assert pygit2.settings.cached_memory[1] == 4 << 20
    finally:
        forge.stop()


def test_the_defaults_are_far_below_libgit2s() -> None:
    settings = Settings.load(environ={})
    # libgit2's own on 64-bit: 8 GiB mapped, 256 MiB of objects
    assert settings.git_mapped_bytes <= 32 << 20
    assert settings.git_object_cache_bytes <= 32 << 20


def test_an_index_is_frozen_once_built(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    build_history(repos / "alice" / "hist.git")
    settled = heap.settled
    forge = start_forge(repos, tmp_path / "data")
    try:
        wait_indexed(forge)
        repo = forge.registry.all()[0]
        graph = forge.indexer.graph(repo.id)
        assert graph is not None and len(graph) > 0
        wait_for(lambda: heap.settled > settled)  # once idle, in the indexer's thread
        assert heap.frozen() > 0
        # the permanent generation is outside every generation a collection walks
        walked = {id(o) for o in gc.get_objects()}
        assert id(graph.postings) not in walked
        assert id(vars(graph)) not in walked
    finally:
        forge.stop()


def test_what_each_slice_of_an_index_adds_is_frozen_as_it_goes(tmp_path: Path) -> None:
    """A first index grows the graph slice after slice: each slice's survivors are frozen
    before the next, so the collections the next one starts walk only what it makes (on
    git.git a full one during the first index took 51 ms)."""
    repos = tmp_path / "repos"
    build_history(repos / "alice" / "hist.git")  # 10,500 commits: 5 slices of 2,500
    settings = Settings.load(
        environ={}, data=tmp_path / "data", repos=repos, index_slice_commits=2500
    )
    forge = Forge(settings)
    seen: list[int] = []
    forge.indexer.on_slice.append(lambda repo, job: seen.append(heap.settled))
    forge.start()
    try:
        wait_indexed(forge)
    finally:
        forge.stop()
    assert len(seen) >= 5, seen
    # a slice's listener runs before its settling: each sees the ones before it settled
    assert all(later > earlier for earlier, later in itertools.pairwise(seen)), seen


def test_settling_freezes_and_a_full_collection_still_frees_cycles() -> None:
    class Node:
        other: object = None

    settled = heap.settled
    first, second = Node(), Node()
    first.other, second.other = second, first
    heap.settle()
    assert heap.settled == settled + 1
    assert id(first) not in {id(o) for o in gc.get_objects()}
    gone = weakref.ref(first)
    del first, second
    gc.collect()
    assert gone() is not None  # frozen: no ordinary collection reaches it
    heap.collect_everything()
    assert gone() is None
    assert heap.frozen() > 0  # and what is left is frozen again


def test_remembered_answers_stay_within_their_byte_bound(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "rows.sqlite3")
    connection.row_factory = sqlite3.Row
    big = connection.execute("SELECT ? AS body", ("x" * (1 << 20),)).fetchall()
    assert store.memo_size(((1,), big)) > 1 << 20  # the values count, not the row's shell
    database = store.Database("test")
    for n in range(64):
        rows = connection.execute("SELECT ? AS n, ? AS body", (n, "y" * (1 << 20))).fetchall()
        database.memo.put(("SELECT", (n,)), ((n,), rows))
    assert database.memo.currsize <= store.MEMO_BYTES
    assert 0 < len(database.memo) < 64  # the oldest went
    connection.close()


def test_a_commits_changed_files_are_kept_by_bytes(tmp_path: Path) -> None:
    repo = pygit2.Repository(str(build_history(tmp_path / "hist.git")))
    caches = ShapeCaches()
    for commit in repo.walk(repo.head.target):
        gitshapes.changes(caches, repo, commit)
    cache = caches.changes
    assert cache.maxsize >= 1 << 20  # bytes, not commits
    assert 0 < cache.currsize <= cache.maxsize
    assert cache.currsize >= approximate_size(cache.values()[0])


def test_a_served_worker_freezes_what_it_started_with(tmp_path: Path) -> None:
    repos = tmp_path / "repos"  # none: no index is built, so no index's settling counts
    repos.mkdir()
    with serving(repos, tmp_path / "data") as server:
        text = _get(server.url + "/-/metrics")
    found = re.search(r"^floorless_gc_frozen_objects ([0-9.e+]+)$", text, re.M)
    assert found is not None
    assert float(found.group(1)) > 1000  # modules, templates, the forge: not walked again


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())


def test_a_large_index_lets_go_of_its_repositorys_handle(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    repos.mkdir()
    forge = start_forge(repos, tmp_path / "data")
    released: list[str] = []
    old: list[weakref.ref[pygit2.Repository]] = []

    def recording(repos: list[Repo]) -> None:
        released.extend(repo.full_name for repo in repos)
        old.extend(weakref.ref(forge.live.open(repo)) for repo in repos)
        forge.live.release_handles(repos)

    forge.indexer.release_repos = recording
    try:
        build_history(repos / "alice" / "hist.git")  # 10,500 commits
        build_one(repos / "alice" / "one.git")  # too few to be worth letting go of
        forge.maintenance.rescan()
        wait_indexed(forge)
        wait_for(lambda: released != [])
        assert released == ["alice/hist"]
        # the handle the index read through is freed, its caches too; work of another thread
        # reading through it at that moment (the code index of the same push) keeps it until
        # the pool's next collection
        wait_for(forge.code.idle)
        if old[0]() is not None:
            forge.handles.collect()
        assert old[0]() is None
    finally:
        forge.stop()


def test_review_caches_are_bounded_in_bytes(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        news = forge.reviews.news
        many = [(f"{n:040x}", "a subject of some length " * 3) for n in range(reviews.NEW_LIMIT)]
        for n in range(2000):
            news.put(("alice", "repo", str(n)), reviews.NewCommits(many, True, False))
        assert news.currsize <= reviews.NEW_COMMITS_BYTES
        assert 0 < len(news) < 2000  # bytes, not a count of entries, bound it
        assert forge.reviews.changed.maxsize == reviews.CHANGED_PATHS_BYTES
    finally:
        forge.stop()


def test_memory_goes_back_once_per_burst_of_requests_when_they_stop() -> None:
    from floorless.core.heap import Activity

    activity = Activity()
    assert not activity.quiet()  # nothing came: nothing to give back
    for _ in range(3):
        activity.seen()
    assert not activity.quiet()  # requests since the last look: still busy
    assert activity.quiet() and activity.given == 1  # none since: given back, once
    assert not activity.quiet() and not activity.quiet()
    activity.seen()
    assert not activity.quiet()
    assert activity.quiet() and activity.given == 2


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_while_busy_what_lives_is_frozen_and_once_quiet_everything_is_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Busy, each look freezes what the requests left alive, so the collections they start
    never walk it again; a cycle frozen so is freed once requests stop (a full collection
    at a moment none waits), or after FULL_AFTER seconds of a server never quiet."""
    activity = heap.Activity()
    settled, everything = heap.settled, heap.everything
    cycle = _Cycle()
    gone = weakref.ref(cycle)
    activity.seen()
    assert not activity.quiet()  # busy: settled
    assert heap.settled == settled + 1 and heap.everything == everything
    del cycle
    gc.collect()
    assert gone() is not None  # frozen: no collection the interpreter runs reaches it
    assert activity.quiet()  # quiet: everything collected, memory given back
    assert heap.everything == everything + 1 and gone() is None

    monkeypatch.setattr(heap, "FULL_AFTER", 0.0)
    cycle = _Cycle()
    gone = weakref.ref(cycle)
    heap.settle()
    del cycle
    activity.seen()
    assert not activity.quiet()  # busy, but past FULL_AFTER: everything collected anyway
    assert heap.everything == everything + 2 and gone() is None
