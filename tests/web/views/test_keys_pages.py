"""SSH keys in the browser: a person's keys page (``/-/keys``), a repository's deploy keys in
its settings, the public ``/{name}.keys``, and the home pages' SSH clone URL. Keys are made by
``ssh-keygen``; its fingerprint is the one the pages must show."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote_plus

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge
from support.keypairs import key_pair

from floorless.core.errors import BadRequest
from floorless.forge import Forge
from floorless.web.app import create_app

WHEN = 1_700_000_000


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("keys")
    forge = start_forge(root / "repos", root / "data")
    ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.accounts.create_org("crew", ann)
    forge.registry.create("ann", "hollow")
    forge.registry.create("ann", "secret", private=True)
    repo = forge.registry.create("ann", "plans")
    handle = forge.live.open(repo)
    tree = handle.TreeBuilder()
    tree.insert("a.txt", handle.create_blob(b"a\n"), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    handle.create_commit("refs/heads/main", who, who, "one", tree.write(), [])
    handle.set_head("refs/heads/main")
    forge.moves.refs_moved(repo)
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def browser(client: testing.TestClient, name: str) -> Browser:
    person = Browser(client)
    assert person.sign_in(name).status_code == 303
    return person


def _error(page: str) -> str:
    found = re.search(r'<p class="error" role="alert">([^<]*)</p>', page)
    assert found is not None, "no error shown"
    return found.group(1)


def test_a_key_added_listed_published_and_deleted(
    forge: Forge, client: testing.TestClient, tmp_path: Path
) -> None:
    ann = browser(client, "ann")
    pair = key_pair(tmp_path, "laptop")
    added = ann.post(
        "/-/keys", {"action": "add", "title": "Laptop", "key": quote_plus(pair.public)}
    )
    assert added.status_code == 303 and added.headers["location"] == "/-/keys"
    page = ann.get("/-/keys")
    assert page.status_code == 200 and "no-store" in page.headers["cache-control"]
    row = page.text[page.text.index("<td>Laptop</td>") :].split("</tr>")[0]
    assert pair.fingerprint in row and "ssh-ed25519" in row and "never used" in row
    assert 'href="/-/keys"' in page.text  # the site's header links here
    (key,) = forge.keys.of_user(forge.accounts.require("ann").id)
    assert key.fingerprint == pair.fingerprint

    public = client.simulate_get("/ann.keys")
    assert public.status_code == 200
    assert public.headers["content-type"] == "text/plain; charset=utf-8"
    assert public.text == pair.content + "\n"

    deleted = ann.post("/-/keys", {"action": "delete", "id": str(key.id)})
    assert deleted.status_code == 303
    assert forge.keys.of_user(forge.accounts.require("ann").id) == []
    assert pair.fingerprint not in ann.get("/-/keys").text
    assert client.simulate_get("/ann.keys").text == ""


def test_a_bad_key_shows_why_and_adds_nothing(
    forge: Forge, client: testing.TestClient, tmp_path: Path
) -> None:
    ben = browser(client, "ben")
    pair = key_pair(tmp_path, "spare")
    for key, words in (
        ("not a key", "not an SSH public key"),
        (pair.private, "private key"),
    ):
        answer = ben.post("/-/keys", {"action": "add", "title": "Mine", "key": quote_plus(key)})
        assert answer.status_code == 400
        assert words in _error(answer.text)
        assert 'value="Mine"' in answer.text  # the form keeps what was typed
    assert forge.keys.of_user(forge.accounts.require("ben").id) == []
    # a key already in use elsewhere
    forge.keys.add_user_key(forge.accounts.require("ann"), pair.public, "ann's")
    try:
        answer = ben.post(
            "/-/keys", {"action": "add", "title": "t", "key": quote_plus(pair.public)}
        )
        assert answer.status_code == 409 and pair.fingerprint in _error(answer.text)
        assert forge.keys.of_user(forge.accounts.require("ben").id) == []
        # nor may one delete another's key
        (theirs,) = forge.keys.of_user(forge.accounts.require("ann").id)
        refused = ben.post("/-/keys", {"action": "delete", "id": str(theirs.id)})
        assert refused.status_code == 404
        assert forge.keys.get(theirs.id) is not None
    finally:
        for key in forge.keys.every():
            forge.keys.delete(key)


def test_the_keys_page_needs_a_session_and_its_form_a_csrf_token(
    forge: Forge, client: testing.TestClient, tmp_path: Path
) -> None:
    anonymous = client.simulate_get("/-/keys")
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/-/login")
    ann = browser(client, "ann")
    pair = key_pair(tmp_path, "k")
    forged = ann.post(
        "/-/keys", {"action": "add", "title": "t", "key": quote_plus(pair.public)}, csrf=None
    )
    assert forged.status_code == 403
    assert forge.keys.every() == []


def test_public_keys_of_no_one_or_an_organisation_are_missing(
    forge: Forge, client: testing.TestClient
) -> None:
    for name in ("crew", "nobody"):
        answer = client.simulate_get(f"/{name}.keys")
        assert answer.status_code == 404
        assert answer.headers["content-type"].startswith("text/plain")
    assert client.simulate_get("/ben.keys").text == ""
    # no new name can be taken for these pages
    with pytest.raises(BadRequest, match=r"\.keys"):
        forge.accounts.create_user("dan.keys", "dan@example.org", PASSWORD)
    # the owner page and the repositories beside it are what they were
    assert client.simulate_get("/ann").status_code == 200
    assert client.simulate_get("/ann/plans").status_code == 200


def test_deploy_keys_in_the_repositorys_settings(
    forge: Forge, client: testing.TestClient, tmp_path: Path
) -> None:
    ann = browser(client, "ann")
    settings = ann.get("/ann/plans/settings").text
    assert 'href="/ann/plans/settings/keys"' in settings
    reader, pusher = key_pair(tmp_path, "reader"), key_pair(tmp_path, "pusher")
    url = "/ann/plans/settings/keys"
    made = ann.post(url, {"action": "add", "title": "ci", "key": quote_plus(reader.public)})
    assert made.status_code == 303 and made.headers["location"] == url
    pushing = {"action": "add", "title": "deploy", "key": quote_plus(pusher.public), "write": "on"}
    assert ann.post(url, pushing).status_code == 303
    repo = forge.registry.get("ann", "plans")
    keys = forge.keys.of_repo(repo.id)
    assert [(k.title, k.read_only, k.user_id) for k in keys] == [
        ("ci", True, None),
        ("deploy", False, None),
    ]
    page = ann.get(url).text
    for key, access in ((reader, "read"), (pusher, "read and push")):
        row = page[page.index(key.fingerprint) :].split("</tr>")[0]
        assert f"<td>{access}</td>" in row and "never used" in row and ">ann</a>" in row

    bad = ann.post(url, {"action": "add", "title": "x", "key": "nonsense"})
    assert bad.status_code == 400 and "not an SSH public key" in _error(bad.text)
    assert len(forge.keys.of_repo(repo.id)) == 2

    # someone who may read the repository but not administer it, and one who may not read it
    ben = browser(client, "ben")
    assert ben.get(url).status_code == 403
    third = key_pair(tmp_path, "third")
    sent = ben.post(
        url, {"action": "add", "title": "x", "key": quote_plus(third.public)}, csrf=None
    )
    assert sent.status_code == 403
    assert ben.get("/ann/secret/settings/keys").status_code == 404
    assert client.simulate_get(url).status_code == 303  # to sign in
    assert len(forge.keys.of_repo(repo.id)) == 2

    deleted = ann.post(url, {"action": "delete", "id": str(keys[0].id)})
    assert deleted.status_code == 303
    assert [k.title for k in forge.keys.of_repo(repo.id)] == ["deploy"]
    # a key of another repository is not this one's to delete
    other = forge.registry.get("ann", "hollow")
    stray = forge.keys.add_deploy_key(
        other.id, third.public, "x", True, forge.accounts.require("ann")
    )
    assert ann.post(url, {"action": "delete", "id": str(stray.id)}).status_code == 404
    assert forge.keys.get(stray.id) is not None
    for key in forge.keys.every():
        forge.keys.delete(key)


def test_the_home_pages_show_the_ssh_clone_url(forge: Forge, client: testing.TestClient) -> None:
    for host, name in (("forge.test", "forge.test"), ("other.example:8080", "other.example")):
        for _ in range(2):  # rendered, then from the page cache
            page = client.simulate_get("/ann/plans", headers={"Host": host}).text
            http = re.search(r'value="([^"]*)" aria-label="Clone URL"', page)
            ssh = re.search(r'value="([^"]*)" aria-label="Clone with SSH"', page)
            assert http is not None and http.group(1) == f"http://{host}/ann/plans.git"
            assert ssh is not None and ssh.group(1) == f"ssh://git@{name}:2222/ann/plans.git"
    empty = client.simulate_get("/ann/hollow", headers={"Host": "forge.test"}).text
    assert "git remote add origin ssh://git@forge.test:2222/ann/hollow.git" in empty
    assert "git remote add origin http://forge.test/ann/hollow.git" in empty
