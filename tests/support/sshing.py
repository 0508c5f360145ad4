"""git over SSH with OpenSSH's own client: keys made by ``ssh-keygen``, ``ssh`` and ``git``
run with the options that make them talk to one test server and nothing else."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from support.forges import patience
from support.githttp import commit, git_environment, rev
from support.serving import Server

PASSWORD = "correct horse battery"


def make_key(directory: Path, name: str, kind: str = "ed25519", bits: int = 0) -> Path:
    """A new key pair ``directory/name`` (and ``.pub``), without a passphrase."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    args = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"{name}@tests", "-f", str(path)]
    if bits:
        args += ["-b", str(bits)]
    subprocess.run(args, check=True, capture_output=True, timeout=patience(60))
    return path


def ssh_options(keys: list[Path], port: int, known_hosts: Path) -> list[str]:
    options = [
        "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=no",
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "LogLevel=ERROR",
        "-o", "ConnectTimeout=30",
        "-F", "/dev/null",
        "-p", str(port),
    ]  # fmt: skip
    for key in keys:
        options += ["-i", str(key)]
    return options


class Ssh:
    """One person's (or deploy key's) view of an SSH server on loopback."""

    def __init__(self, port: int, key: Path, known_hosts: Path, user: str = "git") -> None:
        self.port = port
        self.key = key
        self.known_hosts = known_hosts
        self.user = user

    def url(self, repo: str) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}/{repo}.git"

    def options(self) -> list[str]:
        return ssh_options([self.key], self.port, self.known_hosts)

    def ssh(
        self, *command: str, stdin: bytes | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["ssh", *self.options(), f"{self.user}@127.0.0.1", *command],
            input=stdin if stdin is not None else b"",
            capture_output=True,
            timeout=patience(timeout),
            check=False,
        )

    def git(
        self, *args: str, cwd: Path | None = None, check: bool = True, version: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The real git client, its SSH this key's ``ssh``; never prompts."""
        env = {**git_environment(), "GIT_SSH_COMMAND": " ".join(["ssh", *self.options()])}
        env["GIT_SSH_VARIANT"] = "ssh"
        config = ["-c", "init.defaultBranch=main"]
        if version is not None:
            config += ["-c", f"protocol.version={version}"]
        result = subprocess.run(
            ["git", *config, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=patience(120),
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
        return result


@dataclass
class SshSite:
    """A server on loopback, its SSH port, the keys made for it (one file a name) and the
    known hosts file its clients share."""

    server: Server
    port: int
    keys: Path
    known: Path
    user: str = "git"

    def as_(self, name: str) -> Ssh:
        return Ssh(self.port, self.keys / name, self.known, user=self.user)

    def bare(self, repo: str) -> Path:
        owner, name = repo.split("/")
        return self.server.repos / owner / f"{name}.git"


def read_only_key_may_not_push(site: SshSite, key: str, repo: str, work: Path) -> None:
    """The read-only deploy key ``key`` of ``repo`` clones it, and its push is refused."""
    reader = site.as_(key)
    reader.git("clone", "-q", reader.url(repo), str(work))
    before = rev(site.bare(repo), "main")
    commit(work, "ci.txt", "ci\n", "from the deploy key")
    refused = reader.git("push", "origin", "main", cwd=work, check=False)
    assert refused.returncode != 0 and "this deploy key is read-only" in refused.stderr
    assert rev(site.bare(repo), "main") == before


def missing_to(site: SshSite, outsider: str, private: str, services: tuple[str, ...]) -> None:
    """``private`` answers ``outsider`` exactly as a repository that does not exist."""
    person = site.as_(outsider)
    owner = private.split("/")[0]
    answers = {
        (answer.returncode, answer.stdout, answer.stderr)
        for name in (private, f"{owner}/no-such-repo")
        for service in services
        for answer in [person.ssh(service, f"'{name}.git'")]
    }
    assert answers == {(1, b"", b"floorless: repository not found\n")}


def create_people(server: Server, *names: str) -> None:
    for name in names:
        server.admin(
            "user", "create", name, "--email", f"{name}@example.org",
            *(["--admin"] if name == "alice" else []),
            "--password-stdin", stdin=PASSWORD + "\n",
        )  # fmt: skip


def log_since(server: Server, offset: int, needle: str, timeout: float = 30) -> str:
    """The server's log after ``offset`` once a line in it holds ``needle``."""
    deadline = time.monotonic() + patience(timeout)
    while True:
        text = server.log.read_bytes()[offset:].decode("utf-8", "replace")
        if needle in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + patience(timeout)
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")
