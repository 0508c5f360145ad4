"""The ``/api/v1`` framework and its account, organisation, repository and token endpoints,
driven by pyforgejo (a client generated from Forgejo's OpenAPI description, whose models
validate every answer) over an in-process WSGI transport, and by plain requests where the
point is the bytes: JSON errors for every 4xx, pagination headers, authentication in each of
Forgejo's ways, a private repository answering as a missing one, no process on a read."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
import support.api
from pyforgejo import PyforgejoApi
from pyforgejo.core.api_error import ApiError
from support.accounts import PASSWORD, Browser
from support.api import BASE, api, basic, error_of, token_for
from support.spawns import counting

from floorless.forge import Forge
from floorless.web.api.routes import API_ROUTES
from floorless.web.app import create_app

# the shared fixtures this module's tests ask for
forge = support.api.forge
http = support.api.http

# -- the framework ----------------------------------------------------------------------------


def test_version_and_settings_parse_into_forgejo_models(http: httpx.Client) -> None:
    client = api(http)
    version = client.miscellaneous.get_version()
    assert version.version and version.version.split("+")[0].count(".") == 2
    settings = client.settings.get_general_api_settings()
    assert (settings.default_paging_num, settings.max_response_items) == (30, 50)


def test_tokens_are_made_with_the_password_and_then_authenticate(http: httpx.Client) -> None:
    token = token_for(http, "ann")
    me = api(http, token).user.get_current()
    assert (me.login, me.email, me.is_admin) == ("ann", "ann@example.org", False)
    for header in (f"token {token}", f"Bearer {token}"):
        assert http.get("/api/v1/user", headers={"Authorization": header}).json()["login"] == "ann"
    for param in ("token", "access_token"):
        assert http.get("/api/v1/user", params={param: token}).json()["login"] == "ann"
    # Basic with the token as the password, as git and some clients send it
    pair = base64.b64encode(f"ann:{token}".encode()).decode()
    assert http.get("/api/v1/user", headers={"Authorization": f"Basic {pair}"}).status_code == 200

    # making or listing tokens takes the password: a token (or nothing) is refused
    with pytest.raises(ApiError) as refused:
        api(http, token).user.create_token("ann", name="more", scopes=["write:user"])
    assert refused.value.status_code == 401
    answer = http.get("/api/v1/users/ann/tokens", headers={"Authorization": f"token {token}"})
    assert answer.status_code == 401 and "Basic" in error_of(answer)
    # nor may one make another person's
    answer = http.post(
        "/api/v1/users/ben/tokens", headers=basic("ann"), json={"name": "x", "scopes": ["all"]}
    )
    assert answer.status_code == 403, answer.text
    listed = api(http).user.get_tokens("ann", request_options={"additional_headers": basic("ann")})
    assert [t.sha1 for t in listed] == [""]  # never shown again
    assert "write:repository" in (listed[0].scopes or [])


def test_token_names_scopes_and_deletion(http: httpx.Client) -> None:
    headers = basic("ann")
    made = http.post(
        "/api/v1/users/ann/tokens",
        headers=headers,
        json={"name": "ci", "scopes": ["read:repository"]},
    )
    assert made.status_code == 201, made.text
    read_token = made.json()["sha1"]
    assert made.json()["scopes"][0].startswith("read:")
    again = http.post(
        "/api/v1/users/ann/tokens", headers=headers, json={"name": "ci", "scopes": ["all"]}
    )
    assert again.status_code == 400 and "used already" in error_of(again)
    noscope = http.post(
        "/api/v1/users/ann/tokens", headers=headers, json={"name": "n", "scopes": []}
    )
    assert noscope.status_code == 400 and "scope" in error_of(noscope)
    # a read token reads, and may not write
    client = api(http, read_token)
    assert client.user.get_current().login == "ann"
    made_repo = http.post(
        "/api/v1/user/repos", headers={"Authorization": f"token {read_token}"}, json={"name": "x"}
    )
    assert made_repo.status_code == 403, made_repo.text
    # deleted by name (or id): then refused
    api(http).user.delete_access_token("ann", "ci", request_options={"additional_headers": headers})
    assert (
        http.get("/api/v1/user", headers={"Authorization": f"token {read_token}"}).status_code
        == 401
    )
    gone = http.delete("/api/v1/users/ann/tokens/ci", headers=headers)
    assert gone.status_code == 404 and error_of(gone)


def test_anonymous_and_wrong_credentials(http: httpx.Client) -> None:
    # pyforgejo without a key sends "Authorization: token " -- anonymous, as on Forgejo
    with pytest.raises(ApiError) as refused:
        api(http).user.get_current()
    assert refused.value.status_code == 401
    assert api(http).user.get("ann").login == "ann"
    answer = http.get("/api/v1/user", headers={"Authorization": "token flt_nonsense"})
    assert answer.status_code == 401 and error_of(answer)
    answer = http.get("/api/v1/version", headers=basic("ann", "wrong password"))
    assert answer.status_code == 401 and error_of(answer)


def test_every_error_under_the_api_is_json(http: httpx.Client) -> None:
    for path in (
        "/api/v1/no/such/thing",
        "/api/v1",
        "/api/v1/users/nobody",
        "/api/v1/users/nobody/repos/x/y",
    ):
        answer = http.get(path)
        assert answer.status_code == 404, path
        error_of(answer)
    answer = http.post("/api/v1/no/such", json={})
    assert answer.status_code == 404 and error_of(answer)
    answer = http.delete("/api/v1/version")
    assert answer.status_code == 405 and error_of(answer)


def test_bodies_are_checked_as_forgejo_binds_them(http: httpx.Client) -> None:
    headers = basic("ann")
    url = "/api/v1/users/ann/tokens"
    cases = [
        (b"{not json", 422),
        (b"[1, 2]", 422),
        (json.dumps({"name": 5, "scopes": ["all"]}).encode(), 422),
        (json.dumps({"name": "x", "scopes": "all"}).encode(), 422),
        (json.dumps({"name": "x", "scopes": [1]}).encode(), 422),
        (json.dumps({"scopes": ["all"]}).encode(), 422),
        (b"\xff\xfe", 422),
        (b"{" + b'"pad": "' + b"x" * (2 << 20) + b'"}', 413),
    ]
    for body, status in cases:
        answer = http.post(
            url, headers={**headers, "Content-Type": "application/json"}, content=body
        )
        assert answer.status_code == status, (body[:40], answer.text)
        error_of(answer)
    # unknown fields are ignored, as Forgejo's Go decoder ignores them
    answer = http.post(url, headers=headers, json={"name": "y", "scopes": ["all"], "colour": "red"})
    assert answer.status_code == 201, answer.text


def test_a_body_nested_past_any_stack_is_a_422_with_its_reason(
    forge: Forge, http: httpx.Client
) -> None:
    """100,000 ``[`` broke the parser's stack (RecursionError, a 500), and a few hundred broke
    the check that follows it; every body reader refuses both, and a webhook's config nested
    deeper than anything Forgejo sends, and goes on serving."""
    forge.registry.create("ann", "box")
    token = {"Authorization": f"token {token_for(http, 'ann')}", "Content-Type": "application/json"}
    deep = b"[" * 100_000 + b"]" * 100_000
    within_the_parser = b'{"name": ' + b"[" * 900 + b"]" * 900 + b"}"
    config = {"url": "https://hooks.example/x", "content_type": "json", "more": []}
    for _ in range(40):
        config = {"more": [config]}
    hook = json.dumps({"type": "forgejo", "config": config}).encode()
    for method, url, body in (
        ("POST", "/api/v1/users/ann/tokens", deep),
        ("POST", "/api/v1/users/ann/tokens", within_the_parser),
        (
            "POST",
            "/api/v1/users/ann/tokens",
            b'{"name": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
        ),
        ("POST", "/api/v1/repos/ann/box/hooks", hook),
        ("POST", "/api/v1/repos/ann/box/issues", deep),
        ("POST", "/api/v1/repos/ann/box/contents/x.txt", deep),
        ("POST", "/api/v1/repos/ann/box/contents/x.txt", within_the_parser),
    ):
        headers = basic("ann") if "tokens" in url else token
        answer = http.request(method, url, headers=headers, content=body)
        assert answer.status_code == 422, (url, body[:20], answer.status_code, answer.text[:200])
        assert "nested deeper than 32 levels" in error_of(answer), url
    assert http.get("/api/v1/repos/ann/box/hooks", headers=token).json() == []
    made = http.post("/api/v1/repos/ann/box/issues", headers=token, json={"title": "fine"})
    assert made.status_code == 201, made.text


def test_the_session_cookie_reads_and_writes_only_with_its_csrf_token(
    forge: Forge, http: httpx.Client
) -> None:
    from falcon import testing

    browser = Browser(testing.TestClient(create_app(forge)))
    assert browser.sign_in("ann").status_code == 303
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    me = http.get("/api/v1/user", headers={"Cookie": cookie})
    assert me.status_code == 200 and me.json()["login"] == "ann"
    # another site's page cannot use the visitor's cookie here
    cross = http.get("/api/v1/user", headers={"Cookie": cookie, "Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 401
    write = http.post("/api/v1/user/repos", headers={"Cookie": cookie}, json={"name": "by-cookie"})
    assert write.status_code == 403 and "X-Csrf-Token" in error_of(write)
    assert forge.registry.listing(owner="ann")[1] == 0


def test_api_reads_spawn_no_process(http: httpx.Client) -> None:
    token = token_for(http, "ann")
    headers = {"Authorization": f"token {token}"}
    with counting() as events:
        for path in (
            "/api/v1/version",
            "/api/v1/user",
            "/api/v1/users/ben",
            "/api/v1/users/search?q=a",
        ):
            assert http.get(path, headers=headers).status_code == 200, path
    assert events == []


def test_user_search_answers_ok_and_data_with_pages(http: httpx.Client, forge: Forge) -> None:
    for n in range(4):
        forge.accounts.create_user(f"zed{n}", f"zed{n}@example.org", PASSWORD)
    found = api(http).user.search(q="zed", limit=3)
    assert found.ok and [u.login for u in found.data or []] == ["zed0", "zed1", "zed2"]
    answer = http.get("/api/v1/users/search", params={"q": "ZED", "limit": 3, "page": 2})
    assert answer.headers["x-total-count"] == "4"
    assert [u["login"] for u in answer.json()["data"]] == ["zed3"]
    links = answer.headers["link"]
    assert 'rel="first"' in links and 'rel="prev"' in links and 'rel="next"' not in links
    assert "q=ZED" in links and "limit=3" in links
    # someone else's address is a placeholder
    assert answer.json()["data"][0]["email"].startswith("zed3@noreply.")


# -- repositories and organisations -----------------------------------------------------------


def test_create_get_edit_rename_and_delete_a_repository(forge: Forge, http: httpx.Client) -> None:
    client = api(http, token_for(http, "ann"))
    made = client.repository.create_current_user_repo(
        name="notes", description="my  notes", private=True, default_branch="trunk"
    )
    assert (made.full_name, made.private, made.empty, made.fork, made.parent) == (
        "ann/notes",
        True,
        True,
        False,
        None,
    )
    assert made.description == "my notes" and made.default_branch == "trunk"
    assert made.clone_url == f"{BASE}/ann/notes.git" and made.html_url == f"{BASE}/ann/notes"
    assert made.owner is not None and made.owner.login == "ann"
    assert made.owner.html_url == f"{BASE}/ann" and made.url == f"{BASE}/api/v1/repos/ann/notes"
    assert api(http, token_for(http, "ann")).repository.repo_get("ann", "notes").url == made.url
    assert made.permissions is not None and made.permissions.admin and made.permissions.push
    assert (made.has_issues, made.has_pull_requests) == (True, True)
    assert made.created_at is not None and made.created_at.tzinfo is not None
    assert forge.registry.get("ann", "notes").private

    got = client.repository.repo_get("ann", "notes")
    assert got.id == made.id and got.open_issues_count == 0 and got.open_pr_counter == 0

    edited = client.repository.repo_edit(
        "ann", "notes", description="kept", private=False, has_issues=False, name="journal"
    )
    assert (edited.full_name, edited.description, edited.private, edited.has_issues) == (
        "ann/journal",
        "kept",
        False,
        False,
    )
    assert edited.has_pull_requests and not forge.pulls.features("ann", "journal").issues
    with pytest.raises(ApiError) as gone:
        client.repository.repo_get("ann", "notes")
    assert gone.value.status_code == 404
    # a default branch that does not exist is refused (an empty repository may name any)
    answer = http.patch(
        "/api/v1/repos/ann/journal",
        headers={"Authorization": f"token {token_for(http, 'ann')}"},
        json={"default_branch": "bad..name"},
    )
    assert answer.status_code == 422 and "branch" in error_of(answer)

    # someone else may read it, not change or delete it
    other = api(http, token_for(http, "ben"))
    seen = other.repository.repo_get("ann", "journal")
    assert seen.permissions is not None and not seen.permissions.push and seen.permissions.pull
    for call in (
        lambda: other.repository.repo_edit("ann", "journal", description="mine"),
        lambda: other.repository.repo_delete("ann", "journal"),
    ):
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.status_code == 403
    client.repository.repo_delete("ann", "journal")
    assert forge.registry.listing(owner="ann")[1] == 0


def test_bad_repository_input(http: httpx.Client) -> None:
    headers = {"Authorization": f"token {token_for(http, 'ann')}"}
    assert http.post("/api/v1/user/repos", headers=headers, json={"name": "dup"}).status_code == 201
    again = http.post("/api/v1/user/repos", headers=headers, json={"name": "dup"})
    assert again.status_code == 409 and error_of(again)
    for body, status in (
        ({"name": "a b"}, 400),
        ({"name": "x.git"}, 400),
        ({"name": ["x"]}, 422),
        ({"name": "ok", "private": "yes"}, 422),
        ({"name": "ok", "default_branch": "a..b"}, 422),
        ({"name": "ok", "auto_init": True}, 422),
        ({}, 422),
    ):
        answer = http.post("/api/v1/user/repos", headers=headers, json=body)
        assert answer.status_code == status, (body, answer.text)
        error_of(answer)
    answer = http.patch("/api/v1/repos/ann/dup", headers=headers, content=b"{")
    assert answer.status_code == 422 and error_of(answer)
    answer = http.patch("/api/v1/repos/ann/dup", headers=headers, json={"name": "../x"})
    assert answer.status_code == 400 and error_of(answer)


def test_a_private_repository_is_a_missing_one_to_others(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "hidden", private=True)
    ben = {"Authorization": f"token {token_for(http, 'ben')}"}
    for headers, status in (({}, 401), (ben, 404)):
        for method, body in (("GET", None), ("PATCH", {"description": "x"}), ("DELETE", None)):
            hidden = http.request(method, "/api/v1/repos/ann/hidden", headers=headers, json=body)
            missing = http.request(method, "/api/v1/repos/ann/nothing", headers=headers, json=body)
            if method == "GET" and not headers:
                assert hidden.status_code == missing.status_code in (401, 404)
            else:
                assert hidden.status_code == missing.status_code, (method, headers)
            assert hidden.json() == missing.json()
    assert http.get("/api/v1/repos/ann/hidden", headers=ben).status_code == 404
    # nor does a list or a search show it; its owner sees it everywhere
    assert api(http).repository.repo_search(q="hidden").data == []
    assert http.get("/api/v1/users/ann/repos", headers=ben).json() == []
    ann = api(http, token_for(http, "ann"))
    assert [r.name for r in ann.repository.repo_search(q="hidden").data or []] == ["hidden"]
    assert [r.name for r in ann.user.list_repos("ann")] == ["hidden"]
    assert [r.name for r in ann.user.current_list_repos()] == ["hidden"]
    only_public = http.get(
        "/api/v1/repos/search",
        params={"private": "false"},
        headers=ann._client_wrapper.get_headers(),
    )
    assert only_public.json()["data"] == []


def test_repository_lists_page_with_link_and_total(forge: Forge, http: httpx.Client) -> None:
    for n in range(7):
        forge.registry.create("ben", f"r{n}")
    client = api(http)
    first = client.repository.repo_search(q="r", limit=3)
    assert [r.name for r in first.data or []] == ["r0", "r1", "r2"]
    answer = http.get("/api/v1/repos/search", params={"q": "r", "limit": 3, "page": 2})
    assert answer.headers["x-total-count"] == "7"
    links = dict(
        (part.split('rel="')[1].rstrip('"'), part.split(">")[0].lstrip("<"))
        for part in answer.headers["link"].split(",")
    )
    assert set(links) == {"next", "last", "first", "prev"}
    assert links["last"].startswith(BASE + "/api/v1/repos/search?") and "page=3" in links["last"]
    assert "page=3" in links["next"] and "page=1" in links["prev"] and "q=r" in links["next"]
    last = http.get(links["last"])
    assert [r["name"] for r in last.json()["data"]] == ["r6"] and 'rel="next"' not in last.headers[
        "link"
    ]
    # Forgejo's limits: 30 by default, never more than 50; nonsense is the default
    assert len(client.user.list_repos("ben", limit=100)) == 7
    assert (
        http.get("/api/v1/users/ben/repos", params={"limit": "x", "page": "-2"}).status_code == 200
    )
    forge.registry.create("ben", "many-0")
    for n in range(1, 55):
        forge.registry.create("ben", f"many-{n}")
    assert len(http.get("/api/v1/users/ben/repos", params={"limit": 100}).json()) == 50
    assert len(http.get("/api/v1/users/ben/repos").json()) == 30


def test_organisations_and_their_repositories(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann"))
    org = ann.organization.org_create(username="team")
    assert org.name == org.username == "team"
    assert api(http).organization.org_get("team").id == org.id
    made = ann.organization.create_org_repo("team", name="site", private=True)
    assert made.full_name == "team/site" and made.owner is not None and made.owner.login == "team"
    assert [r.name for r in ann.organization.org_list_repos("team")] == ["site"]
    assert api(http).organization.org_list_repos("team") == []  # private
    ben = api(http, token_for(http, "ben"))
    with pytest.raises(ApiError) as refused:
        ben.organization.create_org_repo("team", name="mine")
    assert refused.value.status_code == 403
    with pytest.raises(ApiError) as taken:
        ben.organization.org_create(username="team")
    assert taken.value.status_code == 422
    with pytest.raises(ApiError) as person:
        api(http).organization.org_get("ann")
    assert person.value.status_code == 404
    forge.accounts.add_member(forge.accounts.require("team"), forge.accounts.require("ben"))
    assert [r.full_name for r in ben.user.current_list_repos()] == ["team/site"]


def test_a_fork_names_its_parent_to_those_who_may_read_it(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "origin", private=True)
    forge.registry.create("ben", "copy")
    forge.db.execute(
        "INSERT INTO forks (owner, name, parent_owner, parent_name, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        ("ben", "copy", "ann", "origin", 0.0),
    )
    seen_by_ann = api(http, token_for(http, "ann")).repository.repo_get("ben", "copy")
    assert seen_by_ann.fork and seen_by_ann.parent is not None
    assert seen_by_ann.parent.full_name == "ann/origin" and seen_by_ann.parent.private
    seen_by_ben = api(http, token_for(http, "ben")).repository.repo_get("ben", "copy")
    assert seen_by_ben.fork and seen_by_ben.parent is None


def test_open_issue_and_pull_request_counts(forge: Forge, http: httpx.Client) -> None:
    repo = forge.registry.create("ann", "busy")
    ann = forge.accounts.require("ann")
    issues = [forge.issues.create("ann", "busy", ann, f"issue {n}", "") for n in range(3)]
    forge.issues.close(issues[0], ann, "completed")
    got = api(http).repository.repo_get(repo.owner, repo.name)
    assert (got.open_issues_count, got.open_pr_counter) == (2, 0)


def test_repository_reads_spawn_no_process(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "quiet")
    headers = {"Authorization": f"token {token_for(http, 'ann')}"}
    with counting() as events:
        for path in (
            "/api/v1/repos/ann/quiet",
            "/api/v1/repos/search?q=q",
            "/api/v1/user/repos",
            "/api/v1/users/ann/repos",
            "/swagger.v1.json",
        ):
            assert http.get(path, headers=headers).status_code == 200, path
    assert events == []


# -- the description --------------------------------------------------------------------------


def test_the_openapi_description_is_what_is_implemented(forge: Forge, http: httpx.Client) -> None:
    document = http.get("/swagger.v1.json").json()
    assert document["swagger"] == "2.0" and document["basePath"] == "/api/v1"
    described = {
        (method, "/api/v1" + path)
        for path, methods in document["paths"].items()
        for method in methods
    }
    implemented = set()
    for template, kind in API_ROUTES:
        for method in ("get", "post", "patch", "put", "delete"):
            if hasattr(kind, f"on_{method}"):
                implemented.add((method, template.replace(":path}", "}")))
    assert described == implemented
    # every definition's fields are exactly those of a real answer
    token = token_for(http, "ann")
    headers = {"Authorization": f"token {token}"}
    forge.registry.create("ann", "shape")
    org = http.post("/api/v1/orgs", headers=headers, json={"username": "shapes"}).json()
    made = http.post(
        "/api/v1/users/ann/tokens", headers=basic("ann"), json={"name": "s", "scopes": ["all"]}
    )
    answers = {
        "Repository": http.get("/api/v1/repos/ann/shape").json(),
        "User": http.get("/api/v1/user", headers=headers).json(),
        "Organization": org,
        "AccessToken": made.json(),
        "ServerVersion": http.get("/api/v1/version").json(),
        "GeneralAPISettings": http.get("/api/v1/settings/api").json(),
        "SearchResults": http.get("/api/v1/repos/search").json(),
        "UserSearchResults": http.get("/api/v1/users/search").json(),
        "Permission": http.get("/api/v1/repos/ann/shape").json()["permissions"],
        "APIError": http.get("/api/v1/nothing").json(),
    }
    for name, answer in answers.items():
        assert set(document["definitions"][name]["properties"]) == set(answer), name
    page = http.get("/api/swagger")
    assert page.status_code == 200 and "<script" not in page.text
    assert "/api/v1/repos/{owner}/{repo}" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_a_page_of_repositories_costs_the_same_statements_whatever_its_length(
    forge: Forge, http: httpx.Client
) -> None:
    team = forge.accounts.create_org("crew", forge.accounts.require("ann"))
    forge.accounts.add_member(team, forge.accounts.require("ben"))
    for n in range(30):
        repo = forge.registry.create("crew" if n % 2 else "ann", f"p{n:02}", private=n % 3 == 0)
        if n % 5 == 0:
            forge.policy.set_collaborator(repo, forge.accounts.require("ben"), "read")
    headers = {"Authorization": f"token {token_for(http, 'ben')}"}

    def statements(limit: int) -> int:
        counts = set()
        for _ in range(3):
            answer = http.get("/api/v1/repos/search", params={"limit": limit}, headers=headers)
            assert len(answer.json()["data"]) == limit
            timing = dict(
                (part.split(";")[0].strip(), part)
                for part in answer.headers["server-timing"].split(",")
            )
            counts.add(int(timing["query"].rsplit("dur=", 1)[1]))
        return min(counts)

    assert statements(2) == statements(20)


def test_levels_for_a_page_agree_with_the_policy_one_by_one(forge: Forge) -> None:
    ann, ben = forge.accounts.require("ann"), forge.accounts.require("ben")
    team = forge.accounts.create_org("crew", ann)
    forge.accounts.add_member(team, ben)
    repos = []
    for owner in ("ann", "ben", "crew", "root"):
        for private in (False, True):
            repo = forge.registry.create(owner, f"x{int(private)}", private=private)
            repos.append(repo)
    forge.policy.set_collaborator(repos[1], ben, "write")
    forge.policy.set_collaborator(repos[7], ben, "read")
    from floorless.accounts.access import ANONYMOUS, Viewer

    viewers = [ANONYMOUS, Viewer(team), Viewer(forge.accounts.require("root"))]
    for who in (ann, ben):
        viewers += [Viewer(who), Viewer(who, "read")]
    for viewer in viewers:
        batch = forge.policy.levels(viewer, repos)
        assert batch == {r.id: forge.policy.level(viewer, r) for r in repos}, viewer


def test_default_branch_moves_to_an_existing_branch(forge: Forge, http: httpx.Client) -> None:
    import pygit2

    repo = forge.registry.create("ann", "code")
    handle = pygit2.Repository(str(repo.path))
    who = pygit2.Signature("Ann", "ann@example.org", 1_700_000_000, 0)
    tree = handle.TreeBuilder().write()
    first = handle.create_commit("refs/heads/main", who, who, "first", tree, [])
    handle.create_reference("refs/heads/dev", first)
    forge.moves.refs_moved(repo)
    client = api(http, token_for(http, "ann"))
    got = client.repository.repo_get("ann", "code")
    assert (got.empty, got.default_branch) == (False, "main")
    moved = client.repository.repo_edit("ann", "code", default_branch="dev")
    assert moved.default_branch == "dev"
    assert handle.references["HEAD"].target == "refs/heads/dev"
    with pytest.raises(ApiError) as refused:
        client.repository.repo_edit("ann", "code", default_branch="nope")
    assert refused.value.status_code == 422
    assert client.repository.repo_get("ann", "code").default_branch == "dev"


@pytest.mark.network
def test_a_real_server_a_real_client_and_a_real_push(tmp_path: Path) -> None:
    """pyforgejo with its own HTTP client against ``floorless serve``: a token made with the
    password, a repository made through the API, pushed to with git at the clone URL the API
    gave, then seen by the API with its branch."""
    from support.githttp import git
    from support.serving import serving

    with serving(tmp_path / "repos", tmp_path / "data") as server, httpx.Client(timeout=60) as h:
        server.admin(
            "user", "create", "ann", "--email", "a@example.org", "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
        # over a socket httpx refuses the blank key's "token " header: a placeholder key,
        # replaced by Basic for this call and by an empty header for anonymous ones
        anonymous = PyforgejoApi(base_url=server.url + "/api/v1", api_key="none", httpx_client=h)
        nobody = {"additional_headers": {"Authorization": ""}}
        token = anonymous.user.create_token(
            "ann", name="push", scopes=["write:repository"],
            request_options={"additional_headers": basic("ann")},
        ).sha1  # fmt: skip
        assert token
        client = PyforgejoApi(base_url=server.url + "/api/v1", api_key=token, httpx_client=h)
        made = client.repository.create_current_user_repo(name="live")
        assert made.clone_url == f"{server.url}/ann/live.git" and made.empty
        work = tmp_path / "work"
        git("init", "-q", "-b", "main", str(work))
        git("commit", "-q", "--allow-empty", "-m", "first", cwd=work)
        authed = made.clone_url.replace("http://", f"http://ann:{token}@")
        git("push", "-q", authed, "main", cwd=work)
        after = client.repository.repo_get("ann", "live")
        assert (after.empty, after.default_branch) == (False, "main")
        seen = anonymous.repository.repo_get("ann", "live", request_options=nobody)
        assert seen.permissions is not None and not seen.permissions.push
        with pytest.raises(ApiError) as hidden:
            anonymous.repository.repo_get("ann", "nothing", request_options=nobody)
        assert hidden.value.status_code == 404


def test_merge_styles_and_features_through_edit(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "styles")
    client = api(http, token_for(http, "ann"))
    edited = client.repository.repo_edit(
        "ann", "styles", allow_rebase=False, allow_squash_merge=False, default_merge_style="merge"
    )
    assert (edited.allow_merge_commits, edited.allow_rebase, edited.allow_squash_merge) == (
        True, False, False
    )  # fmt: skip
    assert forge.pulls.features("ann", "styles").merge_styles == ("merge", "fast-forward-only")
    headers = {"Authorization": f"token {token_for(http, 'ann')}"}
    for body in (
        {"default_merge_style": "rebase-merge"},
        {"default_merge_style": "squash"},  # not allowed now
        {"allow_merge_commits": False, "allow_fast_forward_only_merge": False},
        {"name": "renamed", "default_merge_style": "nonsense"},  # nothing written
    ):
        answer = http.patch("/api/v1/repos/ann/styles", headers=headers, json=body)
        assert answer.status_code == 422, (body, answer.text)
        error_of(answer)
    assert forge.registry.get("ann", "styles").name == "styles"
    assert forge.pulls.features("ann", "styles").default_merge == "merge"


def test_search_sorts_by_name_or_last_update(forge: Forge, http: httpx.Client) -> None:
    for name, when in (("b", 300.0), ("a", 100.0), ("c", 200.0)):
        repo = forge.registry.create("ben", name)
        forge.registry.set_updated(repo.id, when)
    client = api(http)
    assert [r.name for r in client.repository.repo_search().data or []] == ["a", "b", "c"]
    recent = client.repository.repo_search(sort="updated", order="desc").data or []
    assert [r.name for r in recent] == ["b", "c", "a"]
    oldest = client.repository.repo_search(sort="updated", order="asc").data or []
    assert [r.name for r in oldest] == ["a", "c", "b"]
    assert http.get("/api/v1/repos/search", params={"sort": "stars"}).status_code == 422


def test_a_same_site_write_with_the_session_and_its_csrf_token(
    forge: Forge, http: httpx.Client
) -> None:
    from falcon import testing
    from support.accounts import csrf_of

    browser = Browser(testing.TestClient(create_app(forge)))
    assert browser.sign_in("ann").status_code == 303
    csrf = csrf_of(browser.get("/-/new").text)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    headers = {"Cookie": cookie, "X-Csrf-Token": csrf}
    made = http.post("/api/v1/user/repos", headers=headers, json={"name": "by-page"})
    assert made.status_code == 201, made.text
    other_site = http.post(
        "/api/v1/user/repos",
        headers={**headers, "Origin": "https://elsewhere.example"},
        json={"name": "by-other"},
    )
    assert other_site.status_code == 403 and error_of(other_site)
    assert [r.name for r in forge.registry.listing(owner="ann")[0]] == ["by-page"]


def test_every_declared_field_of_a_wrong_type_is_a_422(forge: Forge, http: httpx.Client) -> None:
    """From the declarations themselves: each field of each body this module's resources
    take, sent with a value of another JSON type, is refused as JSON, and nothing is made."""
    forge.registry.create("ann", "box")
    forge.accounts.create_org("crew", forge.accounts.require("ann"))
    token = {"Authorization": f"token {token_for(http, 'ann')}"}
    params = {"name": "ann", "owner": "ann", "repo": "box", "org": "crew", "token": "1"}
    wrong = {"string": 5, "integer": "5", "boolean": "true", "array": "x", "object": []}
    checked = 0
    for template, kind in API_ROUTES:
        if kind.__module__.rsplit(".", 1)[-1] not in ("users", "repos"):
            continue
        path = template.format(**params)
        for method, operation in kind.operations.items():
            body = support.api.declared(operation.body)
            required = {f: "fine" for f, spec in body.items() if spec.required}
            for field, spec in body.items():
                headers = basic("ann") if operation.basic else token
                sent = {**required, field: wrong[spec.kind]}
                answer = http.request(method, path, headers=headers, json=sent)
                assert answer.status_code == 422, (method, path, field, answer.text)
                assert field in error_of(answer)
                checked += 1
    assert checked >= 15
    assert {r.name for r in forge.registry.listing()[0]} == {"box"}
