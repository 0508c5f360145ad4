"""floorless on slow storage: repositories on the benchmark's FUSE simulator. Once a page has
been served, serving it again makes no operation on the storage, even for loose objects
(which git keeps for small pushes and fresh commits): the count comes from the filesystem
itself, per calling thread, leaving out floorless's own background threads."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from falcon import testing
from support.forges import start_forge, wait_indexed

from bench import slowfs
from floorless.web.app import create_app

ROOT = Path(__file__).resolve().parents[2]


def _loose_repository(path: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "A",
        "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "A",
        "GIT_COMMITTER_EMAIL": "a@example.org",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "dir").mkdir()
    for n in range(12):
        (path / f"file{n}.txt").write_text(f"line {n}\n" * 300)
        (path / "dir" / f"mod{n}.py").write_text(f"x = {n}\n" * 40)
        subprocess.run(["git", "add", "."], cwd=path, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", f"change {n}"], cwd=path, check=True, env=env)
    packs = list((path / ".git" / "objects" / "pack").glob("*.pack"))
    assert packs == []  # every object is loose


PAGES = [
    "/",
    "/me/loose",
    "/me/loose/src/branch/main/dir",
    "/me/loose/src/branch/main/file3.txt",
    "/me/loose/raw/branch/main/file3.txt",
    "/me/loose/commits/branch/main",
    "/me/loose/commits/branch/main/file3.txt",
    "/me/loose/branches",
]


@contextlib.contextmanager
def _served_from_slow_storage(tmp_path: Path) -> Iterator[tuple[testing.TestClient, slowfs.Mount]]:
    """A forge over the loose repository on the simulator, indexed and ready."""
    source, mountpoint = tmp_path / "source", tmp_path / "mnt"
    _loose_repository(source / "me" / "loose")
    mountpoint.mkdir()
    with slowfs.mounted(source, mountpoint, delay_ms=0) as mount:
        forge = start_forge(mountpoint, tmp_path / "data")
        try:
            wait_indexed(forge)
            yield testing.TestClient(create_app(forge)), mount
            assert len(forge.handles) == 1  # one handle, whichever threads served
        finally:
            forge.stop()


def test_warm_pages_make_no_storage_operation(fuse, tmp_path: Path) -> None:
    with _served_from_slow_storage(tmp_path) as (client, mount):
        for url in PAGES:
            assert client.simulate_get(url).status_code == 200, url  # cold: reads
            mount.reset()
            for _ in range(5):
                assert client.simulate_get(url).status_code == 200, url
            assert mount.request_total() == 0, (url, mount.counts())


def test_a_new_server_thread_makes_no_storage_operation(fuse, tmp_path: Path) -> None:
    """A server thread's first request reads through the handle the forge already holds: a
    handle per thread would reopen the repository (config, HEAD, objects) on each new thread,
    with the interpreter held, stalling every other request on slow storage."""
    with _served_from_slow_storage(tmp_path) as (client, mount):
        for url in PAGES:
            assert client.simulate_get(url).status_code == 200, url
        mount.reset()
        statuses: list[int] = []

        def first_requests() -> None:
            statuses.extend(client.simulate_get(url).status_code for url in PAGES)

        threads = [threading.Thread(target=first_requests) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert statuses == [200] * len(PAGES) * len(threads)
        assert mount.request_total() == 0, mount.counts()
