"""Refs and the repository list come from memory; changes made behind floorless's back (a
commit written straight into a repository, a repository added or removed) show up after the
background check, and pages never read refs or scan directories themselves."""

from __future__ import annotations

import shutil
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import EPOCH_START, build_one, build_solo, git, git_text, git_text_input

import floorless.repos.registry
import floorless.repos.state
from floorless.cli import main
from floorless.core.errors import NotFound
from floorless.web.app import create_app


class _Calls:
    """Counts calls of a patched function, by the thread that made them."""

    def __init__(self) -> None:
        self.by_thread: Counter[int] = Counter()
        self.lock = threading.Lock()

    def wrap(self, func):
        def wrapper(*args, **kwargs):
            with self.lock:
                self.by_thread[threading.get_ident()] += 1
            return func(*args, **kwargs)

        return wrapper

    def here(self) -> int:
        with self.lock:
            return self.by_thread[threading.get_ident()]

    def elsewhere(self) -> int:
        with self.lock:
            me = threading.get_ident()
            return sum(n for t, n in self.by_thread.items() if t != me)


@pytest.fixture
def repos(repos_copy: Path) -> Path:
    # the big history is not needed here; indexing it would only slow the forge's start
    shutil.rmtree(repos_copy / "alice" / "history.git")
    return repos_copy


@pytest.fixture
def live(repos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ref_reads, scans = _Calls(), _Calls()
    monkeypatch.setattr(
        floorless.repos.state, "read_snapshot", ref_reads.wrap(floorless.repos.state.read_snapshot)
    )
    monkeypatch.setattr(
        floorless.repos.registry, "discover", scans.wrap(floorless.repos.registry.discover)
    )
    forge = start_forge(repos, tmp_path / "data", ref_check_interval=0.2, rescan_interval=0.5)
    try:
        yield forge, testing.TestClient(create_app(forge)), ref_reads, scans
    finally:
        forge.stop()


def _commit_behind_the_back(repo: Path, content: bytes, message: str) -> str:
    """A new commit on main written with plumbing only, as a push straight to disk would."""
    old = git_text(repo, "rev-parse", "main")
    blob = git_text_input(repo, content, "hash-object", "-w", "--stdin")
    tree = git_text_input(repo, f"100644 blob {blob}\tREADME.md\n".encode(), "mktree")
    when = EPOCH_START + 3600
    new = git(repo, "commit-tree", tree, "-p", old, "-m", message, when=when).decode().strip()
    git(repo, "update-ref", "refs/heads/main", new, old)
    return new


def test_a_commit_made_behind_the_back_shows_up(live, repos):
    forge, client, ref_reads, scans = live
    one = repos / "alice" / "one.git"
    old = git_text(one, "rev-parse", "main")
    first = client.simulate_get("/alice/one")
    assert first.status_code == 200 and old in first.text
    reads_before, scans_before = ref_reads.here(), scans.here()

    repo = forge.registry.get("alice", "one")
    cached = forge.live.state(repo).snapshot()
    new = _commit_behind_the_back(
        one, b"# One\n\nChanged behind floorless's back.\n", "Change the README directly"
    )
    right_after = client.simulate_get("/alice/one")
    assert right_after.status_code == 200
    if forge.live.state(repo).snapshot() is cached:
        # the background check has not run yet, so the page came from the cached refs
        assert old in right_after.text and new not in right_after.text

    def shows_new() -> bool:
        page = client.simulate_get("/alice/one")
        return page.status_code == 200 and new in page.text

    wait_for(shows_new, timeout=30)
    page = client.simulate_get("/alice/one").text
    assert "<p>Changed behind floorless" in page  # the new README, rendered
    commits = client.simulate_get("/alice/one/commits/branch/main").text
    assert new in commits and old in commits
    raw = client.simulate_get("/alice/one/raw/branch/main/README.md")
    assert raw.content == b"# One\n\nChanged behind floorless's back.\n"
    wait_for(lambda: "2 commits" in client.simulate_get("/alice/one").text, timeout=30)

    # the pages never read refs or scanned the directory: the background thread did
    assert ref_reads.here() == reads_before
    assert scans.here() == scans_before
    assert ref_reads.elsewhere() > 0


def test_ref_checks_read_refs_only_when_something_moved(live, repos):
    """The background check compares file and directory status first (which lets request
    threads run while slow storage answers); libgit2 reads the refs only after a change."""
    forge, client, ref_reads, _ = live
    one = repos / "alice" / "one.git"
    assert client.simulate_get("/alice/one").status_code == 200
    forge.stop()  # the checks below run here, not in the background thread
    before = sum(ref_reads.by_thread.values())
    for _ in range(3):
        assert forge.maintenance.check_refs() == 0
    assert sum(ref_reads.by_thread.values()) == before
    _commit_behind_the_back(one, b"moved\n", "Move main")
    assert forge.maintenance.check_refs() == 1
    git(one, "branch", "side", "main")  # a new ref in refs/heads
    assert forge.maintenance.check_refs() == 1
    git(one, "pack-refs", "--all")  # loose refs into packed-refs: the same refs
    assert forge.maintenance.check_refs() == 0
    git(one, "tag", "v9")
    assert forge.maintenance.check_refs() == 1
    assert "v9" in client.simulate_get("/alice/one/tags").text


def test_repositories_added_and_removed_behind_the_back(live, repos, tmp_path):
    forge, client, _ref_reads, scans = live
    assert client.simulate_get("/dave/fresh").status_code == 404
    staging = tmp_path / "staging" / "fresh.git"
    build_one(staging)
    (repos / "dave").mkdir()
    staging.rename(repos / "dave" / "fresh.git")
    scans_before = scans.here()

    wait_for(lambda: 'href="/dave/fresh"' in client.simulate_get("/").text, timeout=30)
    home = client.simulate_get("/dave/fresh")
    assert home.status_code == 200 and "Hello." in home.text
    assert 'href="/dave/fresh"' in client.simulate_get("/dave").text

    shutil.rmtree(repos / "alice" / "one.git")
    wait_for(lambda: client.simulate_get("/alice/one").status_code == 404, timeout=30)
    assert 'href="/alice/one"' not in client.simulate_get("/").text
    assert client.simulate_get("/alice/one/raw/branch/main/README.md").status_code == 404
    with pytest.raises(NotFound):
        forge.registry.get("alice", "one")
    # other repositories were never disturbed
    assert client.simulate_get("/alice/demo").status_code == 200
    assert scans.here() == scans_before  # the scans ran in the background
    assert scans.elsewhere() > 0


def test_a_repository_replaced_at_the_same_path_shows_nothing_of_the_old(live, repos, tmp_path):
    """The handle to a removed repository is dropped with it: a new repository at the same
    path must not answer for the old one's objects (its pack files stay readable through
    an open handle after they are deleted)."""
    _forge, client, _ref_reads, _scans = live
    one = repos / "alice" / "one.git"
    old = git_text(one, "rev-parse", "main")
    assert client.simulate_get(f"/alice/one/commit/{old}").status_code == 200
    git(one, "repack", "-adq")  # its objects in a pack the handle maps
    assert client.simulate_get(f"/alice/one/commit/{old}").status_code == 200
    shutil.rmtree(one)
    wait_for(lambda: client.simulate_get("/alice/one").status_code == 404, timeout=30)
    staging = tmp_path / "staging" / "one.git"
    build_solo(staging)  # other content, so other object ids
    staging.rename(one)
    wait_for(lambda: "No owner." in client.simulate_get("/alice/one").text, timeout=30)
    assert git_text(one, "rev-parse", "main") != old
    assert client.simulate_get(f"/alice/one/commit/{old}").status_code == 404


def test_admin_rescan_adds_a_repository_at_once(repos, tmp_path):
    data = tmp_path / "data"
    forge = start_forge(repos, data)  # the default rescan interval: 30 s
    try:
        client = testing.TestClient(create_app(forge))
        assert client.simulate_get("/dave/fresh").status_code == 404
        staging = tmp_path / "staging" / "fresh.git"
        build_one(staging)
        (repos / "dave").mkdir()
        staging.rename(repos / "dave" / "fresh.git")
        with pytest.raises(NotFound):
            forge.registry.get("dave", "fresh")

        result = CliRunner().invoke(
            main, ["admin", "rescan", "--data", str(data), "--repos", str(repos)]
        )
        assert result.exit_code == 0, result.output
        assert "1 added" in result.output

        # on PostgreSQL the running forge hears of the command's write a moment later
        wait_for(lambda: client.simulate_get("/dave/fresh").status_code == 200, timeout=10)
        repo = forge.registry.get("dave", "fresh")
        assert repo.path == repos / "dave" / "fresh.git"
        home = client.simulate_get("/dave/fresh")
        assert home.status_code == 200 and "Hello." in home.text

        shutil.rmtree(repos / "dave" / "fresh.git")
        result = CliRunner().invoke(
            main, ["admin", "rescan", "--data", str(data), "--repos", str(repos)]
        )
        assert result.exit_code == 0 and "1 missing" in result.output
        assert forge.registry.get("dave", "fresh")  # one scan missing it is not proof
        result = CliRunner().invoke(
            main, ["admin", "rescan", "--data", str(data), "--repos", str(repos)]
        )
        assert result.exit_code == 0 and "1 removed" in result.output
        wait_for(lambda: client.simulate_get("/dave/fresh").status_code == 404, timeout=10)
        with pytest.raises(NotFound):
            forge.registry.get("dave", "fresh")
    finally:
        forge.stop()


def test_feed_with_control_characters_is_valid_xml(repos_copy, tmp_path):
    """A commit message holding control characters still gives a feed that parses."""
    repo = repos_copy / "alice" / "one.git"
    tree = git(repo, "rev-parse", "main^{tree}").decode().strip()
    parent = git(repo, "rev-parse", "main").decode().strip()
    commit = git(repo, "commit-tree", tree, "-p", parent, input=b"bell \x07 and escape \x1b\n")
    git(repo, "update-ref", "refs/heads/main", commit.decode().strip())
    forge = start_forge(repos_copy, tmp_path / "data")
    try:
        wait_indexed(forge)
        client = testing.TestClient(create_app(forge))
        for kind in ("atom", "rss"):
            result = client.simulate_get(f"/alice/one/{kind}/branch/main")
            assert result.status_code == 200
            ET.fromstring(result.content)  # raises on characters XML forbids
            assert "bell" in result.text
    finally:
        forge.stop()
