"""Releases through the API, driven by pyforgejo (whose models validate every answer): a
release made with its tag, files uploaded and downloaded, drafts kept from readers, and bad
input refused with nothing left behind."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pygit2
import pytest
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import Attachment, Release
from support.accounts import PASSWORD
from support.api import BASE, api, token_for
from support.forges import start_forge

from floorless.forge import Forge
from floorless.web.app import create_app

WHEN = 1_700_000_000


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "read")
    handle = forge.live.open(plans)
    tree = handle.TreeBuilder()
    tree.insert("a.txt", handle.create_blob(b"a\n"), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    handle.create_commit("refs/heads/main", who, who, "one", tree.write(), [])
    handle.set_head("refs/heads/main")
    forge.moves.refs_moved(plans)
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


def _rows(forge: Forge, table: str) -> int:
    found = forge.db.one(f"SELECT COUNT(*) AS n FROM {table}")
    assert found is not None
    return int(found["n"])


def test_a_release_with_a_file_in_forgejo_shapes(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).repository
    made = ann.repo_create_release(
        "ann", "plans", tag_name="v1.0", target_commitish="main", name="One", body="First *one*"
    )
    assert isinstance(made, Release)
    assert (made.tag_name, made.name, made.body, made.draft) == (
        "v1.0",
        "One",
        "First *one*",
        False,
    )
    assert made.author is not None and made.author.login == "ann"
    assert made.tarball_url == f"{BASE}/ann/plans/archive/v1.0.tar.gz"
    assert forge.live.open(forge.registry.get("ann", "plans")).references.get("refs/tags/v1.0")
    data = b"\x7fELF" + bytes(range(256)) * 4096
    asset = ann.repo_create_release_attachment(
        "ann", "plans", made.id, request=data, name="../tool-linux"
    )
    assert isinstance(asset, Attachment)
    assert (asset.name, asset.size) == ("tool-linux", len(data))
    assert asset.browser_download_url == f"{BASE}/ann/plans/releases/download/v1.0/tool-linux"
    downloaded = http.get(asset.browser_download_url)
    assert downloaded.status_code == 200
    assert hashlib.sha256(downloaded.content).digest() == hashlib.sha256(data).digest()
    listed = ann.repo_list_releases("ann", "plans")
    assert [r.tag_name for r in listed] == ["v1.0"]
    assert listed[0].assets is not None and [a.name for a in listed[0].assets] == ["tool-linux"]
    got = ann.repo_get_release_attachment("ann", "plans", made.id, asset.id)
    assert got.download_count == 1
    assert ann.repo_get_latest_release("ann", "plans").id == made.id
    assert ann.repo_get_release_by_tag("ann", "plans", "v1.0").id == made.id
    renamed = ann.repo_edit_release_attachment("ann", "plans", made.id, asset.id, name="tool")
    assert renamed.name == "tool"
    edited = ann.repo_edit_release("ann", "plans", made.id, name="One, again")
    assert edited.name == "One, again"
    ann.repo_delete_release_attachment("ann", "plans", made.id, asset.id)
    assert ann.repo_list_release_attachments("ann", "plans", made.id) == []
    ann.repo_delete_release("ann", "plans", made.id)
    assert ann.repo_list_releases("ann", "plans") == []
    assert _rows(forge, "attachments") == 0


def test_drafts_are_the_writers_alone(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).repository
    ben = api(http, token_for(http, "ben")).repository
    draft = ann.repo_create_release("ann", "plans", tag_name="v2.0", draft=True)
    assert [r.id for r in ann.repo_list_releases("ann", "plans", draft=True)] == [draft.id]
    assert ben.repo_list_releases("ann", "plans") == []
    assert ben.repo_list_releases("ann", "plans", draft=True) == []
    for call in (
        lambda: ben.repo_get_release("ann", "plans", draft.id),
        lambda: ben.repo_get_release_by_tag("ann", "plans", "v2.0"),
        lambda: ben.repo_list_release_attachments("ann", "plans", draft.id),
    ):
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.status_code == 404
    with pytest.raises(ApiError) as refused:
        ben.repo_create_release("ann", "plans", tag_name="v9")
    assert refused.value.status_code == 403
    outsider = api(http, token_for(http, "cat")).repository
    with pytest.raises(ApiError) as refused:
        outsider.repo_list_releases("ann", "secret")
    assert refused.value.status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"tag_name": "bad..tag"}, 422),
        ({"tag_name": "v1", "target_commitish": "no-such-branch"}, 422),
        ({"tag_name": "v1", "target_commitish": "0" * 40}, 422),
        ({"name": "no tag"}, 422),
    ],
)
def test_bad_releases_are_refused(
    forge: Forge, http: httpx.Client, body: dict[str, str], status: int
) -> None:
    token = token_for(http, "ann")
    answer = http.post(
        "/api/v1/repos/ann/plans/releases", json=body, headers={"Authorization": f"token {token}"}
    )
    assert answer.status_code == status, answer.text
    assert _rows(forge, "releases") == 0


def test_bad_uploads_leave_nothing(forge: Forge, http: httpx.Client) -> None:
    token = token_for(http, "ann")
    auth = {"Authorization": f"token {token}"}
    made = api(http, token).repository.repo_create_release("ann", "plans", tag_name="v1")
    url = f"/api/v1/repos/ann/plans/releases/{made.id}/assets"
    nameless = http.post(
        url, content=b"x", headers={**auth, "Content-Type": "application/octet-stream"}
    )
    assert nameless.status_code == 422
    no_field = http.post(url, files={"other": ("a.bin", b"x")}, headers=auth)
    assert no_field.status_code == 422
    forge.attachments.max_bytes = 10
    try:
        big = http.post(
            url + "?name=big.bin", files={"attachment": ("big.bin", b"x" * 100)}, headers=auth
        )
        assert big.status_code == 413
    finally:
        forge.attachments.max_bytes = forge.settings.attachment_max_bytes
    raw = {**auth, "Content-Type": "application/octet-stream"}
    short = http.post(
        url + "?name=cut.bin", content=b"x" * 10, headers={**raw, "Content-Length": "1000"}
    )
    assert short.status_code == 400 and "ended after 10 of 1000 bytes" in short.text
    fine = http.post(url, files={"attachment": ("ok.bin", b"fine")}, headers=auth)
    assert fine.status_code == 201, fine.text
    assert fine.json()["name"] == "ok.bin"
    assert _rows(forge, "attachments") == 1
    assert len(list(forge.store.every())) == 1
    assert list(forge.store.tmp.iterdir()) == []
    # a name is a file's name: no directory of it is kept
    for sent, kept in (
        ("../../etc/passwd", "passwd"),
        ("a\\..\\b.txt", "b.txt"),
    ):
        named = http.post(url, files={"attachment": (sent, b"n")}, headers=auth)
        assert named.status_code == 201 and named.json()["name"] == kept, (sent, named.text)
    for hopeless in ("..", "/", "a/.."):
        refused = http.post(url, files={"attachment": (hopeless, b"n")}, headers=auth)
        assert refused.status_code in (400, 422), (hopeless, refused.text)


def test_tags_made_and_deleted(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).repository
    plain = ann.repo_create_tag("ann", "plans", tag_name="v0.1")
    assert plain.name == "v0.1" and plain.commit is not None
    signed = ann.repo_create_tag("ann", "plans", tag_name="v0.2", target="main", message="Two")
    assert signed.message is not None and signed.message.strip() == "Two"
    handle = forge.live.open(forge.registry.get("ann", "plans"))
    tag = handle.get(handle.references["refs/tags/v0.2"].target)
    assert isinstance(tag, pygit2.Tag) and tag.tagger.name == "ann"
    with pytest.raises(ApiError) as refused:
        ann.repo_create_tag("ann", "plans", tag_name="v0.1")
    assert refused.value.status_code == 409
    with pytest.raises(ApiError) as refused:
        ann.repo_create_tag("ann", "plans", tag_name="bad..tag")
    assert refused.value.status_code == 422
    ann.repo_create_release("ann", "plans", tag_name="v0.2")
    with pytest.raises(ApiError) as refused:
        ann.repo_delete_tag("ann", "plans", "v0.2")
    assert refused.value.status_code == 409
    ann.repo_delete_tag("ann", "plans", "v0.1")
    assert "refs/tags/v0.1" not in forge.live.open(forge.registry.get("ann", "plans")).references
    ben = api(http, token_for(http, "ben")).repository
    with pytest.raises(ApiError) as refused:
        ben.repo_delete_tag("ann", "plans", "v0.2")
    assert refused.value.status_code == 403
