"""deploy/nginx.conf, as shipped, in front of two ``floorless serve`` nodes that share one
repositories directory and one database (SQLite on one machine, or the suite's PostgreSQL):
clone and push through it, pages through it, the client's own address behind it, and one
node stopped while the other serves everything; deploy/haproxy.cfg in front of the same
nodes."""

from __future__ import annotations

import http.client
import os
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.forges import database_for, wait_for
from support.githttp import commit, git, rev
from support.serving import Server, serving

from bench import proxy as nginx

pytestmark = pytest.mark.network

PASSWORD = "correct horse battery"


@dataclass
class Cluster:
    proxy: nginx.Proxy
    nodes: list[Server]
    token: str

    def get(self, path: str, source: str = "127.0.0.1", **headers: str) -> tuple[int, str]:
        """GET through the proxy over HTTPS, from the loopback address ``source``."""
        context = ssl.create_default_context(cafile=str(self.proxy.cert))
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.proxy.port, timeout=30, context=context, source_address=(source, 0)
        )
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def url(self, repo: str, authorised: bool = False) -> str:
        host = self.proxy.url.removeprefix("https://")
        return (
            f"https://alice:{self.token}@{host}/{repo}.git"
            if authorised
            else (f"https://{host}/{repo}.git")
        )

    def served_by(self) -> dict[int, int]:
        """Requests each node answered, from the proxy's access log."""
        counts = {node.port: 0 for node in self.nodes}
        log = (self.proxy.error_log.parent / "nginx-access.log").read_text()
        for line in log.splitlines():
            for port in re.findall(r"127\.0\.0\.1:(\d+)", line.split(" ", 2)[1]):
                counts[int(port)] = counts.get(int(port), 0) + 1
        return counts


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if nginx.nginx_path() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have nginx (scripts/install-test-deps.sh)")
        pytest.skip("nginx is not installed (scripts/install-test-deps.sh)")
    root = tmp_path_factory.mktemp("scaleout")
    repos, first, second = root / "repos", root / "node-1", root / "node-2"
    # every node signs cookies with the same key and keeps its data in the same database
    key = os.urandom(32)
    for data in (first, second):
        data.mkdir()
        (data / "secret.key").write_bytes(key)
        (data / "secret.key").chmod(0o600)
    shared = database_for(first) or str(first / "floorless.sqlite3")
    tls_port = nginx.free_port()
    config = root / "floorless.toml"
    config.write_text(
        f'base_url = "https://127.0.0.1:{tls_port}"\n'
        'trusted_proxies = ["127.0.0.1"]\n'
        'metrics_addresses = ["127.0.0.2"]\n'
    )
    options = ("--config", str(config), "--database", shared)
    with serving(repos, first, *options) as one, serving(repos, second, *options) as two:
        one.admin("user", "create", "alice", "--email", "alice@example.org", "--admin",
                  "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
        one.admin("repo", "create", "alice/pub")
        token = one.admin("token", "create", "alice", "--scope", "write")
        with nginx.running([one.port, two.port], root / "nginx", tls_port=tls_port) as proxy:
            yield Cluster(proxy, [one, two], token)


def test_pages_answer_through_the_proxy_from_both_nodes(cluster: Cluster) -> None:
    before = cluster.served_by()
    for _ in range(6):
        status, text = cluster.get("/")
        assert status == 200 and "alice/pub" in text
    status, text = cluster.get("/alice/pub")
    assert status == 200 and f"{cluster.proxy.url}/alice/pub.git" in text  # base_url
    after = cluster.served_by()
    assert all(after[port] > before[port] for port in after), after  # round robin
    conn = http.client.HTTPConnection("127.0.0.1", int(cluster.proxy.plain_url.rsplit(":")[-1]))
    conn.request("GET", "/alice/pub")
    response = conn.getresponse()
    assert response.status == 301
    assert response.getheader("Location", "").startswith("https://127.0.0.1")
    conn.close()


@pytest.fixture
def trusting(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """git trusts the proxy's certificate (git built on GnuTLS reads it from here)."""
    monkeypatch.setenv("GIT_SSL_CAINFO", str(cluster.proxy.cert))


def test_clone_and_push_through_the_proxy(cluster: Cluster, trusting, tmp_path: Path) -> None:
    work = tmp_path / "work"
    git("init", "-q", str(work))
    tip = commit(work, "README.md", "# pub\n", "First commit through the proxy")
    git("push", "-q", cluster.url("alice/pub", authorised=True), "main", cwd=work)
    assert rev(cluster.nodes[0].repos / "alice" / "pub.git", "main") == tip
    if not database_for(cluster.nodes[0].data):
        # Two nodes on one SQLite file do not tell each other of a push: the other learns
        # of it by its periodic ref check (ref_check_interval), and a clone before then may
        # be advertised the new tip by one node and have its wants refused by the other.
        # On PostgreSQL the push's node tells the other before the push returns: no wait.
        wait_for(
            lambda: all(
                "First commit through the proxy" in cluster.get("/alice/pub")[1] for _ in range(4)
            )
        )
    for _ in range(4):  # several requests through the proxy reach both nodes
        assert "First commit through the proxy" in cluster.get("/alice/pub")[1]
    clone = tmp_path / "clone"
    git("clone", "-q", cluster.url("alice/pub"), str(clone))
    assert rev(clone / ".git", "HEAD") == tip


def test_floorless_sees_the_clients_own_address(cluster: Cluster) -> None:
    # /-/metrics is for 127.0.0.2 alone; the nodes see every request come from 127.0.0.1
    assert cluster.get("/-/metrics", source="127.0.0.2")[0] == 200
    assert cluster.get("/-/metrics", source="127.0.0.3")[0] == 404
    # what a client says of itself is not believed: nginx adds the address it came from
    spoofed = cluster.get("/-/metrics", source="127.0.0.3", **{"X-Forwarded-For": "127.0.0.2"})
    assert spoofed[0] == 404
    # straight to a node, not through the proxy, the same client is the proxy's address
    conn = http.client.HTTPConnection("127.0.0.1", cluster.nodes[0].port, timeout=30)
    conn.request("GET", "/-/metrics", headers={"X-Forwarded-For": "127.0.0.2"})
    assert conn.getresponse().status == 200  # 127.0.0.1 is a trusted proxy: it vouches
    conn.close()


def test_the_haproxy_configuration_as_shipped(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/haproxy.cfg in front of the same two nodes: pages, the redirect to HTTPS, the
    client's own address, and a clone and a push through it."""
    if nginx.haproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have haproxy (scripts/install-test-deps.sh)")
        pytest.skip("haproxy is not installed (scripts/install-test-deps.sh)")
    with nginx.haproxy_running([node.port for node in cluster.nodes], tmp_path / "ha") as ha:
        through = Cluster(ha, cluster.nodes, cluster.token)
        for _ in range(4):  # round robin: both nodes
            status, text = through.get("/")
            assert status == 200 and "alice/pub" in text
        conn = http.client.HTTPConnection("127.0.0.1", int(ha.plain_url.rsplit(":")[-1]))
        conn.request("GET", "/alice/pub")
        response = conn.getresponse()
        assert response.status in (301, 302)
        assert response.getheader("Location", "").startswith("https://127.0.0.1")
        conn.close()
        assert through.get("/-/metrics", source="127.0.0.2")[0] == 200
        assert through.get("/-/metrics", source="127.0.0.3")[0] == 404
        forged = through.get("/-/metrics", source="127.0.0.3", **{"X-Forwarded-For": "127.0.0.2"})
        assert forged[0] == 404
        monkeypatch.setenv("GIT_SSL_CAINFO", str(ha.cert))
        clone = tmp_path / "clone"
        git("clone", "-q", through.url("alice/pub", authorised=True), str(clone))
        tip = commit(clone, "ha.txt", "through haproxy\n", "Pushed through HAProxy")
        git("push", "-q", "origin", "main", cwd=clone)
        assert rev(cluster.nodes[0].repos / "alice" / "pub.git", "main") == tip
    # both nodes know of the push before the next test clones (on SQLite by their ref check)
    wait_for(lambda: all(_shows(node, "Pushed through HAProxy") for node in cluster.nodes))


def _shows(node: Server, text: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=30)
    try:
        conn.request("GET", "/alice/pub/commits/branch/main")
        return text in conn.getresponse().read().decode("utf-8", "replace")
    finally:
        conn.close()


def test_one_node_stopped_the_other_serves_everything(
    cluster: Cluster, trusting, tmp_path: Path
) -> None:
    stopped, left = cluster.nodes
    stopped.proc.terminate()
    stopped.proc.wait(timeout=30)
    before = cluster.served_by()
    for path in ("/", "/alice/pub", "/alice/pub/commits/branch/main", "/alice/pub/src/branch/main"):
        for _ in range(3):
            assert cluster.get(path)[0] == 200, path
    clone = tmp_path / "clone"
    git("clone", "-q", cluster.url("alice/pub", authorised=True), str(clone))
    tip = commit(clone, "second.txt", "two\n", "Pushed with one node left")
    git("push", "-q", "origin", "main", cwd=clone)
    assert rev(left.repos / "alice" / "pub.git", "main") == tip
    assert "Pushed with one node left" in cluster.get("/alice/pub/commits/branch/main")[1]
    after = cluster.served_by()
    assert after[left.port] - before[left.port] >= 12
