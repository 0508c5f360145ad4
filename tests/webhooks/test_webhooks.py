"""Webhooks: real pushes over HTTP delivered to a real receiver on loopback, as Forgejo sends
them (payload field by field, headers, signature); retries, a receiver that never answers, a
restart mid-queue, two claimers of one delivery; the SSRF refusals of the default settings;
the API's Hook (checked by pyforgejo's model) and its refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import support.webhooks
from pyforgejo.core.api_error import ApiError
from support.accounts import PASSWORD
from support.api import api, error_of, token_for
from support.forges import start_forge, wait_for
from support.webhooks import FAST, Receiver, Site, _commit, _site, git

from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.webhooks.delivery import MAX_ATTEMPTS, Webhooks
from floorless.webhooks.guard import HostRules
from floorless.webhooks.hooks import branch_matches

# the shared fixtures this module's tests ask for
receiver = support.webhooks.receiver

pytestmark = pytest.mark.network


# -- a receiver ---------------------------------------------------------------------------------








# -- a forge served over HTTP ---------------------------------------------------------------------










@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    yield from _site(tmp_path, webhook_allowed_hosts=("loopback",), **FAST)


def states(forge: Forge, hook_id: int) -> list[tuple[str, int, str]]:
    hook = forge.webhooks.hook(hook_id, *_owner(forge, hook_id))
    return [(d.state, d.attempts, d.error) for d in forge.webhooks.deliveries(hook)]


def _owner(forge: Forge, hook_id: int) -> tuple[int | None, int | None]:
    row = forge.db.one("SELECT repo_id, org_id FROM webhooks WHERE id = ?", (hook_id,))
    assert row is not None
    return row["repo_id"], row["org_id"]


def signed(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# -- pushes ---------------------------------------------------------------------------------------






def test_a_push_over_http_is_delivered_as_forgejo_sends_it(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    secret = "s3cr3t"
    hook = site.hook(
        "ann/plans",
        config={"url": receiver.url + "/all", "content_type": "json", "secret": secret},
        events=["push", "create", "delete"],
    )
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/release", "content_type": "form"},
        events=["push"],
        branch_filter="release/*",
    )
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    (work / "b.txt").write_text("b\n")
    first = _commit(work, "First", 1_700_000_000)
    remote = site.url.replace("http://", f"http://ann:{site.token}@") + "/ann/plans.git"
    git(work, "push", "-q", remote, "main")
    wait_for(lambda: len(receiver.at("/all")) == 2)  # create, then push
    # sent by several workers: in no particular order
    created, pushed = sorted(receiver.at("/all"), key=lambda r: r.headers["X-Forgejo-Event"])
    assert created.headers["X-Forgejo-Event"] == "create"
    assert {k: created.json[k] for k in ("sha", "ref", "ref_type")} == {
        "sha": first, "ref": "main", "ref_type": "branch"
    }  # fmt: skip
    assert pushed.json["before"] == "0" * 40 and pushed.json["compare_url"] == ""
    assert [c["id"] for c in pushed.json["commits"]] == [first]
    assert pushed.json["commits"][0]["added"] == ["a.txt", "b.txt"]

    (work / "a.txt").write_text("a, changed\n")
    (work / "b.txt").unlink()
    (work / "c.txt").write_text("c\n")
    second = _commit(work, "Second\n\nwith a body", 1_700_000_100)
    git(work, "push", "-q", remote, "main")
    wait_for(lambda: len(receiver.at("/all")) == 3)
    got = receiver.at("/all")[2]
    payload = got.json
    base = site.url
    author = {"name": "Ann", "email": "ann@example.org", "username": "ann"}
    committer_name = git(work, "log", "-1", "--format=%cn")
    committer_email = git(work, "log", "-1", "--format=%ce")
    expected_commit = {
        "id": second,
        "message": "Second\n\nwith a body\n",
        "url": f"{base}/ann/plans/commit/{second}",
        "author": author,
        "committer": {"name": committer_name, "email": committer_email, "username": ""},
        "verification": None,
        "timestamp": git(work, "log", "-1", "--format=%aI"),
        "added": ["c.txt"],
        "removed": ["b.txt"],
        "modified": ["a.txt"],
    }
    assert payload["ref"] == "refs/heads/main"
    assert (payload["before"], payload["after"]) == (first, second)
    assert payload["compare_url"] == f"{base}/ann/plans/compare/{first}...{second}"
    assert payload["commits"] == [expected_commit]
    assert payload["head_commit"] == expected_commit
    assert payload["total_commits"] == 1
    assert payload["repository"]["full_name"] == "ann/plans"
    assert payload["repository"]["id"] == site.forge.registry.get("ann", "plans").id
    assert payload["pusher"]["login"] == payload["sender"]["login"] == "ann"
    assert "ann@example.org" not in json.dumps(payload["pusher"])  # kept private
    # Forgejo's headers, under each name, and the signature over the body
    headers = got.headers
    assert headers["Content-Type"] == "application/json"
    for prefix in ("X-Forgejo", "X-Gitea", "X-Gogs"):
        assert headers[f"{prefix}-Event"] == "push"
        assert headers[f"{prefix}-Event-Type"] == "push"
        assert headers[f"{prefix}-Delivery"] == headers["X-Forgejo-Delivery"]
    assert headers["X-Forgejo-Signature"] == signed(secret, got.body)
    assert headers["X-Gitea-Signature"] == signed(secret, got.body)
    assert headers["X-Hub-Signature-256"] == "sha256=" + signed(secret, got.body)
    assert len({r.headers["X-Forgejo-Delivery"] for r in receiver.at("/all")}) == 3
    assert receiver.at("/release") == []  # its branch filter: main is not release/*

    # a release branch (form-encoded), a tag (created), a branch deleted
    git(work, "tag", "v1")
    git(work, "push", "-q", remote, "main:release/1", "v1")
    wait_for(lambda: len(receiver.at("/all")) == 7)
    wait_for(site.forge.webhooks.idle)
    assert len(receiver.at("/release")) == 1  # not the tag: refs/tags/v1 is not release/*
    form = receiver.at("/release")[0]
    assert form.headers["Content-Type"] == "application/x-www-form-urlencoded"
    inner = json.loads(parse_qs(form.body.decode())["payload"][0])
    assert inner["ref"] == "refs/heads/release/1" and inner["after"] == second
    kinds = sorted(
        (r.headers["X-Forgejo-Event"], r.json["ref"], r.json.get("ref_type", ""))
        for r in receiver.at("/all")[3:]
    )
    assert kinds == [
        ("create", "release/1", "branch"),
        ("create", "v1", "tag"),
        ("push", "refs/heads/release/1", ""),
        ("push", "refs/tags/v1", ""),
    ]
    git(work, "push", "-q", remote, ":release/1")
    wait_for(lambda: len(receiver.at("/all")) == 8)
    wait_for(site.forge.webhooks.idle)  # the receiver answers before the sender logs it
    deleted = receiver.at("/all")[7]
    assert deleted.headers["X-Forgejo-Event"] == "delete"
    assert {k: deleted.json[k] for k in ("ref", "ref_type", "pusher_type")} == {
        "ref": "release/1", "ref_type": "branch", "pusher_type": "user"
    }  # fmt: skip
    # every one logged as delivered, with the receiver's answer
    logged = site.forge.webhooks.deliveries(
        site.forge.webhooks.hook(hook["id"], *_owner(site.forge, hook["id"]))
    )
    assert [d.state for d in logged] == ["delivered"] * 8
    assert logged[0].response_status == 200 and logged[0].response_body == "ok"
    assert logged[0].response_headers["X-Seen"] == "yes"
    assert logged[0].request_headers["X-Forgejo-Event"] == "delete"


def test_the_test_endpoint_sends_the_last_commit(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    head = _commit(work, "Only", 1_700_000_000)
    remote = site.url.replace("http://", f"http://ann:{site.token}@") + "/ann/plans.git"
    git(work, "push", "-q", remote, "main")
    hook = site.hook("ann/plans", config={"url": receiver.url + "/t", "content_type": "json"})
    api(site.http, site.token).repository.repo_test_hook("ann", "plans", hook["id"])
    wait_for(lambda: len(receiver.at("/t")) == 1)
    payload = receiver.at("/t")[0].json
    assert (payload["before"], payload["after"], payload["ref"]) == (head, head, "refs/heads/main")
    assert [c["id"] for c in payload["commits"]] == [head] and payload["total_commits"] == 1


# -- delivery ------------------------------------------------------------------------------------


def test_a_receiver_answering_500_twice_gets_the_third(site: Site, receiver: Receiver) -> None:
    receiver.failures["/flaky"] = 2
    hook = site.hook("ann/plans", config={"url": receiver.url + "/flaky", "content_type": "json"})
    made = site.forge.webhooks.hook(hook["id"], *_owner(site.forge, hook["id"]))
    site.forge.webhooks.emit([made], "push", {"n": 1})
    wait_for(lambda: states(site.forge, hook["id"])[0][0] == "delivered")
    assert states(site.forge, hook["id"]) == [("delivered", 3, "")]
    assert len(receiver.at("/flaky")) == 3
    assert len({r.headers["X-Forgejo-Delivery"] for r in receiver.at("/flaky")}) == 1

    # one that never stops failing is given up after MAX_ATTEMPTS
    receiver.failures["/down"] = 100
    site.hook("ann/plans", config={"url": receiver.url + "/down", "content_type": "json"})
    down = site.forge.webhooks.hooks(made.repo_id)[-1]
    site.forge.webhooks.emit([down], "push", {"n": 2})
    wait_for(lambda: states(site.forge, down.id)[0][0] == "failed")
    _, attempts, error = states(site.forge, down.id)[0]
    assert attempts == MAX_ATTEMPTS and "answered 500" in error and "given up" in error
    assert len(receiver.at("/down")) == MAX_ATTEMPTS


def test_a_receiver_that_never_answers_holds_up_no_other(site: Site, receiver: Receiver) -> None:
    hanging = site.hook("ann/plans", config={"url": receiver.url + "/hang", "content_type": "json"})
    fine = site.hook("ann/plans", config={"url": receiver.url + "/fine", "content_type": "json"})
    hooks = site.forge.webhooks.hooks(site.forge.registry.get("ann", "plans").id)
    site.forge.webhooks.emit([hooks[0]], "push", {"n": 1})
    wait_for(lambda: len(receiver.at("/hang")) == 1)
    site.forge.webhooks.emit([hooks[1]], "push", {"n": 2})
    wait_for(lambda: states(site.forge, fine["id"])[0][0] == "delivered")
    # the hanging one times out and waits for its next attempt, its error logged
    wait_for(lambda: states(site.forge, hanging["id"])[0][2] != "")
    assert "no answer within 0.5 seconds" in states(site.forge, hanging["id"])[0][2]
    receiver.release.set()


def test_a_restart_mid_queue_delivers_what_was_pending_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = {"webhook_allowed_hosts": ("loopback",), **FAST}
    forge = start_forge(tmp_path / "repos", tmp_path / "data", **settings)
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    repo = forge.registry.create("ann", "plans")
    forge.webhooks.stop()  # as if the node died before sending
    hook = forge.webhooks.create(repo.id, None, url=receiver.url + "/r")
    queued, in_flight = forge.webhooks.emit([hook], "push", {"n": 1}) + forge.webhooks.emit(
        [hook], "push", {"n": 2}
    )
    claimed = forge.webhooks.claim()  # this node had sent (or was sending) the first...
    assert claimed is not None and claimed.id == queued
    forge.stop()  # ... and died before recording it
    assert receiver.got == []
    again = start_forge(tmp_path / "repos", tmp_path / "data", **settings)
    try:
        wait_for(lambda: [d.state for d in again.webhooks.deliveries(hook)] == ["delivered"] * 2)
        wait_for(again.webhooks.idle)
        seen = sorted(r.json["n"] for r in receiver.at("/r"))
        assert seen == [1, 2]  # each once: the claimed one once more, the queued one once
        attempts = {d.id: d.attempts for d in again.webhooks.deliveries(hook)}
        assert attempts == {queued: 2, in_flight: 1}
    finally:
        again.stop()


def test_two_nodes_never_claim_one_delivery(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.webhooks.stop()  # no worker of its own: the two claimers below are the only ones
    try:
        forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        repo = forge.registry.create("ann", "plans")
        hook = forge.webhooks.create(repo.id, None, url="https://hooks.example.org/in")
        other = Webhooks(forge.db, forge.settings)  # another node's workers, same database
        forge.webhooks.emit([hook], "push", {"n": 1})
        results: list[object] = []
        barrier = threading.Barrier(2)

        def take(hooks: Webhooks) -> None:
            barrier.wait()
            results.append(hooks.claim())

        threads = [threading.Thread(target=take, args=(w,)) for w in (forge.webhooks, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(r is not None for r in results) == [False, True]
        assert forge.webhooks.claim() is None and other.claim() is None  # claimed: not due
    finally:
        forge.stop()


# -- SSRF -----------------------------------------------------------------------------------------


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Site]:
    yield from _site(tmp_path, **FAST)  # webhook_allowed_hosts as by default: external


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:9/", "loopback"),
        ("http://[::1]:9/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://localhost:9/", "loopback"),
        ("http://[::ffff:127.0.0.1]:9/", "loopback"),
        ("http://0.0.0.0:9/", "unspecified"),
        ("http://[::7f00:1]:9/", "loopback"),  # IPv4-compatible
        ("http://[::ffff:0:7f00:1]:9/", "loopback"),  # IPv4-translated
        ("http://[64:ff9b::7f00:1]:9/", "loopback"),  # NAT64
        ("http://[2002:7f00:1::1]:9/", "loopback"),  # 6to4
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:9/", "loopback"),  # Teredo
    ],
)
def test_default_settings_refuse_internal_receivers(guarded: Site, url: str, kind: str) -> None:
    made = guarded.hook("ann/plans", config={"url": url, "content_type": "json"})
    hook = guarded.forge.webhooks.hooks(guarded.forge.registry.get("ann", "plans").id)[0]
    guarded.forge.webhooks.emit([hook], "push", {"n": 1})
    wait_for(lambda: states(guarded.forge, made["id"])[0][0] == "failed")
    _, attempts, error = states(guarded.forge, made["id"])[0]
    assert attempts == 1 and error.startswith("refused") and f"a {kind} address" in error
    assert "webhook_allowed_hosts" in error


def test_a_redirect_is_not_followed(tmp_path: Path, receiver: Receiver) -> None:
    for site in _site(tmp_path, webhook_allowed_hosts=("127.0.0.1",), **FAST):
        made = site.hook(
            "ann/plans", config={"url": receiver.url + "/redirect", "content_type": "json"}
        )
        hook = site.forge.webhooks.hooks(site.forge.registry.get("ann", "plans").id)[0]
        site.forge.webhooks.emit([hook], "push", {"n": 1})
        wait_for(lambda: states(site.forge, made["id"])[0][0] == "failed")
        error = states(site.forge, made["id"])[0][2]
        assert "redirected to 'http://localhost:" in error and "not followed" in error
        assert receiver.at("/ok") == []


# An IPv6 address that carries an IPv4 one is what that IPv4 address is: the address, its
# kind, and whether the default rules (external only) and "private" let a hook go there.
TRANSITIONS = [
    # IPv4-mapped
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:8.8.8.8", "external"),
    # IPv4-compatible (deprecated); :: and ::1 are themselves
    ("::7f00:1", "loopback"),
    ("::a9fe:a9fe", "link-local"),
    ("::c0a8:1", "private"),
    ("::808:808", "external"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("::2", "reserved"),
    # IPv4-translated (SIIT)
    ("::ffff:0:7f00:1", "loopback"),
    ("::ffff:0:a00:1", "private"),
    ("::ffff:0:808:808", "external"),
    # NAT64, the well-known prefix; its local-use prefix places the address as it likes
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "link-local"),
    ("64:ff9b::ac10:1", "private"),
    ("64:ff9b::6440:1", "private"),
    ("64:ff9b::e000:1", "multicast"),
    ("64:ff9b::808:808", "external"),
    ("64:ff9b:1::7f00:1", "reserved"),
    ("64:ff9b:1::808:808", "reserved"),
    # 6to4
    ("2002:7f00:1::1", "loopback"),
    ("2002:a00:1::1", "private"),
    ("2002:a9fe:a9fe::1", "link-local"),
    ("2002:0:0::1", "unspecified"),
    ("2002:808:808::1", "external"),
    # Teredo: server, then the client's address inverted (127.0.0.1, 10.0.0.1, 8.8.8.8)
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "external"),
    # plain IPv6, unchanged
    ("fd00::1", "private"),
    ("fe80::1", "link-local"),
    ("2001:db8::1", "reserved"),
    ("2606:4700:4700::1111", "external"),
]


@pytest.mark.parametrize(("address", "kind"), TRANSITIONS)
def test_an_ipv6_transition_address_is_the_ipv4_address_it_carries(address: str, kind: str) -> None:
    import ipaddress

    from floorless.webhooks.guard import kind_of

    ip = ipaddress.ip_address(address)
    assert kind_of(ip) == kind
    assert HostRules(["external"]).address_allowed(ip) is (kind == "external")
    assert HostRules(["private"]).address_allowed(ip) is (kind == "private")
    assert HostRules(["loopback"]).address_allowed(ip) is (kind == "loopback")
    assert HostRules(["*"]).address_allowed(ip)


def test_a_network_listed_allows_either_form_of_an_address() -> None:
    import ipaddress

    nat64 = ipaddress.ip_address("64:ff9b:1::808:808")
    assert HostRules(["64:ff9b:1::/48"]).address_allowed(nat64)
    assert not HostRules(["external", "private", "loopback"]).address_allowed(nat64)
    assert HostRules(["127.0.0.0/8"]).address_allowed(ipaddress.ip_address("2002:7f00:1::1"))
    assert not HostRules(["10.0.0.0/8"]).address_allowed(ipaddress.ip_address("::ffff:0:7f00:1"))


def test_host_rules() -> None:
    import ipaddress

    rules = HostRules(["external", "10.1.0.0/16", "*.hooks.test"])
    assert rules.address_allowed(ipaddress.ip_address("93.184.216.34"))
    assert rules.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert not rules.address_allowed(ipaddress.ip_address("10.2.0.1"))
    assert not rules.address_allowed(ipaddress.ip_address("100.64.0.1"))
    assert not rules.address_allowed(ipaddress.ip_address("fe80::1"))
    assert not rules.address_allowed(ipaddress.ip_address("ff02::1"))
    assert rules.name_allowed("ci.hooks.test") and not rules.name_allowed("hooks.test.evil")
    assert HostRules(["private"]).address_allowed(ipaddress.ip_address("fd00::1"))
    assert HostRules(["*"]).address_allowed(ipaddress.ip_address("127.0.0.1"))
    assert branch_matches("{main,release/*}", "release/2") and not branch_matches("main", "mainx")
    assert branch_matches("", "anything") and branch_matches("*", "a/b")


# -- the API --------------------------------------------------------------------------------------


def test_hooks_through_the_api_as_pyforgejo_reads_them(site: Site) -> None:
    client = api(site.http, site.token)
    made = client.repository.repo_create_hook(
        "ann", "plans", type="forgejo",
        config={"url": "https://ci.example.org/hook", "content_type": "json", "secret": "x"},
        events=["push", "pull_request"], branch_filter="main", active=True,
    )  # fmt: skip
    assert made.type == "forgejo" and made.active and made.events == ["push", "pull_request"]
    assert made.config == {
        "url": "https://ci.example.org/hook", "content_type": "json", "http_method": "post"
    }  # fmt: skip
    assert made.id is not None
    listed = client.repository.repo_list_hooks("ann", "plans")
    assert [h.id for h in listed] == [made.id]
    edited = client.repository.repo_edit_hook(
        "ann", "plans", made.id, active=False, config={"url": "http://ci.example.org/other"}
    )
    assert not edited.active and edited.config is not None
    assert edited.config["url"] == "http://ci.example.org/other"
    got = client.repository.repo_get_hook("ann", "plans", made.id)
    assert got.branch_filter == "main" and "secret" not in json.dumps(got.config)
    # not active unless asked, as Forgejo
    quiet = client.repository.repo_create_hook(
        "ann",
        "plans",
        type="gitea",
        config={"url": "https://x.example.org", "content_type": "form"},
    )
    assert quiet.active is False and quiet.events == ["push"]
    client.repository.repo_delete_hook("ann", "plans", made.id)
    with pytest.raises(ApiError) as gone:
        client.repository.repo_get_hook("ann", "plans", made.id)
    assert gone.value.status_code == 404

    # an organisation's, for its owners
    site.http.post(
        "/api/v1/orgs", headers={"Authorization": f"token {site.token}"}, json={"username": "team"}
    ).raise_for_status()
    org_hook = client.organization.org_create_hook(
        "team", type="forgejo", config={"url": "https://ci.example.org/t", "content_type": "json"},
        events=["push"], active=True,
    )  # fmt: skip
    assert [h.id for h in client.organization.org_list_hooks("team")] == [org_hook.id]
    team_repo = site.forge.registry.create("team", "app")
    org_id = _owner(site.forge, org_hook.id or 0)[1]
    assert [h.id for h in site.forge.webhooks.targets(team_repo.id, org_id)] == [org_hook.id]
    ben = {"Authorization": f"token {token_for(site.http, 'ben')}"}
    assert site.http.get("/api/v1/orgs/team/hooks", headers=ben).status_code == 403
    assert site.http.get("/api/v1/orgs/nobody/hooks", headers=ben).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"type": "forgejo", "config": {"url": "ftp://example.org/", "content_type": "json"}},
        {"type": "forgejo", "config": {"url": "example.org", "content_type": "json"}},
        {"type": "forgejo", "config": {"url": "https://example.org", "content_type": "xml"}},
        {"type": "forgejo", "config": {"url": "https://example.org"}},
        {"type": "forgejo", "config": {"url": "https://example.org", "content_type": 1}},
        {"type": "forgejo", "config": "https://example.org"},
        {"type": "slack", "config": {"url": "https://example.org", "content_type": "json"}},
        {"config": {"url": "https://example.org", "content_type": "json"}},
        {"type": "forgejo", "config": {"url": "https://e.org", "content_type": "json"},
         "events": ["push", "nonsense"]},
        {"type": "forgejo", "config": {"url": "https://e.org", "content_type": "json"},
         "events": "push"},
        {"type": "forgejo", "config": {"url": "https://e.org", "content_type": "json"},
         "active": "yes"},
        {"type": "forgejo", "config": {"url": "https://e.org\r\nX: y", "content_type": "json"}},
    ],
)  # fmt: skip
def test_bad_hooks_are_422_and_write_nothing(site: Site, body: dict[str, Any]) -> None:
    headers = {"Authorization": f"token {site.token}"}
    answer = site.http.post("/api/v1/repos/ann/plans/hooks", headers=headers, json=body)
    assert answer.status_code == 422, answer.text
    error_of(answer)
    assert site.http.get("/api/v1/repos/ann/plans/hooks", headers=headers).json() == []


def test_only_administrators_reach_hooks_and_private_ones_are_missing(site: Site) -> None:
    made = site.hook("ann/plans", config={"url": "https://e.org", "content_type": "json"})
    ben = {"Authorization": f"token {token_for(site.http, 'ben')}"}
    paths = ["/api/v1/repos/ann/plans/hooks", f"/api/v1/repos/ann/plans/hooks/{made['id']}"]
    for path in paths:
        assert site.http.get(path, headers=ben).status_code == 403  # public: may read, not admin
        assert site.http.get(path).status_code == 401
    site.forge.lifecycle.set_private(site.forge.registry.get("ann", "plans"), True)
    for path in [*paths, paths[1] + "/tests"]:
        method = "POST" if path.endswith("/tests") else "GET"
        hidden = site.http.request(method, path, headers=ben)
        missing = site.http.request(method, path.replace("plans", "nothing"), headers=ben)
        assert hidden.status_code == missing.status_code == 404
        assert error_of(hidden).replace("plans", "") == error_of(missing).replace("nothing", "")
    owner = {"Authorization": f"token {site.token}"}
    assert site.http.get(paths[1].replace(str(made["id"]), "999"), headers=owner).status_code == 404
    assert site.http.get(paths[1].replace(str(made["id"]), "x"), headers=owner).status_code == 404


# -- the web settings -----------------------------------------------------------------------------


def test_the_settings_pages_add_list_show_deliveries_and_redeliver(
    site: Site, receiver: Receiver
) -> None:
    from falcon import testing
    from support.accounts import Browser

    browser = Browser(testing.TestClient(create_app(site.forge)))
    browser.sign_in("ann")
    fields = {
        "url": receiver.url + "/web",
        "content_type": "json",
        "http_method": "POST",
        "secret": "web-secret",
        "branch_filter": "",
        "event-push": "on",
        "active": "on",
    }
    # without the form's token nothing is written
    refused = browser.post("/ann/plans/settings/hooks", {"action": "add", **fields}, csrf="x")
    assert refused.status_code == 403 and site.forge.webhooks.hooks(_repo_id(site)) == []
    added = browser.post("/ann/plans/settings/hooks", {"action": "add", **fields})
    assert added.status_code == 303
    (hook,) = site.forge.webhooks.hooks(_repo_id(site))
    assert added.headers["location"].endswith(f"/ann/plans/settings/hooks/{hook.id}")
    assert (hook.url, hook.events, hook.secret, hook.active) == (
        receiver.url + "/web", ("push",), "web-secret", True
    )  # fmt: skip
    listing = browser.get("/ann/plans/settings/hooks").text
    assert receiver.url + "/web" in listing and "web-secret" not in listing
    bad = browser.post("/ann/plans/settings/hooks", {"action": "add", **fields, "url": "ftp://x"})
    assert bad.status_code == 400 and "http:// or https://" in bad.text
    assert len(site.forge.webhooks.hooks(_repo_id(site))) == 1

    receiver.failures["/web"] = 1
    site.forge.webhooks.emit([hook], "push", {"ref": "refs/heads/main", "marker": "<b>x</b>"})
    wait_for(lambda: states(site.forge, hook.id)[0][0] == "delivered")
    page = browser.get(f"/ann/plans/settings/hooks/{hook.id}").text
    (delivery,) = site.forge.webhooks.deliveries(hook)
    assert delivery.uuid in page and "delivered" in page and "2 attempts" in page
    assert "X-Forgejo-Event: push" in page and "X-Seen: yes" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # the payload, escaped
    assert "the receiver answered 500" not in page  # the last attempt's outcome is shown
    redone = browser.post(
        f"/ann/plans/settings/hooks/{hook.id}",
        {"action": "redeliver", "delivery": str(delivery.id)},
    )
    assert redone.status_code == 303
    wait_for(lambda: len(receiver.at("/web")) == 3)
    first, again = receiver.at("/web")[1], receiver.at("/web")[2]
    assert first.body == again.body
    assert first.headers["X-Forgejo-Delivery"] != again.headers["X-Forgejo-Delivery"]
    assert again.headers["X-Forgejo-Signature"] == signed("web-secret", again.body)

    # edited (the secret kept when left empty), then deleted
    edit = {**fields, "secret": "", "url": receiver.url + "/moved", "action": "edit"}
    assert browser.post(f"/ann/plans/settings/hooks/{hook.id}", edit).status_code == 303
    changed = site.forge.webhooks.hook(hook.id, hook.repo_id, None)
    assert (changed.url, changed.secret) == (receiver.url + "/moved", "web-secret")
    gone = browser.post(f"/ann/plans/settings/hooks/{hook.id}", {"action": "delete"})
    assert gone.status_code == 303 and site.forge.webhooks.hooks(_repo_id(site)) == []
    assert browser.get(f"/ann/plans/settings/hooks/{hook.id}").status_code == 404


def _repo_id(site: Site) -> int:
    return site.forge.registry.get("ann", "plans").id


# -- issues and pull requests ---------------------------------------------------------------------


def test_issue_and_pull_request_events_from_web_and_api_alike(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/i", "content_type": "json"},
        events=["issues", "issue_comment", "pull_request", "pull_request_sync"],
    )
    ann = site.forge.accounts.get("ann")
    assert ann is not None
    headers = {"Authorization": f"token {site.token}"}
    # an issue opened through the API, commented on, closed and reopened by the domain layer
    opened = site.http.post(
        "/api/v1/repos/ann/plans/issues", headers=headers, json={"title": "Crash", "body": "x"}
    )
    assert opened.status_code == 201, opened.text
    issue = site.forge.issues.get("ann", "plans", 1)
    site.forge.issues.comment(issue, ann, "Seen it")
    site.forge.issues.close(issue, ann, "completed")
    site.forge.issues.reopen(issue, ann)
    wait_for(lambda: len(receiver.at("/i")) == 4)
    wait_for(site.forge.webhooks.idle)
    seen = sorted(
        (r.headers["X-Forgejo-Event"], r.headers["X-Forgejo-Event-Type"], r.json["action"])
        for r in receiver.at("/i")
    )
    assert seen == [
        ("issue_comment", "issue_comment", "created"),
        ("issues", "issues", "closed"),
        ("issues", "issues", "opened"),
        ("issues", "issues", "reopened"),
    ]
    comment = next(r.json for r in receiver.at("/i") if r.json["action"] == "created")
    assert comment["comment"]["body"] == "Seen it" and comment["is_pull"] is False
    assert comment["issue"]["number"] == 1 and comment["sender"]["login"] == "ann"
    first = next(r.json for r in receiver.at("/i") if r.json["action"] == "opened")
    assert (first["number"], first["issue"]["title"]) == (1, "Crash")
    assert first["repository"]["full_name"] == "ann/plans"

    # a pull request: opened through the API, its head pushed to, merged
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    _commit(work, "First", 1_700_000_000)
    remote = site.url.replace("http://", f"http://ann:{site.token}@") + "/ann/plans.git"
    git(work, "push", "-q", remote, "main")
    git(work, "checkout", "-q", "-b", "feature")
    (work / "b.txt").write_text("b\n")
    _commit(work, "Feature", 1_700_000_100)
    git(work, "push", "-q", remote, "feature")
    made = site.http.post(
        "/api/v1/repos/ann/plans/pulls",
        headers=headers,
        json={"head": "feature", "base": "main", "title": "Add b"},
    )
    assert made.status_code == 201, made.text
    wait_for(lambda: len(receiver.at("/i")) == 5)
    (work / "b.txt").write_text("b, again\n")
    head = _commit(work, "Feature, again", 1_700_000_200)
    git(work, "push", "-q", remote, "feature")
    wait_for(lambda: len(receiver.at("/i")) == 6)
    synced = receiver.at("/i")[5]
    assert (synced.headers["X-Forgejo-Event"], synced.headers["X-Forgejo-Event-Type"]) == (
        "pull_request", "pull_request_sync"
    )  # fmt: skip
    assert synced.json["action"] == "synchronized"
    assert synced.json["pull_request"]["head"]["sha"] == head
    wait_for(lambda: site.forge.pulls.get("ann", "plans", 2).check_state == "mergeable")
    merged = site.http.post(
        "/api/v1/repos/ann/plans/pulls/2/merge", headers=headers, json={"Do": "merge"}
    )
    assert merged.status_code == 200, merged.text
    wait_for(lambda: len(receiver.at("/i")) == 7)
    wait_for(site.forge.webhooks.idle)
    pulls = [r.json for r in receiver.at("/i") if r.headers["X-Forgejo-Event"] == "pull_request"]
    assert [(p["action"], p["number"]) for p in pulls] == [
        ("opened", 2), ("synchronized", 2), ("closed", 2)
    ]  # fmt: skip
    assert pulls[0]["pull_request"]["title"] == "Add b"
    assert pulls[2]["pull_request"]["merged"] is True


def test_review_and_fork_events_and_the_log_kept_short(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    import floorless.webhooks.delivery as webhooks

    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/r", "content_type": "json"},
        events=["pull_request_review", "fork"],
    )
    ann, ben = site.forge.accounts.get("ann"), site.forge.accounts.get("ben")
    assert ann is not None and ben is not None
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    _commit(work, "First", 1_700_000_000)
    remote = site.url.replace("http://", f"http://ann:{site.token}@") + "/ann/plans.git"
    git(work, "push", "-q", remote, "main")
    git(work, "checkout", "-q", "-b", "feature")
    (work / "b.txt").write_text("b\n")
    head = _commit(work, "Feature", 1_700_000_100)
    git(work, "push", "-q", remote, "feature")
    pull = site.forge.pulls.create(
        "ann", "plans", ann, "Add b", "", "main", ("ann", "plans", "feature"), head
    )
    site.forge.reviews.submit(pull, ben, "approve", "Looks good")
    site.forge.reviews.submit(pull, ben, "request_changes", "But rename it")
    ben_token = token_for(site.http, "ben")
    forked = site.http.post(
        "/api/v1/repos/ann/plans/forks", headers={"Authorization": f"token {ben_token}"}, json={}
    )
    assert forked.status_code == 202, forked.text
    wait_for(lambda: len(receiver.at("/r")) == 3)
    wait_for(site.forge.webhooks.idle)
    got = receiver.at("/r")
    reviews = sorted(
        (
            r.headers["X-Forgejo-Event"],
            r.headers["X-Forgejo-Event-Type"],
            r.json["review"]["content"],
        )
        for r in got
        if r.json.get("review")
    )
    assert reviews == [
        ("pull_request_approved", "pull_request_review_approved", "Looks good"),
        ("pull_request_rejected", "pull_request_review_rejected", "But rename it"),
    ]
    (fork,) = [r.json for r in got if r.headers["X-Forgejo-Event"] == "fork"]
    assert (fork["forkee"]["full_name"], fork["repo"]["full_name"]) == ("ann/plans", "ben/plans")
    assert fork["sender"]["login"] == "ben"

    # the log keeps the newest finished deliveries of each hook
    hook = site.forge.webhooks.hooks(_repo_id(site))[0]
    before = len(site.forge.webhooks.deliveries(hook, limit=1000))
    old, webhooks.KEPT_DELIVERIES = webhooks.KEPT_DELIVERIES, 2
    try:
        site.forge.webhooks.emit([hook], "fork", {"n": 1})
        wait_for(site.forge.webhooks.idle)
        site.forge.webhooks.emit([hook], "fork", {"n": 2})
    finally:
        webhooks.KEPT_DELIVERIES = old
    kept = site.forge.webhooks.deliveries(hook, limit=1000)
    assert before == 3  # the three events above; then only the newest two
    assert [json.loads(d.payload) for d in kept] == [{"n": 2}, {"n": 1}]


def test_branches_moved_through_the_api_are_pushes_too(site: Site, receiver: Receiver) -> None:
    import base64

    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/api", "content_type": "json"},
        events=["push", "create", "delete"],
    )
    headers = {"Authorization": f"token {site.token}"}
    first = site.http.post(
        "/api/v1/repos/ann/plans/contents/README.md",
        headers=headers,
        json={"content": base64.b64encode(b"hello\n").decode(), "message": "Start"},
    )
    assert first.status_code == 201, first.text
    sha = first.json()["commit"]["sha"]
    made = site.http.post(
        "/api/v1/repos/ann/plans/branches", headers=headers, json={"new_branch_name": "topic"}
    )
    assert made.status_code == 201, made.text
    gone = site.http.delete("/api/v1/repos/ann/plans/branches/topic", headers=headers)
    assert gone.status_code == 204, gone.text
    wait_for(lambda: len(receiver.at("/api")) == 5)
    wait_for(site.forge.webhooks.idle)
    seen = sorted((r.headers["X-Forgejo-Event"], r.json["ref"]) for r in receiver.at("/api"))
    assert seen == [
        ("create", "main"),
        ("create", "topic"),
        ("delete", "topic"),
        ("push", "refs/heads/main"),
        ("push", "refs/heads/topic"),
    ]
    push = next(r.json for r in receiver.at("/api") if r.json["ref"] == "refs/heads/main")
    assert push["after"] == sha and push["commits"][0]["added"] == ["README.md"]
    assert push["pusher"]["login"] == "ann"
