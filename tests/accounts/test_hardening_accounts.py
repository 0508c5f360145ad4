"""Accounts and headers under attack: nobody elsewhere can lock a person out, argon2 runs only
where a password is checked and a few at a time, proxies are believed only when trusted,
pages refuse framing and carry a CSP that fits them, metrics are not public, and answers
give away nothing by what they cost."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from falcon import testing
from support.forges import start_forge, wait_for
from support.signin import ATTACKER, FORM, LIMITS, PASSWORD, WRONG, basic, make_forge, sign_in
from support.spawns import counting

from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.web.throttle import Failures, SigninThrottle

HOME = "192.0.2.10"  # where ann lives
# a <style> element, or a style or event-handler attribute inside a tag
INLINE = re.compile(r"<style|<[a-zA-Z][^>]*\s(style|on[a-zA-Z]+)\s*=", re.IGNORECASE)
TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "floorless" / "web" / "templates"






class CountingHasher(PasswordHasher):
    """argon2's hasher, counting verifications (and, with ``hold``, keeping each one open
    until the test lets it finish)."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__()
        self.hold = hold
        self.calls = 0
        self.active = 0
        self.most = 0
        self._lock = threading.Lock()

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        with self._lock:
            self.calls += 1
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            if self.hold is not None:
                self.hold.wait(60)
            return super().verify(hash, password)
        finally:
            with self._lock:
                self.active -= 1




@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., Forge]]:
    forges: list[Forge] = []

    def start(**overrides) -> Forge:
        forges.append(make_forge(tmp_path / str(len(forges)), **overrides))
        return forges[-1]

    yield start
    for forge in forges:
        forge.stop()




# -- lockout -----------------------------------------------------------------------------------


def test_an_attacker_at_one_address_cannot_lock_the_owner_out(started) -> None:
    forge = started(**LIMITS)
    client = testing.TestClient(create_app(forge))
    token, _ = forge.accounts.create_token(forge.accounts.get("ann"), "write")
    hasher = forge.accounts.hasher = CountingHasher()
    answers = []
    for _ in range(30):
        answers.append(client.simulate_get("/", headers=basic("ann", WRONG), remote_addr=ATTACKER))
        # her token works throughout, as the Basic password and as a token header
        assert (
            client.simulate_get("/", headers=basic("ann", token), remote_addr=HOME).status_code
            == 200
        )
        assert (
            client.simulate_get("/", headers={"Authorization": f"token {token}"}).status_code == 200
        )
    statuses = [a.status_code for a in answers]
    assert statuses[:3] == [401, 401, 401] and set(statuses[3:]) == {429}
    assert 0 < int(answers[-1].headers["retry-after"]) <= 301
    assert hasher.calls == 3  # a refused attempt costs no argon2 check
    # ann, at home, signs in on the web and with git's Basic credentials
    assert sign_in(client, "ann", PASSWORD, HOME).status_code == 303
    assert (
        client.simulate_get("/", headers=basic("ann", PASSWORD), remote_addr=HOME).status_code
        == 200
    )
    # and the attacker still waits, even with the right password
    assert sign_in(client, "ann", PASSWORD, ATTACKER).status_code == 429


def test_attackers_at_many_addresses_slow_the_account_but_never_lock_its_owner_out(
    started,
) -> None:
    forge = started(**LIMITS)
    client = testing.TestClient(create_app(forge))
    token, _ = forge.accounts.create_token(forge.accounts.get("ann"), "read")
    # ann's git has used her token from home: home is one of her places now
    assert (
        client.simulate_get("/", headers=basic("ann", token), remote_addr=HOME).status_code == 200
    )
    statuses = []
    for n in range(1, 41):  # a new address for every guess
        result = client.simulate_get(
            "/", headers=basic("ann", WRONG), remote_addr=f"198.51.100.{n}"
        )
        statuses.append(result.status_code)
    assert statuses[:6] == [401] * 6 and set(statuses[6:]) == {429}  # guessing is slowed
    # a place ann has never been waits, but never longer than one window
    stranger = sign_in(client, "ann", PASSWORD, "192.0.2.200")
    assert stranger.status_code == 429 and 0 < int(stranger.headers["retry-after"]) <= 301
    # at home, her password signs her in on the web and over git; her token works anywhere
    assert sign_in(client, "ann", PASSWORD, HOME).status_code == 303
    assert (
        client.simulate_get("/", headers=basic("ann", PASSWORD), remote_addr=HOME).status_code
        == 200
    )
    anywhere = basic("ann", token)
    assert client.simulate_get("/", headers=anywhere, remote_addr="192.0.2.201").status_code == 200
    # another account is untouched
    assert sign_in(client, "ben", PASSWORD, "192.0.2.202").status_code == 303


def test_the_owners_places_outlive_a_restart(tmp_path: Path) -> None:
    """A restart (or a worker started again after a crash) must not hand an attacker the
    lockout: where ann has signed in is kept in the database."""
    forge = make_forge(tmp_path, **LIMITS)
    try:
        client = testing.TestClient(create_app(forge))
        assert sign_in(client, "ann", PASSWORD, HOME).status_code == 303
    finally:
        forge.stop()
    forge = start_forge(tmp_path / "repos", tmp_path / "data", **LIMITS)
    try:
        client = testing.TestClient(create_app(forge))
        for n in range(1, 21):  # the account's window fills from everywhere
            client.simulate_get("/", headers=basic("ann", WRONG), remote_addr=f"198.51.100.{n}")
        assert sign_in(client, "ann", PASSWORD, "192.0.2.200").status_code == 429
        assert sign_in(client, "ann", PASSWORD, HOME).status_code == 303
        # and a guesser trying made-up names makes the throttle keep nothing
        failures = Failures(forge.db, forge.secret.get, 300.0)
        throttle = SigninThrottle(3, 8, 6, failures, forge.accounts)
        for n in range(50):
            throttle.check(f"nobody{n}", ATTACKER)
        assert throttle.is_known("ann", HOME) and not throttle.is_known("ann", ATTACKER)
        assert list(throttle._known) == ["ann"]
    finally:
        forge.stop()


def test_an_address_guessing_at_many_accounts_waits(started) -> None:
    forge = started(**LIMITS)
    client = testing.TestClient(create_app(forge))
    for n in range(8):
        result = client.simulate_get("/", headers=basic(f"user{n}", WRONG), remote_addr=ATTACKER)
        assert result.status_code == 401
    assert sign_in(client, "ben", PASSWORD, ATTACKER).status_code == 429
    assert sign_in(client, "ben", PASSWORD, HOME).status_code == 303
    # an IPv6 attacker counts by its /64, whichever address of it it uses
    for n in range(8):
        client.simulate_get(
            "/", headers=basic(f"x{n}", WRONG), remote_addr=f"2001:db8:1:2::{n + 1}"
        )
    assert sign_in(client, "ben", PASSWORD, "2001:db8:1:2::ff").status_code == 429
    assert sign_in(client, "ben", PASSWORD, "2001:db8:1:3::1").status_code == 303


# -- argon2: only where a password is checked, a few at a time ---------------------------------


def test_static_files_metrics_and_tokens_cost_no_argon2_check(started) -> None:
    forge = started()
    client = testing.TestClient(create_app(forge))
    token, _ = forge.accounts.create_token(forge.accounts.get("ann"), "read")
    hasher = forge.accounts.hasher = CountingHasher()
    for url in ("/-/static/style.css", "/-/static/app.js", "/-/metrics"):
        for secret in (PASSWORD, WRONG):
            assert client.simulate_get(url, headers=basic("ann", secret)).status_code == 200, url
    assert client.simulate_get("/", headers=basic("ann", token)).status_code == 200
    assert client.simulate_get("/", headers=basic("", token)).status_code == 200
    assert hasher.calls == 0
    assert client.simulate_get("/", headers=basic("ann", PASSWORD)).status_code == 200
    assert hasher.calls == 1  # the counter counts


def test_password_checks_run_a_few_at_a_time_and_the_rest_are_told_to_retry(started) -> None:
    forge = started(password_checks=2)
    client = testing.TestClient(create_app(forge))
    hold = threading.Event()
    hasher = forge.accounts.hasher = CountingHasher(hold)
    results: list[testing.Result] = []
    lock = threading.Lock()

    def attempt(n: int) -> None:
        result = client.simulate_get(
            "/", headers=basic(f"user{n}", WRONG), remote_addr=f"198.51.100.{n + 1}"
        )
        with lock:
            results.append(result)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: len(results) >= 6, timeout=30)  # the ones beyond the slots, at once
    finally:
        hold.set()
        for thread in threads:
            thread.join(60)
    assert hasher.most <= 2
    statuses = sorted(r.status_code for r in results)
    assert statuses == [401, 401] + [503] * 6
    busy = next(r for r in results if r.status_code == 503)
    assert busy.headers["retry-after"] == "1"


# -- proxies ------------------------------------------------------------------------------------


def test_forwarded_headers_are_ignored_unless_the_peer_is_a_trusted_proxy(started) -> None:
    client = testing.TestClient(create_app(started(**LIMITS)))
    # anyone may claim to be forwarded: it changes nothing
    for n in range(4):
        forwarded = {"X-Forwarded-For": f"198.51.100.{n}", **basic("ann", WRONG)}
        result = client.simulate_get("/", headers=forwarded, remote_addr=ATTACKER)
    assert result.status_code == 429
    secure = sign_in_via(client, "ben", "192.0.2.7", {"X-Forwarded-Proto": "https"})
    assert secure.status_code == 303 and not secure.cookies["floorless_session"].secure


def test_a_trusted_proxy_says_who_the_client_is_and_how_it_came(started) -> None:
    proxy = "10.1.2.3"
    client = testing.TestClient(
        create_app(started(trusted_proxies=("10.0.0.0/8", "::1"), **LIMITS))
    )

    def attempt(forwarded_for: str, peer: str = proxy) -> int:
        headers = {"X-Forwarded-For": forwarded_for, **basic("ann", WRONG)}
        return client.simulate_get("/", headers=headers, remote_addr=peer).status_code

    assert [attempt(ATTACKER) for _ in range(4)] == [401, 401, 401, 429]
    # what the client wrote left of its own address changes nothing; other proxies are skipped
    assert attempt(f"192.0.2.99, {ATTACKER}") == 429
    assert attempt(f"{ATTACKER}, 10.9.9.9") == 429
    # someone else behind the same proxy is someone else
    assert attempt("192.0.2.55") == 401
    assert sign_in_via(client, "ann", proxy, {"X-Forwarded-For": HOME}).status_code == 303
    # the proxy says https: cookies are Secure
    secure = sign_in_via(client, "ben", proxy, {"X-Forwarded-Proto": "https"})
    assert secure.cookies["floorless_session"].secure


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "proto", "address", "scheme"),
    [
        ("192.0.2.1", "198.51.100.1", "https", "192.0.2.1", "http"),  # not a proxy of ours
        ("10.0.0.1", "", "", "10.0.0.1", "http"),
        ("10.0.0.1", "198.51.100.1", "https", "198.51.100.1", "https"),
        ("10.0.0.1", "1.1.1.1, 198.51.100.1, 10.0.0.9", "http, https", "198.51.100.1", "https"),
        ("10.0.0.1", "10.0.0.7, 10.0.0.8", "ftp", "10.0.0.7", "http"),  # proxies all the way
        ("10.0.0.1", "[2001:db8::1]", "", "2001:db8::1", "http"),
        ("::ffff:10.0.0.1", "198.51.100.2", "", "198.51.100.2", "http"),
        ("10.0.0.1", "garbage", "", "garbage", "http"),
    ],
)
def test_client_address_and_scheme(peer, forwarded_for, proto, address, scheme) -> None:
    from floorless.web.proxies import Proxies

    proxies = Proxies(["10.0.0.0/8"])
    headers = {"X-Forwarded-For": forwarded_for, "X-Forwarded-Proto": proto}
    req = testing.create_req(remote_addr=peer, headers={k: v for k, v in headers.items() if v})
    assert proxies.client_address(req) == address
    assert proxies.scheme(req) == scheme


def sign_in_via(
    client: testing.TestClient, name: str, peer: str, headers: dict[str, str]
) -> testing.Result:
    page = client.simulate_get("/-/login", remote_addr=peer, headers=headers)
    csrf = re.search(r'name="csrf" value="([^"]*)"', page.text).group(1)
    cookie = page.cookies["floorless_csrf"].value
    return client.simulate_post(
        "/-/login",
        body=f"csrf={csrf}&name={name}&password={PASSWORD.replace(' ', '+')}",
        headers={**headers, "Content-Type": FORM, "Cookie": f"floorless_csrf={cookie}"},
        remote_addr=peer,
    )


# -- headers ------------------------------------------------------------------------------------


def test_pages_refuse_framing_and_carry_a_policy_that_fits_them(client: testing.TestClient) -> None:
    for url in (
        "/",
        "/-/login",
        "/alice",
        "/alice/demo",
        "/alice/demo/src/branch/main/docs",
        "/alice/demo/src/branch/main/src/app.py",
        "/alice/demo/commits/branch/main",
        "/alice/demo/blame/branch/main/README.md",
        "/alice/demo/branches",
        "/alice/nope",
    ):
        result = client.simulate_get(url)
        assert result.headers["content-type"].startswith("text/html"), url
        headers = result.headers
        assert headers["x-frame-options"] == "DENY", url
        assert headers["x-content-type-options"] == "nosniff", url
        assert headers["referrer-policy"] in ("same-origin", "strict-origin-when-cross-origin")
        policy = {
            name: value
            for name, _, value in (
                part.strip().partition(" ")
                for part in headers["content-security-policy"].split(";")
            )
        }
        assert policy["frame-ancestors"] == "'none'", url
        assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'", url
        assert "unsafe" not in headers["content-security-policy"], url
        # nothing on the page needs more than that policy allows
        html = result.text
        assert not re.search(r"<script(?![^>]*\ssrc=)", html), url
        assert not re.search(INLINE, html), url
    for other in ("/-/static/style.css", "/alice/demo/raw/branch/main/README.md"):
        headers = client.simulate_get(other).headers
        assert (
            headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
        )
    # the raw view keeps its own, stricter policy
    raw = client.simulate_get("/alice/demo/raw/branch/main/README.md")
    assert "sandbox" in raw.headers["content-security-policy"]


def test_no_template_has_inline_script_or_style() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert not re.search(r"<script(?![^>]*\ssrc=)", text), template.name
        assert not re.search(INLINE, text), template.name


# -- metrics ------------------------------------------------------------------------------------


def test_metrics_are_for_the_listed_addresses_and_the_token_only(started) -> None:
    client = testing.TestClient(create_app(started()))
    assert client.simulate_get("/-/metrics", remote_addr="127.0.0.1").status_code == 200
    assert client.simulate_get("/-/metrics", remote_addr="::1").status_code == 200
    assert client.simulate_get("/-/metrics", remote_addr=ATTACKER).status_code == 404
    # a proxy on this machine that is not trusted forwards strangers: they are not local
    forwarded = {"X-Forwarded-For": ATTACKER}
    result = client.simulate_get("/-/metrics", remote_addr="127.0.0.1", headers=forwarded)
    assert result.status_code == 404

    client = testing.TestClient(
        create_app(started(metrics_token="s3cret-token", metrics_addresses=("192.0.2.0/24",)))
    )
    assert client.simulate_get("/-/metrics", remote_addr="192.0.2.9").status_code == 200
    assert client.simulate_get("/-/metrics", remote_addr="127.0.0.1").status_code == 404
    bearer = {"Authorization": "Bearer s3cret-token"}
    ok = client.simulate_get("/-/metrics", remote_addr=ATTACKER, headers=bearer)
    assert ok.status_code == 200 and b"floorless" in ok.content
    wrong = {"Authorization": "Bearer s3cret-tokeN"}
    assert client.simulate_get("/-/metrics", remote_addr=ATTACKER, headers=wrong).status_code == 404


# -- what answers cost --------------------------------------------------------------------------


def test_a_private_name_and_a_missing_one_take_the_same_lookups(started, monkeypatch) -> None:
    forge = started()
    client = testing.TestClient(create_app(forge))
    forge.registry.create("ann", "diary", private=True)
    token, _ = forge.accounts.create_token(forge.accounts.get("ben"), "read")
    asked: list[str] = []
    real = forge.db.query
    requests = threading.get_ident()  # the test client runs the app in this thread

    def query(sql, params=()):
        if threading.get_ident() == requests:  # not the background work's own queries
            asked.append(" ".join(sql.split()))
        return real(sql, params)

    monkeypatch.setattr(forge.db, "query", query)
    lookups = {}
    for viewer in ({}, {"Authorization": f"token {token}"}):
        for url in ("/ann/diary", "/ann/nothing", "/ann/diary/commits", "/ann/nothing/commits"):
            client.simulate_get(url, headers=viewer)  # warm
            asked.clear()
            assert client.simulate_get(url, headers=viewer).status_code == 404
            lookups[url] = list(asked)
        assert lookups["/ann/diary"] == lookups["/ann/nothing"], viewer
        assert lookups["/ann/diary/commits"] == lookups["/ann/nothing/commits"], viewer


def test_an_archive_of_a_missing_commit_is_404_without_a_process(
    client: testing.TestClient,
) -> None:
    missing = "0123456789abcdef0123456789abcdef01234567"
    for suffix in (".tar.gz", ".zip"):
        url = f"/alice/demo/archive/{missing}{suffix}"
        with counting() as events:
            got = client.simulate_get(url)
            head = client.simulate_head(url)
        assert got.status_code == 404 and head.status_code == 404, url
        assert not events, url
        for result in (got, head):
            assert "immutable" not in result.headers.get("cache-control", ""), url
    # a commit that exists still has its archive
    real = client.simulate_head("/alice/demo/archive/main.tar.gz")
    assert real.status_code == 200 and real.headers["content-type"] == "application/gzip"
