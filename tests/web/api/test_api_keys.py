"""SSH keys through the API, as Forgejo answers them: a person's own (``/user/keys``), anyone's
public keys (``/users/{name}/keys``), a repository's deploy keys for its administrators
(``/repos/{owner}/{repo}/keys``), and the SSH clone URL of every repository. Keys are made by
``ssh-keygen``, whose fingerprint is the one expected; pyforgejo's models parse the answers."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import support.api
from pyforgejo.core.api_error import ApiError
from support.api import BASE, api, error_of, token_for
from support.forges import start_forge
from support.keypairs import key_pair

from floorless.forge import Forge
from floorless.web.app import create_app

forge = support.api.forge
http = support.api.http


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def test_a_persons_keys_added_listed_read_and_deleted(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    pair = key_pair(tmp_path, "laptop")
    client = api(http, token_for(http, "ann"))
    made = client.user.current_post_key(key=pair.public + "\n", title="Laptop")
    assert (made.title, made.key, made.fingerprint) == ("Laptop", pair.content, pair.fingerprint)
    assert made.url == f"{BASE}/api/v1/user/keys/{made.id}"
    assert (made.key_type, made.read_only) == ("user", False)
    assert made.user is not None and made.user.login == "ann"
    assert made.created_at is not None and made.created_at.tzinfo is not None
    assert [k.id for k in forge.keys.of_user(forge.accounts.require("ann").id)] == [made.id]

    assert [k.fingerprint for k in client.user.current_list_keys()] == [pair.fingerprint]
    assert client.user.current_get_key(made.id).key == pair.content
    assert client.user.current_list_keys(fingerprint="SHA256:nothing") == []
    # anyone may list a person's public keys, without being told whose or what kind
    public = api(http).user.list_keys("ann")
    assert [(k.id, k.key, k.user, k.key_type) for k in public] == [
        (made.id, pair.content, None, None)
    ]
    raw = http.get("/api/v1/users/ann/keys")
    assert raw.headers["x-total-count"] == "1"
    assert set(raw.json()[0]) == {"id", "key", "url", "title", "fingerprint", "created_at"}
    assert http.get("/api/v1/users/ben/keys").json() == []

    client.user.current_delete_key(made.id)
    assert client.user.current_list_keys() == []
    with pytest.raises(ApiError) as gone:
        client.user.current_get_key(made.id)
    assert gone.value.status_code == 404


def test_a_bad_or_used_key_is_a_422_and_adds_nothing(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    ann = _auth(token_for(http, "ann"))
    ben = _auth(token_for(http, "ben"))
    pair = key_pair(tmp_path, "one")
    short_rsa = key_pair(tmp_path, "short", "rsa", 1024)
    for key, words in (
        ("garbage", "not an SSH public key"),
        (pair.private, "private key"),
        (short_rsa.public, "2048"),
        ("", "empty"),
    ):
        answer = http.post("/api/v1/user/keys", headers=ann, json={"key": key, "title": "x"})
        assert answer.status_code == 422, answer.text
        message = error_of(answer)
        assert message.startswith("Invalid key content") and words in message, message
    answer = http.post("/api/v1/user/keys", headers=ann, json={"key": pair.public})
    assert answer.status_code == 422 and error_of(answer) == "[title]: Required"
    assert forge.keys.every() == []

    made = http.post("/api/v1/user/keys", headers=ann, json={"key": pair.public, "title": "a"})
    assert made.status_code == 201, made.text
    # the same key again, by its owner or by anyone else, as a person's or a deploy key
    forge.registry.create("ben", "tools")
    for path, headers in (
        ("/api/v1/user/keys", ann),
        ("/api/v1/user/keys", ben),
        ("/api/v1/repos/ben/tools/keys", ben),
    ):
        again = http.post(path, headers=headers, json={"key": pair.public, "title": "b"})
        assert again.status_code == 422 and pair.fingerprint in error_of(again), again.text
    assert [k.title for k in forge.keys.every()] == ["a"]


def test_who_may_read_add_and_delete_a_persons_keys(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    pair = key_pair(tmp_path, "k")
    assert http.get("/api/v1/user/keys").status_code == 401
    anonymous = http.post("/api/v1/user/keys", json={"key": pair.public, "title": "t"})
    assert anonymous.status_code == 401 and error_of(anonymous)
    read = _auth(token_for(http, "ann", ["read:user"]))
    refused = http.post("/api/v1/user/keys", headers=read, json={"key": pair.public, "title": "t"})
    assert refused.status_code == 403 and "scope" in error_of(refused)
    assert forge.keys.every() == []
    assert http.get("/api/v1/user/keys", headers=read).json() == []

    made = api(http, token_for(http, "ann")).user.current_post_key(key=pair.public, title="t")
    assert http.delete(f"/api/v1/user/keys/{made.id}", headers=read).status_code == 403
    # another person's key is no key of theirs: 404, and it stays
    ben = _auth(token_for(http, "ben"))
    for method in ("GET", "DELETE"):
        answer = http.request(method, f"/api/v1/user/keys/{made.id}", headers=ben)
        assert answer.status_code == 404 and error_of(answer)
    for bad in ("0", "x", "99999999999999999999"):
        assert http.get(f"/api/v1/user/keys/{bad}", headers=ben).status_code == 404
    assert [k.id for k in forge.keys.every()] == [made.id]
    # a site administrator sees whose a listed key is
    root = http.get("/api/v1/users/ann/keys", headers=_auth(token_for(http, "root")))
    assert root.json()[0]["user"]["login"] == "ann"
    assert http.get("/api/v1/users/nobody/keys").status_code == 404


def test_deploy_keys_for_the_repositorys_administrators(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    repo = forge.registry.create("ann", "site")
    forge.policy.set_collaborator(repo, forge.accounts.require("ben"), "write")
    reader, pusher = key_pair(tmp_path, "reader"), key_pair(tmp_path, "pusher")
    client = api(http, token_for(http, "ann"))
    made = client.repository.repo_create_key(
        "ann", "site", key=reader.public, title="ci", read_only=True
    )
    assert (made.title, made.key, made.fingerprint) == ("ci", reader.content, reader.fingerprint)
    assert made.read_only is True and made.key_id == made.id
    assert made.url == f"{BASE}/api/v1/repos/ann/site/keys/{made.id}"
    assert made.repository is not None and made.repository.full_name == "ann/site"
    # without read_only, a deploy key may push, as on Forgejo
    pushing = client.repository.repo_create_key("ann", "site", key=pusher.public, title="deploy")
    assert pushing.read_only is False
    stored = forge.keys.of_repo(repo.id)
    assert [(k.id, k.read_only, k.user_id) for k in stored] == [
        (made.id, True, None),
        (pushing.id, False, None),
    ]

    listed = client.repository.repo_list_keys("ann", "site")
    assert [k.fingerprint for k in listed] == [reader.fingerprint, pusher.fingerprint]
    assert [k.id for k in client.repository.repo_list_keys("ann", "site", key_id=made.id)] == [
        made.id
    ]
    only = client.repository.repo_list_keys("ann", "site", fingerprint=pusher.fingerprint)
    assert [k.id for k in only] == [pushing.id]
    assert client.repository.repo_get_key("ann", "site", made.id).title == "ci"
    # a person's key is no deploy key, nor is another repository's
    as_person = http.get(f"/api/v1/user/keys/{made.id}", headers=_auth(token_for(http, "ann")))
    assert as_person.status_code == 404
    forge.registry.create("ann", "other")
    other = http.get(
        f"/api/v1/repos/ann/other/keys/{made.id}", headers=_auth(token_for(http, "ann"))
    )
    assert other.status_code == 404

    # a writer who does not administer it, a read token, no one: refused, nothing changes
    ben = _auth(token_for(http, "ben"))
    read = _auth(token_for(http, "ann", ["read:repository"]))
    third = key_pair(tmp_path, "third")
    for headers, status in ((ben, 403), (read, 403), ({}, 401)):
        for method, path, body in (
            ("GET", "/api/v1/repos/ann/site/keys", None),
            ("POST", "/api/v1/repos/ann/site/keys", {"key": third.public, "title": "t"}),
            ("GET", f"/api/v1/repos/ann/site/keys/{made.id}", None),
            ("DELETE", f"/api/v1/repos/ann/site/keys/{made.id}", None),
        ):
            answer = http.request(method, path, headers=headers, json=body)
            assert answer.status_code == status, (headers, method, path, answer.text)
            error_of(answer)
    assert len(forge.keys.of_repo(repo.id)) == 2

    client.repository.repo_delete_key("ann", "site", made.id)
    assert [k.id for k in forge.keys.of_repo(repo.id)] == [pushing.id]
    with pytest.raises(ApiError) as gone:
        client.repository.repo_get_key("ann", "site", made.id)
    assert gone.value.status_code == 404


def test_a_private_repositorys_deploy_keys_are_missing_to_others(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    forge.registry.create("ann", "hidden", private=True)
    ben = _auth(token_for(http, "ben"))
    pair = key_pair(tmp_path, "k")
    for method, body in (("GET", None), ("POST", {"key": pair.public, "title": "t"})):
        hidden = http.request(method, "/api/v1/repos/ann/hidden/keys", headers=ben, json=body)
        missing = http.request(method, "/api/v1/repos/ann/nope/keys", headers=ben, json=body)
        assert hidden.status_code == missing.status_code == 404
        assert error_of(hidden) == error_of(missing)
    assert forge.keys.every() == []


def test_every_repository_has_its_ssh_clone_url(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "notes")
    got = api(http).repository.repo_get("ann", "notes")
    assert got.ssh_url == "ssh://git@forge.test:2222/ann/notes.git"
    listed = http.get("/api/v1/repos/search", headers={"Host": "other.example:8080"}).json()
    assert [r["ssh_url"] for r in listed["data"]] == ["ssh://git@other.example:2222/ann/notes.git"]


def test_the_ssh_clone_url_follows_the_settings(tmp_path: Path) -> None:
    for settings, expected in (
        ({"ssh_domain": "git.example.org", "ssh_url_port": 22}, "git@git.example.org:ann/x.git"),
        ({"ssh_port": 0}, ""),
    ):
        here = tmp_path / str(len(expected))
        forge = start_forge(here / "repos", here / "data", **settings)
        try:
            forge.accounts.create_user("ann", "ann@example.org", support.api.PASSWORD)
            forge.registry.create("ann", "x")
            with httpx.Client(
                transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE
            ) as client:
                assert client.get("/api/v1/repos/ann/x").json()["ssh_url"] == expected
        finally:
            forge.stop()


def test_the_described_key_shapes_are_the_answers(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    forge.registry.create("ann", "shape")
    headers = _auth(token_for(http, "ann"))
    mine = http.post(
        "/api/v1/user/keys",
        headers=headers,
        json={"key": key_pair(tmp_path, "a").public, "title": "a"},
    )
    deploy = http.post(
        "/api/v1/repos/ann/shape/keys",
        headers=headers,
        json={"key": key_pair(tmp_path, "b").public, "title": "b"},
    )
    document = http.get("/swagger.v1.json").json()
    for name, answer in (("PublicKey", mine), ("DeployKey", deploy)):
        assert answer.status_code == 201, answer.text
        assert set(document["definitions"][name]["properties"]) == set(answer.json()), name
    for path in ("/user/keys", "/repos/{owner}/{repo}/keys"):
        (body,) = document["paths"][path]["post"]["parameters"][-1:]
        assert set(body["schema"]["properties"]) == {"key", "title", "read_only"}
        assert set(body["schema"]["required"]) == {"key", "title"}
