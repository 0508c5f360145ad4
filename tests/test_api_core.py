"""The ``/api/v1`` framework and its account, organisation, repository and token endpoints,
driven by pyforgejo (a client generated from Forgejo's OpenAPI description, whose models
validate every answer) over an in-process WSGI transport, and by plain requests where the
point is the bytes: JSON errors for every 4xx, pagination headers, authentication in each of
Forgejo's ways, a private repository answering as a missing one, no process on a read."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import start_forge
from pyforgejo import PyforgejoApi
from pyforgejo.core.api_error import ApiError
from test_accounts import PASSWORD, Browser
from test_spawns import counting

from floorless.forge import Forge
from floorless.web.app import create_app

BASE = "http://forge.test"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.accounts.create_user("root", "root@example.org", PASSWORD, admin=True)
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


def basic(name: str, password: str = PASSWORD) -> dict[str, str]:
    pair = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def api(http: httpx.Client, token: str = "") -> PyforgejoApi:
    # without a key pyforgejo refuses to start; a blank one sends "Authorization: token ",
    # which Forgejo (and floorless) take as anonymous
    return PyforgejoApi(base_url=BASE + "/api/v1", api_key=token or " ", httpx_client=http)


def token_for(http: httpx.Client, name: str, scopes: list[str] | None = None) -> str:
    """A new token, made as Forgejo's clients make one: with the password over Basic."""
    made = api(http).user.create_token(
        name,
        name=f"t-{len(scopes or [])}-{id(scopes)}",
        scopes=scopes or ["write:repository", "write:user", "write:organization"],
        request_options={"additional_headers": basic(name)},
    )
    assert made.sha1 and made.token_last_eight == made.sha1[-8:]
    return made.sha1


def error_of(answer: httpx.Response) -> str:
    assert answer.headers["content-type"] == "application/json; charset=utf-8", answer.text
    body = answer.json()
    assert set(body) == {"message", "url"}, body
    assert body["url"].endswith("/api/swagger")
    return str(body["message"])


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
