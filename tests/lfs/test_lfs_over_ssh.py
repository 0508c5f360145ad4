"""Git LFS for a repository cloned over SSH: ``git lfs`` asks ``git-lfs-authenticate`` for the
HTTP endpoint and a header, then pushes and pulls its objects there, with the access of the
key's person; someone who may not read the repository hears "not found" from it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.githttp import commit
from support.lfs import FILTER, needs_git_lfs
from support.serving import free_port, serving
from support.sshing import SshSite, create_people, make_key

pytestmark = needs_git_lfs

LFS = FILTER


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshSite]:
    root = tmp_path_factory.mktemp("lfs-ssh")
    port = free_port()
    with serving(root / "repos", root / "data", "--ssh-port", str(port)) as server:
        create_people(server, "alice", "bob")
        keys = root / "keys"
        for name in ("alice", "bob"):
            make_key(keys, name)
            server.admin("key", "add", name, stdin=(keys / f"{name}.pub").read_text())
        server.admin("repo", "create", "alice/art", "--private")
        yield SshSite(server, port, keys, root / "known_hosts")


def test_lfs_authenticate_names_the_endpoint_and_a_header(site: SshSite) -> None:
    alice = site.as_("alice")
    answer = alice.ssh("git-lfs-authenticate", "alice/art.git", "download")
    assert answer.returncode == 0, answer.stderr
    shown = json.loads(answer.stdout)
    assert shown["href"].endswith("/alice/art.git/info/lfs")
    assert shown["header"]["Authorization"].startswith("Bearer lfs.")
    assert shown["expires_in"] == 3600
    # someone who may not read it: exactly a missing repository's answer
    bob = site.as_("bob")
    hidden = bob.ssh("git-lfs-authenticate", "alice/art.git", "download")
    missing = bob.ssh("git-lfs-authenticate", "alice/none.git", "download")
    assert hidden.returncode == missing.returncode == 1
    assert hidden.stderr == missing.stderr == b"floorless: repository not found\n"
    odd = alice.ssh("git-lfs-authenticate", "alice/art.git", "delete")
    assert odd.returncode == 1 and b"download or upload" in odd.stderr


def test_push_and_clone_with_lfs_over_ssh(site: SshSite, tmp_path: Path) -> None:
    alice = site.as_("alice")
    work = tmp_path / "work"
    alice.git("init", "-q", str(work))
    alice.git(*LFS, "lfs", "install", "--local", cwd=work)
    alice.git(*LFS, "lfs", "track", "*.bin", cwd=work)
    data = os.urandom(1 << 20)
    (work / "big.bin").write_bytes(data)
    alice.git(*LFS, "add", ".gitattributes", "big.bin", cwd=work)
    commit(work, "README.md", "# art\n", "art")
    pushed = alice.git(*LFS, "push", alice.url("alice/art"), "main", cwd=work)
    assert pushed.returncode == 0
    stored = list((site.server.data / "storage" / "sha256").glob("*/*/*"))
    assert [p.read_bytes() for p in stored] == [data]
    clone = tmp_path / "clone"
    alice.git(*LFS, "clone", "-q", alice.url("alice/art"), str(clone))
    assert (clone / "big.bin").read_bytes() == data
