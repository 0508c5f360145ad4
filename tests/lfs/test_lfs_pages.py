"""A Git LFS pointer's pages show the real file: its size, a download of its bytes from
``/media/``, an image's preview; a pointer whose object was never uploaded says so, and its
``/media/`` sends the pointer, as ``/raw/`` always does (as on Forgejo)."""

from __future__ import annotations

import hashlib
import io
import subprocess
from collections.abc import Iterator

import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge, wait_indexed

from floorless.forge import Forge
from floorless.lfs.pointers import Pointer, parse
from floorless.web.app import create_app

MODEL = bytes(range(256)) * 4000
# the smallest PNG: one transparent pixel
PHOTO = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8ffff3f0005fe02fea7d6a4c50000000049454e44ae426082"
)
GONE = b"never uploaded " * 100


def _pointer(data: bytes) -> bytes:
    return Pointer(hashlib.sha256(data).hexdigest(), len(data)).text()


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("lfs-pages")
    forge = start_forge(root / "repos", root / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    for name, private in (("art", False), ("vault", True)):
        repo = forge.registry.create("ann", name, private=private)
        work = root / f"work-{name}"
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        (work / "model.bin").write_bytes(_pointer(MODEL))
        (work / "photo.png").write_bytes(_pointer(PHOTO))
        (work / "gone.bin").write_bytes(_pointer(GONE))
        (work / "README.md").write_text("# art\n")
        git = ["git", "-C", str(work), "-c", "user.name=A", "-c", "user.email=a@example.org"]
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "pointers"], check=True)
        subprocess.run([*git, "push", "-q", str(repo.path), "main"], check=True)
        forge.moves.after_push(repo)
        for data in (MODEL, PHOTO):
            oid = hashlib.sha256(data).hexdigest()
            forge.lfs.upload(repo.id, oid, len(data), io.BytesIO(data).read)
    wait_indexed(forge)
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def test_a_pointer_page_shows_the_real_file(client: testing.TestClient) -> None:
    page = client.simulate_get("/ann/art/src/branch/main/model.bin")
    assert page.status_code == 200
    assert "Stored with Git LFS" in page.text
    assert "1000.0 KiB" in page.text or "1.0 MiB" in page.text or "1,000" in page.text, page.text[
        :3000
    ]
    assert 'href="/ann/art/media/branch/main/model.bin"' in page.text
    assert "oid sha256:" not in page.text  # not the pointer's text
    got = client.simulate_get("/ann/art/media/branch/main/model.bin")
    assert got.status_code == 200 and got.content == MODEL
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''model.bin"
    ranged = client.simulate_get(
        "/ann/art/media/branch/main/model.bin", headers={"Range": "bytes=5-9"}
    )
    assert ranged.status_code == 206 and ranged.content == MODEL[5:10]
    # /raw/ is the blob itself: the pointer
    raw = client.simulate_get("/ann/art/raw/branch/main/model.bin")
    assert parse(raw.content) == Pointer(hashlib.sha256(MODEL).hexdigest(), len(MODEL))


def test_an_image_pointer_is_previewed(client: testing.TestClient) -> None:
    page = client.simulate_get("/ann/art/src/branch/main/photo.png")
    assert '<img src="/ann/art/media/branch/main/photo.png"' in page.text
    got = client.simulate_get("/ann/art/media/branch/main/photo.png")
    assert got.content == PHOTO and got.headers["content-type"] == "image/png"


def test_a_pointer_never_uploaded_says_so(client: testing.TestClient) -> None:
    page = client.simulate_get("/ann/art/src/branch/main/gone.bin")
    assert page.status_code == 200
    assert "does not hold" in page.text and "Stored with Git LFS" not in page.text
    got = client.simulate_get("/ann/art/media/branch/main/gone.bin")
    assert parse(got.content) == Pointer(hashlib.sha256(GONE).hexdigest(), len(GONE))
    # an ordinary file's media is its raw bytes
    readme = client.simulate_get("/ann/art/media/branch/main/README.md")
    assert readme.content == b"# art\n"


def test_a_private_repositorys_media_is_its_readers_alone(client: testing.TestClient) -> None:
    path = "/ann/vault/media/branch/main/model.bin"
    assert client.simulate_get(path).status_code == 404
    ben = Browser(client)
    assert ben.sign_in("ben").status_code == 303
    assert ben.get(path).status_code == 404
    ann = Browser(client)
    assert ann.sign_in("ann").status_code == 303
    got = ann.get(path)
    assert got.status_code == 200 and got.content == MODEL
    assert got.headers["cache-control"].startswith("private")


def test_the_settings_count_what_the_repository_holds(
    forge: Forge, client: testing.TestClient
) -> None:
    art = forge.registry.get("ann", "art")
    forge.locks.create(art.id, forge.accounts.require("ann").id, "model.bin")
    ann = Browser(client)
    assert ann.sign_in("ann").status_code == 303
    page = ann.get("/ann/art/settings")
    assert page.status_code == 200
    assert "This repository holds 2 Git LFS objects" in page.text
    assert "and 1 file is locked" in page.text
    assert forge.lfs.usage(art.id).bytes == len(MODEL) + len(PHOTO)
