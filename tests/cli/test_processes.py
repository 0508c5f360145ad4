"""``floorless serve --processes N``: several server processes on one port, each a node of
its own sharing the database (PostgreSQL, which tells them of each other's changes, or
SQLite, whose processes post them on a board in shared memory). A push through one process
is on the next page from any of them, also from one that had the repository's refs in
memory, and the history is indexed once, by one process under its lease."""

from __future__ import annotations

import base64
import http.client
import json
import re
from pathlib import Path

from support.forges import database_for, patience, wait_for
from support.githttp import commit, git, rev
from support.serving import Server, serving

PASSWORD = "correct horse battery"


def scrape(server: Server) -> tuple[int, str]:
    """``/-/metrics`` on a new connection (so any process may take it): its process id and
    text."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(30))
    try:
        conn.request("GET", "/-/metrics", headers={"Connection": "close"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    found = re.search(r"^floorless_process_id ([0-9.e+]+)$", text, re.M)
    assert found is not None
    return int(float(found.group(1))), text


def every_process(server: Server, workers: set[int]) -> dict[int, str]:
    """The latest scrape of each worker process (scraping until each has answered)."""
    seen: dict[int, str] = {}
    for _ in range(400):
        pid, text = scrape(server)
        seen[pid] = text
        if set(seen) == workers:
            return seen
    raise AssertionError(f"not every process answered: {sorted(seen)} of {sorted(workers)}")


def value(text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def pages_answered(text: str) -> float:
    """Responses this process gave, /-/metrics itself left out."""
    return sum(
        float(count)
        for route, count in re.findall(
            r'^floorless_responses_total\{route="([^"]*)",status="200"\} ([0-9.e+]+)$', text, re.M
        )
        if "metrics" not in route
    )


def page(server: Server, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(30))
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        conn.close()


def test_two_processes_serve_one_push_and_index_it_once(tmp_path: Path) -> None:
    repos, data = tmp_path / "repos", tmp_path / "data"
    with serving(repos, data, "--processes", "2") as server:
        workers = set(server.worker_pids()[1:])
        assert len(workers) == 2  # granian's main process and two workers
        server.admin("user", "create", "alice", "--email", "alice@example.org",
                     "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
        server.admin("repo", "create", "alice/pub")
        token = server.admin("token", "create", "alice", "--scope", "write")
        every_process(server, workers)  # both up before the push
        for _ in range(30):  # each process reads the empty repository's refs, and keeps them
            assert "alice/pub" in page(server, "/alice/pub")
        assert all(pages_answered(t) > 0 for t in every_process(server, workers).values())

        work = tmp_path / "work"
        git("init", "-q", "-b", "main", str(work))
        for n in range(3):
            tip = commit(work, f"f{n}.txt", f"{n}\n", f"Commit number {n}")
        url = f"http://alice:{token}@127.0.0.1:{server.port}/alice/pub.git"
        git("push", "-q", url, "main", cwd=work)
        assert rev(repos / "alice" / "pub.git", "main") == tip

        # no wait: the process that took the push told the other before it returned
        for _ in range(30):
            assert "Commit number 2" in page(server, "/alice/pub/commits/branch/main")
            assert tip[:10] in page(server, "/alice/pub")
        answered = every_process(server, workers)
        assert all(pages_answered(text) > 0 for text in answered.values()), "one process idle"

        def indexed_once() -> bool:
            scrapes = every_process(server, workers)
            done = all(value(t, "floorless_index_pending") == 0 for t in scrapes.values())
            return done and sum(value(t, "floorless_index_commits") for t in scrapes.values()) == 3

        wait_for(indexed_once)
        history = page(server, "/alice/pub/commits/branch/main/f1.txt")
        assert "Commit number 1" in history and "Commit number 2" not in history
        # and nothing more is indexed after, by either
        scrapes = every_process(server, workers)
        assert sum(value(t, "floorless_index_commits") for t in scrapes.values()) == 3

        moved = commit(work, "f3.txt", "3\n", "Commit number 3")  # a branch both have read
        git("push", "-q", url, "main", cwd=work)
        for _ in range(30):
            assert "Commit number 3" in page(server, "/alice/pub/commits/branch/main")
            assert moved[:10] in page(server, "/alice/pub")


def request(server: Server, method: str, path: str, **headers: str) -> tuple[int, bytes]:
    """One request on a connection of its own (any process may take it)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(30))
    try:
        body = headers.pop("body", None)
        conn.request(method, path, body=body, headers={"Connection": "close", **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_token_made_through_one_process_signs_in_on_every_one(tmp_path: Path) -> None:
    """What one process writes to the database (here a token, and its deletion) holds on the
    next request to any process: nothing of it is kept in one process's memory."""
    repos, data = tmp_path / "repos", tmp_path / "data"
    with serving(repos, data, "--processes", "2") as server:
        workers = set(server.worker_pids()[1:])
        server.admin("user", "create", "alice", "--email", "alice@example.org",
                     "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
        every_process(server, workers)
        password = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
        status, body = request(
            server, "POST", "/api/v1/users/alice/tokens", Authorization=f"Basic {password}",
            body=json.dumps({"name": "ci", "scopes": ["read:user"]}),
            **{"Content-Type": "application/json"},
        )  # fmt: skip
        assert status == 201, body
        made = json.loads(body)
        for _ in range(20):
            status, body = request(
                server, "GET", "/api/v1/user", Authorization=f"token {made['sha1']}"
            )
            assert (status, json.loads(body)["login"]) == (200, "alice")
        status, _ = request(server, "DELETE", f"/api/v1/users/alice/tokens/{made['id']}",
                            Authorization=f"Basic {password}")  # fmt: skip
        assert status == 204
        for _ in range(20):
            status, _ = request(
                server, "GET", "/api/v1/user", Authorization=f"token {made['sha1']}"
            )
            assert status == 401


def test_two_servers_on_one_database_hear_each_others_pushes_and_statuses(
    tmp_path: Path,
) -> None:
    """Two ``floorless serve`` commands given one database (on SQLite: one file, its board):
    a push and a commit status through one are on the other's next page, and the history
    is indexed by one of them, under its lease."""
    repos, first, second = tmp_path / "repos", tmp_path / "a" / "data", tmp_path / "b" / "data"
    first.mkdir(parents=True)
    shared = ("--database", database_for(first) or str(first / "floorless.sqlite3"))
    with serving(repos, first, *shared) as a:
        a.admin("user", "create", "alice", "--email", "alice@example.org",
                "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
        a.admin("repo", "create", "alice/pub")
        token = a.admin("token", "create", "alice", "--scope", "write")
        second.mkdir(parents=True)
        (second / "secret.key").write_bytes((first / "secret.key").read_bytes())
        with serving(repos, second, *shared) as b:
            assert "alice/pub" in page(b, "/alice/pub")  # b has the empty refs in memory
            work = tmp_path / "work"
            git("init", "-q", "-b", "main", str(work))
            tip = commit(work, "f.txt", "1\n", "The first commit")
            git("push", "-q", f"http://alice:{token}@127.0.0.1:{a.port}/alice/pub.git", "main",
                cwd=work)  # fmt: skip
            assert tip[:10] in page(b, "/alice/pub")
            empty = request(b, "GET", f"/api/v1/repos/alice/pub/commits/{tip}/status")[1]
            assert json.loads(empty)["state"] == ""
            status, _ = request(
                a, "POST", f"/api/v1/repos/alice/pub/statuses/{tip}",
                Authorization=f"token {token}", body=json.dumps({"state": "failure",
                "context": "ci"}), **{"Content-Type": "application/json"},
            )  # fmt: skip
            assert status == 201
            told = request(b, "GET", f"/api/v1/repos/alice/pub/commits/{tip}/status")[1]
            assert json.loads(told)["state"] == "failure"

            def indexed() -> bool:
                counts = [scrape(s)[1] for s in (a, b)]
                return all(value(t, "floorless_index_pending") == 0 for t in counts)

            wait_for(indexed)
            total = sum(value(scrape(s)[1], "floorless_index_commits") for s in (a, b))
            assert total == 1  # one of them indexed it; the other loaded what it stored
