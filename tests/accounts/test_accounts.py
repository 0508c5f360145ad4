"""Accounts in the browser and on the command line: sign-in with signed session cookies and
CSRF-checked forms, throttling, tokens shown once and stored hashed, repository creation,
renaming, visibility, collaborators and deletion; and no secret ever reaches a log."""

from __future__ import annotations

import hmac
import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge, stored_bytes
from support.serving import run_admin

from floorless.forge import Forge
from floorless.web.app import create_app


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data", signin_attempts=3)
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def test_sign_in_sets_a_signed_http_only_lax_cookie(client: testing.TestClient) -> None:
    browser = Browser(client)
    result = browser.sign_in("ann")
    assert result.status_code == 303 and result.headers["location"] == "/"
    cookie = result.cookies["floorless_session"]
    assert cookie.http_only and cookie.same_site == "Lax" and not cookie.secure
    assert "ann" in browser.get("/").text and "Sign out" in browser.get("/").text
    # a cookie whose signature does not match is nobody
    session_id, _, signature = cookie.value.partition(".")
    forged = Browser(client)
    forged.cookies["floorless_session"] = f"{session_id}.{'0' * len(signature)}"
    assert "Sign out" not in forged.get("/").text


def test_cookies_are_secure_behind_https(tmp_path: Path) -> None:
    # X-Forwarded-Proto is believed from a trusted proxy only (the test client is 127.0.0.1)
    for trusted, secure in (((), False), (("127.0.0.1",), True)):
        forge = start_forge(tmp_path / "repos", tmp_path / "data", trusted_proxies=trusted)
        try:
            if forge.accounts.get("ann") is None:
                forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
            browser = Browser(testing.TestClient(create_app(forge)))
            browser.headers["X-Forwarded-Proto"] = "https"
            result = browser.sign_in("ann")
            assert result.cookies["floorless_session"].secure is secure
        finally:
            forge.stop()


def test_wrong_password_and_throttling(client: testing.TestClient) -> None:
    browser = Browser(client)
    for _ in range(3):
        result = browser.sign_in("ann", "wrong password")
        assert result.status_code == 401 and "wrong user name or password" in result.text
        assert "www-authenticate" not in result.headers  # a form, not a browser dialog
    result = browser.sign_in("ann")  # even the right password waits now
    assert result.status_code == 429 and int(result.headers["retry-after"]) > 0
    assert "floorless_session" not in browser.cookies
    # git's Basic credentials count against the same limit
    assert client.simulate_get("/", headers=_basic("ann", PASSWORD)).status_code == 429
    # another account from the same address is not held up by them (the address has a limit
    # of its own, signin_address_attempts: tests/test_hardening_accounts.py)
    assert Browser(client).sign_in("ben").status_code == 303


def _basic(name: str, password: str) -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def test_forms_need_the_csrf_token_and_the_same_origin(client: testing.TestClient) -> None:
    browser = Browser(client)
    browser.sign_in("ann")
    assert browser.post("/-/new", {"name": "x"}, csrf=None).status_code == 403
    assert browser.post("/-/new", {"name": "x"}, csrf="forged").status_code == 403
    token = csrf_of(browser.get("/-/new").text)
    browser.headers["Origin"] = "http://evil.example"
    assert browser.post("/-/new", {"name": "x"}, csrf=token).status_code == 403
    del browser.headers["Origin"]
    assert browser.post("/-/new", {"name": "x"}, csrf=token).status_code == 303
    # the sign-in form too: a token from another browser's cookie does not fit
    other = Browser(client)
    other.get("/-/login")
    result = Browser(client).post("/-/login", {"name": "ann", "password": PASSWORD}, csrf=None)
    assert result.status_code == 403


def test_sign_out_ends_the_session_on_the_server(client: testing.TestClient) -> None:
    browser = Browser(client)
    browser.sign_in("ann")
    stolen = dict(browser.cookies)
    assert browser.post("/-/logout", {}, csrf=csrf_of(browser.get("/").text)).status_code == 303
    thief = Browser(client)
    thief.cookies = stolen
    assert "Sign out" not in thief.get("/").text


def test_tokens_are_shown_once_stored_hashed_and_revocable(
    client: testing.TestClient, forge: Forge
) -> None:
    browser = Browser(client)
    browser.sign_in("ann")
    created = browser.post("/-/tokens", {"action": "create", "scope": "read", "name": "laptop"})
    assert created.status_code == 303 and created.headers["location"] == "/-/tokens"
    page = browser.get("/-/tokens")
    plain = re.search(r'value="(flt_[^"]+)"', page.text).group(1)
    assert (
        page.headers["cache-control"].startswith("no-store")
        or "no-store" in page.headers["cache-control"]
    )
    listing = browser.get("/-/tokens").text
    assert plain not in listing and plain[:8] in listing and "laptop" in listing
    database = stored_bytes(forge)
    assert plain.encode() not in database and PASSWORD.encode() not in database
    rows = forge.db.query("SELECT password_hash FROM accounts")
    assert rows and all(row[0].startswith("$argon2id$") for row in rows)
    auth = {"Authorization": f"token {plain}"}
    assert client.simulate_get("/", headers=auth).status_code == 200
    token_id = forge.accounts.tokens(forge.accounts.get("ann"))[0].id
    assert forge.accounts.tokens(forge.accounts.get("ann"))[0].last_used_at is not None
    browser.post("/-/tokens", {"action": "revoke", "id": str(token_id)})
    assert client.simulate_get("/", headers=auth).status_code == 401


def test_expired_tokens_are_refused(forge: Forge, client: testing.TestClient) -> None:
    ann = forge.accounts.get("ann")
    plain, token = forge.accounts.create_token(ann, "write", expires_days=1)
    assert client.simulate_get("/", headers={"Authorization": f"Bearer {plain}"}).status_code == 200
    forge.db.execute("UPDATE tokens SET expires_at = 1 WHERE id = ?", (token.id,))
    result = client.simulate_get("/", headers={"Authorization": f"Bearer {plain}"})
    assert result.status_code == 401 and result.headers["www-authenticate"].startswith("Basic")


def test_token_comparison_is_constant_time(forge: Forge, monkeypatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    plain, _ = forge.accounts.create_token(forge.accounts.get("ann"), "read")
    assert forge.accounts.check_token(plain) is not None
    assert compared, "the stored hash was not compared with hmac.compare_digest"


def test_create_rename_make_private_share_and_delete_a_repository(
    client: testing.TestClient, forge: Forge
) -> None:
    ann, ben = Browser(client), Browser(client)
    ann.sign_in("ann")
    ben.sign_in("ben")
    created = ann.post("/-/new", {"owner": "ann", "name": "notes", "visibility": "public"})
    assert created.status_code == 303 and created.headers["location"] == "/ann/notes"
    assert (forge.settings.repos / "ann" / "notes.git" / "HEAD").is_file()
    assert ben.get("/ann/notes").status_code == 200
    assert ben.get("/ann/notes/settings").status_code == 403  # may read, may not administer
    assert (
        ann.post(
            "/ann/notes/settings",
            {"action": "update", "visibility": "private", "description": "My notes"},
        ).status_code
        == 303
    )
    assert ben.get("/ann/notes").status_code == 404
    assert ben.get("/ann/notes/settings").status_code == 404
    assert "ann/notes" not in ben.get("/").text
    ann.post("/ann/notes/settings", {"action": "collaborator", "user": "ben", "role": "read"})
    assert ben.get("/ann/notes").status_code == 200 and "My notes" in ben.get("/ann/notes").text
    renamed = ann.post("/ann/notes/settings", {"action": "rename", "name": "journal"})
    assert renamed.headers["location"] == "/ann/journal/settings"
    assert ben.get("/ann/notes").status_code == 404
    assert ben.get("/ann/journal").status_code == 200  # the collaborator came along
    assert Browser(client).get("/ann/journal").status_code == 404  # still private
    assert not (forge.settings.repos / "ann" / "notes.git").exists()
    ann.post("/ann/journal/settings", {"action": "remove-collaborator", "user": "ben"})
    assert ben.get("/ann/journal").status_code == 404
    wrong = ann.post("/ann/journal/settings", {"action": "delete", "confirm": "journal"})
    assert wrong.status_code == 400 and (forge.settings.repos / "ann" / "journal.git").exists()
    deleted = ann.post("/ann/journal/settings", {"action": "delete", "confirm": "ann/journal"})
    assert deleted.status_code == 303
    assert not (forge.settings.repos / "ann" / "journal.git").exists()
    assert ann.get("/ann/journal").status_code == 404
    forge.maintenance.rescan()
    assert ann.get("/ann/journal").status_code == 404


def test_names_are_checked(client: testing.TestClient, forge: Forge) -> None:
    ann = Browser(client)
    ann.sign_in("ann")
    for name in ("..", ".hidden", "a/b", "x.git", "", "settings\x00"):
        result = ann.post("/-/new", {"owner": "ann", "name": name})
        assert result.status_code == 400, name
    ann.post("/-/new", {"owner": "ann", "name": "twice"})
    assert ann.post("/-/new", {"owner": "ann", "name": "twice"}).status_code == 409
    assert ann.post("/-/new", {"owner": "ben", "name": "theirs"}).status_code == 400
    assert sorted(p.name for p in (forge.settings.repos / "ann").iterdir()) == ["twice.git"]


def test_first_run_tells_how_to_create_the_first_admin(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        client = testing.TestClient(create_app(forge))
        for page in ("/", "/-/login"):
            assert "floorless admin user create" in client.simulate_get(page).text
        forge.accounts.create_user("first", "first@example.org", PASSWORD, admin=True)
        assert "floorless admin user create" not in client.simulate_get("/").text
    finally:
        forge.stop()


def test_no_secret_reaches_the_log(client: testing.TestClient, forge: Forge, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    plain, _ = forge.accounts.create_token(forge.accounts.get("ann"), "write")
    client.simulate_get("/", headers={"Authorization": f"token {plain}"})
    client.simulate_get("/", headers={"Authorization": f"token {plain}x"})
    client.simulate_get("/", headers=_basic("ann", PASSWORD))
    client.simulate_get("/", headers=_basic("ann", "not the password"))
    client.simulate_get("/ann/nothing/info/refs", headers=_basic("ann", plain))
    Browser(client).sign_in("ann", "not the password either")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (plain, PASSWORD, "not the password"):
        assert secret not in logged


def test_admin_commands_answer_bad_input_clearly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok = run_admin(
        data,
        "user",
        "create",
        "zoe",
        "--email",
        "z@example.org",
        "--admin",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert ok.returncode == 0 and "zoe" in ok.stdout
    cases = [
        (
            ("user", "create", "zoe", "--email", "z@example.org", "--password-stdin"),
            PASSWORD,
            "taken",
        ),
        (
            ("user", "create", "bad/name", "--email", "x@example.org", "--password-stdin"),
            PASSWORD,
            "valid",
        ),
        (("user", "create", "yan", "--email", "x@example.org", "--password-stdin"), "short", "8"),
        (
            ("user", "create", "yan", "--email", "x@example.org", "--password-stdin"),
            "",
            "no password",
        ),
        (("token", "create", "nobody", "--scope", "read"), "", "no user"),
        (("token", "create", "zoe", "--scope", "admin"), "", "Invalid value"),
        (("repo", "create", "zoe"), "", "OWNER/NAME"),
        (("repo", "create", "nobody/x"), "", "no user"),
        (("repo", "create", "zoe/.."), "", "valid"),
        (("org", "create", "team", "--owner", "nobody"), "", "no user"),
    ]
    for args, stdin, message in cases:
        result = run_admin(data, *args, stdin=stdin + "\n" if stdin else "")
        assert result.returncode != 0, args
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    token = run_admin(data, "token", "create", "zoe", "--scope", "write", "--expires", "30")
    assert token.returncode == 0 and re.fullmatch(r"flt_\S+\n", token.stdout)
    assert run_admin(data, "org", "create", "team", "--owner", "zoe").returncode == 0
    assert run_admin(data, "repo", "create", "team/shared", "--private").returncode == 0
    assert (data / "repositories" / "team" / "shared.git").is_dir()
    shutil.rmtree(data / "repositories" / "team")


def test_organisations_own_repositories_their_members_share(forge: Forge) -> None:
    from floorless.accounts.access import Level, Viewer

    ann, ben = forge.accounts.get("ann"), forge.accounts.get("ben")
    carl = forge.accounts.create_user("carl", "carl@example.org", PASSWORD)
    team = forge.accounts.create_org("team", ann)
    forge.accounts.add_member(team, ben, "member")
    repo = forge.registry.create("team", "shared", private=True)
    assert [o.name for o in forge.accounts.owned_orgs(ann)] == ["team"]
    assert forge.accounts.owned_orgs(ben) == []
    level = forge.policy.level
    assert level(Viewer(ann), repo) == Level.ADMIN
    assert level(Viewer(ben), repo) == Level.WRITE
    assert level(Viewer(ben, scope="read"), repo) == Level.READ
    assert level(Viewer(carl), repo) == Level.NONE
    assert level(Viewer(), repo) == Level.NONE
    with pytest.raises(Exception, match="organisation"):
        forge.accounts.create_token(team, "read")


# Found in review: each of these was a defect.


def test_renaming_onto_a_name_with_stale_rows_keeps_the_repository_private(
    client: testing.TestClient, forge: Forge
) -> None:
    ann = Browser(client)
    ann.sign_in("ann")
    ann.post("/-/new", {"owner": "ann", "name": "secret", "visibility": "private"})
    forge.registry.set_private("ann", "gone", False)  # left by a repository that vanished
    renamed = ann.post("/ann/secret/settings", {"action": "rename", "name": "gone"})
    assert renamed.status_code == 303
    forge.maintenance.rescan()
    assert Browser(client).get("/ann/gone").status_code == 404
    # a rename the disk refuses changes nothing at all
    (forge.settings.repos / "ann" / "blocked.git").mkdir()
    refused = ann.post("/ann/gone/settings", {"action": "rename", "name": "blocked"})
    assert refused.status_code == 409
    assert (forge.settings.repos / "ann" / "gone.git" / "HEAD").is_file()
    assert forge.registry.get("ann", "gone").private
    # only the case of the name changes
    assert ann.post("/ann/gone/settings", {"action": "rename", "name": "Gone"}).status_code == 303
    assert ann.get("/ann/Gone").status_code == 200


def test_a_new_repository_does_not_inherit_an_old_ones_collaborators(
    client: testing.TestClient, forge: Forge
) -> None:
    ann, ben = Browser(client), Browser(client)
    ann.sign_in("ann")
    ben.sign_in("ben")
    ann.post("/-/new", {"owner": "ann", "name": "reused", "visibility": "private"})
    ann.post("/ann/reused/settings", {"action": "collaborator", "user": "ben", "role": "read"})
    assert ben.get("/ann/reused").status_code == 200
    shutil.rmtree(forge.settings.repos / "ann" / "reused.git")  # gone behind floorless's back
    forge.maintenance.rescan()
    forge.maintenance.rescan()  # dropped when two scans in a row miss it
    ann.post("/-/new", {"owner": "ann", "name": "reused", "visibility": "private"})
    assert ben.get("/ann/reused").status_code == 404


def test_repository_ids_are_never_reused_and_a_deleted_ones_index_goes(
    client: testing.TestClient, forge: Forge
) -> None:
    ann = Browser(client)
    ann.sign_in("ann")
    ann.post("/-/new", {"owner": "ann", "name": "first"})
    first = forge.registry.get("ann", "first")
    forge.db.execute(
        "INSERT INTO answers (repo_id, kind, key, value) VALUES (?, 'x', ?, '[]')",
        (first.id, b"\0"),
    )
    ann.post("/ann/first/settings", {"action": "delete", "confirm": "ann/first"})
    ann.post("/-/new", {"owner": "ann", "name": "second"})
    assert forge.registry.get("ann", "second").id > first.id
    assert forge.db.one("SELECT 1 FROM answers WHERE repo_id = ?", (first.id,)) is None


@pytest.mark.parametrize(
    "target", ["/\t/evil.example", "/\\evil.example", "//evil.example", "/\n/evil", "https://e.x"]
)
def test_sign_in_never_sends_anyone_to_another_site(client: testing.TestClient, target) -> None:
    from urllib.parse import quote

    browser = Browser(client)
    browser.sign_in("ann")
    result = browser.get("/-/login", query_string="next=" + quote(target, safe=""))
    assert result.status_code == 303 and result.headers["location"] == "/"


@pytest.mark.parametrize(
    ("target", "location"),
    [
        ("/\u3002x", "/%E3%80%82x"),  # an ideographic full stop: a dot in a host name
        ("/\uff0f\uff0fevil.example", "/%EF%BC%8F%EF%BC%8Fevil.example"),  # fullwidth slashes
        ("/alice/d\u00e9mo?q=\u00e9#\u00e9", "/alice/d%C3%A9mo?q=%C3%A9#%C3%A9"),
        ("/a%20b", "/a%20b"),  # what is already encoded stays as it is
    ],
)
def test_the_way_back_past_ascii_is_percent_encoded_on_this_site(
    client: testing.TestClient, target: str, location: str
) -> None:
    """A Location header is Latin-1 at most (a server refuses to send other text: a 500):
    every character past ASCII goes as UTF-8, percent-encoded, in this site's path."""
    from urllib.parse import quote

    browser = Browser(client)
    browser.sign_in("ann")
    result = browser.get("/-/login", query_string="next=" + quote(target, safe=""))
    assert result.status_code == 303 and result.headers["location"] == location
    page = Browser(client).get("/-/login", query_string="next=" + quote(target, safe=""))
    assert f'name="next" value="{location}"' in page.text.replace("&amp;", "&")
    # the form carries it back encoded, and signing in goes there
    result = Browser(client).post(
        "/-/login", {"name": "ann", "password": PASSWORD, "next": quote(location, safe="")}
    )
    assert result.status_code == 303 and result.headers["location"] == location


def test_an_old_password_stops_working_when_it_is_changed(
    client: testing.TestClient, forge: Forge
) -> None:
    assert client.simulate_get("/", headers=_basic("ann", PASSWORD)).status_code == 200
    forge.accounts.set_password(forge.accounts.get("ann"), "a brand new password")
    assert client.simulate_get("/", headers=_basic("ann", PASSWORD)).status_code == 401
    fresh = _basic("ann", "a brand new password")
    assert client.simulate_get("/", headers=fresh).status_code == 200


def test_odd_form_values_and_cookies_are_4xx_not_500(client: testing.TestClient) -> None:
    browser = Browser(client)
    browser.get("/-/login")
    assert (
        browser.post("/-/login", {"name": "ann", "password": "x"}, csrf="%C3%A9").status_code == 403
    )
    for value in ("abc.%C3%A9", "abc.é".encode().decode("latin-1"), "x" * 300):
        result = client.simulate_get("/", headers={"Cookie": f"floorless_session={value}"})
        assert result.status_code == 200
    browser.sign_in("ann")
    assert browser.post("/-/tokens", {"scope": "read", "expires": "9" * 400}).status_code == 400
    assert browser.post("/-/tokens", {"action": "revoke", "id": "9" * 30}).status_code == 400


def test_names_the_forge_uses_for_itself_cannot_be_accounts(forge: Forge) -> None:
    for name in ("local", "LOCAL", "admin", "-"):
        with pytest.raises(Exception, match=r"reserved|valid"):
            forge.accounts.create_user(name, "x@example.org", PASSWORD)


def test_sign_in_comes_back_to_the_exact_url_that_asked_for_it(client: testing.TestClient) -> None:
    """The way back is the URL that asked, its query and encoding kept."""
    from urllib.parse import parse_qs, quote

    asked = client.simulate_get("/-/tokens", query_string="note=a%20b")
    assert asked.status_code in (302, 303)
    location = asked.headers["location"]
    assert location.startswith("/-/login?next=")
    back = parse_qs(location.split("?", 1)[1])["next"][0]
    assert back == "/-/tokens?note=a%20b"
    browser = Browser(client)
    result = browser.post(
        "/-/login", {"name": "ann", "password": PASSWORD, "next": quote(back, safe="")}
    )
    assert result.status_code == 303 and result.headers["location"] == back
