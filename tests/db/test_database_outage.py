"""A node that loses its database: a real ``floorless serve`` on a PostgreSQL cluster of its
own, which the test stops and starts again. Warm public pages keep answering from memory;
what needs the database answers 503 saying so, at once rather than after a hang; a private
repository is never shown; and when the database is back the node serves everything again
by itself."""

from __future__ import annotations

import glob
import http.client
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from falcon import testing
from support.forges import POSTGRES, ROOT, patience, start_forge, wait_for
from support.gitfixtures import build_one
from support.serving import serving

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

pytestmark = pytest.mark.skipif(
    not POSTGRES, reason="losing the database is a PostgreSQL matter (SQLite is a local file)"
)

PASSWORD = "a long password"
UNREACHABLE = "the database cannot be reached; try again shortly"


@dataclass
class Cluster:
    url: str
    directory: Path

    def pg_ctl(self, *args: str) -> None:
        bin_dir = max(
            glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
        )
        command = [f"{bin_dir}/pg_ctl", "-D", str(self.directory / "data"), *args]
        if os.getuid() == 0:  # the cluster's files belong to postgres (scripts/test-postgres.sh)
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=patience(60))

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        port = urlsplit(self.url).port
        options = f"-k {self.directory} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off"
        log = str(self.directory / "server.log")
        self.pg_ctl("-l", log, "-w", "-t", "60", "start", "-o", options)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for this test alone: stopping it stops no other test."""
    script = str(ROOT / "scripts" / "test-postgres.sh")
    started = subprocess.run(
        ["bash", script, "start"], capture_output=True, text=True, timeout=patience(120)
    )
    assert started.returncode == 0, started.stderr
    found = dict(re.findall(r"export (\w+)=(\S+)", started.stdout))
    own = Cluster(found["FLOORLESS_TEST_POSTGRES"], Path(found["FLOORLESS_TEST_POSTGRES_DIR"]))
    try:
        yield own
    finally:
        subprocess.run(["bash", script, "stop", str(own.directory)], timeout=patience(60))


def ask(
    base: str, path: str, method: str = "GET", headers: dict[str, str] | None = None, body: str = ""
) -> tuple[int, dict[str, str], str]:
    """One request; the answer's status, headers (lower-case names) and text."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=patience(30))
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        answer = conn.getresponse()
        text = answer.read().decode("utf-8", "replace")
        headers: dict[str, str] = {}
        for name, value in answer.getheaders():  # several Set-Cookie headers kept together
            headers[name.lower()] = headers.get(name.lower(), "") + value + "\n"
        return answer.status, headers, text
    finally:
        conn.close()


def sign_in(base: str, name: str) -> tuple[int, str]:
    """The sign-in form as a browser sends it: its status and the session cookie it set."""
    status, headers, page = ask(base, "/-/login")
    if status != 200:
        return status, ""
    csrf = re.search(r'name="csrf" value="([^"]*)"', page).group(1)
    cookie = re.search(r"floorless_csrf=([^;]*)", headers["set-cookie"]).group(1)
    status, headers, _ = ask(
        base,
        "/-/login",
        "POST",
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"floorless_csrf={cookie}",
        },
        f"csrf={csrf}&name={name}&password={PASSWORD.replace(' ', '+')}",
    )
    session = re.search(r"floorless_session=([^;]*)", headers.get("set-cookie", ""))
    return status, session.group(1) if session else ""


def test_a_node_that_loses_its_database_serves_what_it_holds_and_recovers(
    cluster: Cluster, tmp_path: Path
) -> None:
    repos, data = tmp_path / "repos", tmp_path / "data"
    build_one(repos / "alice" / "one.git")
    build_one(repos / "alice" / "secret.git")
    settings = Settings.load(environ={}, data=data, repos=repos, database=cluster.url)
    forge = Forge(settings)
    forge.start(background=False)
    forge.accounts.create_user("alice", "alice@example.org", PASSWORD)
    forge.registry.set_private("alice", "secret", True)
    forge.stop()

    public = "/alice/one/src/branch/main/README.md"
    private = "/alice/secret/src/branch/main/README.md"
    with serving(repos, data, "--database", cluster.url) as server:
        base = server.url
        assert ask(base, public)[0] == 200
        assert ask(base, public)[0] == 200  # warm: in the page cache
        status, session = sign_in(base, "alice")
        assert status == 303 and session
        mine = {"Cookie": f"floorless_session={session}"}
        assert ask(base, private, headers=mine)[0] == 200
        assert ask(base, private)[0] == 404
        assert ask(base, "/-/ready")[0] == 200

        cluster.stop()
        # the warm public page answers from memory, again and again
        for _ in range(3):
            status, _, text = ask(base, public)
            assert status == 200 and "Hello." in text
        # what needs the database says so, with no hang and no 500
        for path, headers in (("/", {}), (private, {}), (private, mine), (public, mine)):
            status, answered, text = ask(base, path, headers=headers)
            assert status == 503, (path, status, text)
            assert UNREACHABLE in text and answered["retry-after"]
        assert sign_in(base, "alice")[0] == 503
        status, _, text = ask(base, "/-/ready")
        assert status == 503 and '"database":"unreachable"' in text.replace(" ", "")
        assert ask(base, "/-/health")[0] == 200

        cluster.start()
        # the node finds its database again by itself
        wait_for(lambda: ask(base, "/-/ready")[0] == 200, timeout=30)
        assert ask(base, "/")[0] == 200
        assert ask(base, public)[0] == 200
        assert ask(base, private)[0] == 404
        assert ask(base, private, headers=mine)[0] == 200  # the session outlived the outage
        status, session = sign_in(base, "alice")
        assert status == 303 and session
        assert "Traceback" not in server.log.read_text()


def test_a_repository_made_private_elsewhere_is_not_shown_in_an_outage(
    fixture_root: Path, tmp_path: Path
) -> None:
    """Node B read a repository while it was public; node A makes it private, and B, which
    hears of the write but is not asked for the repository again, then loses the database:
    B refuses it rather than serve the row it last read (as it refuses every row read before a
    write to visibility it heard of). One read again since is served."""
    repos = tmp_path / "repos"
    for name in ("plans", "open"):
        shutil.copytree(fixture_root / "solo.git", repos / "alice" / f"{name}.git")
    a = start_forge(repos, tmp_path / "a")
    b = start_forge(repos, tmp_path / "b", database=a.settings.database)
    try:
        wait_for(lambda: a.db.coherent() and b.db.coherent())
        client = testing.TestClient(create_app(b))
        for name in ("plans", "open"):
            assert client.simulate_get(f"/alice/{name}").status_code == 200
        heard = b.db.version("repo_access")
        a.registry.set_private("alice", "plans", True)
        wait_for(lambda: b.db.version("repo_access") != heard)
        assert client.simulate_get("/alice/open").status_code == 200  # read again since
        b.db._retry_at = time.monotonic() + 3600  # B cannot reach the database from now on
        assert client.simulate_get("/alice/plans").status_code == 503
        assert client.simulate_get("/alice/open").status_code == 200
    finally:
        b.db._retry_at = None
        b.stop()
        a.stop()
