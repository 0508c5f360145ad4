"""git over OpenSSH's own server: a real ``sshd`` this test starts on loopback with a config
of its own, asking ``floorless ssh authorized-keys`` for the keys and running ``floorless ssh
serve`` for each session, which relays it to a real ``floorless serve``. Clone (v0, v2),
fetch, push (also into an empty repository), deploy keys, a private repository, a key
removed and the greeting: the same answers as the built-in server gives."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.forges import patience
from support.githttp import commit, git, rev
from support.serving import Server, database_options, floorless_command, free_port, serving
from support.sshing import (
    SshSite,
    create_people,
    make_key,
    missing_to,
    read_only_key_may_not_push,
    wait_for_port,
)

pytestmark = pytest.mark.network

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


Site = SshSite


def _sshd_config(root: Path, port: int, server: Server) -> Path:
    host_key = make_key(root / "sshd", "host_key")
    locations = ["--data", str(server.data), *database_options(server.data)]
    # sshd wants the command's own path (its first word) owned by root and in directories only
    # root may write: /usr/bin/env is, wherever this checkout lies
    command = " ".join(
        ["/usr/bin/env", floorless_command(), "ssh", "authorized-keys", *locations,
         "--user", "%u", "--key", "%k"]
    )  # fmt: skip
    config = root / "sshd" / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                "PidFile none",
                "UsePAM no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "AuthorizedKeysFile none",
                f"AuthorizedKeysCommand {command}",
                f"AuthorizedKeysCommandUser {getpass.getuser()}",
                "PermitRootLogin prohibit-password",
                "AcceptEnv GIT_PROTOCOL",
                "StrictModes no",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    return config


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if not os.path.exists(SSHD):
        pytest.fail("sshd is missing: scripts/install-test-deps.sh installs openssh-server")
    root = tmp_path_factory.mktemp("openssh")
    with serving(root / "repos", root / "data") as server:  # no built-in SSH server
        create_people(server, "alice", "bob", "carol")
        keys = root / "keys"
        for name in ("alice", "bob", "carol", "reader"):
            make_key(keys, name)
            if name != "reader":
                server.admin("key", "add", name, stdin=(keys / f"{name}.pub").read_text())
        for name, private in (("alice/pub", False), ("alice/priv", True), ("alice/empty", False)):
            server.admin("repo", "create", name, *(["--private"] if private else []))
        server.admin("key", "deploy", "alice/pub", stdin=(keys / "reader.pub").read_text())
        port = free_port()
        config = _sshd_config(root, port, server)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        log = root / "sshd.log"
        with log.open("wb") as out:
            sshd = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT
            )
        try:
            wait_for_port(port)
            site = Site(server, port, keys, root / "known_hosts", user=getpass.getuser())
            seed = root / "seed"
            git("init", "-q", str(seed))
            commit(seed, "README.md", "# over OpenSSH\n", "first")
            alice = site.as_("alice")
            for name in ("alice/pub", "alice/priv"):
                pushed = alice.git("push", "-q", alice.url(name), "main", cwd=seed, check=False)
                assert pushed.returncode == 0, pushed.stderr + log.read_text(errors="replace")
            yield site
        finally:
            sshd.terminate()
            sshd.wait(timeout=30)


def test_authorized_keys_lines_force_the_relay(site: Site) -> None:
    key = (site.keys / "bob.pub").read_text().split()
    listed = subprocess.run(
        [floorless_command(), "ssh", "authorized-keys", "--data", str(site.server.data),
         *database_options(site.server.data), "--user", "git", "--key", key[1]],
        capture_output=True, text=True, timeout=patience(60), check=True,
    ).stdout.splitlines()  # fmt: skip
    assert len(listed) == 1
    assert re.fullmatch(
        r'command="\S+ ssh serve --data \S+ (--database \S+ )?key-\d+",restrict,no-port-forwarding,'
        r"no-X11-forwarding,no-agent-forwarding,no-pty,no-user-rc " + re.escape(" ".join(key[:2])),
        listed[0],
    ), listed[0]


def test_greeting(site: Site) -> None:
    answer = site.as_("bob").ssh()
    assert answer.returncode == 1 and b"Hello, bob!" in answer.stdout


@pytest.mark.parametrize("version", ["0", "2"])
def test_clone_fetch_and_push(site: Site, tmp_path: Path, version: str) -> None:
    alice = site.as_("alice")
    work = tmp_path / "a"
    alice.git("clone", "-q", alice.url("alice/pub"), str(work), version=version)
    assert rev(work / ".git", "HEAD") == rev(site.bare("alice/pub"), "main")
    new = commit(work, f"v{version}.txt", "pushed\n", f"over OpenSSH, v{version}")
    alice.git("push", "-q", "origin", "main", cwd=work, version=version)
    assert rev(site.bare("alice/pub"), "main") == new
    # the forge took it in: the page is there at once
    page = httpx.get(f"{site.server.url}/alice/pub/src/branch/main/v{version}.txt")
    assert page.status_code == 200
    other = tmp_path / "b"
    bob = site.as_("bob")
    bob.git("clone", "-q", bob.url("alice/pub"), str(other), version=version)
    bob.git("fetch", "-q", "origin", cwd=other, version=version)
    assert rev(other / ".git", "origin/main") == new


def test_push_into_an_empty_repository(site: Site, tmp_path: Path) -> None:
    alice = site.as_("alice")
    work = tmp_path / "w"
    git("init", "-q", str(work))
    first = commit(work, "a.txt", "a\n", "the first")
    alice.git("push", "-q", alice.url("alice/empty"), "main", cwd=work)
    assert rev(site.bare("alice/empty"), "HEAD") == first


def test_a_read_only_deploy_key_may_not_push(site: Site, tmp_path: Path) -> None:
    read_only_key_may_not_push(site, "reader", "alice/pub", tmp_path / "r")


def test_a_private_repository_is_missing_to_an_outsider(site: Site) -> None:
    missing_to(site, "carol", "alice/priv", ("git-upload-pack",))


def test_a_removed_key_stops_at_once(site: Site) -> None:
    make_key(site.keys, "spare")
    fingerprint = site.server.admin(
        "key", "add", "bob", stdin=(site.keys / "spare.pub").read_text()
    ).split()[0]
    spare = site.as_("spare")
    assert spare.git("ls-remote", spare.url("alice/pub")).returncode == 0
    site.server.admin("key", "remove", fingerprint)
    began = time.monotonic()
    refused = spare.git("ls-remote", spare.url("alice/pub"), check=False)
    assert refused.returncode != 0 and "Permission denied (publickey)" in refused.stderr
    assert time.monotonic() - began < patience(30)
