"""A repository's pages find their repository before their view runs (``FindRepository``):
one that the reader may not read answers 404 before anything else is asked, in plain text
where the page answers in plain text; a method the page has no responder for is still 405,
whoever asks; a 404 inside a readable repository keeps its header."""

from __future__ import annotations

from collections.abc import Iterator

import pygit2
import pytest
from falcon import testing
from support.forges import start_forge

from floorless.forge import Forge
from floorless.web.app import create_app

WHEN = 1_700_000_000


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("pages")
    forge = start_forge(root / "repos", root / "data")
    forge.accounts.create_user("ann", "ann@example.org", "a long enough password")
    for name, private in (("plans", False), ("secret", True)):
        repo = forge.registry.create("ann", name, private=private)
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


def tip(forge: Forge, name: str) -> str:
    handle = forge.live.open(forge.registry.get("ann", name))
    return str(handle.references["refs/heads/main"].target)


@pytest.mark.parametrize(
    "path",
    ["", "/branches", "/issues", "/pulls", "/pulls/1", "/issues/new", "/src/branch/main", "/fork"],
)
def test_a_private_repository_is_missing_to_a_visitor(
    client: testing.TestClient, path: str
) -> None:
    hidden = client.simulate_get("/ann/secret" + path)
    missing = client.simulate_get("/ann/nope" + path)
    assert hidden.status_code == missing.status_code == 404, path
    assert hidden.text == missing.text  # not a word more: not even "sign in"


def test_pages_that_answer_in_plain_text_do_so_for_a_hidden_repository(
    forge: Forge, client: testing.TestClient
) -> None:
    head = tip(forge, "secret")
    for path in ("/raw/branch/main/a.txt", f"/commit/{head}.diff", "/archive/main.tar.gz"):
        hidden = client.simulate_get("/ann/secret" + path)
        assert hidden.status_code == 404, path
        assert hidden.headers["content-type"].startswith("text/plain"), path
    page = client.simulate_get(f"/ann/secret/commit/{head}")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")


def test_a_method_a_page_has_not_is_refused_as_before(client: testing.TestClient) -> None:
    for repo in ("plans", "secret", "nope"):
        refused = client.simulate_post(f"/ann/{repo}/branches")
        assert refused.status_code == 405, repo
        assert "GET" in refused.headers["allow"]


def test_a_malformed_id_is_refused_before_the_repository_is_read(
    client: testing.TestClient,
) -> None:
    for path in ("/-/last/zzz", "/-/paths/zzz"):
        answer = client.simulate_get("/ann/plans" + path)
        assert answer.status_code == 404 and 'href="/ann/plans/branches"' not in answer.text


def test_a_missing_page_of_a_readable_repository_keeps_its_header(
    client: testing.TestClient,
) -> None:
    answer = client.simulate_get("/ann/plans/src/branch/nope")
    assert answer.status_code == 404 and 'href="/ann/plans/branches"' in answer.text
    assert client.simulate_get("/ann/plans/branches").status_code == 200
