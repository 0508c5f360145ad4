"""One owner per repository's state: ``RepoState.forget()`` drops the handle, the snapshot,
the rendered pages, the answers in memory, the commit graph and the reachability marks
together, and every way a repository goes (delete, rename, replacement at its path, gone
after two scans) goes through it; a pack removed behind floorless's back reopens the handle
alone."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.forges import wait_indexed
from support.gitfixtures import EPOCH_START, build_one, build_solo, git, git_text, git_text_input

import floorless
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.repos.registry import Repo
from floorless.repos.state import RepoState
from floorless.web.app import create_app
from floorless.web.pages import PageCache

PAGES = ("/alice/one", "/alice/one/src/branch/main/README.md", "/alice/one/commits/branch/main")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Forge, testing.TestClient]]:
    """A forge over alice/one and alice/two, no background thread (the test runs the checks
    and scans), every page of alice/one served twice (cached) and both indexed."""
    repos = tmp_path / "repos"
    build_one(repos / "alice" / "one.git")
    build_solo(repos / "alice" / "two.git")
    forge = Forge(Settings.load(environ={}, data=tmp_path / "data", repos=repos))
    forge.start(background=False)
    forge.indexer.start()
    try:
        client = testing.TestClient(create_app(forge))
        for repo in forge.registry.all():
            forge.live.snapshot(repo)
        wait_indexed(forge)
        for url in PAGES * 2:
            assert client.simulate_get(url).status_code == 200, url
        yield forge, client
    finally:
        forge.stop()


def _pages(forge: Forge) -> PageCache:
    (pages,) = [part for part in forge.states.parts() if isinstance(part, PageCache)]
    return pages


def held(forge: Forge, repo: Repo) -> dict[str, bool]:
    """Which pieces of ``repo``'s state the forge keeps in memory."""
    state = forge.states.at(repo.path)
    other = state is not None and state.repo.id != repo.id  # a newer repository at its path
    return {
        "state": state is not None and not other,
        "handle": repo.path in forge.handles and not other,
        "snapshot": state is not None and not other and state.loaded,
        "pages": _pages(forge).held(repo.id) > 0,
        "answers": forge.answers.cache.held(repo.id) > 0,
        "graph": forge.indexer.graph(repo.id) is not None,
        "marks": forge.indexer.reach.holds(repo.id),
    }


NOTHING = dict.fromkeys(
    ("state", "handle", "snapshot", "pages", "answers", "graph", "marks"), False
)


@pytest.fixture
def forgotten(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids of the repositories whose state was forgotten, in order."""
    calls: list[int] = []
    original = RepoState.forget

    def forget(self: RepoState) -> None:
        calls.append(self.repo.id)
        original(self)

    monkeypatch.setattr(RepoState, "forget", forget)
    return calls


def test_forget_drops_every_piece(served) -> None:
    forge, _ = served
    one, two = forge.registry.get("alice", "one"), forge.registry.get("alice", "two")
    assert held(forge, one) == dict.fromkeys(NOTHING, True)
    before = held(forge, two)
    forge.live.state(one).forget()
    assert held(forge, one) == NOTHING
    assert held(forge, two) == before  # another repository's pieces stay


def test_the_page_cache_never_serves_a_forgotten_repository(served) -> None:
    forge, client = served
    one = forge.registry.get("alice", "one")
    forge.live.state(one).forget()
    hits = _pages(forge).hits
    assert client.simulate_get(PAGES[0]).status_code == 200
    assert _pages(forge).hits == hits  # rendered again, from a new snapshot


def test_delete_goes_through_forget(served, forgotten) -> None:
    forge, client = served
    one = forge.registry.get("alice", "one")
    forge.lifecycle.delete(one)
    assert forgotten == [one.id]
    assert held(forge, one) == NOTHING
    assert client.simulate_get(PAGES[0]).status_code == 404


def test_rename_goes_through_forget(served, forgotten) -> None:
    forge, client = served
    one = forge.registry.get("alice", "one")
    renamed = forge.lifecycle.rename(one, "uno")
    assert forgotten == [one.id]
    assert held(forge, one) == NOTHING  # under the old path, and by id until read again
    assert client.simulate_get("/alice/uno").status_code == 200
    assert forge.states.at(renamed.path) is not None
    assert forge.states.by_id(one.id) is forge.states.at(renamed.path)


def test_a_repository_replaced_at_its_path_goes_through_forget(served, forgotten, tmp_path) -> None:
    """Another process deletes alice/one and creates a new alice/one (a new row id, the same
    path): the next scan forgets the old state, and the new repository's pages show it."""
    forge, client = served
    old = forge.registry.get("alice", "one")
    forge.registry.delete(old)  # behind this forge's back: its state is not told
    new = forge.registry.create("alice", "one")
    assert new.path == old.path and new.id > old.id
    handle = forge.live.open(old)
    forge.maintenance.rescan()
    assert forgotten == [old.id]
    assert held(forge, old) == NOTHING
    assert forge.live.open(new) is not handle
    page = client.simulate_get("/alice/one")
    assert page.status_code == 200 and "Hello." not in page.text  # empty: not the old one's


def test_a_request_for_the_new_row_forgets_the_replaced_state(served, forgotten) -> None:
    forge, _ = served
    old = forge.registry.get("alice", "one")
    forge.registry.delete(old)
    new = forge.registry.create("alice", "one")
    assert forge.live.snapshot(new).is_empty
    assert forgotten == [old.id]
    # an older row: the state of what is there
    assert forge.live.state(old) is forge.live.state(new)


def test_a_repository_gone_for_two_scans_goes_through_forget(served, forgotten, tmp_path) -> None:
    forge, client = served
    one = forge.registry.get("alice", "one")
    aside = tmp_path / "aside.git"
    one.path.rename(aside)
    forge.maintenance.rescan()
    assert forgotten == []  # missing once: kept, it may be back in a moment
    assert held(forge, one)["graph"]
    forge.maintenance.rescan()
    assert forgotten == [one.id]
    assert held(forge, one) == NOTHING
    assert client.simulate_get(PAGES[0]).status_code == 404


def test_a_ref_moved_through_floorless_is_read_again(served) -> None:
    forge, client = served
    one = forge.registry.get("alice", "one")
    state = forge.live.state(one)
    snapshot = state.snapshot()
    git(one.path, "branch", "side", "main")
    forge.moves.refs_moved(one)
    assert state.snapshot() is not snapshot and b"side" in state.snapshot().branches
    assert held(forge, one)["graph"]  # what is keyed by object ids stays
    assert "side" in client.simulate_get("/alice/one/branches").text


# -- a pack removed behind floorless's back ---------------------------------------------------


def _pack_files_open(paths: list[Path]) -> int:
    """File descriptors and memory mappings of ``paths`` this process holds."""
    names = [str(p) for p in paths]
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += any(target.startswith(name) for name in names)
    with open("/proc/self/maps") as maps:
        count += sum(any(name in line for name in names) for line in maps)
    return count


def _commit_behind_the_back(repo: Path) -> None:
    old = git_text(repo, "rev-parse", "main")
    blob = git_text_input(repo, b"repacked\n", "hash-object", "-w", "--stdin")
    tree = git_text_input(repo, f"100644 blob {blob}\tREADME.md\n".encode(), "mktree")
    new = git(repo, "commit-tree", tree, "-p", old, "-m", "More", when=EPOCH_START + 60)
    git(repo, "update-ref", "refs/heads/main", new.decode().strip(), old)


def test_a_repack_behind_the_back_reopens_the_handle(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    path = build_one(repos / "alice" / "one.git")
    git(path, "repack", "-adq")
    old_packs = sorted((path / "objects" / "pack").glob("pack-*"))
    assert any(p.suffix == ".pack" for p in old_packs)
    forge = Forge(Settings.load(environ={}, data=tmp_path / "data", repos=repos))
    forge.start(background=False)
    gc.disable()  # only the pool's collect may close the old handle here
    try:
        client = testing.TestClient(create_app(forge))
        one = forge.registry.get("alice", "one")
        assert client.simulate_get("/alice/one/raw/branch/main/README.md").status_code == 200
        snapshot, handle = forge.live.snapshot(one), forge.live.open(one)
        assert _pack_files_open(old_packs) > 0  # the page read the pack through the handle
        handle_id = id(handle)
        del handle

        assert forge.maintenance.check_refs() == 0
        assert id(forge.live.open(one)) == handle_id  # nothing changed: the same handle

        _commit_behind_the_back(path)
        git(path, "repack", "-adq")  # a new pack with everything; the old one removed
        assert not any(p.exists() for p in old_packs)
        assert forge.maintenance.check_refs() == 1  # main moved too
        assert one.path in forge.handles  # reopened at once, by the checking thread
        assert id(forge.live.open(one)) != handle_id
        forge.handles.collect()
        assert _pack_files_open(old_packs) == 0

        page = client.simulate_get("/alice/one/raw/branch/main/README.md")
        assert page.status_code == 200 and page.content == b"repacked\n"
        assert forge.live.snapshot(one) is not snapshot  # the refs moved: a new snapshot
    finally:
        gc.enable()
        forge.stop()


def test_a_repack_alone_keeps_the_snapshot_and_the_index(served) -> None:
    """Only the handle goes: the refs, graph, marks, answers and pages name objects by id."""
    forge, client = served
    one = forge.registry.get("alice", "one")
    state = forge.live.state(one)
    git(one.path, "repack", "-adq")  # loose objects into a first pack: no pack let go
    git(one.path, "commit-graph", "write", "--reachable")  # beside the packs, not in them
    snapshot, handle = state.snapshot(), state.handle()
    assert forge.maintenance.check_refs() == 0 and state.handle() is handle

    blob = git_text_input(one.path, b"kept aside\n", "hash-object", "-w", "--stdin")
    git(one.path, "update-ref", "refs/keep/aside", blob)  # neither a branch nor a tag
    git(one.path, "repack", "-adq")  # one more object: a new pack, the first one removed
    # the refs were read again: the same branches and tags
    assert forge.maintenance.check_refs() == 0
    assert state.handle() is not handle
    assert state.snapshot() is snapshot
    assert held(forge, one) == dict.fromkeys(NOTHING, True)
    hits = _pages(forge).hits
    assert client.simulate_get(PAGES[0]).status_code == 200
    assert _pages(forge).hits == hits + 1  # the page cached before the repack, served


def test_a_pack_directory_that_cannot_be_read_is_no_change(served) -> None:
    forge, _ = served
    one = forge.registry.get("alice", "one")
    state = forge.live.state(one)
    handle = state.handle()
    pack = one.path / "objects" / "pack"
    pack.rename(one.path / "objects" / "elsewhere")  # a failed stat tells nothing
    try:
        assert forge.maintenance.check_refs() == 0 and state.handle() is handle
    finally:
        (one.path / "objects" / "elsewhere").rename(pack)


def test_only_the_owner_drops_a_repositorys_entries() -> None:
    """No caller pokes the caches one by one: a repository's entries are dropped by its
    ``RepoState`` (the indexer and the answers forward to the parts they hold)."""
    allowed = {
        ".forget_repository(": {"state.py", "indexer.py", "answers.py"},
        "handles.forget(": {"state.py"},
        "reach.forget(": {"indexer.py"},
    }
    for source in Path(floorless.__file__).parent.rglob("*.py"):
        text = source.read_text()
        for call, owners in allowed.items():
            assert call not in text or source.name in owners, (source, call)
