"""Code search against a real ``floorless serve``: what git's own client pushes over HTTP is
found once the background index has it, a later push replaces it, and a private
repository's pushed content is found only by those who may read it."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

import pytest
import support.githttp
from support.forges import patience
from support.githttp import Site, commit, git

# the shared fixtures this module's tests ask for
site = support.githttp.site

pytestmark = pytest.mark.network


def found(site: Site, path: str, user: str | None = None) -> str:
    status, text = site.page(path, user)
    assert status == 200, (path, status, text[:300])
    return text


def wait_found(site: Site, path: str, needle: str, user: str | None = None) -> str:
    deadline = time.monotonic() + patience(60)
    while True:
        text = found(site, path, user)
        if needle in text:
            return text
        assert time.monotonic() < deadline, f"{needle!r} never showed at {path}"
        time.sleep(0.1)


def test_a_push_over_http_is_found_and_a_later_one_replaces_it(
    site: Site,
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    git("clone", "-q", site.url("alice/pub", "alice"), str(work))
    (work / "zoo").mkdir()
    tip = commit(work, "zoo/animals.txt", "a quokka\nand a wombat\n", "Animals")
    git("push", "-q", "origin", "main", cwd=work)
    text = wait_found(site, "/alice/pub/search?q=quokka", "<mark>quokka</mark>")
    assert f"/alice/pub/src/commit/{tip}/zoo/animals.txt#L1" in text
    assert "<mark>quokka</mark>" in wait_found(site, "/-/search?q=quokka", "alice/pub")
    commit(work, "zoo/animals.txt", "a numbat\nand a wombat\n", "Fewer quokkas")
    git("push", "-q", "origin", "main", cwd=work)
    wait_found(site, "/alice/pub/search?q=numbat", "<mark>numbat</mark>")
    assert "No files match" in found(site, "/alice/pub/search?q=quokka")


def test_a_private_push_is_found_only_by_its_readers(
    site: Site,
    tmp_path: Path,
) -> None:
    work = tmp_path / "private"
    git("clone", "-q", site.url("alice/priv", "alice"), str(work))
    commit(work, "vault.txt", "the axolotl protocol\n", "Vault")
    git("push", "-q", "origin", "main", cwd=work)
    wait_found(site, "/alice/priv/search?q=axolotl", "<mark>axolotl</mark>", "alice")
    wait_found(site, "/-/search?q=axolotl", "alice/priv", "alice")
    for user in (None, "bob"):
        text = found(site, "/-/search?q=" + quote("axolotl"), user)
        assert "alice/priv" not in text and "vault.txt" not in text
        assert "No files match" in text
        status, _ = site.page("/alice/priv/search?q=axolotl", user)
        assert status == 404
