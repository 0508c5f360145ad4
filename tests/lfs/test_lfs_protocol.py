"""The Git LFS protocol over the real app, message by message: the batch API's answers, uploads
checked against their size and SHA-256, the transfer header a batch gives, objects lent to a
fork when it is made and collected with the last repository that holds them, and the locks
API. The real ``git lfs`` client's round trips are ``test_lfs_client.py``'s."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from falcon import testing
from support.accounts import PASSWORD
from support.forges import start_forge, wait_for

from floorless.forge import Forge
from floorless.web.app import create_app

MEDIA = "application/vnd.git-lfs+json"
DATA = os.urandom(300_000)
OID = hashlib.sha256(DATA).hexdigest()


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("lfs-protocol")
    forge = start_forge(root / "repos", root / "data")
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.registry.create("ann", "other")
    forge.policy.set_collaborator(plans, forge.accounts.get("ben"), "write")  # type: ignore[arg-type]
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def _auth(who: str | None) -> dict[str, str]:
    if who is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{who}:{PASSWORD}".encode()).decode()}


def _post(
    client: testing.TestClient, path: str, body: Any, who: str | None = "ann", **headers: str
) -> testing.Result:
    return client.simulate_post(
        path,
        body=body if isinstance(body, bytes) else json.dumps(body).encode(),
        headers={"Content-Type": MEDIA, "Accept": MEDIA, **_auth(who), **headers},
    )


def _batch(
    client: testing.TestClient, repo: str, operation: str, objects: list[dict[str, Any]],
    who: str | None = "ann",
) -> testing.Result:  # fmt: skip
    return _post(
        client, f"/ann/{repo}.git/info/lfs/objects/batch",
        {"operation": operation, "transfers": ["basic"], "objects": objects}, who,
    )  # fmt: skip


def _upload(
    client: testing.TestClient, repo: str, data: bytes, oid: str | None = None, who: str = "ann"
) -> testing.Result:
    """Upload as ``git lfs`` does: the batch, then its upload action with its headers."""
    oid = oid or hashlib.sha256(data).hexdigest()
    answer = _batch(client, repo, "upload", [{"oid": oid, "size": len(data)}], who)
    assert answer.status_code == 200, answer.text
    action = answer.json["objects"][0]["actions"]["upload"]
    return client.simulate_put(
        action["href"].split("://", 1)[1].partition("/")[2].join(["/", ""]),
        body=data,
        headers=action["header"],
    )


def _stored(forge: Forge, oid: str) -> bool:
    return forge.store.size(oid) is not None


def test_an_upload_then_a_download_through_the_batch(
    forge: Forge, client: testing.TestClient
) -> None:
    assert _upload(client, "plans", DATA).status_code == 200
    assert _stored(forge, OID)
    answer = _batch(client, "plans", "download", [{"oid": OID, "size": len(DATA)}])
    assert answer.headers["content-type"] == MEDIA
    entry = answer.json["objects"][0]
    action = entry["actions"]["download"]
    assert action["href"].endswith(f"/ann/plans.git/info/lfs/objects/{OID}")
    got = client.simulate_get(f"/ann/plans.git/info/lfs/objects/{OID}", headers=action["header"])
    assert got.status_code == 200 and got.content == DATA
    ranged = client.simulate_get(
        f"/ann/plans.git/info/lfs/objects/{OID}",
        headers={**action["header"], "Range": "bytes=10-19"},
    )
    assert ranged.status_code == 206 and ranged.content == DATA[10:20]
    # held now: an upload asks for nothing; the repository's usage counts it once
    again = _batch(client, "plans", "upload", [{"oid": OID, "size": len(DATA)}])
    assert "actions" not in again.json["objects"][0]
    usage = forge.lfs.usage(forge.registry.get("ann", "plans").id)
    assert (usage.objects, usage.bytes) == (1, len(DATA))


def test_a_corrupt_or_short_upload_is_refused_and_kept_nowhere(
    forge: Forge, client: testing.TestClient
) -> None:
    data = os.urandom(70_000)
    oid = hashlib.sha256(data).hexdigest()
    corrupt = data[:-1] + bytes([data[-1] ^ 1])
    refused = _upload(client, "plans", corrupt, oid=oid)
    assert refused.status_code == 422 and "SHA-256" in refused.json["message"]
    assert refused.headers["content-type"] == MEDIA
    assert not _stored(forge, oid) and not _stored(forge, hashlib.sha256(corrupt).hexdigest())
    answer = _batch(client, "plans", "upload", [{"oid": oid, "size": len(data)}])
    header = answer.json["objects"][0]["actions"]["upload"]["header"]
    path = f"/ann/plans.git/info/lfs/objects/{oid}"
    short = client.simulate_put(
        path, body=data[:1000], headers={**header, "X-Lfs-Size": str(len(data))}
    )
    assert short.status_code in (400, 422), short.text
    assert not _stored(forge, oid)
    assert list(forge.store.tmp.iterdir()) == []  # no part file left behind
    down = _batch(client, "plans", "download", [{"oid": oid, "size": len(data)}])
    assert down.json["objects"][0]["error"]["code"] == 404
    # whole, it goes in
    assert _upload(client, "plans", data).status_code == 200 and _stored(forge, oid)


def test_bytes_held_elsewhere_give_no_right_to_them(
    forge: Forge, client: testing.TestClient
) -> None:
    secret = os.urandom(5000)
    oid = hashlib.sha256(secret).hexdigest()
    assert _upload(client, "other", secret).status_code == 200
    # ben may write to plans but names an object only ann/other holds
    down = _batch(client, "plans", "download", [{"oid": oid, "size": len(secret)}], "ben")
    assert down.json["objects"][0]["error"]["code"] == 404
    assert (
        client.simulate_get(
            f"/ann/plans.git/info/lfs/objects/{oid}", headers=_auth("ben")
        ).status_code
        == 404
    )
    up = _batch(client, "plans", "upload", [{"oid": oid, "size": len(secret)}], "ben")
    assert "upload" in up.json["objects"][0]["actions"]  # the bytes must be sent to be had


def test_the_transfer_header_is_for_its_repository_object_and_operation(
    forge: Forge, client: testing.TestClient
) -> None:
    plans = forge.registry.get("ann", "plans")
    forge.lfs.upload(plans.id, OID, len(DATA), io.BytesIO(DATA).read)  # (run alone, too)
    answer = _batch(client, "plans", "download", [{"oid": OID, "size": len(DATA)}], "ben")
    header = answer.json["objects"][0]["actions"]["download"]["header"]
    assert list(header) == ["Authorization"]  # so that git lfs asks for no credentials
    good = client.simulate_get(f"/ann/plans.git/info/lfs/objects/{OID}", headers=header)
    assert good.status_code == 200
    ((name, value),) = header.items()
    assert value.startswith("Bearer lfs.")
    account, scope, expires, signature = value.removeprefix("Bearer lfs.").split(".")
    for forged in (
        f"{account}.{scope}.{expires}.{'0' * len(signature)}",  # another signature
        f"1.{scope}.{expires}.{signature}",  # another person
        f"{account}.write.{expires}.{signature}"
        if scope == "read"
        else f"{account}.read.{expires}.{signature}",
        f"{account}.{scope}.{int(expires) + 1}.{signature}",  # a longer life
        f"{account}.{scope}.{int(expires) - 7200}.{signature}",  # long expired
        "garbage",
    ):
        forged = "Bearer lfs." + forged
        refused = client.simulate_get(
            f"/ann/plans.git/info/lfs/objects/{OID}", headers={name: forged}
        )
        assert refused.status_code == 401, forged
    # a download's header uploads nothing, and serves no other repository
    put = client.simulate_put(f"/ann/plans.git/info/lfs/objects/{OID}", body=DATA, headers=header)
    assert put.status_code == 401
    other = client.simulate_get(f"/ann/other.git/info/lfs/objects/{OID}", headers=header)
    assert other.status_code == 401


def test_bad_batches_get_clear_answers(client: testing.TestClient) -> None:
    path = "/ann/plans.git/info/lfs/objects/batch"
    for body in (
        b"{", b"[]", b"\xff", {"operation": "delete", "objects": []},
        {"operation": "download", "objects": [{"oid": "abc", "size": 1}]},
        {"operation": "download", "objects": [{"oid": OID, "size": -1}]},
        {"operation": "download", "objects": [{"oid": OID.upper(), "size": 1}]},
        {"operation": "download", "objects": "x"},
        {"operation": "download", "transfers": ["ssh"], "objects": []},
        {"operation": "download", "hash_algo": "sha1", "objects": []},
        {"operation": "download", "objects": [{"oid": OID, "size": 1}] * 1001},
    ):  # fmt: skip
        result = _post(client, path, body)
        assert result.status_code == 422, (body, result.text)
        assert result.headers["content-type"] == MEDIA and result.json["message"]
    wrong_type = _post(
        client, path, {"operation": "download", "objects": []}, **{"Content-Type": "text/plain"}
    )
    assert wrong_type.status_code == 415
    for bad in ("..%2f..%2fetc%2fpasswd", "%00", OID[:-1], OID + "0"):
        got = client.simulate_get(f"/ann/plans.git/info/lfs/objects/{bad}", headers=_auth("ann"))
        assert got.status_code in (404, 422), bad
    unknown = _batch(client, "nothing", "download", [], None)
    assert unknown.status_code == 401 and unknown.headers["www-authenticate"].startswith("Basic")
    assert _batch(client, "nothing", "download", [], "ben").status_code == 404


def test_a_fork_starts_with_its_parents_objects_and_no_later_ones(
    forge: Forge, client: testing.TestClient
) -> None:
    plans = forge.registry.get("ann", "plans")
    before = os.urandom(4000)
    assert _upload(client, "plans", before).status_code == 200
    fork = forge.lifecycle.fork(plans, "cat", "plans-fork")
    later = os.urandom(4000)
    assert _upload(client, "plans", later).status_code == 200
    path = "/cat/plans-fork.git/info/lfs/objects/batch"
    objects = [{"oid": hashlib.sha256(d).hexdigest(), "size": len(d)} for d in (before, later)]
    answer = _post(client, path, {"operation": "download", "objects": objects}, "cat")
    had, lacks = answer.json["objects"]
    assert "download" in had["actions"] and lacks["error"]["code"] == 404
    # the bytes are kept once; deleting the parent leaves the fork its object
    forge.lifecycle.delete(plans)
    wait_for(lambda: forge.hook_events.idle() if hasattr(forge.hook_events, "idle") else True)
    assert _stored(forge, had["oid"])
    got = client.simulate_get(
        f"/cat/plans-fork.git/info/lfs/objects/{had['oid']}", headers=_auth("cat")
    )
    assert got.status_code == 200 and got.content == before
    # once the last repository holding them goes, so do the bytes
    forge.lifecycle.delete(fork)
    wait_for(lambda: not _stored(forge, had["oid"]) and not _stored(forge, lacks["oid"]))


# -- locks ---------------------------------------------------------------------------------


def test_locks_are_taken_listed_verified_and_let_go(
    forge: Forge, client: testing.TestClient
) -> None:
    base = "/ann/other.git/info/lfs/locks"
    forge.policy.set_collaborator(
        forge.registry.get("ann", "other"), forge.accounts.get("ben"), "write"
    )  # type: ignore[arg-type]
    made = _post(client, base, {"path": "art/hero.psd"}, "ben")
    assert made.status_code == 201
    lock = made.json["lock"]
    assert lock["path"] == "art/hero.psd" and lock["owner"]["name"] == "ben"
    taken = _post(client, base, {"path": "/art/./hero.psd"}, "ann")
    assert taken.status_code == 409 and taken.json["lock"]["id"] == lock["id"]
    for bad in ("../x", "", "a/../../b", "a\x00b", 5):
        assert _post(client, base, {"path": bad}, "ben").status_code == 400, bad
    for n in range(3):
        assert _post(client, base, {"path": f"sheet{n}.png"}, "ann").status_code == 201
    listed = client.simulate_get(base, query_string="limit=2", headers=_auth("ben"))
    assert [x["path"] for x in listed.json["locks"]] == ["art/hero.psd", "sheet0.png"]
    cursor = listed.json["next_cursor"]
    rest = client.simulate_get(base, query_string=f"limit=2&cursor={cursor}", headers=_auth("ben"))
    assert [x["path"] for x in rest.json["locks"]] == ["sheet1.png", "sheet2.png"]
    assert rest.json["next_cursor"] == ""
    one = client.simulate_get(base, query_string="path=art/hero.psd", headers=_auth("ann"))
    assert [x["id"] for x in one.json["locks"]] == [lock["id"]]
    verify = _post(client, base + "/verify", {}, "ben")
    assert [x["path"] for x in verify.json["ours"]] == ["art/hero.psd"]
    assert len(verify.json["theirs"]) == 3
    # someone else's lock: not without force, and force is for administrators
    unlock = f"{base}/{lock['id']}/unlock"
    assert _post(client, unlock, {}, "ann").status_code == 403
    sheet = rest.json["locks"][0]["id"]
    forced = _post(client, f"{base}/{sheet}/unlock", {"force": True}, "ben")
    assert forced.status_code == 403 and "administrators" in forced.json["message"]
    assert _post(client, unlock, {"force": True}, "ann").status_code == 200  # ann owns it
    assert _post(client, unlock, {}, "ben").status_code == 404
    assert _post(client, f"{base}/{sheet}/unlock", {}, "ann").json["lock"]["path"] == "sheet1.png"
    assert _post(client, f"{base}/abc/unlock", {}, "ann").status_code == 400
    assert (
        client.simulate_get(base, query_string="cursor=x", headers=_auth("ann")).status_code == 400
    )
