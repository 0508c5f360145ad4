"""What a fork must never give away: the objects its parent gains after the fork (read through
alternates) when the parent is private, or the parent itself by making a fork of a private
repository public; nor whether someone has a private fork, through the compare page."""

from __future__ import annotations

from pathlib import Path

import support.forks
from falcon import testing
from support.accounts import Browser
from support.forks import commit, git, person

from floorless.forge import Forge

# the shared fixtures this module's tests ask for
client = support.forks.client
forge = support.forks.forge


def _grow(forge: Forge, tmp_path: Path, name: str, text: str) -> tuple[str, str]:
    """A new commit on ann/secret's main adding ``name``: its blob id and tree id."""
    secret = forge.registry.get("ann", "secret")
    work = tmp_path / "grow"
    if not work.exists():
        git("clone", "-q", str(secret.path), str(work))
    commit(work, name, text, f"Add {name}")
    git("push", "-q", "origin", "main", cwd=work)
    forge.moves.after_push(secret)
    blob = git("rev-parse", f"HEAD:{name}", cwd=work).stdout.strip()
    tree = git("rev-parse", "HEAD^{tree}", cwd=work).stdout.strip()
    return blob, tree


def _fork(client: testing.TestClient, who: str, parent: str, name: str) -> Browser:
    browser = person(client, who)
    result = browser.post(f"/{parent}/fork", {"owner": who, "name": name})
    assert result.status_code == 303, result.text[:300]
    return browser


def test_a_fork_never_serves_what_its_private_parent_gained(
    forge: Forge,
    client: testing.TestClient,
    tmp_path: Path,
) -> None:
    # dan, a reader of ann/secret, forks it; then loses access; ann adds a secret file
    _fork(client, "dan", "ann/secret", "copy")
    dan = forge.accounts.get("dan")
    assert dan is not None
    forge.policy.remove_collaborator(forge.registry.get("ann", "secret"), dan)
    blob, tree = _grow(forge, tmp_path, "password.txt", "hunter2\n")
    browser = Browser(client)
    assert browser.sign_in("dan").status_code == 303
    token = forge.accounts.create_token(dan, "read")[0]
    headers = {"Authorization": f"token {token}"}
    for url in (
        f"/api/v1/repos/dan/copy/git/blobs/{blob}",
        f"/api/v1/repos/dan/copy/git/trees/{tree}",
    ):
        assert client.simulate_get(url, headers=headers).status_code == 404, url
    assert browser.get(f"/dan/copy/raw/blob/{blob}").status_code == 404
    # by id, a fork of a private repository serves only what it holds itself (what it
    # borrows cannot be told from what the parent gained since); by path, all it reaches
    secret = forge.registry.get("ann", "secret")
    old_blob = git("--git-dir", str(secret.path), "rev-parse", "main~1:README.md").stdout.strip()
    assert (
        client.simulate_get(f"/api/v1/repos/dan/copy/git/blobs/{old_blob}", headers=headers)
    ).status_code == 404
    assert browser.get("/dan/copy/raw/branch/main/README.md").status_code == 200
    contents = client.simulate_get("/api/v1/repos/dan/copy/contents/README.md", headers=headers)
    assert contents.status_code == 200 and contents.json["sha"] == old_blob


def test_a_public_fork_of_a_parent_made_private_serves_none_of_its_new_objects(
    forge: Forge,
    client: testing.TestClient,
    tmp_path: Path,
) -> None:
    _fork(client, "cat", "ann/plans", "plans")
    forge.lifecycle.set_private(forge.registry.get("ann", "plans"), True)
    plans = forge.registry.get("ann", "plans")
    work = tmp_path / "plans-work"
    git("clone", "-q", str(plans.path), str(work))
    commit(work, "pw.txt", "hunter2\n", "Add pw")
    git("push", "-q", "origin", "main", cwd=work)
    forge.moves.after_push(plans)
    blob = git("rev-parse", "HEAD:pw.txt", cwd=work).stdout.strip()
    assert client.simulate_get(f"/api/v1/repos/cat/plans/git/blobs/{blob}").status_code == 404
    assert client.simulate_get(f"/cat/plans/raw/blob/{blob}").status_code == 404


def test_a_fork_of_a_private_repository_stays_private(
    forge: Forge,
    client: testing.TestClient,
) -> None:
    dan = _fork(client, "dan", "ann/secret", "copy")
    assert forge.registry.get("dan", "copy").private
    page = dan.get("/dan/copy/settings")
    result = dan.post(
        "/dan/copy/settings", {"action": "update", "visibility": "public", "description": ""}
    )
    assert result.status_code == 403 and "stays private" in result.text
    assert forge.registry.get("dan", "copy").private
    assert client.simulate_get("/dan/copy/raw/branch/main/README.md").status_code == 404
    token = forge.accounts.create_token(forge.accounts.get("dan"), "write")[0]  # type: ignore[arg-type]
    answer = client.simulate_patch(
        "/api/v1/repos/dan/copy",
        json={"private": False, "description": "changed"},
        headers={"Authorization": f"token {token}"},
    )
    assert answer.status_code == 403 and "stays private" in answer.json["message"]
    copy = forge.registry.get("dan", "copy")
    assert copy.private and copy.description != "changed"  # nothing written
    assert page.status_code == 200
    # a fork of a public repository is its owner's to publish or not
    cat = _fork(client, "cat", "ann/plans", "plans")
    forge.lifecycle.set_private(forge.registry.get("cat", "plans"), True)
    cat.post("/cat/plans/settings", {"action": "update", "visibility": "public", "description": ""})
    assert not forge.registry.get("cat", "plans").private


def test_compare_never_tells_whether_someone_has_a_private_fork(
    forge: Forge,
    client: testing.TestClient,
) -> None:
    _fork(client, "cat", "ann/plans", "plans")
    forge.lifecycle.set_private(forge.registry.get("cat", "plans"), True)
    for viewer in (Browser(client), person(client, "eve")):
        hidden = viewer.get("/ann/plans/compare/main...cat:main")
        none = viewer.get("/ann/plans/compare/main...eve:main")
        named = viewer.get("/ann/plans/compare/main...cat/other:main")
        assert hidden.status_code == none.status_code == named.status_code == 404
        assert hidden.content == none.content == named.content
