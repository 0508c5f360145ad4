"""What a first visit asks is answered before the whole history is indexed.

The bulk index goes newest commits first, a slice at a time; a directory's last-commit
column and a path's first history page may need commits far older than what it holds. Here
the indexer's thread never runs past what the test does by hand (one slice of 500 of the
10,500-commit history, or none), so the index is provably unfinished when the answers
arrive: they come from the background git work the page's request started, and they are
git's own.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from falcon import testing
from support.forges import wait_for
from support.gitfixtures import git_text

import floorless.git.changed
import floorless.git.lastchanged
import floorless.index.answers
import floorless.index.indexer
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.git.changed import path_log
from floorless.git.env import GitEnvironment
from floorless.git.repo import open_repository
from floorless.index.indexer import VIEWED_PAUSE, IndexJob
from floorless.repos.registry import Repo
from floorless.web.app import create_app

SLICE = 500


@pytest.fixture
def forge(fixture_root: Path, tmp_path: Path) -> Iterator[Forge]:
    repos = tmp_path / "repos"
    shutil.copytree(fixture_root / "alice/history.git", repos / "big/one.git")
    settings = Settings.load(
        environ={}, data=tmp_path / "data", repos=repos, index_slice_commits=SLICE
    )
    forge = Forge(settings)
    forge.start(background=False)  # the indexer's thread is never started
    yield forge
    forge.stop()


def _repo(forge: Forge) -> Repo:
    return forge.registry.get("big", "one")


def _slices(forge: Forge, repo: Repo, count: int) -> None:
    """The commits (the first slice), then ``count - 1`` slices of changed paths."""
    job = IndexJob(repo, forge.live.state(repo).snapshot())
    try:
        for _ in range(count):
            assert not forge.indexer.work(job)
    finally:
        floorless.index.indexer._close(job)


def _hold_an_answer(forge: Forge, key: str) -> threading.Event:
    """An answer a page waits for, begun: it runs until the event returned is set."""
    began, release = threading.Event(), threading.Event()

    def viewed() -> None:
        began.set()
        release.wait(60)

    forge.answers._defer((key,), viewed, viewed=True)
    assert began.wait(60)
    return release


def _last(root: Path, tip: str, path: str) -> str | None:
    return git_text(root, "log", "-1", "--format=%H", tip, "--", path).strip() or None


@pytest.mark.parametrize("limited", [True, False])
@pytest.mark.parametrize("directory", ["", "side"])
def test_a_column_completes_before_the_index(
    forge: Forge, directory: str, limited: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``limited``: git is asked about the entries left by name; else (more of them than
    LIMITED_PATHS) about every commit of their directory."""
    if not limited:
        monkeypatch.setattr(floorless.git.lastchanged, "LIMITED_PATHS", 0)
    repo = _repo(forge)
    root = Path(repo.path)
    tip = git_text(root, "rev-parse", "main").strip()
    _slices(forge, repo, 2)
    graph = forge.indexer.graph(repo.id)
    assert graph is not None and graph.indexed == SLICE < len(graph)
    client = testing.TestClient(create_app(forge))
    url = f"/big/one/-/last/{tip}" + (f"/{directory}" if directory else "")
    first = client.simulate_get(url)
    assert first.status_code == 202  # the recent slice alone cannot answer it
    wait_for(lambda: client.simulate_get(url).status_code == 200, timeout=120)
    column = client.simulate_get(url).json
    assert graph.indexed == SLICE  # no more of the index was built meanwhile
    assert forge.answers.rest_answered == 1
    names = git_text(root, "ls-tree", "--name-only", tip + ":" + directory).split()
    prefix = directory + "/" if directory else ""
    expected = {name: _last(root, tip, prefix + name) for name in names}
    got = {bytes.fromhex(k).decode(): v["id"] for k, v in column["entries"].items()}
    assert got == expected
    assert any(
        graph.seq[bytes.fromhex(c)] < len(graph) - SLICE for c in got.values()
    )  # some of them older than what the index holds


@pytest.mark.parametrize("path", ["rare.txt", "dir0/file05.txt", "side"])
def test_a_first_history_page_before_the_index(forge: Forge, path: str) -> None:
    repo = _repo(forge)
    root = Path(repo.path)
    limit = forge.settings.commits_per_page
    expected = git_text(root, "log", f"-{limit}", "--format=%H", "main", "--", path).split()
    client = testing.TestClient(create_app(forge))
    url = f"/big/one/commits/branch/main/{path}"
    page = client.simulate_get(url)
    assert page.status_code == 200 and "being prepared" in page.text
    wait_for(lambda: "being prepared" not in client.simulate_get(url).text, timeout=120)
    shown = client.simulate_get(url).text
    assert forge.indexer.graph(repo.id) is None  # not even the commits were indexed
    assert forge.answers.first_pages == 1
    positions = [shown.find(f"/commit/{c}") for c in expected]
    assert -1 not in positions and positions == sorted(positions)
    more = git_text(root, "rev-list", "--count", "main", "--", path).strip()
    assert ('rel="next"' in shown) == (int(more) > limit)


def _root_column_before_the_index(forge: Forge) -> tuple[dict[str, str], dict[str, str | None]]:
    """The root's last-commit column of the test repository as its page gets it (202 until
    it is known), answered before the index has begun, and git's own answer for it."""
    repo = _repo(forge)
    root = Path(repo.path)
    tip = git_text(root, "rev-parse", "main").strip()
    client = testing.TestClient(create_app(forge))
    url = f"/big/one/-/last/{tip}"
    assert client.simulate_get(url).status_code == 202
    wait_for(lambda: client.simulate_get(url).status_code == 200, timeout=120)
    column = client.simulate_get(url).json
    assert forge.indexer.graph(repo.id) is None  # the index has not begun
    names = git_text(root, "ls-tree", "--name-only", tip).split()
    expected = {name: _last(root, tip, name) for name in names}
    got = {bytes.fromhex(k).decode(): v["id"] for k, v in column["entries"].items()}
    return got, expected


def test_a_small_column_before_the_commits_are_known(forge: Forge) -> None:
    """Before even the index's first slice (every commit's id and parents): a directory of
    a few entries is asked of git entry by entry."""
    got, expected = _root_column_before_the_index(forge)
    assert got == expected


def test_a_column_asked_entry_by_entry_stops_once_the_index_has_caught_up(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git is asked for no more entries once the index holds the whole history: on slow
    storage an entry can take git seconds, and a small repository's index is done before
    its column. The page's next poll answers from the index, as git would."""
    repo = _repo(forge)
    root = Path(repo.path)
    tip = git_text(root, "rev-parse", "main").strip()
    names = git_text(root, "ls-tree", "--name-only", tip).split()
    assert 2 < len(names) <= floorless.index.answers.ONE_BY_ONE
    asked: list[bytes] = []
    real = floorless.git.lastchanged.path_log

    def path_log(git: GitEnvironment, git_dir: Path, start: bytes, path: bytes, *more: Any):
        asked.append(path)
        if len(asked) == 1:  # the whole index is built while git answers the first entry
            _slices(forge, repo, 1)
            job = IndexJob(repo, forge.live.state(repo).snapshot())
            try:
                while not forge.indexer.work(job):
                    pass
            finally:
                floorless.index.indexer._close(job)
        return real(git, git_dir, start, path, *more)

    monkeypatch.setattr(floorless.git.lastchanged, "path_log", path_log)
    forge.answers._last_one_by_one(repo, bytes.fromhex(tip), b"", [n.encode() for n in names])
    assert asked == [names[0].encode()]  # not one git a name
    assert forge.answers.rest_answered == 0  # git's half answer is not stored
    client = testing.TestClient(create_app(forge))
    url = f"/big/one/-/last/{tip}"
    wait_for(lambda: client.simulate_get(url).status_code == 200, timeout=120)
    column = client.simulate_get(url).json
    got = {bytes.fromhex(k).decode(): v["id"] for k, v in column["entries"].items()}
    assert got == {name: _last(root, tip, name) for name in names}
    assert len(asked) == 1


def test_git_asked_for_an_entry_is_ended_once_its_answer_is_not_wanted(
    fixture_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While git walks for one entry, whether the answer is still wanted is asked every
    STOP_POLL seconds: no longer wanted, git is killed and nothing is answered; wanted, the
    answer is git's whole, however many times it was asked meanwhile."""
    git = GitEnvironment(tmp_path / "run")
    git.prepare()
    root = fixture_root / "alice/history.git"
    tip = bytes.fromhex(git_text(root, "rev-parse", "main").strip())
    ended: list[int | None] = []
    stop = floorless.git.changed._stop

    def recorded(proc: subprocess.Popen[bytes]) -> None:
        stop(proc)
        ended.append(proc.returncode)

    monkeypatch.setattr(floorless.git.changed, "_stop", recorded)
    monkeypatch.setattr(floorless.git.changed, "STOP_POLL", 0.0)  # asked before git is done
    looks = [0]

    def not_wanted() -> bool:
        looks[0] += 1
        return True

    assert path_log(git, root, tip, b"rare.txt", 3, stopped=not_wanted) is None
    assert looks[0] == 1 and ended == [-signal.SIGKILL]
    monkeypatch.setattr(floorless.git.changed, "STOP_POLL", 0.001)
    wanted = path_log(git, root, tip, b"rare.txt", 3, stopped=lambda: False)
    expected = git_text(root, "rev-list", "-3", "main", "--", "rare.txt").split()
    assert wanted is not None and [c.hex() for c in wanted] == expected
    assert ended[-1] == 0


def test_the_bulk_index_makes_way_for_a_viewed_answer_for_a_while(forge: Forge) -> None:
    """While git answers what a page waits for, a slice of the bulk index stops after its
    first commit and no next one is taken; for VIEWED_PAUSE seconds at most, and a pause
    that ended does not begin again before as long again has passed."""
    indexer = forge.indexer
    repo = _repo(forge)
    _slices(forge, repo, 1)  # the commits
    release = _hold_an_answer(forge, "viewed")
    now = time.monotonic()
    assert indexer._paused(now) and not indexer._paused(now + VIEWED_PAUSE)
    job = IndexJob(repo, forge.live.state(repo).snapshot(), fresh=False)
    try:
        assert not indexer.work(job)
    finally:
        floorless.index.indexer._close(job)
    assert indexer.commits_indexed == 1  # cut short, not SLICE
    release.set()
    wait_for(lambda: not indexer._paused(time.monotonic()))
    since = indexer._viewed_since
    again = _hold_an_answer(forge, "again")
    assert indexer._viewed_since == since  # the same window: no new pause past its end
    again.set()


def test_a_paused_bulk_index_waits_for_the_pause_rather_than_spinning(forge: Forge) -> None:
    """A job ready while the bulk index pauses waits on the condition for the pause's end
    (or the answer's): it does not poll it with waits of no time, which took the very
    interpreter the pause was giving to the page's answer."""
    indexer = forge.indexer
    repo = _repo(forge)
    indexer.schedule(repo, forge.live.state(repo).snapshot())  # ready now
    release = _hold_an_answer(forge, "viewed")
    waits = 0
    real_wait = indexer._wake.wait

    def counted(timeout: float | None = None) -> bool:
        nonlocal waits
        waits += 1
        return real_wait(timeout)

    indexer._wake.wait = counted  # type: ignore[method-assign]
    taken: list[IndexJob | None] = []
    taker = threading.Thread(target=lambda: taken.append(indexer._take()))
    taker.start()
    wait_for(lambda: waits >= 1)
    time.sleep(0.2)  # room for a spinning taker to spin
    release.set()  # the answer is in: the pause ends, the job is taken
    taker.join(60)
    assert taken and taken[0] is not None and taken[0].repo.id == repo.id
    assert waits <= 3, waits  # spinning, it was tens of thousands


def test_git_is_asked_for_a_column_once_a_slice_is_in(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big directory's entries left after the recent history are asked of git only once a
    whole slice of it is indexed: after one commit (a slice cut short) git would be asked
    for nearly every entry, over every commit. (Not the root's: see
    ``test_a_wide_root_is_diffed_in_parts_before_the_commits_are_known``.)"""
    asked: list[tuple[object, ...]] = []
    monkeypatch.setattr(forge.answers, "_defer", lambda key, *args, **kwargs: asked.append(key))
    monkeypatch.setattr(floorless.index.answers, "ONE_BY_ONE", 0)  # none is small enough
    repo = _repo(forge)
    tip = git_text(Path(repo.path), "rev-parse", "main").strip()
    client = testing.TestClient(create_app(forge))
    job = IndexJob(repo, forge.live.state(repo).snapshot())
    try:
        assert not forge.indexer.work(job)  # the commits
        forge.indexer.slice_commits = 1  # (as a slice a viewed answer cut short)
        assert not forge.indexer.work(job)
        forge.indexer.slice_commits = SLICE
        assert client.simulate_get(f"/big/one/-/last/{tip}/side").status_code == 202
        assert asked == []
        assert not forge.indexer.work(job)
        assert client.simulate_get(f"/big/one/-/last/{tip}/side").status_code == 202
        assert [key[0] for key in asked] == ["last"]
    finally:
        floorless.index.indexer._close(job)


def _hold_a_pause(forge: Forge) -> threading.Event:
    """A viewed answer that runs until the returned event is set: the bulk index pauses."""
    began, release = threading.Event(), threading.Event()

    def viewed() -> None:
        began.set()
        release.wait(60)

    forge.answers._defer(("viewed",), viewed, viewed=True)
    assert began.wait(60)
    return release


def test_code_search_indexing_makes_way_for_a_viewed_answer(forge: Forge) -> None:
    """Code search's index shares the interpreter: it reads no blob while a page's answer
    runs in the background, and goes on once it is in."""
    repo = _repo(forge)
    release = _hold_a_pause(forge)
    indexing = threading.Thread(target=forge.code.index, args=(repo,))
    try:
        indexing.start()
        wait_for(lambda: forge.indexer.made_way == 1)
        assert forge.code.blobs_read == 0
    finally:
        release.set()
    indexing.join(60)
    assert not indexing.is_alive()
    assert forge.code.blobs_read > 0
    assert forge.code.indexed(repo.id) is not None
    assert forge.indexer.made_way == 1


def test_code_search_waits_for_a_pause_only_within_its_window(forge: Forge) -> None:
    """A pause that outlasts its window holds code search no longer than the bulk index."""
    repo = _repo(forge)
    indexer = forge.indexer
    release = _hold_a_pause(forge)
    indexing = threading.Thread(target=forge.code.index, args=(repo,))
    try:
        indexing.start()
        wait_for(lambda: indexer.made_way == 1)
        assert forge.code.blobs_read == 0
        with indexer._wake:  # the window ends (as VIEWED_PAUSE seconds would end it)
            indexer._viewed_since -= VIEWED_PAUSE
            indexer._wake.notify_all()
        indexing.join(60)
        assert not indexing.is_alive()
        assert indexer._viewed == 1  # the viewed answer still runs
        assert forge.code.blobs_read > 0
    finally:
        release.set()


def test_a_wide_root_is_diffed_in_parts_before_the_commits_are_known(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root too wide to ask git entry by entry (git.git's has 561 entries) is not left
    waiting for the index: from the first request, git diffs every commit's root, in
    PARTS processes side by side, and its answer is exact before the index knows a commit."""
    monkeypatch.setattr(floorless.index.answers, "ONE_BY_ONE", 0)  # none is small enough
    spawned: list[list[str]] = []
    real_popen = GitEnvironment.popen

    def counted(self: GitEnvironment, git_dir: Path, args: list[str], *rest, **kwargs):
        spawned.append(list(args))
        return real_popen(self, git_dir, args, *rest, **kwargs)

    monkeypatch.setattr(GitEnvironment, "popen", counted)
    got, expected = _root_column_before_the_index(forge)
    assert forge.answers.rest_answered == 1
    assert got == expected
    diffs = [args for args in spawned if args[0] == "diff-tree"]
    assert len(diffs) == floorless.git.lastchanged.PARTS == 2
    assert all("-r" not in args for args in diffs)  # the root's entries, not what is below
    # one walk of the history gives both the diffs' lines and the order they are walked in
    assert sorted(args[0] for args in spawned) == ["diff-tree"] * 2 + ["rev-list"]


@pytest.mark.parametrize("parts", [1, 3, 7])
def test_a_wide_root_in_any_number_of_parts(
    forge: Forge, parts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However the commits are shared out, the answer is git's, merges and their side
    branches included: git diffs each commit against its first parent alone, and a merge's
    other parents are asked, in process, only of the entries that differ from the first."""
    repo = _repo(forge)
    root = Path(repo.path)
    tip = git_text(root, "rev-parse", "main").strip()
    names = git_text(root, "ls-tree", "--name-only", tip).split()
    git = forge.indexer.git
    assert git is not None
    asked: list[set[bytes]] = []
    real_differing = floorless.git.lastchanged.differing

    def differing(*args: Any) -> set[bytes]:
        asked.append(set(args[3]))
        return real_differing(*args)

    monkeypatch.setattr(floorless.git.lastchanged, "differing", differing)
    found = floorless.git.lastchanged.root_last(
        git, open_repository(root), bytes.fromhex(tip), [n.encode() for n in names], parts
    )
    got = {name.decode(): None if c is None else c.hex() for name, c in found.items()}
    assert got == {name: _last(root, tip, name) for name in names}
    first_parents = set(git_text(root, "rev-list", "--first-parent", tip).split())
    assert set(got.values()) - first_parents  # some answers lie on a side branch
    merges = int(git_text(root, "rev-list", "--merges", "--count", tip).strip())
    assert 0 < len(asked) <= merges  # only merges that changed a travelling entry, each once
    assert all(0 < len(entries) < len(names) for entries in asked)


def test_the_commits_of_the_index_make_way_for_a_viewed_answer(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's first slice (every commit's id and parents) waits while git answers what
    a page waits for, as its later slices do: that answer needs none of them."""
    monkeypatch.setattr(floorless.index.indexer, "MAKE_WAY_EVERY", 100)
    indexer = forge.indexer
    repo = _repo(forge)
    release = _hold_an_answer(forge, "viewed")
    job = IndexJob(repo, forge.live.state(repo).snapshot())
    working = threading.Thread(target=indexer.work, args=(job,))
    try:
        working.start()
        wait_for(lambda: indexer.made_way == 1)
        graph = indexer.graph(repo.id)
        assert graph is not None and len(graph) == 100  # it stopped at its first look
    finally:
        release.set()
        working.join(60)
        floorless.index.indexer._close(job)
    assert not working.is_alive()
    graph = indexer.graph(repo.id)
    assert graph is not None
    assert len(graph) == int(git_text(Path(repo.path), "rev-list", "--all", "--count").strip())
