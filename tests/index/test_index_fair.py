"""The history index is built in slices, fairly, and survives a restart half-way.

Observed through the indexer's own state (slices, progress, commits indexed), never through
time: a small repository queued behind a large one is indexed first, a repository a page
waits for goes first, a recently changed path answers before the whole history is indexed,
a stopped index goes on where it stopped, and the loaded index is packed (no Python object
per commit for the collector to walk).
"""

from __future__ import annotations

import gc
import shutil
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.forges import wait_for
from support.gitfixtures import git, git_text

import floorless.index.indexer
from floorless.core.config import Settings
from floorless.core.errors import DatabaseUnavailable
from floorless.forge import Forge
from floorless.index.indexer import IndexJob
from floorless.repos.registry import Repo
from floorless.web.app import create_app

SLICE = 500  # commits a slice indexes here: the large fixture takes about 22 slices


@pytest.fixture
def repos(fixture_root: Path, tmp_path: Path) -> Path:
    """The 10,500-commit history twice (``big/one``, ``big/two``) and a one-commit one."""
    target = tmp_path / "repos"
    for name in ("one", "two"):
        shutil.copytree(fixture_root / "alice/history.git", target / f"big/{name}.git")
    shutil.copytree(fixture_root / "solo.git", target / "small/solo.git")
    return target


def _forge(repos: Path, data: Path, **overrides: object) -> Forge:
    """A forge whose indexer thread is started by the test, once its queue is set."""
    forge = Forge(Settings.load(environ={}, data=data, repos=repos, **overrides))
    forge.start(background=False)
    return forge


@pytest.fixture
def forge(repos: Path, tmp_path: Path) -> Iterator[Forge]:
    forge = _forge(repos, tmp_path / "data", index_slice_commits=SLICE)
    yield forge
    forge.stop()


def _repo(forge: Forge, owner: str, name: str) -> Repo:
    return forge.registry.get(owner, name)


def _queue(forge: Forge, *repos: Repo) -> None:
    for repo in repos:
        forge.indexer.schedule(repo, forge.live.state(repo).snapshot())


def _done_order(forge: Forge) -> list[tuple[str, dict[str, tuple[int, int] | None]]]:
    """Record, as each repository's indexing ends, the progress of every repository."""
    order: list[tuple[str, dict[str, tuple[int, int] | None]]] = []
    names = {r.id: r.full_name for r in forge.registry.all()}

    def done(repo: Repo, added: int) -> None:
        order.append((repo.full_name, {names[i]: forge.indexer.progress(i) for i in sorted(names)}))

    forge.indexer.on_indexed.append(done)
    return order


def test_a_small_repository_queued_behind_a_large_one_is_indexed_first(forge: Forge) -> None:
    big, small = _repo(forge, "big", "one"), _repo(forge, "small", "solo")
    order = _done_order(forge)
    _queue(forge, big, small)
    forge.indexer.start()
    wait_for(forge.indexer.idle, timeout=300)
    assert [name for name, _ in order] == ["small/solo", "big/one"]
    _, progress = order[0]
    indexed, known = progress["big/one"] or (0, 0)
    assert indexed < known / 2  # the large one had most of its history still to do
    assert progress["small/solo"] == (1, 1)


def test_a_repository_a_page_waits_for_goes_first(forge: Forge) -> None:
    one, two = _repo(forge, "big", "one"), _repo(forge, "big", "two")
    order = _done_order(forge)
    _queue(forge, one, two)
    client = testing.TestClient(create_app(forge))
    page = client.simulate_get("/big/two/commits/branch/main/README.md")
    assert page.status_code == 200 and "being prepared" in page.text
    forge.indexer.start()
    wait_for(forge.indexer.idle, timeout=300)
    assert [name for name, _ in order] == ["big/two", "big/one"]
    other = order[0][1]["big/one"]  # queued first, yet hardly begun
    assert other is None or other[0] < other[1] / 2


def test_a_recent_path_answers_before_the_history_is_indexed(forge: Forge, repos: Path) -> None:
    repo = _repo(forge, "big", "one")
    root = repos / "big/one.git"
    tip = bytes.fromhex(git_text(root, "rev-parse", "main"))
    path = git(root, "log", "-1", "--format=", "--name-only", "main").split(b"\n")[0]
    expected = git_text(root, "log", "-5", "--format=%H", "main", "--", path.decode()).split()
    answered: list[tuple[list[str], int, int]] = []

    def ask(repo_: Repo, job: IndexJob) -> None:
        if answered:
            return
        page = forge.answers.path_history(repo.id, tip, path, 0, 5)
        progress = forge.indexer.progress(repo.id)
        if page is not None and progress is not None:
            answered.append(([c.hex() for c in page.commits], *progress))

    forge.indexer.on_slice.append(ask)
    _queue(forge, repo)
    forge.indexer.start()
    wait_for(forge.indexer.idle, timeout=300)
    assert answered, "never answered"
    commits, indexed, known = answered[0]
    assert commits == expected
    assert known == int(git_text(root, "rev-list", "--count", "--all"))
    assert indexed <= 2 * SLICE < known  # after a slice or two, of about 22


def test_a_stopped_index_goes_on_where_it_stopped(repos: Path, tmp_path: Path) -> None:
    first = _forge(repos, tmp_path / "data", index_slice_commits=SLICE)
    repo = _repo(first, "big", "one")
    job = IndexJob(repo, first.live.state(repo).snapshot())
    for _ in range(5):  # the commits, then four slices of changed paths
        assert not first.indexer.work(job)
    floorless.index.indexer._close(job)
    assert first.indexer.commits_indexed == 4 * SLICE
    first.stop()
    first.db.close()

    again = _forge(repos, tmp_path / "data", index_slice_commits=SLICE)
    try:
        repo = _repo(again, "big", "one")
        root = repos / "big/one.git"
        total = int(git_text(root, "rev-list", "--count", "--all"))
        assert again.indexer.update(repo, again.live.state(repo).snapshot()) == 0  # none new
        assert again.indexer.commits_indexed == total - 4 * SLICE
        graph = again.indexer.graph(repo.id)
        assert graph is not None and graph.indexed == len(graph) == total
        tip = git_text(root, "rev-parse", "main")
        for path in (b"rare.txt", b"README.md", b"dir0", b"side"):
            walk = graph.walk([graph.seq[bytes.fromhex(tip)]], path)
            assert graph.history(walk, 100_000)
            got = [graph.oids[s].hex() for s in walk.page(0, 100_000).commits]
            assert got == git_text(root, "log", "--format=%H", tip, "--", path.decode()).split()
    finally:
        again.stop()


def test_the_loaded_index_is_packed(repos: Path, tmp_path: Path) -> None:
    first = _forge(repos, tmp_path / "data")
    repo = _repo(first, "big", "one")
    total = first.indexer.update(repo, first.live.state(repo).snapshot())
    assert total > 10_000
    first.stop()
    first.db.close()
    del first

    again = _forge(repos, tmp_path / "data")
    try:
        repo = _repo(again, "big", "one")
        snapshot = again.live.state(repo).snapshot()
        gc.collect()
        before = len(gc.get_objects())
        assert again.indexer.update(repo, snapshot) == 0  # loads the stored index
        gc.collect()
        tracked = len(gc.get_objects()) - before
        graph = again.indexer.graph(repo.id)
        assert graph is not None and len(graph.oids) == total
        assert tracked < 1000  # not one per commit: the collector has nothing to walk
        assert isinstance(graph.times, array)
        assert not any(isinstance(v, (set, frozenset)) for v in vars(graph).values())
    finally:
        again.stop()


def test_pages_say_how_far_the_index_is(forge: Forge, monkeypatch: pytest.MonkeyPatch) -> None:
    # what git would answer before the index does is held back (test_first_visits.py)
    monkeypatch.setattr(forge.answers, "_defer", lambda *args, **kwargs: None)
    repo = _repo(forge, "big", "one")
    job = IndexJob(repo, forge.live.state(repo).snapshot())
    try:
        for _ in range(2):  # the commits, then one slice of changed paths
            assert not forge.indexer.work(job)
    finally:
        floorless.index.indexer._close(job)
    known = len(forge.indexer.graph(repo.id) or ())
    client = testing.TestClient(create_app(forge))
    page = client.simulate_get("/big/one/commits/branch/main/rare.txt")
    assert page.status_code == 200 and "being prepared" in page.text
    assert f"{SLICE} of {known:,} commits" in page.text
    assert "refresh" not in page.headers  # the page fetches itself again: no reload
    home = client.simulate_get("/big/one")
    assert f"{SLICE} of {known:,} commits" in home.text
    tip = git_text(Path(repo.path), "rev-parse", "main")
    column = client.simulate_get(f"/big/one/-/last/{tip}")
    assert column.status_code == 202 and column.json["progress"] == [SLICE, known]


def test_an_index_the_database_failed_waits_and_goes_on(
    forge: Forge, repos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slice the database could not take (it was unreachable) is no failure of the
    repository: the job waits, starts again from what was stored, and the index completes."""
    store = floorless.index.indexer.write_changes
    failed: list[int] = []

    def unreachable_once(*args: object, **kwargs: object) -> None:
        if len(failed) < 1 and forge.indexer.commits_indexed >= SLICE:
            failed.append(1)
            raise DatabaseUnavailable("the database cannot be reached; try again shortly")
        store(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(floorless.index.indexer, "write_changes", unreachable_once)
    monkeypatch.setattr(floorless.index.indexer, "DATABASE_RETRY", 0.1)
    repo = _repo(forge, "big", "one")
    _queue(forge, repo)
    forge.indexer.start()
    wait_for(lambda: bool(failed) and forge.indexer.idle(), timeout=300)
    total = int(git_text(repos / "big/one.git", "rev-list", "--count", "--all"))
    graph = forge.indexer.graph(repo.id)
    assert repo.id not in forge.indexer.failures
    assert graph is not None and graph.indexed == len(graph) == total
