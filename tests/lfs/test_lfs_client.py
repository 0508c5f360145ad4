"""Git LFS through the real ``git lfs`` client against a real ``floorless serve``: clone, push
and pull a repository whose files LFS tracks, locks, and who may do what (a reader may not
upload, an outsider sees nothing, a corrupt upload is refused and kept nowhere)."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.githttp import PASSWORD, Site, git
from support.lfs import FILTER, needs_git_lfs
from support.serving import run_admin, serving

pytestmark = needs_git_lfs

LFS = [*FILTER, "-c", "lfs.locksverify=true"]


def lfs(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    result = git(*LFS, *args, cwd=cwd, check=check)
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("lfs")
    with serving(root / "repos", root / "data") as server:
        for name in ("alice", "reader", "outsider"):
            server.admin(
                "user", "create", name, "--email", f"{name}@example.org",
                "--password-stdin", stdin=PASSWORD + "\n",
            )  # fmt: skip
        server.admin("repo", "create", "alice/art", "--private")
        made = Site(server)
        _api(made, "PUT", "/repos/alice/art/collaborators/reader", {"permission": "read"})
        yield made


def _api(site: Site, method: str, path: str, body: object, who: str = "alice") -> int:
    request = urllib.request.Request(
        f"{site.server.url}/api/v1{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"token {site.token(who)}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def _store(site: Site) -> Path:
    return site.server.data / "storage" / "sha256"


def _stored(site: Site) -> set[str]:
    return {p.name for p in _store(site).glob("*/*/*")}


def _work(tmp_path: Path, site: Site, who: str = "alice") -> Path:
    work = tmp_path / "work"
    lfs("clone", "-q", site.url("alice/art", who), str(work))
    return work


def test_push_clone_and_pull_carry_the_real_files(site: Site, tmp_path: Path) -> None:
    work = tmp_path / "first"
    git("init", "-q", str(work))
    lfs("lfs", "install", "--local", cwd=work)
    lfs("lfs", "track", "*.bin", cwd=work)
    big = os.urandom(3 << 20)
    (work / "model.bin").write_bytes(big)
    (work / "README.md").write_text("# art\n")
    lfs("add", ".gitattributes", "model.bin", "README.md", cwd=work)
    lfs("commit", "-q", "-m", "a model", cwd=work)
    out = lfs("push", site.url("alice/art", "alice"), "main", cwd=work)
    oid = hashlib.sha256(big).hexdigest()
    assert oid in _stored(site), out
    # the repository holds the pointer, the store the bytes
    bare = site.server.repos / "alice" / "art.git"
    pointer = git("--git-dir", str(bare), "show", "main:model.bin").stdout
    assert f"oid sha256:{oid}" in pointer and f"size {len(big)}" in pointer
    # a clone by a reader gets the real file back
    clone = tmp_path / "clone"
    lfs("clone", "-q", site.url("alice/art", "reader"), str(clone))
    assert (clone / "model.bin").read_bytes() == big
    # a second version, pulled
    bigger = os.urandom(1 << 20)
    (work / "model.bin").write_bytes(bigger)
    lfs("commit", "-q", "-am", "a better model", cwd=work)
    lfs("push", site.url("alice/art", "alice"), "main", cwd=work)
    lfs("pull", "-q", site.url("alice/art", "reader"), "main", cwd=clone)
    assert (clone / "model.bin").read_bytes() == bigger


def test_a_reader_may_not_upload_and_an_outsider_sees_nothing(site: Site, tmp_path: Path) -> None:
    work = tmp_path / "reader"
    lfs("clone", "-q", site.url("alice/art", "reader"), str(work))
    (work / "theirs.bin").write_bytes(os.urandom(4096))
    lfs("lfs", "track", "theirs.bin", cwd=work)
    lfs("add", ".gitattributes", "theirs.bin", cwd=work)
    lfs("commit", "-q", "-m", "a reader's file", cwd=work)
    before = _stored(site)
    refused = git(*LFS, "push", site.url("alice/art", "reader"), "HEAD:main", cwd=work, check=False)
    assert refused.returncode != 0
    assert _stored(site) == before  # nothing of theirs was kept
    outsider = git(
        *LFS, "clone", "-q", site.url("alice/art", "outsider"), str(tmp_path / "o"), check=False
    )
    assert outsider.returncode != 0
    assert "not found" in outsider.stderr.lower()


def test_locks_through_the_client(site: Site, tmp_path: Path) -> None:
    work = _work(tmp_path, site)
    url = site.url("alice/art", "alice")
    lfs("config", f"lfs.{url}/info/lfs.locksverify", "true", cwd=work)
    out = lfs("lfs", "lock", "model.bin", cwd=work)
    assert "Locked model.bin" in out
    listed = lfs("lfs", "locks", "--json", cwd=work)
    locks = json.loads(listed.strip().splitlines()[-1])
    assert [(x["path"], x["owner"]["name"]) for x in locks] == [("model.bin", "alice")]
    # a reader sees the lock but may not take one, nor let alice's go
    reader = tmp_path / "reader-locks"
    lfs("clone", "-q", site.url("alice/art", "reader"), str(reader))
    assert "model.bin" in lfs("lfs", "locks", cwd=reader)
    refused = git(*LFS, "lfs", "lock", "README.md", cwd=reader, check=False)
    assert refused.returncode != 0
    refused = git(*LFS, "lfs", "unlock", "--force", "model.bin", cwd=reader, check=False)
    assert refused.returncode != 0
    assert "Unlocked model.bin" in lfs("lfs", "unlock", "model.bin", cwd=work)
    assert lfs("lfs", "locks", cwd=work).strip() == ""


def test_fsck_finds_pointers_whose_objects_never_came(site: Site, tmp_path: Path) -> None:
    clean = site.server.admin("lfs", "fsck", "alice/art")
    assert "0 missing" in clean, clean
    work = _work(tmp_path, site)
    lost = os.urandom(2048)
    oid = hashlib.sha256(lost).hexdigest()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 2048\n"
    (work / "lost.dat").write_text(pointer)  # committed as it is: no LFS filter on .dat
    git("add", "lost.dat", cwd=work)
    git("commit", "-q", "-m", "a pointer with no object", cwd=work)
    git("push", "-q", "--no-verify", site.url("alice/art", "alice"), "HEAD:main", cwd=work)
    found = site.server.admin("lfs", "fsck", "alice/art", check=False)
    assert f"missing {oid} (2048 bytes) lost.dat" in found, found
    result = run_admin(site.server.data, "lfs", "fsck", "--repos", str(site.server.repos))
    assert result.returncode == 1 and "1 pointers name objects" in result.stderr
