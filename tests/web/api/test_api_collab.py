"""Collaborators and forks through ``/api/v1``, driven by pyforgejo (its models validate every
answer): a collaborator added, listed, checked, asked about and removed, with the access it
gives (reading a private repository through the API, pushing with git over HTTP); only the
repository's admins change collaborators; forks made and listed as the web's fork form makes
them, a private fork never listed to whoever may not read it; bad input a clear 4xx with
nothing written; no process on a read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyforgejo.core.api_error import ApiError
from support.accounts import PASSWORD
from support.api import BASE, api, basic, error_of, token_for
from support.forges import start_forge
from support.forks import commit, git, rev
from support.spawns import counting

from floorless.forge import Forge
from floorless.web.app import create_app

REPOS = "/api/v1/repos"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    """ann owns ``plans`` (public) and ``secret`` (private), each with three commits; ben, cat
    and dan are other people; ann owns the organisation ``crew``."""
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    forge.accounts.create_org("crew", forge.accounts.require("ann"))
    work = tmp_path / "work"
    git("init", "-q", str(work))
    for n in range(3):
        commit(work, "README.md", f"# plans\n\nversion {n}\n", f"version {n}")
    for name, private in (("plans", False), ("secret", True)):
        repo = forge.registry.create("ann", name, private=private)
        git("push", "-q", str(repo.path), "main", cwd=work)
        forge.moves.after_push(repo)
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def status_of(call) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as refused:
        call()
    return int(refused.value.status_code or 0)


def collaborator_rows(forge: Forge) -> list[tuple[str, str, str, str]]:
    rows = forge.db.query(
        "SELECT c.owner, c.name, a.name AS person, c.role FROM collaborators c"
        " JOIN accounts a ON a.id = c.user_id ORDER BY c.owner, c.name, a.name"
    )
    return [(r["owner"], r["name"], r["person"], r["role"]) for r in rows]


# -- collaborators ----------------------------------------------------------------------------


def test_a_collaborator_added_listed_checked_asked_about_and_removed(
    forge: Forge, http: httpx.Client
) -> None:
    ann, ben = api(http, token_for(http, "ann")), api(http, token_for(http, "ben"))
    cat = api(http, token_for(http, "cat"))
    assert status_of(lambda: ben.repository.repo_get("ann", "secret")) == 404
    ann.repository.repo_add_collaborator("ann", "secret", "ben", permission="write")
    ann.repository.repo_add_collaborator("ann", "secret", "dan")  # Forgejo's default: write

    listed = ann.repository.repo_list_collaborators("ann", "secret")
    assert [u.login for u in listed] == ["ben", "dan"]
    assert listed[0].email == "ben@noreply.forge.test"  # another's address is not shown
    page = http.get(f"{REPOS}/ann/secret/collaborators?limit=1&page=2", headers=basic("ann"))
    assert [u["login"] for u in page.json()] == ["dan"]
    assert page.headers["x-total-count"] == "2" and 'rel="first"' in page.headers["link"]

    assert ann.repository.repo_check_collaborator("ann", "secret", "ben") is None  # 204
    assert status_of(lambda: ann.repository.repo_check_collaborator("ann", "secret", "cat")) == 404
    # owner, site administrators aside: the role given
    asked = ann.repository.repo_get_repo_permissions("ann", "secret", "ben")
    assert (asked.permission, asked.role_name, asked.user and asked.user.login) == (
        "write",
        "write",
        "ben",
    )
    document = http.get("/swagger.v1.json").json()
    answer = http.get(f"{REPOS}/ann/secret/collaborators/ben/permission", headers=basic("ann"))
    assert set(document["definitions"]["RepoCollaboratorPermission"]["properties"]) == set(
        answer.json()
    )
    for path in ("/collaborators/{user}/permission", "/forks", "/assignees"):
        assert "/repos/{owner}/{repo}" + path in document["paths"]
    own = ann.repository.repo_get_repo_permissions("ann", "secret", "ann")
    assert (own.permission, own.role_name) == ("owner", "owner")
    mine = ben.repository.repo_get_repo_permissions("ann", "secret", "ben")
    assert mine.permission == "write"
    assert mine.user is not None and mine.user.email == "ben@example.org"  # their own address
    # a collaborator asks only about themselves; an outsider finds no repository at all
    refused = http.get(f"{REPOS}/ann/secret/collaborators/dan/permission", headers=basic("ben"))
    assert refused.status_code == 403 and "their own" in error_of(refused)
    assert (
        status_of(lambda: cat.repository.repo_get_repo_permissions("ann", "secret", "cat")) == 404
    )

    # the access it gives: ben reads the private repository through the API
    seen = ben.repository.repo_get("ann", "secret")
    assert seen.permissions is not None
    assert (seen.private, seen.permissions.push, seen.permissions.admin) == (True, True, False)
    readme = ben.repository.repo_get_contents("ann", "secret", "README.md")
    assert readme.name == "README.md"  # type: ignore[union-attr]

    # a new role replaces the old one; none named leaves it as it is (as Forgejo)
    ann.repository.repo_add_collaborator("ann", "secret", "ben", permission="read")
    ann.repository.repo_add_collaborator("ann", "secret", "ben")
    assert ann.repository.repo_get_repo_permissions("ann", "secret", "ben").permission == "read"
    assert ben.repository.repo_get("ann", "secret").permissions.push is False  # type: ignore[union-attr]

    ann.repository.repo_delete_collaborator("ann", "secret", "ben")
    assert [u.login for u in ann.repository.repo_list_collaborators("ann", "secret")] == ["dan"]
    assert status_of(lambda: ann.repository.repo_check_collaborator("ann", "secret", "ben")) == 404
    assert status_of(lambda: ben.repository.repo_get("ann", "secret")) == 404
    asked = ann.repository.repo_get_repo_permissions("ann", "secret", "ben")
    assert asked.permission == "none"
    # the web's settings page shows what the API wrote: one list of collaborators
    assert [c.name for c in forge.policy.collaborators(forge.registry.get("ann", "secret"))] == [
        "dan"
    ]


def test_only_the_repositorys_admins_change_collaborators(forge: Forge, http: httpx.Client) -> None:
    ann_read = token_for(http, "ann", ["read:repository"])
    ben = api(http, token_for(http, "ben"))
    cat = api(http, token_for(http, "cat"))
    ann = api(http, token_for(http, "ann"))
    ann.repository.repo_add_collaborator("ann", "plans", "dan", permission="write")
    before = collaborator_rows(forge)

    # a reader of a public repository lists and checks, but may not add or remove
    assert [u.login for u in ben.repository.repo_list_collaborators("ann", "plans")] == ["dan"]
    assert status_of(lambda: ben.repository.repo_add_collaborator("ann", "plans", "ben")) == 403
    assert status_of(lambda: ben.repository.repo_delete_collaborator("ann", "plans", "dan")) == 403
    # a collaborator with write is no admin either
    dan = api(http, token_for(http, "dan"))
    assert status_of(lambda: dan.repository.repo_add_collaborator("ann", "plans", "cat")) == 403
    # the owner with a read-scoped token may not write
    put = http.put(f"{REPOS}/ann/plans/collaborators/ben", headers=auth(ann_read), json={})
    assert put.status_code == 403 and "scope" in error_of(put)
    # anonymous: asked to sign in
    assert http.get(f"{REPOS}/ann/plans/collaborators").status_code == 401
    assert http.put(f"{REPOS}/ann/plans/collaborators/ben", json={}).status_code == 401
    # an admin collaborator may
    ann.repository.repo_add_collaborator("ann", "plans", "cat", permission="admin")
    cat.repository.repo_add_collaborator("ann", "plans", "ben", permission="read")
    cat.repository.repo_delete_collaborator("ann", "plans", "ben")
    assert collaborator_rows(forge) == [("ann", "plans", "cat", "admin"), *before]

    # a private repository is missing to an outsider, whatever they ask, as a missing one is
    missing = http.get(f"{REPOS}/ann/nothing/collaborators", headers=basic("cat"))
    assert missing.status_code == 404
    for method, path in (
        ("GET", "/collaborators"),
        ("GET", "/collaborators/dan"),
        ("PUT", "/collaborators/cat"),
        ("DELETE", "/collaborators/dan"),
        ("GET", "/collaborators/cat/permission"),
        ("GET", "/assignees"),
    ):
        for who in (basic("ben"), {}):
            answer = http.request(method, f"{REPOS}/ann/secret{path}", headers=who, json={})
            assert answer.status_code == 404, (method, path, answer.status_code)
            assert answer.json()["message"] == missing.json()["message"]
    assert collaborator_rows(forge) == [("ann", "plans", "cat", "admin"), *before]


def test_bad_collaborator_input_is_a_clear_4xx_and_writes_nothing(
    forge: Forge, http: httpx.Client
) -> None:
    headers = auth(token_for(http, "ann"))
    url = f"{REPOS}/ann/plans/collaborators"
    for body, status, words in (
        ({"permission": "owner"}, 422, "permission"),
        ({"permission": "<script>alert(1)</script>"}, 422, "permission"),
        ({"permission": 2}, 422, "permission"),
        ({"permission": ["read"]}, 422, "permission"),
    ):
        answer = http.put(f"{url}/ben", headers=headers, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert words in error_of(answer)
    for raw in (b"{", b"[]", b'"read"'):
        answer = http.put(f"{url}/ben", headers=headers, content=raw)
        assert answer.status_code == 422, raw
        error_of(answer)
    huge = http.put(f"{url}/ben", headers=headers, content=b'{"permission": "' + b"r" * 2**21)
    assert huge.status_code == 413
    # no such person: Forgejo's 422 where they are the object, 404 where asked about
    for method in ("PUT", "DELETE", "GET"):
        answer = http.request(method, f"{url}/nobody", headers=headers, json={})
        assert answer.status_code == 422 and "nobody" in error_of(answer), method
    asked = http.get(f"{url}/nobody/permission", headers=headers)
    assert asked.status_code == 404 and "nobody" in error_of(asked)
    # an organisation is no collaborator
    answer = http.put(f"{url}/crew", headers=headers, json={"permission": "read"})
    assert answer.status_code == 422 and "organisation" in error_of(answer)
    # nor is the repository's owner
    answer = http.put(f"{url}/ann", headers=headers, json={"permission": "read"})
    assert answer.status_code == 400 and "owns" in error_of(answer)
    assert collaborator_rows(forge) == []


def test_assignees_are_those_the_web_offers(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann"))
    ann.repository.repo_add_collaborator("ann", "plans", "ben", permission="write")
    assert (
        [u.login for u in ann.repository.repo_get_assignees("ann", "plans")]
        == forge.policy.assignable(forge.registry.get("ann", "plans"))
        == ["ann", "ben"]
    )


# -- forks ------------------------------------------------------------------------------------


def test_a_fork_made_and_listed_through_the_api(forge: Forge, http: httpx.Client) -> None:
    cat = api(http, token_for(http, "cat"))
    with counting() as spawned:
        made = cat.repository.create_fork("ann", "plans")
    assert spawned == []  # refs written, no git process
    assert (made.full_name, made.fork, made.private, made.empty) == (
        "cat/plans",
        True,
        False,
        False,
    )
    assert made.parent is not None and made.parent.full_name == "ann/plans"
    assert made.permissions is not None and made.permissions.admin
    fork = forge.registry.get("cat", "plans")
    parent = forge.registry.get("ann", "plans")
    assert fork.parent == ("ann", "plans") and rev(fork.path, "main") == rev(parent.path, "main")
    answer = http.post(f"{REPOS}/ann/plans/forks", headers=basic("ben"), json={"name": "mine"})
    assert answer.status_code == 202 and answer.json()["full_name"] == "ben/mine"

    listed = cat.repository.list_forks("ann", "plans")
    assert [r.full_name for r in listed] == ["ben/mine", "cat/plans"]
    assert all(r.fork and r.parent and r.parent.full_name == "ann/plans" for r in listed)
    assert cat.repository.repo_get("ann", "plans").forks_count == 2
    one = http.get(f"{REPOS}/ann/plans/forks?limit=1", headers=basic("cat"))
    assert [r["full_name"] for r in one.json()] == ["ben/mine"]
    assert one.headers["x-total-count"] == "2"
    assert api(http).repository.list_forks("cat", "plans") == []  # a fork of none

    # a private fork is listed and counted only for who may read it
    forge.lifecycle.set_private(forge.registry.get("ben", "mine"), True)
    assert [r.full_name for r in cat.repository.list_forks("ann", "plans")] == ["cat/plans"]
    assert cat.repository.repo_get("ann", "plans").forks_count == 1
    anonymous = http.get(f"{REPOS}/ann/plans/forks")
    assert [r["full_name"] for r in anonymous.json()] == ["cat/plans"]
    assert anonymous.headers["x-total-count"] == "1"
    ben = api(http, token_for(http, "ben"))
    assert [r.full_name for r in ben.repository.list_forks("ann", "plans")] == [
        "ben/mine",
        "cat/plans",
    ]
    assert ben.repository.repo_get("ann", "plans").forks_count == 2


def test_forks_of_a_private_repository_and_into_organisations(
    forge: Forge, http: httpx.Client
) -> None:
    ann, cat = api(http, token_for(http, "ann")), api(http, token_for(http, "cat"))
    dan = api(http, token_for(http, "dan"))
    repos_before = sorted(r.full_name for r in forge.registry.all())
    # a repository one cannot read: 404 as a missing one, and nothing made
    missing = http.post(f"{REPOS}/ann/nothing/forks", headers=basic("cat"), json={})
    for who in (basic("cat"), {}):
        answer = http.post(f"{REPOS}/ann/secret/forks", headers=who, json={"name": "stolen"})
        assert answer.status_code == 404 and answer.json() == missing.json()
        answer = http.get(f"{REPOS}/ann/secret/forks", headers=who)
        assert answer.status_code == 404 and answer.json() == missing.json()
    # into an organisation the caller does not own: 403; one that is none: 422
    assert status_of(lambda: cat.repository.create_fork("ann", "plans", organization="crew")) == 403
    for name in ("no-such-org", "ann"):
        answer = http.post(
            f"{REPOS}/ann/plans/forks", headers=basic("cat"), json={"organization": name}
        )
        assert answer.status_code == 422 and "organisation" in error_of(answer)
    # anonymous and read-scoped callers make nothing
    assert http.post(f"{REPOS}/ann/plans/forks", json={}).status_code == 401
    read = token_for(http, "cat", ["read:repository"])
    assert http.post(f"{REPOS}/ann/plans/forks", headers=auth(read), json={}).status_code == 403
    # bad names and types
    for body, status in (
        ({"name": "../x"}, 400),
        ({"name": "a b"}, 400),
        ({"name": 7}, 422),
        ({"organization": ["crew"]}, 422),
    ):
        answer = http.post(f"{REPOS}/ann/plans/forks", headers=basic("cat"), json=body)
        assert answer.status_code == status, (body, answer.text)
        error_of(answer)
    assert sorted(r.full_name for r in forge.registry.all()) == repos_before

    # a reader of the private repository forks it: the fork is private too
    ann.repository.repo_add_collaborator("ann", "secret", "dan", permission="read")
    made = dan.repository.create_fork("ann", "secret")
    assert (made.full_name, made.private, made.fork) == ("dan/secret", True, True)
    assert made.parent is not None and made.parent.full_name == "ann/secret"
    assert status_of(lambda: cat.repository.repo_get("dan", "secret")) == 404
    # the name taken: 409
    assert status_of(lambda: dan.repository.create_fork("ann", "secret")) == 409
    # the owner forks into the organisation they own
    crew = ann.repository.create_fork("ann", "plans", organization="crew", name="plans-crew")
    assert crew.full_name == "crew/plans-crew" and crew.owner and crew.owner.login == "crew"
    assert sorted(r.full_name for r in forge.registry.all()) == sorted(
        [*repos_before, "dan/secret", "crew/plans-crew"]
    )


def test_reads_start_no_process(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann"))
    ann.repository.repo_add_collaborator("ann", "plans", "ben", permission="write")
    ann.repository.create_fork("ann", "plans", organization="crew")
    headers = basic("ann")
    with counting() as events:
        for path in (
            "/ann/plans/collaborators",
            "/ann/plans/collaborators/ben",
            "/ann/plans/collaborators/ben/permission",
            "/ann/plans/assignees",
            "/ann/plans/forks",
            "/crew/plans",
        ):
            answer = http.get(REPOS + path, headers=headers)
            assert answer.status_code in (200, 204), (path, answer.text)
    assert events == []


# -- a real server: git over HTTP -------------------------------------------------------------


def test_a_collaborator_pushes_and_a_fork_clones_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against ``floorless serve``: ben may not push to ann's private repository until the
    API makes him a collaborator with write; then his push lands, and a fork he makes through
    the API clones with git over HTTP."""
    from pyforgejo import PyforgejoApi
    from support.serving import serving

    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")  # a refusal fails, never asks
    with serving(tmp_path / "repos", tmp_path / "data") as server:
        tokens = {}
        for name in ("ann", "ben"):
            server.admin(
                "user",
                "create",
                name,
                "--email",
                f"{name}@example.org",
                "--password-stdin",
                stdin=PASSWORD + "\n",
            )
            tokens[name] = server.admin("token", "create", name, "--scope", "write")
        server.admin("repo", "create", "ann/secret", "--private")

        def url(who: str, repo: str) -> str:
            return server.url.replace("http://", f"http://{who}:{tokens[who]}@") + f"/{repo}.git"

        work = tmp_path / "work"
        git("init", "-q", str(work))
        commit(work, "README.md", "# secret\n", "First")
        git("push", "-q", url("ann", "ann/secret"), "main", cwd=work)

        clone = tmp_path / "ben-clone"
        assert git("clone", "-q", url("ben", "ann/secret"), str(clone), check=False).returncode
        with httpx.Client(base_url=server.url, timeout=60) as http:

            def client(who: str) -> PyforgejoApi:
                return PyforgejoApi(
                    base_url=server.url + "/api/v1", api_key=tokens[who], httpx_client=http
                )

            client("ann").repository.repo_add_collaborator(
                "ann", "secret", "ben", permission="write"
            )
            git("clone", "-q", url("ben", "ann/secret"), str(clone))
            pushed = commit(clone, "ben.txt", "from ben\n", "Ben's change")
            git("push", "-q", "origin", "main", cwd=clone)
            assert client("ben").repository.repo_get_branch("ann", "secret", "main").commit.id == (  # type: ignore[union-attr]
                pushed
            )

            made = client("ben").repository.create_fork("ann", "secret")
            assert (made.full_name, made.private) == ("ben/secret", True)
        fork_clone = tmp_path / "fork-clone"
        git("clone", "-q", url("ben", "ben/secret"), str(fork_clone))
        assert rev(fork_clone / ".git", "HEAD") == pushed
        assert (fork_clone / "ben.txt").read_text() == "from ben\n"
        # private: not even its parent's owner reads it
        assert git("ls-remote", url("ann", "ben/secret"), check=False).returncode
