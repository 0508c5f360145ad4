"""Uploads, releases and Git LFS attacked over the real app: reading what one may not (private
and draft files, LFS objects by oid, through forks, with transfer headers made for something
else), writing as a reader or a read token, odd names and numbers that must be a 4xx and never
a 500, cross-site requests a signed-in browser can be made to send, and bodies past a limit.
Each test names what must hold."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import patience, start_forge
from support.queries import statements
from support.serving import Server, serving

from floorless.collab.releases import Release
from floorless.files.attachments import Attachment
from floorless.forge import Forge
from floorless.repos.registry import Repo
from floorless.web.app import create_app

MEDIA = "application/vnd.git-lfs+json"
WHEN = 1_700_000_000


def _commit(forge: Forge, repo: Repo) -> None:
    handle = forge.live.open(repo)
    tree = handle.TreeBuilder()
    tree.insert("a.txt", handle.create_blob(b"a\n"), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    handle.create_commit("refs/heads/main", who, who, "one", tree.write(), [])
    handle.set_head("refs/heads/main")
    forge.moves.refs_moved(repo)


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    """ann owns public plans and private secret; on secret ben reads and cat writes (cat
    writes plans too); dan is an outsider; root is the site's administrator."""
    root = tmp_path_factory.mktemp("hostile-uploads")
    forge = start_forge(root / "repos", root / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    forge.accounts.create_user("root", "root@example.org", PASSWORD, admin=True)
    plans = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    for repo in (plans, secret):
        _commit(forge, repo)
    forge.policy.set_collaborator(secret, forge.accounts.require("ben"), "read")
    forge.policy.set_collaborator(secret, forge.accounts.require("cat"), "write")
    forge.policy.set_collaborator(plans, forge.accounts.require("cat"), "write")
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def _auth(who: str | None) -> dict[str, str]:
    if who is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{who}:{PASSWORD}".encode()).decode()}


def _token(forge: Forge, who: str, scope: str) -> dict[str, str]:
    plain, _ = forge.accounts.create_token(forge.accounts.require(who), scope)
    return {"Authorization": f"token {plain}"}


def _lfs(
    client: testing.TestClient, path: str, body: object, headers: dict[str, str]
) -> testing.Result:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.simulate_post(path, body=data, headers={"Content-Type": MEDIA, **headers})


def _batch(
    client: testing.TestClient, repo: str, operation: str, data: bytes, headers: dict[str, str]
) -> testing.Result:
    objects = [{"oid": hashlib.sha256(data).hexdigest(), "size": len(data)}]
    body = {"operation": operation, "objects": objects}
    return _lfs(client, f"/ann/{repo}.git/info/lfs/objects/batch", body, headers)


def _hold(forge: Forge, repo: str, data: bytes) -> str:
    """The repository holds ``data`` as an LFS object; its oid."""
    oid = hashlib.sha256(data).hexdigest()
    forge.lfs.upload(forge.registry.get("ann", repo).id, oid, len(data), io.BytesIO(data).read)
    return oid


def _release(forge: Forge, repo: str, tag: str, draft: bool = False) -> Release:
    found = forge.registry.get("ann", repo)
    return forge.releases.create(found, None, tag, target="main", draft=draft)


def _attach(forge: Forge, release: Release, name: str, data: bytes) -> Attachment:
    read = io.BytesIO(data).read
    return forge.attachments.upload(release.repo_id, None, name, read, release_id=release.id)


def _count(forge: Forge, table: str) -> int:
    row = forge.db.one(f"SELECT COUNT(*) AS n FROM {table}")
    assert row is not None
    return int(row["n"])


def _same(
    client: testing.TestClient, hidden: str, missing: str, who: str | None, body: object = None
) -> None:
    """What an outsider sees of ``hidden`` is what they see of ``missing``: the status, the
    body, the headers, and the database statements ``Server-Timing`` counts (warm)."""
    for _ in range(2):
        if body is None:
            a, b = (client.simulate_get(p, headers=_auth(who)) for p in (hidden, missing))
        else:
            a, b = (_lfs(client, p, body, _auth(who)) for p in (hidden, missing))
    assert (a.status_code, a.content) == (b.status_code, b.content), hidden
    for header in ("content-type", "cache-control", "www-authenticate"):
        assert a.headers.get(header) == b.headers.get(header), (hidden, header)
    assert statements(a) == statements(b), hidden


# -- reading what one may not ----------------------------------------------------------------


def test_a_private_repository_s_files_answer_outsiders_as_missing_ones(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "secret", "s1.0")
    attachment = _attach(forge, release, "tool.bin", b"secret bytes")
    oid = _hold(forge, "secret", b"secret lfs bytes")
    gone = "00000000-0000-4000-8000-000000000000"
    api = f"/api/v1/repos/ann/{{}}/releases/{release.id}/assets"
    for who in (None, "dan"):
        for path in (
            "/ann/{}/releases/download/s1.0/tool.bin",
            api,
            f"{api}/{attachment.id}",
            f"/ann/{{}}.git/info/lfs/objects/{oid}",
            "/ann/{}.git/info/lfs/locks",
        ):
            _same(client, path.format("secret"), path.format("nothing"), who)
        _same(client, f"/attachments/{attachment.uuid}", f"/attachments/{gone}", who)
        for tail in ("objects/batch", "verify", "locks", "locks/verify", "locks/1/unlock"):
            body: dict[str, object] = {"oid": oid, "size": 16}
            if tail != "verify":
                body = {"operation": "download", "objects": [body]}
            lfs = "/ann/{}.git/info/lfs/" + tail
            _same(client, lfs.format("secret"), lfs.format("nothing"), who, body)
    got = client.simulate_get(f"/attachments/{attachment.uuid}", headers=_auth("ben"))
    assert got.content == b"secret bytes"


def test_a_draft_s_files_are_its_writers_alone_and_no_shared_cache_keeps_them(
    forge: Forge, client: testing.TestClient
) -> None:
    draft = _release(forge, "plans", "d1.0", draft=True)
    attachment = _attach(forge, draft, "next.bin", b"not yet")
    paths = (
        f"/attachments/{attachment.uuid}",
        "/ann/plans/releases/download/d1.0/next.bin",
        f"/api/v1/repos/ann/plans/releases/{draft.id}/assets/{attachment.id}",
    )
    for path in paths:
        for who in (None, "dan", "ben"):
            assert client.simulate_get(path, headers=_auth(who)).status_code == 404, (path, who)
        assert client.simulate_get(path, headers=_token(forge, "ann", "read")).status_code == 404
    for path in paths[:2]:
        got = client.simulate_get(path, headers=_auth("cat"))
        assert got.status_code == 200 and got.content == b"not yet"
        assert got.headers["cache-control"].startswith("private")


def test_a_file_replaced_under_its_tag_and_name_is_not_kept_stale_by_caches(
    forge: Forge, client: testing.TestClient
) -> None:
    """A release's file by tag and name is whatever file has that name now: a file taken
    down (a leaked key, a bad build) and replaced must not be served on from a cache for a
    year. Addresses by uuid or object id name the same bytes forever, and may say so."""
    release = _release(forge, "plans", "i1.0")
    old = _attach(forge, release, "tool.bin", b"the bad build")
    path = "/ann/plans/releases/download/i1.0/tool.bin"
    first = client.simulate_get(path)
    assert "immutable" not in first.headers["cache-control"]
    assert "no-cache" in first.headers["cache-control"]
    forge.attachments.delete(old)
    new = _attach(forge, release, "tool.bin", b"the good build")
    etag = {"If-None-Match": first.headers["etag"]}
    assert client.simulate_get(path, headers=etag).content == b"the good build"
    by_uuid = client.simulate_get(f"/attachments/{new.uuid}")
    assert "immutable" in by_uuid.headers["cache-control"]


def test_lfs_objects_come_only_from_a_repository_that_holds_them(
    forge: Forge, client: testing.TestClient
) -> None:
    data = os.urandom(3000)
    oid = _hold(forge, "secret", data)
    # the same bytes asked of public plans, by oid, or named in a batch: nothing
    assert client.simulate_get(f"/ann/plans.git/info/lfs/objects/{oid}").status_code == 404
    down = _batch(client, "plans", "download", data, _auth("cat"))
    assert down.json["objects"][0]["error"]["code"] == 404
    up = _batch(client, "plans", "upload", data, _auth("cat"))
    assert "upload" in up.json["objects"][0]["actions"]  # the bytes must be sent to be had
    for odd in (hashlib.sha256(b"guess").hexdigest(), "..%2f..%2fsecret", oid[:-1], "%ff" * 32):
        got = client.simulate_get(f"/ann/plans.git/info/lfs/objects/{odd}", headers=_auth("ann"))
        assert got.status_code in (404, 422), odd


def test_a_transfer_header_serves_only_its_person_repository_object_and_operation(
    forge: Forge, client: testing.TestClient
) -> None:
    data = os.urandom(2000)
    oid = _hold(forge, "secret", data)
    _hold(forge, "plans", data)
    other = _hold(forge, "secret", os.urandom(2000))
    answer = _batch(client, "secret", "download", data, _auth("ben"))
    header = answer.json["objects"][0]["actions"]["download"]["header"]
    path = f"/ann/secret.git/info/lfs/objects/{oid}"
    assert client.simulate_get(path, headers=header).content == data
    for refused in (
        client.simulate_get(f"/ann/plans.git/info/lfs/objects/{oid}", headers=header),
        client.simulate_get(f"/ann/secret.git/info/lfs/objects/{other}", headers=header),
        client.simulate_put(path, body=data, headers={**header, "X-Lfs-Size": str(len(data))}),
        _lfs(client, "/ann/secret.git/info/lfs/verify", {"oid": oid, "size": len(data)}, header),
    ):
        assert refused.status_code == 401
    # a read token's header stays a reader's; a header outlives no one's access
    read = _batch(client, "secret", "download", data, _token(forge, "cat", "read"))
    ((_, value),) = read.json["objects"][0]["actions"]["download"]["header"].items()
    assert value.split(".")[-3] == "read"  # ACCOUNT.SCOPE.EXPIRES.MAC
    secret, ben = forge.registry.get("ann", "secret"), forge.accounts.require("ben")
    forge.policy.remove_collaborator(secret, ben)
    try:
        assert client.simulate_get(path, headers=header).status_code == 404
    finally:
        forge.policy.set_collaborator(secret, ben, "read")


def test_forks_hold_only_what_they_were_lent(forge: Forge, client: testing.TestClient) -> None:
    parent = forge.registry.create("ann", "lent")
    _commit(forge, parent)
    before = _hold(forge, "lent", b"before the fork")
    fork = forge.lifecycle.fork(parent, "dan", "lent")
    forge.lifecycle.set_private(parent, True)  # the parent made private after forking
    after = _hold(forge, "lent", b"after the fork")
    base = "/dan/lent.git/info/lfs/objects"
    assert client.simulate_get(f"{base}/{before}").content == b"before the fork"
    assert client.simulate_get(f"{base}/{after}", headers=_auth("dan")).status_code == 404
    assert client.simulate_get(f"/ann/lent.git/info/lfs/objects/{before}").status_code == 401
    # a private fork of it: its outsiders see nothing; the parent deleted, it keeps its own
    private = forge.lifecycle.fork(forge.registry.get("ann", "lent"), "ann", "lent-private")
    assert private.private
    hidden = f"/ann/lent-private.git/info/lfs/objects/{after}"
    assert client.simulate_get(hidden, headers=_auth("dan")).status_code == 404
    forge.lifecycle.delete(forge.registry.get("ann", "lent"))
    assert client.simulate_get(hidden, headers=_auth("ann")).content == b"after the fork"
    assert client.simulate_get(f"{base}/{before}").status_code == 200
    forge.lifecycle.delete(fork)


def test_a_fork_s_tag_or_release_cannot_reach_what_its_private_parent_gained(
    forge: Forge, client: testing.TestClient
) -> None:
    """A fork reads its parent's objects (alternates), and the object gate serves none of
    them by id. Nor may a tag or a release made in the fork point at one: it would be the
    fork's ref then, and serve the private parent's commit to anyone."""
    parent = forge.registry.create("ann", "grown")
    _commit(forge, parent)
    forge.lifecycle.fork(parent, "dan", "grown")
    forge.lifecycle.set_private(parent, True)
    handle = forge.live.open(parent)
    tree = handle.TreeBuilder()
    tree.insert("key.txt", handle.create_blob(b"the parent's secret\n"), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN + 60, 0)
    head = [handle.head.target]
    secret = str(handle.create_commit("refs/heads/main", who, who, "key", tree.write(), head))
    forge.moves.refs_moved(forge.registry.get("ann", "grown"))
    api, dan = "/api/v1/repos/dan/grown", _auth("dan")
    assert client.simulate_get(f"{api}/git/commits/{secret}", headers=dan).status_code == 404
    for target in (secret, secret[:7]):
        tag = {"tag_name": "t", "target": target}
        made = client.simulate_post(f"{api}/tags", json=tag, headers=dan)
        assert made.status_code == 422, (target, made.text)
        body = {"tag_name": "r", "target_commitish": target}
        assert client.simulate_post(f"{api}/releases", json=body, headers=dan).status_code == 422
        body["draft"] = True
        assert client.simulate_post(f"{api}/releases", json=body, headers=dan).status_code == 422
    assert client.simulate_get("/dan/grown/raw/tag/t/key.txt").status_code == 404
    fine = {"tag_name": "ok", "target": "main"}
    assert client.simulate_post(f"{api}/tags", json=fine, headers=dan).status_code == 201


# -- writing as one may not ------------------------------------------------------------------


def test_readers_and_read_tokens_upload_and_overwrite_nothing(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "secret", "r1.0")
    attachment = _attach(forge, release, "kept.bin", b"kept")
    data = os.urandom(1000)
    oid = hashlib.sha256(data).hexdigest()
    api = f"/api/v1/repos/ann/secret/releases/{release.id}/assets"
    octet = {"Content-Type": "application/octet-stream"}
    files, objects = _count(forge, "attachments"), _count(forge, "lfs_objects")
    for headers in (_auth("ben"), _token(forge, "cat", "read"), _token(forge, "ann", "read")):
        sent = client.simulate_post(
            api, query_string="name=x", body=b"x", headers={**headers, **octet}
        )
        assert sent.status_code == 403
        one = f"{api}/{attachment.id}"
        assert client.simulate_patch(one, json={"name": "y"}, headers=headers).status_code == 403
        assert client.simulate_delete(one, headers=headers).status_code == 403
        assert _batch(client, "secret", "upload", data, headers).status_code == 403
        put = client.simulate_put(
            f"/ann/secret.git/info/lfs/objects/{oid}", body=data, headers=headers
        )
        assert put.status_code == 403
        lock = _lfs(client, "/ann/secret.git/info/lfs/locks", {"path": "a.bin"}, headers)
        assert lock.status_code == 403
    assert (_count(forge, "attachments"), _count(forge, "lfs_objects")) == (files, objects)
    assert forge.attachments.by_id(attachment.id).name == "kept.bin"  # type: ignore[union-attr]


def test_another_release_s_ids_find_nothing(forge: Forge, client: testing.TestClient) -> None:
    hidden = _release(forge, "secret", "x1.0")
    theirs = _attach(forge, hidden, "theirs.bin", b"theirs")
    mine = _release(forge, "plans", "x1.0")
    base = f"/api/v1/repos/ann/plans/releases/{mine.id}/assets/{theirs.id}"
    cat = _auth("cat")
    assert client.simulate_get(base, headers=cat).status_code == 404
    assert client.simulate_patch(base, json={"name": "stolen"}, headers=cat).status_code == 404
    assert client.simulate_delete(base, headers=cat).status_code == 404
    upload = f"/api/v1/repos/ann/plans/releases/{hidden.id}/assets"
    octet = {**cat, "Content-Type": "application/octet-stream"}
    sent = client.simulate_post(upload, query_string="name=z", body=b"z", headers=octet)
    assert sent.status_code == 404
    assert forge.attachments.by_id(theirs.id) == theirs


def test_bad_lfs_uploads_leave_nothing_behind(forge: Forge, client: testing.TestClient) -> None:
    data = os.urandom(5000)
    oid = hashlib.sha256(data).hexdigest()
    path = f"/ann/plans.git/info/lfs/objects/{oid}"
    cat = _auth("cat")
    for body, size in (
        (data[:-1] + b"x", None),  # another hash
        (data[:-10], None),  # short
        (data, "4999"),  # longer than announced
        (data, "999999999999999999"),  # a huge size, the body short of it
        (data, "9" * 30),  # no size at all
        (data, "\u00b2"),  # a digit that is no number
    ):
        headers = {**cat, **({"X-Lfs-Size": size} if size else {})}
        got = client.simulate_put(path, body=body, headers=headers)
        assert 400 <= got.status_code < 500, (size, got.text)
    assert forge.lfs.size(forge.registry.get("ann", "plans").id, oid) is None
    assert forge.store.size(oid) is None and list(forge.store.tmp.iterdir()) == []


def test_an_upload_in_flight_outlives_another_process_s_start(
    forge: Forge, client: testing.TestClient
) -> None:
    """``floorless admin`` (or a second worker, or another node on shared storage) prepares
    its own forge over the same data while this one takes an upload: the part file being
    written is not that start's to sweep away."""
    data = os.urandom(3 * (1 << 20))
    oid = hashlib.sha256(data).hexdigest()
    body = io.BytesIO(data)

    def read(size: int) -> bytes:
        if body.tell() == 1 << 20:  # a third in: another forge starts on the same data
            other = Forge(forge.settings)
            other.prepare()
            other.db.close()
        return body.read(size)

    plans = forge.registry.get("ann", "plans")
    assert forge.lfs.upload(plans.id, oid, len(data), read)
    assert forge.lfs.size(plans.id, oid) == len(data)
    assert client.simulate_get(f"/ann/plans.git/info/lfs/objects/{oid}").content == data


def test_locks_go_only_by_their_owner_or_an_administrator_s_force(
    forge: Forge, client: testing.TestClient
) -> None:
    base = "/ann/secret.git/info/lfs/locks"
    lock = _lfs(client, base, {"path": "art/hero.psd"}, _auth("cat")).json["lock"]
    unlock = f"{base}/{lock['id']}/unlock"
    assert _lfs(client, unlock, {"force": True}, _auth("ben")).status_code == 403  # a reader
    assert _lfs(client, unlock, {}, _auth("ann")).status_code == 403  # not without force
    plans = forge.registry.get("ann", "plans")
    forge.policy.set_collaborator(plans, forge.accounts.require("dan"), "write")
    other = f"/ann/plans.git/info/lfs/locks/{lock['id']}/unlock"
    assert _lfs(client, other, {"force": True}, _auth("dan")).status_code == 404
    forge.policy.remove_collaborator(plans, forge.accounts.require("dan"))
    assert _lfs(client, unlock, {"force": True}, _token(forge, "ann", "read")).status_code == 403
    assert _lfs(client, unlock, {"force": True}, _auth("root")).status_code == 200


def test_the_allowed_types_go_by_the_file_not_by_the_type_its_sender_claims(
    tmp_path: Path,
) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data", attachment_types=[".zip", "image/*"])
    try:
        forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        plans = forge.registry.create("ann", "plans")
        _commit(forge, plans)
        release = _release(forge, "plans", "v1.0")
        client = testing.TestClient(create_app(forge))
        api = f"/api/v1/repos/ann/plans/releases/{release.id}/assets"
        for name, claimed, status in (
            ("tool.exe", "image/png", 415),
            ("logo.png", "application/octet-stream", 201),
            ("build.zip", "application/zip", 201),
        ):
            files = [("attachment", (name, b"MZ\x90\x00", claimed))]
            sent = httpx.Request("POST", "http://forge.test" + api, files=files)
            headers = {**_auth("ann"), "Content-Type": sent.headers["content-type"]}
            got = client.simulate_post(api, body=sent.read(), headers=headers)
            assert got.status_code == status, (name, claimed, got.text)
        assert [a.name for a in forge.attachments.of_releases([release.id])[release.id]] == [
            "logo.png",
            "build.zip",
        ]
    finally:
        forge.stop()


# -- odd input: a 4xx, never a 500 -----------------------------------------------------------


def test_a_digit_that_is_no_number_in_a_release_s_path_or_page_is_a_4xx(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "plans", "n1.0")
    base = "/api/v1/repos/ann/plans/releases"
    for path in (f"{base}/%C2%B2", f"{base}/%C2%B2/assets", f"{base}/{release.id}/assets/%C2%B9"):
        assert client.simulate_get(path, headers=_auth("ann")).status_code == 404, path
    page = client.simulate_get("/ann/plans/releases", query_string="page=%C2%B2")
    assert page.status_code == 400


def test_lfs_bodies_json_can_say_but_nothing_can_take_are_a_4xx(
    client: testing.TestClient,
) -> None:
    base = "/ann/plans.git/info/lfs"
    ann = _auth("ann")
    for path, body in (
        (f"{base}/locks", b'{"path": "a\\ud800.bin"}'),  # a lone surrogate: no UTF-8
        (f"{base}/locks/verify", {"cursor": 10**30}),  # past what a database stores
        (f"{base}/locks/verify", {"limit": 10**30, "cursor": 2**63}),
        (f"{base}/objects/batch", b"[" * 100_000),  # past the parser's stack
        (f"{base}/verify", b'{"a":' * 50_000),
        (f"{base}/locks", b"[" * 100_000),
    ):
        got = _lfs(client, path, body, ann)
        assert 400 <= got.status_code < 500, (path, got.status_code)
        assert got.headers["content-type"] == MEDIA


def test_a_part_s_headers_that_are_not_text_are_a_400_and_store_nothing(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "plans", "p1.0")
    browser = Browser(client)
    browser.sign_in("cat")
    csrf = csrf_of(browser.get("/ann/plans/releases/new").text)
    files = _count(forge, "attachments")
    for disposition, kind in (
        (b'form-data; name="files"; filename="\xff\xfe.bin"', b"application/octet-stream"),
        (b'form-data; name="files"; filename="a.bin"', b"\xff/\xfe"),
        (b'form-data; name="\xff"; filename="a.bin"', b"application/octet-stream"),
    ):
        part = b"Content-Disposition: " + disposition + b"\r\nContent-Type: " + kind
        body = (b"--XX\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n" + csrf.encode()
                + b"\r\n--XX\r\nContent-Disposition: form-data; name=\"tag_name\"\r\n\r\np2.0"
                + b"\r\n--XX\r\n" + part + b"\r\n\r\nzz\r\n--XX--\r\n")  # fmt: skip
        kind_header = {"Content-Type": "multipart/form-data; boundary=XX"}
        form = client.simulate_post(
            "/ann/plans/releases/new",
            body=body,
            headers={**browser._cookie_header(), **kind_header},
        )
        assert form.status_code == 400, disposition
        api = client.simulate_post(
            f"/api/v1/repos/ann/plans/releases/{release.id}/assets",
            body=body.replace(b'name="files"', b'name="attachment"'),
            headers={**_auth("cat"), **kind_header},
        )
        assert api.status_code == 400, disposition
    assert _count(forge, "attachments") == files
    assert forge.releases.by_tag(forge.registry.get("ann", "plans").id, "p2.0") is None


def test_a_tag_name_or_target_too_long_for_git_is_a_422(
    forge: Forge, client: testing.TestClient
) -> None:
    ann = _auth("ann")
    base = "/api/v1/repos/ann/plans"
    for path, body in (
        ("/tags", {"tag_name": "t" * 300}),  # past a file name's length
        ("/tags", {"tag_name": "t" * 2000}),  # past a ref name's
        ("/tags", {"tag_name": "ok-tag", "target": "m" * 2000}),
        ("/releases", {"tag_name": "r" * 300, "target_commitish": "main"}),
        ("/releases", {"tag_name": "r" * 2000, "draft": True}),
        ("/releases", {"tag_name": "ok-release", "target_commitish": "m" * 2000}),
    ):
        got = client.simulate_post(base + path, json=body, headers=ann)
        assert got.status_code == 422, (path, len(json.dumps(body)), got.status_code)
    assert client.simulate_delete(f"{base}/tags/{'t' * 2000}", headers=ann).status_code == 404
    assert client.simulate_get(f"{base}/releases/tags/{'t' * 2000}").status_code == 404


def test_file_names_inject_no_header_and_name_no_directory(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "plans", "f1.0")
    api = f"/api/v1/repos/ann/plans/releases/{release.id}/assets"
    octet = {**_auth("cat"), "Content-Type": "application/octet-stream"}
    names = ('a"; filename="evil.html', "a\r\nSet-Cookie: x=1", "../../etc/passwd",
             "..\\..\\boot.ini", "x%2f..%2fy", "page.html", "\u00e9t\u00e9 \u202e.txt")  # fmt: skip
    for name in names:
        script = b"<script>1</script>"
        made = client.simulate_post(api, params={"name": name}, body=script, headers=octet)
        assert made.status_code == 201, name
        kept = made.json["name"]
        assert "/" not in kept and "\\" not in kept and "\r" not in kept and "\n" not in kept
        got = client.simulate_get(f"/attachments/{made.json['uuid']}")
        disposition = got.headers["content-disposition"]
        assert disposition.startswith("attachment; filename*=UTF-8''") and '"' not in disposition
        assert (
            " " not in disposition.partition("''")[2] and ";" not in disposition.partition("''")[2]
        )
        assert got.headers["content-type"] == "application/octet-stream"
        assert (
            got.headers["x-content-type-options"] == "nosniff" and "set-cookie" not in got.headers
        )


# -- cross-site requests -----------------------------------------------------------------------


def test_the_release_forms_take_nothing_without_their_csrf_token(
    forge: Forge, client: testing.TestClient
) -> None:
    release = _release(forge, "plans", "c1.0")
    kept = _attach(forge, release, "kept.bin", b"kept")
    other = _attach(forge, _release(forge, "plans", "c2.0"), "other.bin", b"other")
    browser = Browser(client)
    browser.sign_in("cat")
    files = _count(forge, "attachments")
    for csrf in (None, "forged"):
        made = browser.post_files("/ann/plans/releases/new", {"tag_name": "c3.0"},
                                  [("a.bin", b"x")], csrf=csrf)  # fmt: skip
        assert made.status_code == 403
        edit = "/ann/plans/releases/edit/c1.0"
        gone = browser.post(edit, {"action": "delete", "confirm": "on"}, csrf=csrf)
        assert gone.status_code == 403
    assert _count(forge, "attachments") == files
    assert forge.releases.by_id(release.repo_id, release.id) is not None
    # the form's own token deletes only this release's files, not another's named by uuid
    saved = browser.post(
        "/ann/plans/releases/edit/c1.0", {"action": "save", "delete_file": other.uuid}
    )
    assert saved.status_code == 303
    assert forge.attachments.by_id(other.id) is not None and forge.attachments.by_id(kept.id)
    reader = Browser(client)
    reader.sign_in("ben")
    assert reader.get("/ann/secret/releases/new").status_code == 403


def test_a_signed_in_browser_cannot_be_made_to_lock_or_unlock_from_another_site(
    forge: Forge, client: testing.TestClient
) -> None:
    """A page on another site may send a POST with the visitor's cookie and a body with no
    type (``fetch`` of a ``Blob``, ``no-cors``) or ``text/plain`` (a form) without asking
    first; only a JSON body needs the browser's preflight, which this forge never grants."""
    browser = Browser(client)
    browser.sign_in("ann")
    base = "/ann/plans.git/info/lfs/locks"
    mine = _lfs(client, base, {"path": "mine.bin"}, _auth("cat")).json["lock"]
    locks = _count(forge, "lfs_locks")
    cookie = browser._cookie_header()
    for kind in ({}, {"Content-Type": "text/plain"}):
        for path, body in ((base, b'{"path": "forged.bin"}'),
                           (f"{base}/{mine['id']}/unlock", b'{"force": true}')):  # fmt: skip
            sent = client.simulate_post(path, body=body, headers={**cookie, **kind})
            assert sent.status_code == 415, (path, kind, sent.status_code)
    assert _count(forge, "lfs_locks") == locks


# -- bodies past a limit, over a real server ---------------------------------------------------


def _first_line(port: int, request: bytes) -> bytes:
    """The status line the server answers ``request`` (headers only) with."""
    with socket.create_connection(("127.0.0.1", port), timeout=patience(20)) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n" not in answer:
            piece = sock.recv(4096)
            if not piece:
                break
            answer += piece
    return answer.partition(b"\r\n")[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server whose attachments are small and Git LFS objects unlimited."""
    root = tmp_path_factory.mktemp("hostile-limits")
    config = root / "floorless.toml"
    config.write_text("attachment_max_bytes = 100000\nlfs_max_bytes = 0\nclient_timeout = 3.0\n")
    with serving(root / "repos", root / "data", "--config", str(config)) as running:
        yield running


@pytest.mark.network
def test_a_body_past_the_attachment_limit_is_refused_before_it_is_read(server: Server) -> None:
    """An upload form's limit is the attachments' (and its framing), not Git LFS's: with LFS
    objects unlimited, a release form once took a body of a terabyte onto the disk."""
    over = 100_000 + (1 << 20) + 1
    for path in (b"/ann/plans/releases/new", b"/api/v1/repos/ann/plans/releases/1/assets"):
        line = _first_line(
            server.port,
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data;"
            b" boundary=x\r\nContent-Length: " + str(over).encode() + b"\r\n\r\n",
        )
        assert line.split(b" ")[1] == b"413", (path, line)
    # Git LFS's own limit is another's: an object's upload is read (then answered 401)
    lfs = "/ann/plans.git/info/lfs/objects/" + "a" * 64
    with httpx.Client(base_url=server.url, timeout=patience(30)) as http:
        assert http.put(lfs, content=b"x" * over).status_code == 401
    line = _first_line(
        server.port, b"POST /-/login HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n"
    )
    assert line.split(b" ")[1] == b"400"


@pytest.mark.network
def test_an_anonymous_upload_is_refused_before_its_body_is_spooled(server: Server) -> None:
    """The gateway reads a whole body onto the disk before the app runs: with
    ``lfs_max_bytes`` at its default (0, no limit), anyone, signed in or not, could send a
    terabyte to any LFS object's address. A large body nobody known sends is refused from its
    headers alone, before a byte of it is kept."""
    for credentials in (
        b"",
        b"Authorization: Basic " + base64.b64encode(b"nobody:wrong") + b"\r\n",
        b"Authorization: Bearer lfs.1.write.99999999999.0000\r\n",
        b"Cookie: floorless_session=forged\r\n",
    ):
        for path, length in (
            (b"/ann/plans.git/info/lfs/objects/" + b"a" * 64, b"Content-Length: %d" % (1 << 40)),
            (b"/ann/plans.git/git-receive-pack", b"Transfer-Encoding: chunked"),
        ):
            line = _first_line(
                server.port,
                b"PUT " + path + b" HTTP/1.1\r\nHost: x\r\n" + credentials + length
                + b"\r\n\r\n",
            )  # fmt: skip
            assert line.split(b" ")[1] == b"401", (credentials, path, line)
