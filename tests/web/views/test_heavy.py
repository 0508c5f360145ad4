"""Heavy objects stay within budgets: a large blob's file, blame and raw pages, a large file's
diff, a commit of 50,000 files and a directory of 100,000 entries. libgit2 holds the
interpreter while it inflates or diffs, so what is over a budget is either not read at all
(the page says so) or handed to one git child, under the same slots as archives and blame.
Counts are asserted (processes, entries, patches), never times."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import git
from support.serving import serving
from support.spawns import counting

from floorless.forge import Forge
from floorless.web.app import create_app

WHEN = 1_700_000_000
BIG = 24 * 1024 * 1024  # over every budget below
WIDE = 100_000
MANY = 50_000
BUDGETS = {
    "max_blob_page_bytes": 1 << 20,
    "max_blame_bytes": 1 << 20,
    "max_raw_in_process_bytes": 1 << 20,
    "max_diff_file_bytes": 256 << 10,
    "max_diff_bytes": 1 << 20,
    "max_diff_files": 50,
    "max_diff_listed": 400,
    "max_tree_entries": 500,
}
FILE = pygit2.enums.FileMode.BLOB
TREE = pygit2.enums.FileMode.TREE


def big_text(size: int, changed: bytes = b"") -> bytes:
    line = b"%09d the quick brown fox jumps over the lazy dog, again and again\n"
    lines = [line % i for i in range(size // len(line % 0) + 1)]
    if changed:
        lines[len(lines) // 2] = changed
    return b"".join(lines)


def build_heavy(path: Path) -> dict[str, str]:
    """A large file, then one line of it changed, then 50,000 files added in one commit; a
    directory of 100,000 entries throughout."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)
    big1 = repo.create_blob(big_text(BIG))
    big2 = repo.create_blob(big_text(BIG, b"a changed line in the middle\n"))
    same = repo.create_blob(b"one line\n")
    wide = repo.TreeBuilder()
    for i in range(WIDE):
        wide.insert(f"f{i:06d}.txt", same, FILE)
    wide_id = wide.write()
    many = repo.TreeBuilder()
    for i in range(MANY):
        many.insert(f"m{i:06d}.txt", repo.create_blob(b"file %d\n" % i), FILE)
    many_id = many.write()

    def root(big: pygit2.Oid, with_many: bool = False) -> pygit2.Oid:
        tb = repo.TreeBuilder()
        tb.insert("README.md", repo.create_blob(b"# heavy\n"), FILE)
        tb.insert("small.txt", repo.create_blob(b"small\n"), FILE)
        tb.insert("big.txt", big, FILE)
        tb.insert("wide", wide_id, TREE)
        if with_many:
            tb.insert("many", many_id, TREE)
        return tb.write()

    first = repo.create_commit(None, sig, sig, "Add a large file\n", root(big1), [])
    changed = repo.create_commit(None, sig, sig, "Change one line\n", root(big2), [first])
    added = repo.create_commit(None, sig, sig, "Add many files\n", root(big2, True), [changed])
    repo.references.create("refs/heads/main", added)
    return {"changed": str(changed), "added": str(added), "big": str(big2)}


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("heavy")
    ids = build_heavy(root / "alice" / "heavy.git")
    return root, ids


@pytest.fixture(scope="module")
def forge(heavy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    forge = start_forge(heavy[0], tmp_path_factory.mktemp("heavy-data"), **BUDGETS)
    wait_indexed(forge)  # blobs asked for by id are served once the index says they are reachable
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def get(client: testing.TestClient, url: str, **kwargs) -> tuple[testing.Result, int]:
    with counting() as events:
        result = client.simulate_get(url, **kwargs)
    return result, len(events)


def test_file_page_of_a_large_blob_is_not_read(client):
    result, spawns = get(client, "/alice/heavy/src/branch/main/big.txt")
    assert result.status_code == 200 and spawns == 0
    notice = re.search(r'<p class="notice too-large">(.*?)</p>', result.text, re.S)
    assert notice and "too large to show" in notice.group(1)
    assert 'href="/alice/heavy/raw/branch/main/big.txt"' in notice.group(1)
    assert "the quick brown fox" not in result.text  # not a line of it was read
    assert "/blame/" not in result.text  # no link to a blame that would refuse


def test_blame_of_a_large_blob_is_refused_without_a_process(client):
    result, spawns = get(client, "/alice/heavy/blame/branch/main/big.txt")
    assert result.status_code == 200 and spawns == 0
    assert "too large to blame" in result.text


def test_raw_large_blob_streams_from_one_git_child(client, heavy):
    root, ids = heavy
    data = git(root / "alice" / "heavy.git", "cat-file", "blob", ids["big"])
    assert len(data) > BUDGETS["max_raw_in_process_bytes"]
    for url in ("/alice/heavy/raw/branch/main/big.txt", f"/alice/heavy/raw/blob/{ids['big']}"):
        result, spawns = get(client, url)
        assert result.status_code == 200 and spawns == 1, url
        assert result.headers["etag"] == f'"{ids["big"]}"'
        assert result.headers["content-type"] == "text/plain; charset=utf-8"
        assert result.content == data
    # a resumed download: the child's bytes before the range are dropped
    start = len(data) - 5_000_000
    result, spawns = get(
        client, "/alice/heavy/raw/branch/main/big.txt", headers={"Range": f"bytes={start}-"}
    )
    assert result.status_code == 206 and spawns == 1
    assert result.headers["content-range"] == f"bytes {start}-{len(data) - 1}/{len(data)}"
    assert result.content == data[start:]
    result, spawns = get(
        client, "/alice/heavy/raw/branch/main/big.txt", headers={"Range": "bytes=10-19"}
    )
    assert result.status_code == 206 and result.content == data[10:20] and spawns == 1
    # what needs no bytes needs no process
    etag = result.headers["etag"]
    result, spawns = get(
        client, "/alice/heavy/raw/branch/main/big.txt", headers={"If-None-Match": etag}
    )
    assert result.status_code == 304 and spawns == 0
    result, spawns = get(
        client, "/alice/heavy/raw/branch/main/big.txt", headers={"Range": f"bytes={len(data)}-"}
    )
    assert result.status_code == 416 and spawns == 0
    # small files keep the in-process path
    result, spawns = get(client, "/alice/heavy/raw/branch/main/small.txt")
    assert result.status_code == 200 and result.content == b"small\n" and spawns == 0


def test_raw_large_blob_is_refused_when_the_git_slots_are_taken(client, forge):
    slots = forge.git_slots
    taken = 0
    while slots.acquire(blocking=False):
        taken += 1
    try:
        result, spawns = get(client, "/alice/heavy/raw/branch/main/big.txt")
        assert result.status_code == 503 and spawns == 0
        assert result.headers["retry-after"] == "5"
        small = client.simulate_get("/alice/heavy/raw/branch/main/small.txt")
        assert small.status_code == 200  # small files need no slot
    finally:
        for _ in range(taken):
            slots.release()
    assert client.simulate_get("/alice/heavy/raw/branch/main/big.txt").status_code == 200


def test_commit_page_shows_a_large_file_without_its_diff(client, heavy):
    _, ids = heavy
    result, spawns = get(client, f"/alice/heavy/commit/{ids['changed']}")
    assert result.status_code == 200 and spawns == 0
    assert "Large file: its diff is not shown." in result.text
    assert "a changed line in the middle" not in result.text
    assert '<table class="diff">' not in result.text


def test_diff_and_patch_of_a_large_file_come_from_git(client, heavy):
    root, ids = heavy
    repo = root / "alice" / "heavy.git"
    expected = git(repo, "diff-tree", "-p", "-M", f"{ids['changed']}^", ids["changed"])
    assert b"+a changed line in the middle" in expected
    result, spawns = get(client, f"/alice/heavy/commit/{ids['changed']}.diff")
    assert result.status_code == 200 and spawns == 1
    assert result.content == expected
    result, spawns = get(client, f"/alice/heavy/commit/{ids['changed']}.patch")
    assert result.status_code == 200 and spawns == 1
    assert result.text.startswith(f"From {ids['changed']} Mon Sep 17 00:00:00 2001\n")
    assert "Subject: [PATCH] Change one line\n" in result.text
    assert " big.txt | 2 +-\n" in result.text
    assert result.content.endswith(expected + b"-- \nfloorless\n\n")


def test_a_commit_of_50000_files_lists_and_diffs_within_the_budget(client, heavy):
    _, ids = heavy
    result, spawns = get(client, f"/alice/heavy/commit/{ids['added']}")
    assert result.status_code == 200 and spawns == 0
    page = result.text
    assert f"{MANY} files changed" in page
    listed = re.findall(r'<li><span class="status added">', page)
    assert len(listed) == BUDGETS["max_diff_listed"]
    assert f"{MANY - BUDGETS['max_diff_listed']} more files changed, not listed" in page
    assert page.count('<table class="diff">') == BUDGETS["max_diff_files"]
    assert "in the files whose diff is shown" in page
    # the whole diff is git's, streamed
    result, spawns = get(client, f"/alice/heavy/commit/{ids['added']}.diff")
    assert result.status_code == 200 and spawns == 1
    assert result.text.count("diff --git ") == MANY


def test_a_directory_of_100000_entries_is_listed_in_pages(client, forge):
    limit = BUDGETS["max_tree_entries"]
    url = "/alice/heavy/src/branch/main/wide"
    seen: list[str] = []
    query = None
    for _ in range(3):
        result, spawns = get(client, url, query_string=query)
        assert result.status_code == 200 and spawns == 0
        names = re.findall(r'<tr data-name="([0-9a-f]*)">', result.text)
        assert len(names) == limit
        assert 'data-ready="yes"' in result.text  # no last commits asked for, not even later
        assert f"This directory has {WIDE} entries" in result.text
        seen += [bytes.fromhex(n).decode() for n in names]
        following = re.search(r'<a rel="next" href="([^"]*)"', result.text)
        assert following
        url, _, query = following.group(1).partition("?")
    assert seen == [f"f{i:06d}.txt" for i in range(3 * limit)]
    last = client.simulate_get(url, query_string="after=f099990.txt")
    assert len(re.findall(r'<tr data-name="', last.text)) == 9
    assert 'rel="next"' not in last.text
    sha = str(pygit2.Repository(str(forge.registry.get("alice", "heavy").path)).head.target)
    answer = client.simulate_get(f"/alice/heavy/-/last/{sha}/wide")
    assert answer.status_code == 200 and answer.json == {"ready": True, "entries": {}}


@pytest.mark.network
def test_a_small_page_answers_while_a_large_download_streams(heavy, tmp_path):
    root, _ = heavy
    config = tmp_path / "floorless.toml"
    config.write_text("".join(f"{k} = {v}\n" for k, v in BUDGETS.items()))
    with serving(root, tmp_path / "data", "--config", str(config)) as server:
        download = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        download.request("GET", "/alice/heavy/raw/branch/main/big.txt")
        response = download.getresponse()
        assert response.status == 200
        assert response.read(1000).startswith(b"000000000 the quick brown fox")
        # the download is not read on: git is blocked writing it, in its own process
        assert any(_is_git(pid) for pid in server.descendants())
        for path in ("/alice/heavy/src/branch/main/small.txt", "/alice/heavy"):
            page = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            page.request("GET", path)
            assert page.getresponse().status == 200, path
            page.close()
        download.close()
        wait_for(lambda: not any(_is_git(pid) for pid in server.descendants()))


def _is_git(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "git"
    except FileNotFoundError:
        return False


def test_heads_of_streamed_answers_leave_every_git_slot_free(client, forge, heavy):
    """HEAD asks for headers only: falcon drops a streamed body for it without closing it, so
    a body left open would keep its git child and slot (two HEADs of a large .diff took every
    slot, and archives, large files and blame answered 503 until a restart)."""
    _, ids = heavy
    slots = max(1, forge.settings.threads // 2)
    urls = [
        f"/alice/heavy/commit/{ids['changed']}.diff",
        f"/alice/heavy/commit/{ids['changed']}.patch",
        "/alice/heavy/raw/branch/main/big.txt",
        "/alice/heavy/archive/main.tar.gz",
    ]
    for url in urls:
        for _ in range(slots + 1):
            with counting() as events:
                result = client.simulate_head(url)
            assert result.status_code == 200, url
            if url.endswith((".diff", ".patch")):
                assert len(events) == 0, url  # no body wanted: no git
    taken = 0
    while forge.git_slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        forge.git_slots.release()
    assert taken == slots
    result, spawns = get(client, "/alice/heavy/archive/main.tar.gz")
    assert result.status_code == 200 and spawns == 1
