"""Garbage collection is also the forge's housekeeping of packs: what it writes keeps chains
of deltas at most ``gc_pack_depth`` deep, and cuts the longer chains of a pack made elsewhere
(git's own default depth is 50), so that libgit2, which rebuilds an object from its whole
chain on each read, reads a history's trees quickly. Chain lengths are git's own count
(``git verify-pack -v``)."""

from __future__ import annotations

import re
from pathlib import Path

import pygit2
from support.forges import start_forge
from support.gitfixtures import git

VERSIONS = 40
WHEN = 1_700_000_000


def _deep_history(git_dir: Path) -> str:
    """A bare repository whose one file changes a little in each of ``VERSIONS`` commits,
    packed with git's default depth (50): its blobs' delta chains run longer than 10."""
    repo = pygit2.init_repository(str(git_dir), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)
    lines = [
        f"line {n}: some text that stays the same from one version to the next" for n in range(200)
    ]
    parents: list[pygit2.Oid] = []
    for version in range(VERSIONS):
        lines[version * 5 % 200] = f"line changed in version {version}"
        blob = repo.create_blob(("\n".join(lines) + "\n").encode())
        builder = repo.TreeBuilder()
        builder.insert("notes.txt", blob, pygit2.enums.FileMode.BLOB)
        tip = repo.create_commit(
            "refs/heads/main", sig, sig, f"Version {version}\n", builder.write(), parents
        )
        parents = [tip]
    git(git_dir, "repack", "-a", "-d", "-f", "-q", "--depth=50", "--window=50")
    return str(parents[0])


def _longest_chain(git_dir: Path) -> int:
    (index,) = (git_dir / "objects" / "pack").glob("*.idx")
    out = git(git_dir, "verify-pack", "-v", str(index)).decode()
    return max((int(n) for n in re.findall(r"^chain length = (\d+):", out, re.M)), default=0)


def test_collecting_a_repository_cuts_its_delta_chains(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    git_dir = repos / "alice" / "deep.git"
    tip = _deep_history(git_dir)
    assert _longest_chain(git_dir) > 10
    forge = start_forge(repos, tmp_path / "data", gc_interval=0)
    try:
        assert forge.garbage.collect(forge.registry.get("alice", "deep"))
    finally:
        forge.stop()
    assert 0 < _longest_chain(git_dir) <= 10
    assert git(git_dir, "rev-list", "--count", "main").strip() == str(VERSIONS).encode()
    assert git(git_dir, "rev-parse", "main").decode().strip() == tip
    git(git_dir, "fsck", "--strict", "--no-dangling")


def test_the_depth_is_a_setting(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    git_dir = repos / "alice" / "deep.git"
    _deep_history(git_dir)
    forge = start_forge(repos, tmp_path / "data", gc_interval=0, gc_pack_depth=3)
    try:
        assert forge.garbage.collect(forge.registry.get("alice", "deep"))
    finally:
        forge.stop()
    assert 0 < _longest_chain(git_dir) <= 3
