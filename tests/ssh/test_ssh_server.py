"""git over SSH with OpenSSH's own client against the built-in server of a real
``floorless serve``: clone (v0, v2), fetch, push (new branch, empty repository, AGit), a
person's keys and deploy keys, what a private repository looks like to an outsider, a key
removed, the greeting of ``ssh -T``, the processes a session costs, and bad commands."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from support.forges import patience
from support.githttp import commit, git, rev
from support.serving import free_port, serving
from support.sshing import (
    SshSite,
    create_people,
    log_since,
    make_key,
    missing_to,
    read_only_key_may_not_push,
)

pytestmark = pytest.mark.network


Site = SshSite


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ssh")
    port = free_port()
    config = root / "floorless.toml"  # webhooks to a receiver on loopback, sent at once
    config.write_text(
        'webhook_allowed_hosts = ["loopback"]\nwebhook_timeout = 2.0\n'
        "webhook_retry_seconds = 0.05\n"
    )
    extra = ("--ssh-port", str(port), "--config", str(config))
    with serving(root / "repos", root / "data", *extra) as server:
        create_people(server, "alice", "bob", "carol")
        keys = root / "keys"
        for name in ("alice", "bob", "carol", "reader", "writer"):
            make_key(keys, name)
        for name in ("alice", "bob", "carol"):
            server.admin("key", "add", name, "--title", f"{name}'s laptop",
                         stdin=(keys / f"{name}.pub").read_text())  # fmt: skip
        site = Site(server, port, keys, root / "known_hosts")
        seed = root / "seed"
        git("init", "-q", str(seed))
        for n in range(3):
            commit(seed, "README.md", f"# project\n\nversion {n}\n", f"version {n}")
        for name, private in (("alice/pub", False), ("alice/priv", True), ("alice/empty", False)):
            server.admin("repo", "create", name, *(["--private"] if private else []))
        alice = site.as_("alice")
        for name in ("alice/pub", "alice/priv"):
            alice.git("push", "-q", alice.url(name), "main", cwd=seed)
        server.admin("key", "deploy", "alice/pub", "--title", "ci reader",
                     stdin=(keys / "reader.pub").read_text())  # fmt: skip
        server.admin("key", "deploy", "alice/priv", "--title", "ci writer", "--write",
                     stdin=(keys / "writer.pub").read_text())  # fmt: skip
        yield site


def test_ssh_t_greets_the_person_by_name(site: Site) -> None:
    answer = site.as_("bob").ssh()
    assert answer.returncode == 1
    assert b'Hello, bob! You are signed in with the key "bob\'s laptop"' in answer.stdout
    deploy = site.as_("reader").ssh()
    assert b"deploy key 'ci reader'" in deploy.stdout and b"read-only" in deploy.stdout


@pytest.mark.parametrize("version", ["0", "2"])
def test_clone_in_both_protocol_versions(site: Site, tmp_path: Path, version: str) -> None:
    bob = site.as_("bob")
    offset = site.server.log.stat().st_size
    traced = bob.git("clone", bob.url("alice/pub"), str(tmp_path / "c"), version=version)
    assert traced.returncode == 0
    assert rev(tmp_path / "c" / ".git", "HEAD") == rev(site.bare("alice/pub"), "main")
    # one git process for the session, none to sign in
    text = log_since(site.server, offset, "git-upload-pack")
    assert re.search(r"git-upload-pack '/?alice/pub.git': exit 0 in [0-9.]+ s, processes: 1 "
                     r"\(signing in: 0\)", text), text  # fmt: skip


def test_fetch_sees_a_push_at_once(site: Site, tmp_path: Path) -> None:
    alice, bob = site.as_("alice"), site.as_("bob")
    alice.git("clone", "-q", alice.url("alice/pub"), str(tmp_path / "a"))
    bob.git("clone", "-q", bob.url("alice/pub"), str(tmp_path / "b"))
    offset = site.server.log.stat().st_size
    new = commit(tmp_path / "a", "fetched.txt", "new\n", "for the fetch")
    alice.git("push", "-q", "origin", "main", cwd=tmp_path / "a")
    text = log_since(site.server, offset, "git-receive-pack")
    assert re.search(r"git-receive-pack .*: exit 0 .*processes: 1 \(signing in: 0\)", text), text
    assert rev(site.bare("alice/pub"), "main") == new
    # the pages know of it before the push returned
    page = httpx.get(f"{site.server.url}/alice/pub/src/branch/main/fetched.txt")
    assert page.status_code == 200
    bob.git("fetch", "-q", "origin", cwd=tmp_path / "b")
    assert rev(tmp_path / "b" / ".git", "origin/main") == new


def test_push_into_an_empty_repository(site: Site, tmp_path: Path) -> None:
    alice = site.as_("alice")
    work = tmp_path / "w"
    git("init", "-q", str(work))
    first = commit(work, "a.txt", "a\n", "the first")
    pushed = alice.git("push", alice.url("alice/empty"), "main", cwd=work)
    assert "[new branch]" in pushed.stderr
    assert rev(site.bare("alice/empty"), "HEAD") == first
    assert httpx.get(f"{site.server.url}/alice/empty").status_code == 200


def test_a_reader_proposes_by_agit_but_does_not_push(site: Site, tmp_path: Path) -> None:
    bob = site.as_("bob")
    work = tmp_path / "b"
    bob.git("clone", "-q", bob.url("alice/pub"), str(work))
    before = rev(site.bare("alice/pub"), "main")
    commit(work, "idea.txt", "an idea\n", "An idea over SSH")
    refused = bob.git("push", "origin", "main", cwd=work, check=False)
    assert refused.returncode != 0
    assert "you may read alice/pub but not push to it" in refused.stderr
    assert rev(site.bare("alice/pub"), "main") == before
    proposed = bob.git("push", "origin", "HEAD:refs/for/main/ssh-idea", cwd=work)
    assert re.search(r"/alice/pub/pulls/\d+", proposed.stderr), proposed.stderr
    pulls = httpx.get(f"{site.server.url}/api/v1/repos/alice/pub/pulls").json()
    assert any(p["title"] == "An idea over SSH" for p in pulls)


def test_a_read_only_deploy_key_clones_and_may_not_push(site: Site, tmp_path: Path) -> None:
    read_only_key_may_not_push(site, "reader", "alice/pub", tmp_path / "r")


def test_a_deploy_key_reaches_its_repository_alone(site: Site, tmp_path: Path) -> None:
    writer = site.as_("writer")
    work = tmp_path / "w"
    writer.git("clone", "-q", writer.url("alice/priv"), str(work))
    new = commit(work, "deploy.txt", "deployed\n", "by the deploy key")
    writer.git("push", "-q", "origin", "main", cwd=work)
    assert rev(site.bare("alice/priv"), "main") == new
    elsewhere = writer.git("ls-remote", writer.url("alice/pub"), check=False)
    missing = writer.git("ls-remote", writer.url("alice/no-such"), check=False)
    assert elsewhere.returncode == missing.returncode != 0
    assert elsewhere.stderr == missing.stderr and "repository not found" in missing.stderr


def test_a_private_repository_is_missing_to_an_outsider(site: Site, tmp_path: Path) -> None:
    missing_to(site, "carol", "alice/priv", ("git-upload-pack", "git-receive-pack"))
    carol = site.as_("carol")
    assert carol.git("ls-remote", carol.url("alice/pub")).returncode == 0


def test_a_removed_key_stops_at_once(site: Site, tmp_path: Path) -> None:
    make_key(site.keys, "spare")
    added = site.server.admin("key", "add", "bob", stdin=(site.keys / "spare.pub").read_text())
    fingerprint = added.split()[0]
    spare = site.as_("spare")
    assert spare.git("ls-remote", spare.url("alice/pub")).returncode == 0
    listed = site.server.admin("key", "list", "bob")
    assert fingerprint in listed and "spare@tests" in listed
    site.server.admin("key", "remove", fingerprint)
    refused = spare.git("ls-remote", spare.url("alice/pub"), check=False)
    assert refused.returncode != 0 and "Permission denied (publickey)" in refused.stderr


def test_an_object_no_ref_reaches_is_not_served(site: Site, tmp_path: Path) -> None:
    """As over HTTP: a commit dropped by a force-push is not fetched by id."""
    alice = site.as_("alice")
    work = tmp_path / "a"
    alice.git("clone", "-q", alice.url("alice/pub"), str(work))
    alice.git("checkout", "-q", "-b", "secret", cwd=work)
    secret = commit(work, "secret.txt", "a secret\n", "a secret")
    alice.git("push", "-q", "origin", "secret", cwd=work)
    alice.git("push", "-q", "origin", ":secret", cwd=work)
    for version in ("0", "2"):
        fresh = tmp_path / f"f{version}"
        git("init", "-q", str(fresh))
        fetched = alice.git(
            "fetch", alice.url("alice/pub"), secret, cwd=fresh, check=False, version=version
        )
        assert fetched.returncode != 0 and f"not our ref {secret}" in fetched.stderr


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["ls", "-la"], "floorless serves git over SSH and nothing else"),
        (["git-upload-archive", "'alice/pub.git'"], "nothing else"),
        (["git-upload-pack", "'alice/pub.git"], "nothing else"),  # an unclosed quote
        (["git-upload-pack", "'../../etc/passwd'"], "is not a repository"),
        (["git-upload-pack", "'alice/../alice/pub.git'"], "is not a repository"),
        (["git-upload-pack", "'alice/my repo.git'"], "is not a repository"),
        (["git-upload-pack", '"alice/pub\'.git"'], "is not a repository"),
        (["git-upload-pack", "'alice/pub.git'", "extra"], "nothing else"),
        (["git-receive-pack", "'alice'"], "is not a repository"),
    ],
)
def test_bad_commands_get_a_clear_answer(site: Site, command: list[str], says: str) -> None:
    answer = site.as_("bob").ssh(*command)
    assert answer.returncode == 1 and answer.stdout == b""
    assert answer.stderr.startswith(b"floorless: ") and says.encode() in answer.stderr


def test_shells_subsystems_and_forwarding_are_refused(site: Site) -> None:
    bob = site.as_("bob")
    sftp = subprocess.run(
        ["ssh", *bob.options(), "-s", "git@127.0.0.1", "sftp"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert sftp.returncode == 255 and b"subsystem request failed" in sftp.stderr
    forwarded = subprocess.run(
        ["ssh", *bob.options(), "-o", "ExitOnForwardFailure=yes", "-L",
         f"127.0.0.1:{free_port()}:127.0.0.1:{site.server.port}", "git@127.0.0.1", "true"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert forwarded.returncode != 0
    remote = subprocess.run(
        ["ssh", *bob.options(), "-o", "ExitOnForwardFailure=yes", "-R",
         f"127.0.0.1:{free_port()}:127.0.0.1:{site.server.port}", "git@127.0.0.1"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert remote.returncode != 0 and b"forwarding failed" in remote.stderr
    # and the server goes on serving
    assert bob.git("ls-remote", bob.url("alice/pub")).returncode == 0


def _api(site: Site, method: str, path: str, body: dict[str, object]) -> httpx.Response:
    token = site.server.admin("token", "create", "alice", "--scope", "write")
    return httpx.request(
        method,
        f"{site.server.url}/api/v1{path}",
        json=body,
        headers={"Authorization": f"token {token}"},
        timeout=30,
    )


def test_a_push_over_ssh_is_governed_as_over_http(site: Site, tmp_path: Path) -> None:
    """Branch protection, push options, a pull request's head moved by a push, and the push's
    webhook: the same as a push over HTTP."""
    got: list[dict[str, object]] = []

    class Receiver(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append({"event": self.headers.get("X-Forgejo-Event"), **json.loads(body)})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        hook = _api(site, "POST", "/repos/alice/pub/hooks", {
            "type": "forgejo", "active": True, "events": ["push", "create", "delete"],
            "config": {"url": f"http://127.0.0.1:{receiver.server_port}/", "content_type": "json"},
        })  # fmt: skip
        assert hook.status_code == 201, hook.text
        alice = site.as_("alice")
        work = tmp_path / "a"
        alice.git("clone", "-q", alice.url("alice/pub"), str(work))
        # a protected branch refuses the push, with the rule's reason, as over HTTP
        alice.git("push", "-q", "origin", "HEAD:refs/heads/guarded", cwd=work)
        rule = {"rule_name": "guarded", "enable_push": False, "apply_to_admins": True}
        assert _api(site, "POST", "/repos/alice/pub/branch_protections", rule).status_code == 201
        commit(work, "guarded.txt", "no\n", "to a guarded branch")
        refused = alice.git("push", "origin", "HEAD:refs/heads/guarded", cwd=work, check=False)
        assert refused.returncode != 0 and "guarded" in refused.stderr
        assert "protected" in refused.stderr, refused.stderr
        # AGit with push options: a pull request titled by them; a second push moves its head
        opened = alice.git(
            "push", "origin", "HEAD:refs/for/main", "-o", "topic=opts", "-o", "title=By options",
            cwd=work,
        )  # fmt: skip
        number = int(re.search(r"/alice/pub/pulls/(\d+)", opened.stderr).group(1))  # type: ignore[union-attr]
        pulls = f"{site.server.url}/api/v1/repos/alice/pub/pulls/{number}"
        assert httpx.get(pulls).json()["title"] == "By options"
        moved = commit(work, "guarded.txt", "again\n", "a second proposal")
        alice.git("push", "-q", "origin", "HEAD:refs/for/main/opts", cwd=work)
        assert httpx.get(pulls).json()["head"]["sha"] == moved
        # a plain push's webhook names its pusher and its commit
        pushed = commit(work, "hooked.txt", "hooked\n", "for the webhook")
        alice.git("push", "-q", "origin", "HEAD:refs/heads/hooked", cwd=work)
        deadline = time.monotonic() + patience(30)
        while not any(e.get("ref") == "refs/heads/hooked" for e in got):
            assert time.monotonic() < deadline, got
            time.sleep(0.05)
        event = next(e for e in got if e.get("ref") == "refs/heads/hooked")
        assert event["event"] == "push" and event["after"] == pushed
        assert event["pusher"]["login"] == "alice"  # type: ignore[index]
        # a tag pushed and deleted: its create and delete, as over HTTP
        alice.git("tag", "ssh-v1", cwd=work)
        alice.git("push", "-q", "origin", "ssh-v1", cwd=work)
        alice.git("push", "-q", "--delete", "origin", "ssh-v1", cwd=work)
        deadline = time.monotonic() + patience(30)
        while not any(e["event"] == "delete" and e.get("ref") == "ssh-v1" for e in got):
            assert time.monotonic() < deadline, got
            time.sleep(0.05)
        tagged = [(e["event"], e.get("ref_type")) for e in got if e.get("ref") == "ssh-v1"]
        assert sorted(tagged) == [("create", "tag"), ("delete", "tag")]
        made = next(e for e in got if e["event"] == "create" and e.get("ref") == "ssh-v1")
        assert made["sha"] == pushed and made["sender"]["login"] == "alice"  # type: ignore[index]
    finally:
        receiver.shutdown()
        receiver.server_close()
