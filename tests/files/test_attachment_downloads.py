"""Attachments downloaded: ``/attachments/{uuid}`` and a release's
``/releases/download/{tag}/{name}``, streamed from the content store with a range, a file
name and immutable caching; counted; hidden exactly as missing from whoever may not see them."""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Iterator

import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge, wait_for

from floorless.files.attachments import Attachment
from floorless.forge import Forge
from floorless.web.app import create_app

DATA = bytes(range(256)) * 8192  # 2 MiB: more than one piece of the stream


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("downloads")
    forge = start_forge(root / "repos", root / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def _release(forge: Forge, repo: str, tag: str, draft: bool = False) -> int:
    found = forge.registry.get("ann", repo)
    now = time.time()
    forge.db.execute(
        "INSERT INTO releases (repo_id, tag_name, title, draft, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (found.id, tag, tag, int(draft), now, now),
    )
    row = forge.db.one(
        "SELECT id FROM releases WHERE repo_id = ? AND tag_name = ?", (found.id, tag)
    )
    assert row is not None
    return int(row["id"])


def _attach(forge: Forge, repo: str, release_id: int, name: str, data: bytes) -> Attachment:
    found = forge.registry.get("ann", repo)
    return forge.attachments.upload(
        found.id, None, name, io.BytesIO(data).read, size=len(data), release_id=release_id
    )


def _count(forge: Forge, attachment: Attachment) -> int:
    found = forge.attachments.by_id(attachment.id)
    assert found is not None
    return found.download_count


def test_a_release_file_downloads_whole_and_by_range(
    forge: Forge, client: testing.TestClient
) -> None:
    attachment = _attach(forge, "plans", _release(forge, "plans", "v1.0"), "build.tar.gz", DATA)
    assert attachment.oid == hashlib.sha256(DATA).hexdigest()
    whole = client.simulate_get(f"/attachments/{attachment.uuid}")
    assert whole.status_code == 200
    assert whole.content == DATA
    assert whole.headers["content-disposition"] == "attachment; filename*=UTF-8''build.tar.gz"
    assert whole.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert whole.headers["etag"] == f'"{attachment.oid}"'
    by_tag = client.simulate_get("/ann/plans/releases/download/v1.0/build.tar.gz")
    assert by_tag.content == DATA
    part = client.simulate_get(
        f"/attachments/{attachment.uuid}", headers={"Range": "bytes=1000-1999"}
    )
    assert part.status_code == 206
    assert part.content == DATA[1000:2000]
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(DATA)}"
    again = client.simulate_get(
        f"/attachments/{attachment.uuid}", headers={"If-None-Match": f'"{attachment.oid}"'}
    )
    assert again.status_code == 304
    assert _count(forge, attachment) == 2  # the two whole downloads, not the range or the 304


def test_hidden_files_answer_as_missing_ones(forge: Forge, client: testing.TestClient) -> None:
    secret = _attach(forge, "secret", _release(forge, "secret", "v2"), "key.bin", b"hidden")
    draft = _attach(forge, "plans", _release(forge, "plans", "v3", draft=True), "d.zip", b"d")
    missing = client.simulate_get("/attachments/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    ben = Browser(client)
    assert ben.sign_in("ben").status_code == 303
    for path in (
        f"/attachments/{secret.uuid}",
        f"/attachments/{draft.uuid}",
        "/ann/plans/releases/download/v3/d.zip",
    ):
        for answer in (client.simulate_get(path), ben.get(path)):
            assert (answer.status_code, answer.text) == (missing.status_code, missing.text)
    assert client.simulate_get("/ann/secret/releases/download/v2/key.bin").status_code == 404
    ann = Browser(client)
    assert ann.sign_in("ann").status_code == 303
    assert ann.get(f"/attachments/{secret.uuid}").content == b"hidden"
    private = ann.get(f"/attachments/{secret.uuid}")
    assert private.headers["cache-control"] == "private, max-age=31536000, immutable"
    assert ann.get("/ann/plans/releases/download/v3/d.zip").content == b"d"


@pytest.mark.parametrize(
    "path",
    [
        "/ann/plans/releases/download/v1.0/../../secret/x",
        "/ann/plans/releases/download/v1.0/%2e%2e%2fx",
        "/ann/plans/releases/download/v1.0/a%00b",
        "/ann/plans/releases/download/nope",
        "/attachments/" + "x" * 500,
    ],
)
def test_path_tricks_find_nothing(client: testing.TestClient, path: str) -> None:
    assert client.simulate_get(path).status_code in (400, 404)


def test_deleting_the_last_record_removes_the_bytes(forge: Forge) -> None:
    release = _release(forge, "plans", "v4")
    first = _attach(forge, "plans", release, "a.bin", b"shared bytes")
    second = _attach(forge, "plans", release, "b.bin", b"shared bytes")
    assert first.oid == second.oid
    forge.attachments.delete(first)
    assert forge.store.size(first.oid) == len(b"shared bytes")  # the other still needs them
    forge.attachments.delete_of_release(release)
    assert forge.store.size(first.oid) is None


def test_a_deleted_repository_s_files_are_collected(forge: Forge) -> None:
    forge.registry.create("ann", "gone")
    kept = _attach(forge, "plans", _release(forge, "plans", "v5"), "same.bin", b"both have it")
    gone = _attach(forge, "gone", _release(forge, "gone", "v1"), "same.bin", b"both have it")
    only = _attach(forge, "gone", _release(forge, "gone", "v2"), "only.bin", b"gone's alone")
    forge.lifecycle.delete(forge.registry.get("ann", "gone"))
    wait_for(lambda: forge.store.size(only.oid) is None)
    assert gone.oid == kept.oid
    assert forge.store.size(kept.oid) == len(b"both have it")
    assert forge.attachments.by_id(gone.id) is None
