"""Two nodes on loopback sharing one repositories directory and one PostgreSQL database:
what one node changes, the other shows at its very next request; a session made on one is
good on the other; a node killed in the middle of a push and of an index leaves nothing
lost, and the other finishes the index once the dead node's lease has expired.

Each node has a data directory of its own, as nodes on separate machines would, and the ref
check is set to an hour, so that only the nodes' notices can explain what the other sees.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import psycopg
import pytest
from support.forges import POSTGRES, database_for, patience, start_forge, wait_for
from support.gitfixtures import git_text
from support.githttp import PASSWORD, commit, git
from support.serving import Server, serving

from floorless.db import open_database
from floorless.db.notices import CHANNEL
from floorless.index.rows import load

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(
        not POSTGRES,
        reason="nodes share a PostgreSQL database: set FLOORLESS_TEST_POSTGRES (./check does)",
    ),
]

SLICE = 50  # commits a slice indexes: the 10,500-commit history takes about 210
SETTINGS = f"""
ref_check_interval = 3600.0
rescan_interval = 3600.0
lease_seconds = 3.0
index_slice_commits = {SLICE}
"""


@dataclass
class Nodes:
    a: Server
    b: Server
    root: Path

    def url(self, node: Server, repo: str, user: str | None = None) -> str:
        host = node.url.removeprefix("http://")
        if user is None:
            return f"http://{host}/{repo}.git"
        token = self.a.admin("token", "create", user, "--scope", "write")
        return f"http://{user}:{token}@{host}/{repo}.git"

    def db(self) -> psycopg.Connection[tuple[object, ...]]:
        url = database_for(self.a.data)
        assert url
        return psycopg.connect(url, autocommit=True)


def get(
    node: Server, path: str, cookies: dict[str, str] | None = None
) -> tuple[int, str, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=patience(30))
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in (cookies or {}).items())}
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    text = response.read().decode("utf-8", "replace")
    conn.close()
    return response.status, text, response


def _node_pair(stack: ExitStack, root: Path, repos: Path) -> Nodes:
    config = root / "nodes.toml"
    config.write_text(SETTINGS)
    a = stack.enter_context(serving(repos, root / "a", "--config", str(config)))
    b = stack.enter_context(
        serving(repos, root / "b", "--config", str(config), database_of=root / "a")
    )
    return Nodes(a, b, root)


def _people(nodes: Nodes) -> None:
    nodes.a.admin(
        "user", "create", "alice", "--email", "alice@example.org", "--admin",
        "--password-stdin", stdin=PASSWORD + "\n",
    )  # fmt: skip


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    root = tmp_path_factory.mktemp("nodes")
    with ExitStack() as stack:
        pair = _node_pair(stack, root, root / "repos")
        _people(pair)
        pair.a.admin("repo", "create", "alice/pub")
        pair.a.admin("repo", "create", "alice/priv", "--private")
        seed = root / "seed"
        git("init", "-q", str(seed))
        commit(seed, "README.md", "# project\n", "The first version")
        for name in ("alice/pub", "alice/priv"):
            git("push", "-q", pair.url(pair.a, name, "alice"), "main", cwd=seed)
        yield pair


def test_a_push_through_one_node_is_on_the_other_at_its_next_request(
    nodes: Nodes, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    git("clone", "-q", nodes.url(nodes.b, "alice/pub"), str(work))
    # node B has the repository's refs and its pages in memory now
    for path in ("/alice/pub", "/alice/pub/branches"):
        assert "The second version" not in get(nodes.b, path)[1]
    tip = commit(work, "README.md", "# project\n\nmore\n", "The second version")
    git("push", "-q", nodes.url(nodes.a, "alice/pub", "alice"), "main", cwd=work)
    status, home, _ = get(nodes.b, "/alice/pub")
    assert status == 200 and "The second version" in home
    git("switch", "-q", "-c", "topic", cwd=work)
    topic = commit(work, "topic.txt", "topic\n", "Start the topic")
    git("push", "-q", nodes.url(nodes.a, "alice/pub", "alice"), "topic", cwd=work)
    assert "topic" in get(nodes.b, "/alice/pub/branches")[1]
    assert "Start the topic" in get(nodes.b, "/alice/pub/commits/branch/topic")[1]
    remote = git("ls-remote", nodes.url(nodes.b, "alice/pub")).stdout
    assert f"{tip}\trefs/heads/main" in remote and f"{topic}\trefs/heads/topic" in remote
    # and the other way round, a branch deleted through B is gone from A's next answer
    git("push", "-q", nodes.url(nodes.b, "alice/pub", "alice"), ":topic", cwd=work)
    assert "refs/heads/topic" not in git("ls-remote", nodes.url(nodes.a, "alice/pub")).stdout
    assert "Start the topic" not in get(nodes.a, "/alice/pub/branches")[1]


def _sign_in(node: Server) -> dict[str, str]:
    """Sign in on ``node`` as a browser does; the cookies it was given."""
    status, page, response = get(node, "/-/login")
    assert status == 200
    cookies = {}
    for header in response.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        cookies[name] = rest.split(";", 1)[0]
    found = re.search(r'name="csrf" value="([^"]*)"', page)
    assert found
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=patience(30))
    body = urlencode({"csrf": found.group(1), "name": "alice", "password": PASSWORD})
    conn.request(
        "POST",
        "/-/login",
        body=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
        },
    )
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.status == 303
    for header in response.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        cookies[name] = rest.split(";", 1)[0]
    assert cookies.get("floorless_session")
    return cookies


def test_a_session_made_on_one_node_is_good_on_the_other(nodes: Nodes) -> None:
    cookies = _sign_in(nodes.a)
    assert get(nodes.b, "/alice/priv")[0] == 404
    status, page, _ = get(nodes.b, "/alice/priv", cookies)
    assert status == 200 and "The first version" in page
    status, page, _ = get(nodes.b, "/-/tokens", cookies)
    assert status == 200 and "alice" in page
    assert get(nodes.b, "/-/tokens")[0] == 303  # without it: to the sign-in page


# -- a node killed mid-push and mid-index ------------------------------------------------------


def _index_of(nodes: Nodes, repo_id: int) -> tuple[int, int]:
    """(commits whose changed paths are stored, commits stored) of the repository's index."""
    url = database_for(nodes.a.data)
    assert url
    db = open_database(url)
    try:
        graph, _ = load(db, repo_id)
    finally:
        db.close()
    return graph.indexed, len(graph)


def _holder(nodes: Nodes, repo_id: int) -> str | None:
    with nodes.db() as conn:
        row = conn.execute(
            "SELECT holder FROM leases WHERE name = %s", (f"index:{repo_id}",)
        ).fetchone()
    return None if row is None else str(row[0])


def _hold_pushes(node: Server) -> Path:
    """Make pushes through ``node`` stop in the middle: their objects received, no ref moved
    yet (its pre-receive hook, floorless's own in its runtime directory, is made to wait, a
    minute at most, for a file that never comes). The file that tells the hook has started."""
    entered = node.data / "push-entered"
    hook = node.data / "run" / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\ntouch '{entered}'\nfor i in $(seq 600); do sleep 0.1; done\nexit 1\n"
    )
    hook.chmod(0o755)
    return entered


def _receiving(node: Server) -> bool:
    """Whether a ``git receive-pack`` runs under ``node``."""
    for pid in node.descendants():
        try:
            if b"receive-pack" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _slices(nodes: Nodes, repo_id: int) -> dict[int, bytes]:
    with nodes.db() as conn:
        rows = conn.execute(
            "SELECT slice, data FROM index_changes WHERE repo_id = %s", (repo_id,)
        ).fetchall()
    return {int(number): bytes(data) for number, data in rows}


def test_a_node_killed_mid_push_and_mid_index_loses_nothing(
    tmp_path: Path, fixture_root: Path
) -> None:
    repos = tmp_path / "repos"
    with ExitStack() as stack:
        nodes = _node_pair(stack, tmp_path, repos)
        a, b = nodes.a, nodes.b
        _people(nodes)
        a.admin("repo", "create", "alice/pub")
        work = tmp_path / "work"
        git("init", "-q", str(work))
        acknowledged = commit(work, "README.md", "# pub\n", "Acknowledged")
        git("push", "-q", nodes.url(a, "alice/pub", "alice"), "main", cwd=work)
        git("switch", "-q", "-c", "heavy", cwd=work)
        (work / "heavy.bin").write_bytes(os.urandom(4 * 1024 * 1024))
        git("add", "heavy.bin", cwd=work)
        git("commit", "-q", "-m", "Heavy", cwd=work)

        # a long history appears; node A is asked for it first, takes its lease, indexes it
        history = repos / "big/history.git"
        shutil.copytree(fixture_root / "alice/history.git", history)
        commits = int(git_text(history, "rev-list", "--count", "--all"))
        a.admin("rescan")
        with nodes.db() as conn:
            found = conn.execute("SELECT id FROM repos WHERE name = 'history'").fetchone()
        assert found is not None
        repo_id = int(found[0])
        url = nodes.url(a, "alice/pub", "alice")
        entered = _hold_pushes(a)  # after the admin commands, which write the hooks again
        pushing = subprocess.Popen(
            ["git", "-c", "credential.helper=", "push", "-q", url, "heavy"],
            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )  # fmt: skip
        stack.callback(pushing.wait, patience(60))
        stack.callback(pushing.kill)
        wait_for(lambda: entered.exists() and _receiving(a))  # A is mid-push
        assert get(a, "/big/history")[0] == 200
        assert get(b, "/big/history")[0] == 200  # B follows: A holds the lease
        wait_for(lambda: len(_slices(nodes, repo_id)) >= 1)  # A is mid-index
        workers = a.worker_pids()
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=patience(30))
        holder = _holder(nodes, repo_id)
        assert holder is not None and int(holder.split(":")[1]) in workers
        assert pushing.wait(timeout=patience(60)) != 0  # the push was never acknowledged
        stored = _slices(nodes, repo_id)
        assert _index_of(nodes, repo_id)[0] < commits, "A was done before it was killed"

        # B serves on, and takes the index over once A's lease has expired
        assert get(b, "/alice/pub")[0] == 200
        wait_for(lambda: _index_of(nodes, repo_id) == (commits, commits), timeout=120)
        assert _holder(nodes, repo_id) != holder
        after = _slices(nodes, repo_id)
        assert all(after[number] == data for number, data in stored.items())  # went on
        assert len(after) > len(stored)
        status, page, _ = get(b, "/big/history/commits/branch/main")
        assert status == 200 and f"of {commits:,} commits" not in page

        # nothing lost: every acknowledged ref is there, both repositories are whole
        remote = git("ls-remote", nodes.url(b, "alice/pub")).stdout
        assert f"{acknowledged}\trefs/heads/main" in remote
        assert "refs/heads/heavy" not in remote  # never acknowledged
        for path in (repos / "alice/pub.git", history):
            git("--git-dir", str(path), "fsck", "--no-progress")
        # and B (whose hooks are its own) takes the push A never finished
        git("push", "-q", nodes.url(b, "alice/pub", "alice"), "heavy", cwd=work)
        assert "refs/heads/heavy" in git("ls-remote", nodes.url(b, "alice/pub")).stdout


# -- the listener, in process ------------------------------------------------------------------


def test_the_listener_hears_again_after_losing_the_database(
    fixture_root: Path, tmp_path: Path
) -> None:
    repos = tmp_path / "repos"
    shutil.copytree(fixture_root / "solo.git", repos / "alice/solo.git")
    one = start_forge(repos, tmp_path / "one", ref_check_interval=3600.0)
    two = start_forge(
        repos, tmp_path / "two", ref_check_interval=3600.0, database=one.settings.database
    )
    try:
        wait_for(lambda: one.peers.notices.listening and two.peers.notices.listening)
        repo = two.registry.get("alice", "solo")
        assert b"side" not in two.live.snapshot(repo).branches
        connections = two.peers.notices.connections
        # a ref moved while the listeners lose the database (the notice of it is lost) is
        # read all the same: on each request while deaf, or once listening again
        git_text(repos / "alice/solo.git", "branch", "-f", "side", "HEAD")
        with psycopg.connect(one.settings.database, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query LIKE %s",  # the listeners' connections: their last statement
                (f"LISTEN {CHANNEL}%",),
            )
        heard_from = two.peers.notices
        wait_for(lambda: heard_from.connections > connections and heard_from.listening)
        assert b"side" in two.live.snapshot(repo).branches
        # listening again: a ref moved through the other node is heard
        heard = two.peers.notices.received
        git_text(repos / "alice/solo.git", "branch", "-f", "other", "HEAD")
        one.moves.refs_moved(one.registry.get("alice", "solo"))
        wait_for(lambda: two.peers.notices.received > heard)
        assert b"other" in two.live.snapshot(repo).branches
    finally:
        two.stop()
        one.stop()


def test_one_node_at_a_time_collects_a_repositorys_garbage(
    fixture_root: Path, tmp_path: Path
) -> None:
    repos = tmp_path / "repos"
    shutil.copytree(fixture_root / "solo.git", repos / "alice/solo.git")
    one = start_forge(repos, tmp_path / "one")
    two = start_forge(repos, tmp_path / "two", database=one.settings.database)
    try:
        repo = two.registry.get("alice", "solo")
        assert one.leases.take(f"gc {repo.id}")  # one collects it now
        packs = sorted((repos / "alice/solo.git/objects/pack").iterdir())
        assert two.garbage.collect(repo) is False  # so the other leaves it alone
        assert sorted((repos / "alice/solo.git/objects/pack").iterdir()) == packs
        one.leases.release(f"gc {repo.id}")
        assert two.garbage.collect(repo) is True
        assert not two.leases.holds(f"gc {repo.id}")  # let go once done
        assert one.leases.take(f"gc {repo.id}")
    finally:
        two.stop()
        one.stop()
