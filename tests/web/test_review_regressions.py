"""Regressions found by a hostile review of a running server: HEAD, Range and If-Range,
archive downloads and blame that hold worker threads, lines that Pygments splits differently
from git, README links encoded twice, URLs with a leading ``//``, template files read on every
page, and walks a page must never start."""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import EPOCH_START, _init_bare, git, git_text, git_text_input

from floorless.core.config import Settings
from floorless.core.timing import spawn_counter
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.index import answers as answers_module
from floorless.web.app import create_app
from floorless.web.markup import highlight_lines, render_markdown


@pytest.fixture(scope="module")
def demo(fixture_root: Path) -> Path:
    return fixture_root / "alice" / "demo.git"


# ------------------------------------------------------------------------------------ HEAD


def test_head_is_answered_wherever_get_is(client, demo):
    main = git_text(demo, "rev-parse", "main")
    urls = [
        "/",
        "/alice",
        "/alice/demo",
        "/alice/demo/src/branch/main/docs",
        "/alice/demo/src/branch/main/src/app.py",
        "/alice/demo/commits/branch/main",
        f"/alice/demo/commit/{main}",
        f"/alice/demo/commit/{main}.diff",
        "/alice/demo/branches",
        "/alice/demo/tags",
        "/alice/demo/atom/branch/main",
        f"/alice/demo/-/last/{main}",
        "/-/static/style.css",
        "/-/metrics",
        "/alice/empty",
        "/alice/nope",
    ]
    for url in urls:
        get = client.simulate_get(url)
        head = client.simulate_head(url)
        assert head.status_code == get.status_code, (url, head.status_code, get.status_code)
        assert head.content == b"", url
        if get.status_code == 200:  # errors to HEAD are plain text by design
            assert head.headers["content-type"] == get.headers["content-type"], url


def test_head_of_an_archive_starts_no_git(client):
    counter = spawn_counter()
    before = counter.total
    head = client.simulate_head("/alice/demo/archive/main.tar.gz")
    assert head.status_code == 200
    assert head.headers["content-type"] == "application/gzip"
    assert "demo-main.tar.gz" in head.headers["content-disposition"]
    assert counter.total == before
    assert client.simulate_head("/alice/demo/archive/nope.zip").status_code == 404


# ------------------------------------------------------------------------- Range, If-Range


RAW = "/alice/demo/raw/branch/main/src/app.py"


@pytest.mark.parametrize(
    "value", ["bytes=0-0,2-3", "items=0-5", "bytes=5-2", "bytes=abc", "bytes=-0", "0-5"]
)
def test_a_range_that_is_not_one_byte_range_is_ignored(client, demo, value):
    data = git(demo, "cat-file", "-p", "main:src/app.py")
    result = client.simulate_get(RAW, headers={"Range": value})
    assert result.status_code == 200, (value, result.status_code)
    assert result.content == data
    assert "content-range" not in result.headers


def test_if_range_of_another_version_sends_the_whole_file(client, demo):
    data = git(demo, "cat-file", "-p", "main:src/app.py")
    etag = client.simulate_get(RAW).headers["etag"]
    for stale in ('"' + "0" * 40 + '"', "W/" + etag, "Sat, 01 Jan 2000 00:00:00 GMT"):
        result = client.simulate_get(RAW, headers={"Range": "bytes=0-3", "If-Range": stale})
        assert result.status_code == 200, stale
        assert result.content == data
    same = client.simulate_get(RAW, headers={"Range": "bytes=0-3", "If-Range": etag})
    assert same.status_code == 206
    assert same.content == data[:4]


# ---------------------------------------------------------------------- leading double slash


def test_a_leading_double_slash_names_the_same_file(client, demo):
    data = git(demo, "cat-file", "-p", "main:README.md")
    result = client.simulate_get("//alice/demo/raw/branch/main/README.md")
    assert result.status_code == 200
    assert result.content == data
    main = git_text(demo, "rev-parse", "main")
    assert client.simulate_get(f"//alice/demo/-/last/{main}/docs").status_code == 200
    moved = client.simulate_get("//alice/demo/src/main/docs")
    assert moved.status_code == 302
    assert moved.headers["location"].endswith("/alice/demo/src/branch/main/docs")


# --------------------------------------------------------------------- archives and threads


def _start(app, path: str):
    """Call the WSGI app without reading the body, as a server does before a slow client reads."""
    environ = testing.create_environ(path=path)
    captured: dict[str, str] = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = status
        captured.update({k.lower(): v for k, v in headers})

    body = app(environ, start_response)
    return captured, body


def test_stalled_archive_downloads_leave_threads_for_other_pages(client, forge):
    app = client.app
    slots = max(1, forge.settings.threads // 2)
    held = []
    try:
        for _ in range(slots):
            headers, body = _start(app, "/alice/demo/archive/main.tar")
            assert headers["status"].startswith("200"), headers
            held.append(body)
        headers, body = _start(app, "/alice/demo/archive/main.tar")
        assert headers["status"].startswith("503"), headers
        assert headers["retry-after"] == "5"
        assert b"too many archives" in b"".join(body)
        assert client.simulate_get("/alice/demo").status_code == 200
    finally:
        procs = [body.proc for body in held]
        for body in held:
            body.close()
    assert all(proc.returncode is not None for proc in procs)  # no git child left behind
    result = client.simulate_get("/alice/demo/archive/main.tar")
    assert result.status_code == 200
    assert b"demo-main/" in result.content[:4096]


def test_an_archive_dropped_before_its_first_read_stops_git(client):
    headers, body = _start(client.app, "/alice/demo/archive/main.zip")
    assert headers["status"].startswith("200")
    proc = body.proc
    body.close()  # the client went away before the server sent a byte
    assert proc.returncode is not None


def test_a_broken_archive_frees_its_slot(client, forge):
    for _ in range(forge.settings.threads + 1):
        assert client.simulate_get("/alice/corrupt/archive/main.zip").status_code == 503
    assert client.simulate_get("/alice/demo/archive/main.zip").status_code == 200


# -------------------------------------------------------------------- lines as git sees them


def test_a_lone_carriage_return_is_not_a_line_break():
    assert highlight_lines("a.txt", "a\rb\nc\n") == ["a\u240db", "c"]
    assert highlight_lines("a.txt", "a\r\nb\r\n") == ["a", "b"]
    assert highlight_lines("a.txt", "first\n\n") == ["first", ""]


@pytest.fixture(scope="module")
def lines_forge(tmp_path_factory: pytest.TempPathFactory):
    """A repository whose files Pygments would count differently from git."""
    root = tmp_path_factory.mktemp("lines-repos")
    repo = _init_bare(root / "zed" / "lines.git")

    def commit(files: dict[str, bytes], message: str, when: int, parent: str | None) -> str:
        entries = []
        for name, content in sorted(files.items()):
            blob = git_text_input(repo, content, "hash-object", "-w", "--stdin")
            entries.append(f"100644 blob {blob}\t{name}\n")
        tree = git_text_input(repo, "".join(entries).encode(), "mktree")
        args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
        sha = git(repo, *args, when=when).decode().strip()
        git(repo, "update-ref", "refs/heads/main", sha)
        return sha

    files = {"cr.txt": b"a\rb\nc\n", "blank.txt": b"first\n\n"}
    first = commit(files, "init", EPOCH_START, None)
    second = commit({**files, "cr.txt": b"a\rb\nc\nd\n"}, "add d", EPOCH_START + 60, first)
    forge = start_forge(root, tmp_path_factory.mktemp("lines-data"))
    wait_indexed(forge)
    yield testing.TestClient(create_app(forge)), second
    forge.stop()


def _line_rows(html: str) -> list[str]:
    return re.findall(r'<td class="src"><pre>(.*?)</pre></td>', html, re.S)


def test_file_page_numbers_lines_as_git_does(lines_forge):
    client, _ = lines_forge
    page = client.simulate_get("/zed/lines/src/branch/main/cr.txt")
    assert page.status_code == 200
    assert len(_line_rows(page.text)) == 3  # "a\rb", "c", "d"
    assert 'id="L4"' not in page.text


def _blame_rows(html: str) -> list[str]:
    """The text of each line of a blame page (one row a line: number cell, then text)."""
    return re.findall(r'<td><a href="#L\d+">\d+</a><td>(.*?)\n', html)


def test_blame_keeps_every_line(lines_forge):
    client, _ = lines_forge
    blank = client.simulate_get("/zed/lines/blame/branch/main/blank.txt")
    assert blank.status_code == 200
    assert len(_blame_rows(blank.text)) == 2  # "first" and the empty last line
    cr = client.simulate_get("/zed/lines/blame/branch/main/cr.txt")
    rows = _blame_rows(cr.text)
    assert len(rows) == 3
    assert rows[1] == "c" and rows[2] == "d"


def test_diff_lines_show_their_own_text(lines_forge):
    client, second = lines_forge
    page = client.simulate_get(f"/zed/lines/commit/{second}")
    assert page.status_code == 200
    added = re.findall(r'<tr class="add">.*?<span class="mark">\+</span>(.*?)</pre>', page.text)
    assert added == ["d"]


# ----------------------------------------------------------------------- README link targets


def test_relative_links_are_percent_encoded_once():
    repo = SimpleNamespace(owner="o", name="r")
    html = render_markdown(
        "[a](<name with spaces.txt>) [b](café.md) ![c](img/ü.png) [d](x.md#L3)",
        lambda path, image: (urls.raw if image else urls.src)(repo, "branch", "main", path),
        b"docs",
    )
    assert 'href="/o/r/src/branch/main/docs/name%20with%20spaces.txt"' in html
    assert 'href="/o/r/src/branch/main/docs/caf%C3%A9.md"' in html
    assert 'src="/o/r/raw/branch/main/docs/img/%C3%BC.png"' in html
    assert 'href="/o/r/src/branch/main/docs/x.md#L3"' in html
    assert "%25" not in html


# ------------------------------------------------------------- walks a page must not start


def test_corrupt_repository_path_history_is_an_error_not_an_endless_refresh(client, forge):
    repo = forge.registry.get("alice", "corrupt")
    assert repo.id in forge.indexer.failures
    result = client.simulate_get("/alice/corrupt/commits/branch/main/README.md")
    assert result.status_code == 503
    assert "refresh" not in result.headers
    assert "cannot be indexed" in result.text


def test_history_of_a_path_never_changed_walks_nothing(forge, fixture_root):
    repo = forge.registry.get("alice", "history")
    tip = bytes.fromhex(git_text(fixture_root / "alice" / "history.git", "rev-parse", "main"))
    graph = forge.indexer.ready(repo.id, tip)
    assert graph is not None
    # a budget of one commit: answering by walking to the root would run out of it
    walk = graph.walk([graph.seq[tip]], b"no/such/path")
    assert graph.history(walk, 50, budget=1)
    assert walk.page(0, 50).commits == [] and not walk.page(0, 50).more


def test_deferred_last_commit_walks_are_shared_and_bounded(forge, fixture_root, monkeypatch):
    repo = forge.registry.get("alice", "history")
    history = fixture_root / "alice" / "history.git"
    commits = subprocess.run(
        ["git", f"--git-dir={history}", "rev-list", "-n", "40", "main~200"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split()
    answers = forge.answers
    release = threading.Event()
    started: list[tuple[bytes, bytes]] = []
    real = answers._compute_last

    def slow(graph, repo_id, commit, directory, names, budget):
        if budget is None:
            started.append((commit, directory))
            release.wait(30)
        return real(graph, repo_id, commit, directory, names, budget)

    monkeypatch.setattr(answers_module, "INLINE_BUDGET", 1)
    monkeypatch.setattr(answers, "_compute_last", slow)
    try:
        first = bytes.fromhex(commits[0])
        for _ in range(10):  # one page polled ten times: one walk
            assert answers.last_commits(repo, first, b"", [b"rare.txt"]) is None
        wait_for(lambda: len(started) == 1, timeout=10)
        for sha in commits[1:]:  # forty different pages at once: a bounded number of walks
            assert answers.last_commits(repo, bytes.fromhex(sha), b"", [b"rare.txt"]) is None
        assert len(started) <= answers_module.DEFERRED_WALKS
    finally:
        release.set()
    wait_for(lambda: not answers.busy(), timeout=30)
    answer = answers.last_commits(repo, bytes.fromhex(commits[0]), b"", [b"rare.txt"])
    assert answer is not None


def test_a_warm_page_reads_no_template_file(client, monkeypatch):
    import os.path

    assert client.simulate_get("/alice/demo/branches").status_code == 200  # templates loaded
    checks: list[str] = []
    real = os.path.getmtime

    def getmtime(path):
        checks.append(str(path))
        return real(path)

    monkeypatch.setattr(os.path, "getmtime", getmtime)
    assert client.simulate_get("/alice/demo/branches").status_code == 200
    assert [p for p in checks if p.endswith(".html")] == []


def test_blame_misses_are_bounded_and_hits_are_not(client, forge, fixture_root):
    history = fixture_root / "alice" / "history.git"
    commit = git_text(history, "rev-parse", "main~7")
    miss = f"/alice/history/blame/commit/{commit}/README.md"
    hit = "/alice/demo/blame/branch/main/src/app.py"
    assert client.simulate_get(hit).status_code == 200  # now cached
    slots = forge.git_slots
    held = 0
    while slots.acquire(blocking=False):  # every slot busy with a long archive or blame
        held += 1
    try:
        assert held == max(1, forge.settings.threads // 2)
        busy = client.simulate_get(miss)
        assert busy.status_code == 503
        assert busy.headers["retry-after"] == "5"
        assert "try again" in busy.text
        assert client.simulate_get(hit).status_code == 200
        assert client.simulate_get("/alice/history").status_code == 200
    finally:
        for _ in range(held):
            slots.release()
    assert client.simulate_get(miss).status_code == 200


def test_a_path_history_cursor_of_an_unknown_commit_is_not_an_empty_history(client):
    for url in ("/alice/demo/commits/branch/main", "/alice/demo/commits/branch/main/README.md"):
        result = client.simulate_get(url, params={"after": "a" * 40})
        assert result.status_code == 404, url
        assert "no such commit" in result.text


def test_last_commits_of_a_repository_that_cannot_be_indexed_is_an_error(repos_copy, tmp_path):
    """The page script polls ``/-/last``: it must stop on an error, not poll a 202 forever."""
    forge = Forge(Settings.load(environ={}, data=tmp_path / "data", repos=repos_copy))
    forge.start(background=False)  # nothing indexes: the failure below stays the last word
    forge.answers._defer = lambda *args, **kwargs: None  # nor does git answer before it
    client = testing.TestClient(create_app(forge))
    repo = forge.registry.get("alice", "one")
    sha = git_text(repos_copy / "alice" / "one.git", "rev-parse", "main")
    pending = client.simulate_get(f"/alice/one/-/last/{sha}")
    assert pending.status_code == 202
    assert pending.json == {"ready": False, "entries": {}}
    forge.indexer.failures[repo.id] = "object missing"
    failed = client.simulate_get(f"/alice/one/-/last/{sha}")
    assert failed.status_code == 503
    assert "cannot be indexed" in failed.text


def test_broken_repository_pages_do_not_show_git_internals(client, fixture_root):
    corrupt = fixture_root / "alice" / "corrupt.git"
    header = git_text(corrupt, "cat-file", "-p", "main")
    tree = header.split("\n")[0].split()[1]
    for url in (
        "/alice/corrupt",
        "/alice/corrupt/src/branch/main",
        "/alice/corrupt/raw/branch/main/README.md",
        "/alice/corrupt/archive/main.zip",
    ):
        result = client.simulate_get(url)
        assert result.status_code == 503, url
        assert "cannot be read" in result.text or "cannot read" in result.text, url
        assert tree not in result.text, url
        assert str(corrupt) not in result.text, url


def test_branches_whose_commits_are_all_missing_are_broken_not_empty(repos_copy, tmp_path):
    one = repos_copy / "alice" / "one.git"
    (one / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (one / "packed-refs").unlink(missing_ok=True)
    (one / "refs" / "heads" / "main").write_text("1" * 40 + "\n")
    forge = start_forge(repos_copy, tmp_path / "data")
    try:
        client = testing.TestClient(create_app(forge))
        result = client.simulate_get("/alice/one")
        assert result.status_code == 503
        assert "This repository is empty" not in result.text
        assert client.simulate_get("/alice/empty").status_code == 200
    finally:
        forge.stop()
