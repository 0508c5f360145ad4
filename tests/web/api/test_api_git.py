"""The API's git endpoints against git itself: branches, tags, refs, commits, trees, blobs,
contents and raw files read from the fixture repositories and compared with what ``git``
answers, byte for byte; no process started by a read; bad paths a clear 4xx; a private
repository 404 everywhere to those who may not read it. Writing files and branches: seen
by ``git`` with the right author and message, a stale blob id refused with nothing written,
racing writers never losing a commit."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD
from support.forges import start_forge, wait_indexed
from support.gitfixtures import DEMO_INVALID_UTF8_PATH, build_one, git, git_env, git_text
from support.rawcalls import _call
from support.spawns import counting

from floorless.forge import Forge
from floorless.web.app import create_app

API = "/api/v1/repos"
DEMO = f"{API}/alice/demo"


def get_json(client: testing.TestClient, url: str, **headers: str) -> tuple[testing.Result, object]:
    result = client.simulate_get(url, headers=headers or None)
    assert result.status_code == 200, (url, result.status_code, result.text[:300])
    assert result.headers["content-type"].startswith("application/json")
    return result, json.loads(result.text)


@pytest.fixture(scope="module")
def demo(fixture_root: Path) -> Path:
    return fixture_root / "alice" / "demo.git"


# ---------------------------------------------------------------------------------- reading


def test_branches_as_git_has_them(client: testing.TestClient, demo: Path) -> None:
    refs = git_text(
        demo, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads"
    )
    expected = dict(line.split() for line in refs.splitlines())
    result, found = get_json(client, f"{DEMO}/branches?limit=2")
    assert result.headers["x-total-count"] == str(len(expected))
    assert found[0]["name"] == "main"  # the default branch first
    assert 'rel="next"' in result.headers["link"]
    seen = {}
    for page in range(1, 4):
        _, items = get_json(client, f"{DEMO}/branches?limit=2&page={page}")
        seen.update({b["name"]: b["commit"]["id"] for b in items})
    assert seen == expected
    _, one = get_json(client, f"{DEMO}/branches/feature/x")
    assert one["name"] == "feature/x" and one["commit"]["id"] == expected["feature/x"]
    assert one["commit"]["author"]["email"] == git_text(
        demo, "log", "-1", "--format=%ae", "feature/x"
    )
    assert one["user_can_push"] is False  # anonymous
    missing = client.simulate_get(f"{DEMO}/branches/feature/none")
    assert missing.status_code == 404


def test_tags_and_refs(client: testing.TestClient, demo: Path) -> None:
    _, tags = get_json(client, f"{DEMO}/tags")
    by_name = {t["name"]: t for t in tags}
    assert set(by_name) == set(git_text(demo, "tag").split())
    for name, tag in by_name.items():
        assert tag["id"] == git_text(demo, "rev-parse", f"refs/tags/{name}")
        assert tag["commit"]["sha"] == git_text(demo, "rev-parse", f"refs/tags/{name}^{{commit}}")
        assert tag["tarball_url"].endswith(f"/alice/demo/archive/{name}.tar.gz")
    assert by_name["v2.0"]["message"] == "Version 2.0\n\nWith feature X.\n"
    _, one = get_json(client, f"{DEMO}/tags/v2.0")
    assert one == by_name["v2.0"]
    assert client.simulate_get(f"{DEMO}/tags/v9").status_code == 404

    _, refs = get_json(client, f"{DEMO}/git/refs")
    listed = git_text(demo, "for-each-ref", "--format=%(refname) %(objectname) %(objecttype)")
    expected = {line.split()[0]: line.split()[1:] for line in listed.splitlines()}
    assert {r["ref"]: [r["object"]["sha"], r["object"]["type"]] for r in refs} == expected
    _, heads = get_json(client, f"{DEMO}/git/refs/heads")
    assert {r["ref"] for r in heads} == {k for k in expected if k.startswith("refs/heads/")}
    _, one_ref = get_json(client, f"{DEMO}/git/refs/heads/feature/x")
    assert [r["ref"] for r in one_ref] == ["refs/heads/feature/x"]
    assert client.simulate_get(f"{DEMO}/git/refs/heads/nothing").status_code == 404


def test_commits_in_pages_as_git_log(client: testing.TestClient, demo: Path) -> None:
    log = git_text(demo, "log", "--format=%H", "main").split()
    result, first = get_json(client, f"{DEMO}/commits?limit=4")
    assert [c["sha"] for c in first] == log[:4]
    assert result.headers["x-hasmore"] == "true"
    _, second = get_json(client, f"{DEMO}/commits?limit=4&page=2")
    assert [c["sha"] for c in second] == log[4:8]
    last_page = (len(log) + 3) // 4
    result, last = get_json(client, f"{DEMO}/commits?limit=4&page={last_page}")
    assert [c["sha"] for c in last] == log[(last_page - 1) * 4 :]
    assert result.headers["x-hasmore"] == "false"
    _, feature = get_json(client, f"{DEMO}/commits?sha=feature/x&limit=50")
    assert [c["sha"] for c in feature] == git_text(demo, "log", "--format=%H", "feature/x").split()
    for path in ("docs/guide.md", "src", "README.md"):
        _, found = get_json(client, f"{DEMO}/commits?path={path}&limit=50")
        assert [c["sha"] for c in found] == git_text(
            demo, "log", "--format=%H", "main", "--", path
        ).split(), path

    commit = first[0]
    sha = commit["sha"]
    assert commit["commit"]["message"] == git_text(demo, "log", "-1", "--format=%B", sha) + "\n"
    assert commit["commit"]["author"]["name"] == git_text(demo, "log", "-1", "--format=%an", sha)
    assert commit["commit"]["tree"]["sha"] == git_text(demo, "rev-parse", f"{sha}^{{tree}}")
    assert [p["sha"] for p in commit["parents"]] == git_text(
        demo, "log", "-1", "--format=%P", sha
    ).split()
    numstat = git_text(demo, "diff", "--numstat", f"{sha}^", sha).splitlines()
    added = sum(int(line.split()[0]) for line in numstat)
    deleted = sum(int(line.split()[1]) for line in numstat)
    assert commit["stats"] == {"total": added + deleted, "additions": added, "deletions": deleted}
    assert [f["filename"] for f in commit["files"]] == [line.split("\t")[2] for line in numstat]
    _, bare = get_json(client, f"{DEMO}/commits?limit=1&stat=false&files=false")
    assert "stats" not in bare[0] and "files" not in bare[0]

    _, single = get_json(client, f"{DEMO}/git/commits/{sha}")
    assert single == commit
    _, by_short = get_json(client, f"{DEMO}/git/commits/{sha[:10]}")
    assert by_short["sha"] == sha
    _, by_branch = get_json(client, f"{DEMO}/git/commits/main")
    assert by_branch["sha"] == sha
    assert client.simulate_get(f"{DEMO}/git/commits/{'0' * 40}").status_code == 404
    assert client.simulate_get(f"{DEMO}/commits?sha=nowhere").status_code == 404
    assert client.simulate_get(f"{DEMO}/commits?stat=maybe").status_code == 400


def test_trees_as_ls_tree(client: testing.TestClient, demo: Path) -> None:
    _, top = get_json(client, f"{DEMO}/git/trees/main")
    listed = git(demo, "ls-tree", "-l", "main").decode("utf-8", "replace").splitlines()
    expected = []
    for line in listed:
        meta, name = line.split("\t", 1)
        mode, kind, sha, size = meta.split()
        expected.append([name.strip('"'), mode, kind, sha, 0 if size == "-" else int(size)])
    shaped = [[e["path"], e["mode"], e["type"], e["sha"], e["size"]] for e in top["tree"]]
    # names git quotes (non-UTF-8, spaces) are compared by id: the JSON name is replaced text
    assert [row[1:] for row in shaped] == [row[1:] for row in expected]
    assert top["sha"] == git_text(demo, "rev-parse", "main^{tree}") and top["truncated"] is False

    deep = git_text(demo, "ls-tree", "-r", "-t", "--format=%(objectname)", "main").split()
    _, whole = get_json(client, f"{DEMO}/git/trees/{top['sha']}?recursive=true&per_page=5")
    assert whole["total_count"] == len(deep) and whole["truncated"] is True
    ids = []
    for page in range(1, len(deep) // 5 + 2):
        _, part = get_json(
            client, f"{DEMO}/git/trees/{top['sha']}?recursive=1&per_page=5&page={page}"
        )
        ids += [e["sha"] for e in part["tree"]]
    assert ids == deep
    assert client.simulate_get(f"{DEMO}/git/trees/{'1' * 40}").status_code == 404


def test_blobs_contents_and_raw_are_byte_exact(client: testing.TestClient, demo: Path) -> None:
    for path in ("README.md", "data/blob.bin", "images/logo.png", "no_newline.txt"):
        expected = git(demo, "show", f"main:{path}")
        sha = git_text(demo, "rev-parse", f"main:{path}")
        _, blob = get_json(client, f"{DEMO}/git/blobs/{sha}")
        assert base64.b64decode(blob["content"]) == expected and blob["size"] == len(expected)
        _, content = get_json(client, f"{DEMO}/contents/{path}")
        assert content["type"] == "file" and content["sha"] == sha and content["path"] == path
        assert base64.b64decode(content["content"]) == expected
        assert content["download_url"].endswith(f"/alice/demo/raw/branch/main/{path}")
        assert content["last_commit_sha"] in (
            None,
            git_text(demo, "log", "-1", "--format=%H", "main", "--", path),
        )
        raw = client.simulate_get(f"{DEMO}/raw/{path}")
        assert raw.status_code == 200 and raw.content == expected
        assert client.simulate_get(f"{DEMO}/media/{path}").content == expected
    # a ref: as a parameter, or leading the path (Forgejo's older form)
    old = git(demo, "show", "v1.0:README.md")
    assert client.simulate_get(f"{DEMO}/raw/README.md?ref=v1.0").content == old
    assert client.simulate_get(f"{DEMO}/raw/feature/x/docs/feature.md").content == git(
        demo, "show", "feature/x:docs/feature.md"
    )
    _, at_tag = get_json(client, f"{DEMO}/contents/README.md?ref=v1.0")
    assert base64.b64decode(at_tag["content"]) == old
    commit = git_text(demo, "rev-parse", "v1.0^{commit}")
    _, at_commit = get_json(client, f"{DEMO}/contents/README.md?ref={commit}")
    assert at_commit["sha"] == at_tag["sha"]
    # a non-UTF-8 name is read by its exact bytes
    status, _, body = _call(client.app, f"{DEMO}/raw/".encode() + DEMO_INVALID_UTF8_PATH)
    assert status.startswith("200") and body == b"latin bytes\n"

    _, root = get_json(client, f"{DEMO}/contents")
    names = git(demo, "ls-tree", "--name-only", "-z", "main").split(b"\0")[:-1]
    assert sorted(e["sha"] for e in root) == sorted(
        git_text(demo, "ls-tree", "--format=%(objectname)", "main").split()
    )
    assert len(root) == len(names)
    kinds = {e["name"]: e["type"] for e in root}
    assert kinds["docs"] == "dir" and kinds["link-to-readme"] == "symlink"
    assert kinds["README.md"] == "file" and kinds["vendor"] == "dir"
    assert all(e["content"] is None for e in root)
    _, vendor = get_json(client, f"{DEMO}/contents/vendor")
    assert [e["type"] for e in vendor] == ["submodule"]
    _, link = get_json(client, f"{DEMO}/contents/link-to-readme")
    assert link["type"] == "symlink" and link["target"] == "README.md"


@pytest.mark.parametrize(
    "url",
    [
        "/contents/..%2f..%2fetc/passwd",
        "/contents/docs/../../x",
        "/contents/%2e%2e/x",
        "/contents/a%00b",
        "/raw/..%2fHEAD",
        "/raw/a%00",
        "/contents/README.md?ref=..%2f..",
        "/contents/missing.txt",
        "/raw/nowhere/at/all",
        "/commits?path=..%2fx",
        "/git/blobs/xyz",
        "/git/trees/%ff",
        "/contents/README.md?ref=%ff",
    ],
)
def test_bad_paths_are_a_clear_4xx(client: testing.TestClient, url: str) -> None:
    result = client.simulate_get(DEMO + url)
    assert 400 <= result.status_code < 500, (url, result.status_code, result.text[:200])
    if "/raw/" not in url:
        assert "message" in json.loads(result.text)


def test_reads_start_no_process(client: testing.TestClient, demo: Path) -> None:
    sha = git_text(demo, "rev-parse", "main")
    blob = git_text(demo, "rev-parse", "main:README.md")
    urls = [
        "/branches",
        "/branches/feature/x",
        "/tags",
        "/tags/v2.0",
        "/git/refs",
        "/commits?limit=5",
        "/commits?path=docs/guide.md",
        f"/git/commits/{sha}",
        "/git/trees/main?recursive=true",
        f"/git/blobs/{blob}",
        "/contents",
        "/contents/docs",
        "/contents/README.md",
        "/raw/README.md",
        "/media/images/logo.png",
    ]
    for url in urls:
        client.simulate_get(DEMO + url)  # warm: the index answers, the caches fill
        with counting() as events:
            result = client.simulate_get(DEMO + url)
        assert result.status_code == 200, (url, result.text[:200])
        assert events == [], url


def test_archive_through_the_api(client: testing.TestClient) -> None:
    result = client.simulate_get(f"{DEMO}/archive/v2.0.tar.gz")
    assert result.status_code == 200 and result.content[:2] == b"\x1f\x8b"
    assert client.simulate_get(f"{DEMO}/archive/nothing.zip").status_code == 404


# ---------------------------------------------------------------------------------- writing


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Forge, testing.TestClient, dict[str, str]]]:
    """ann owns ann/plans (one commit) and ann/secret (private); ben may write to plans,
    cat may read it; each has a token."""
    repos = tmp_path / "repos"
    forge = start_forge(repos, tmp_path / "data")
    tokens = {}
    for name in ("ann", "ben", "cat", "dan"):
        user = forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
        tokens[name] = forge.accounts.create_token(user, "write")[0]
    plans = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    for repo in (plans, secret):
        shutil.rmtree(repo.path)
        build_one(repo.path)
        forge.moves.refs_moved(repo)
    forge.policy.set_collaborator(plans, forge.accounts.get("ben"), "write")  # type: ignore[arg-type]
    forge.policy.set_collaborator(plans, forge.accounts.get("cat"), "read")  # type: ignore[arg-type]
    wait_indexed(forge)
    yield forge, testing.TestClient(create_app(forge)), tokens
    forge.stop()


def call(
    client: testing.TestClient, method: str, url: str, token: str | None, body: object = None
) -> testing.Result:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    return client.simulate_request(
        method, url, headers=headers, body=None if body is None else json.dumps(body)
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_write_a_file_and_fetch_it(site, tmp_path: Path) -> None:
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    result = call(
        client,
        "POST",
        f"{API}/ann/plans/contents/notes/today.md",
        tokens["ben"],
        {
            "content": b64(b"# Today\n"),
            "message": "Write today's notes",
            "author": {"name": "Ben Writer", "email": "ben.writer@example.org"},
        },
    )
    assert result.status_code == 201, result.text
    answer = json.loads(result.text)
    sha = answer["commit"]["sha"]
    assert answer["content"]["path"] == "notes/today.md"
    assert base64.b64decode(answer["content"]["content"]) == b"# Today\n"
    assert git_text(repo.path, "rev-parse", "main") == sha
    assert git_text(repo.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", "main") == (
        "Ben Writer <ben.writer@example.org>|Ben Writer <ben.writer@example.org>|"
        "Write today's notes"
    )
    # pages see it at once (the branch moved as after a push), and so does the API
    _, listed = get_json(client, f"{API}/ann/plans/commits?limit=1")
    assert listed[0]["sha"] == sha

    # a clone through git over HTTP would need a server: a local fetch of the same objects
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True, env=git_env())
    assert (clone / "notes" / "today.md").read_bytes() == b"# Today\n"

    blob = answer["content"]["sha"]
    updated = call(
        client,
        "PUT",
        f"{API}/ann/plans/contents/notes/today.md",
        tokens["ann"],
        {"content": b64(b"# Today, again\n"), "sha": blob},
    )
    assert updated.status_code == 200, updated.text
    assert git_text(repo.path, "log", "-1", "--format=%an <%ae> %s", "main") == (
        "ann <ann@example.org> Update 'notes/today.md'"
    )
    # the stale sha again: 409, nothing written
    before = git_text(repo.path, "rev-parse", "main")
    stale = call(
        client,
        "PUT",
        f"{API}/ann/plans/contents/notes/today.md",
        tokens["ann"],
        {"content": b64(b"lost\n"), "sha": blob},
    )
    assert stale.status_code == 409 and "message" in json.loads(stale.text)
    assert git_text(repo.path, "rev-parse", "main") == before
    gone = call(
        client,
        "DELETE",
        f"{API}/ann/plans/contents/notes/today.md",
        tokens["ann"],
        {"sha": git_text(repo.path, "rev-parse", "main:notes/today.md"), "new_branch": "cleanup"},
    )
    assert gone.status_code == 200, gone.text
    assert json.loads(gone.text)["content"] is None
    assert git_text(repo.path, "rev-parse", "main") == before
    assert "notes" not in git_text(repo.path, "ls-tree", "--name-only", "cleanup").split()


def test_several_files_in_one_commit(site) -> None:
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    readme = git_text(repo.path, "rev-parse", "main:README.md")
    result = call(
        client,
        "POST",
        f"{API}/ann/plans/contents",
        tokens["ann"],
        {
            "branch": "main",
            "new_branch": "topic/more",
            "message": "Several at once",
            "files": [
                {"operation": "create", "path": "a.txt", "content": b64(b"a\n")},
                {
                    "operation": "update",
                    "path": "README.md",
                    "content": b64(b"new\n"),
                    "sha": readme,
                },
                {"operation": "create", "path": "dir/b.bin", "content": b64(bytes(range(256)))},
            ],
        },
    )
    assert result.status_code == 201, result.text
    answer = json.loads(result.text)
    assert [f["path"] for f in answer["files"]] == ["a.txt", "README.md", "dir/b.bin"]
    assert git_text(repo.path, "rev-list", "--count", "topic/more") == "2"
    assert git(repo.path, "show", "topic/more:dir/b.bin") == bytes(range(256))
    assert git_text(repo.path, "log", "-1", "--format=%s", "topic/more") == "Several at once"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/contents/x.txt", {"content": "not base64!"}, 422),
        ("POST", "/contents/README.md", {"content": "eA=="}, 422),  # exists
        ("POST", "/contents/x.txt", {"content": 5}, 422),
        ("POST", "/contents/x.txt", {"content": "eA==", "branch": "no..good"}, 422),
        ("POST", "/contents/x.txt", {"content": "eA==", "new_branch": "bad name"}, 422),
        ("POST", "/contents/x.txt", {"content": "eA==", "branch": "missing"}, 404),
        ("POST", "/contents/.git/config", {"content": "eA=="}, 422),
        ("POST", "/contents/a/%2e%2e/b", {"content": "eA=="}, 422),
        ("PUT", "/contents/README.md", {"content": "eA=="}, 422),  # no sha
        ("PUT", "/contents/README.md", {"content": "eA==", "sha": "1" * 40}, 409),
        ("DELETE", "/contents/missing.txt", {"sha": "1" * 40}, 404),
        ("POST", "/contents", {"files": []}, 422),
        ("POST", "/contents", {"files": [{"operation": "move", "path": "a"}]}, 422),
        ("POST", "/branches", {"new_branch_name": "main"}, 409),
        ("POST", "/branches", {"new_branch_name": "x..y"}, 422),
        ("POST", "/branches", {"new_branch_name": "n", "old_ref_name": "nowhere"}, 404),
        ("DELETE", "/branches/main", None, 403),
        ("DELETE", "/branches/none", None, 404),
    ],
)
def test_bad_writes_write_nothing(site, method: str, path: str, body, status: int) -> None:
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    before = git_text(repo.path, "for-each-ref")
    result = call(client, method, f"{API}/ann/plans{path}", tokens["ann"], body)
    assert result.status_code == status, result.text
    assert "message" in json.loads(result.text)
    assert git_text(repo.path, "for-each-ref") == before


def test_malformed_json_is_refused(site) -> None:
    _forge, client, tokens = site
    result = client.simulate_post(
        f"{API}/ann/plans/contents/x.txt",
        headers={"Authorization": f"token {tokens['ann']}", "Content-Type": "application/json"},
        body="{not json",
    )
    assert 400 <= result.status_code < 500


def test_branches_created_and_deleted(site) -> None:
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    main = git_text(repo.path, "rev-parse", "main")
    made = call(
        client, "POST", f"{API}/ann/plans/branches", tokens["ben"], {"new_branch_name": "topic/a"}
    )
    assert made.status_code == 201, made.text
    assert json.loads(made.text)["commit"]["id"] == main
    assert git_text(repo.path, "rev-parse", "topic/a") == main
    _, listed = get_json(client, f"{API}/ann/plans/branches")
    assert {b["name"] for b in listed} == {"main", "topic/a"}
    gone = call(client, "DELETE", f"{API}/ann/plans/branches/topic/a", tokens["ben"])
    assert gone.status_code == 204
    assert git_text(repo.path, "branch", "--list") == "main" or "topic/a" not in git_text(
        repo.path, "branch", "--list"
    )


def test_who_may_write(site) -> None:
    _forge, client, tokens = site
    body = {"content": b64(b"x\n")}
    url = f"{API}/ann/plans/contents/x.txt"
    assert call(client, "POST", url, None, body).status_code == 401
    assert call(client, "POST", url, tokens["cat"], body).status_code == 403  # reads only
    assert call(client, "POST", url, tokens["dan"], body).status_code == 403  # public: reads
    secret = f"{API}/ann/secret/contents/x.txt"
    assert call(client, "POST", secret, tokens["dan"], body).status_code == 404
    assert call(client, "POST", secret, tokens["ann"], body).status_code == 201


def test_a_private_repository_is_404_everywhere(site) -> None:
    forge, client, tokens = site
    repo = forge.registry.get("ann", "secret")
    sha = git_text(repo.path, "rev-parse", "main")
    blob = git_text(repo.path, "rev-parse", "main:README.md")
    paths = [
        "/branches",
        "/branches/main",
        "/tags",
        "/tags/v1",
        "/commits",
        f"/git/commits/{sha}",
        "/git/refs",
        "/git/refs/heads",
        f"/git/trees/{sha}",
        f"/git/blobs/{blob}",
        "/contents",
        "/contents/README.md",
        "/raw/README.md",
        "/media/README.md",
        "/archive/main.tar.gz",
    ]
    for path in paths:
        for token in (None, tokens["dan"]):
            headers = {"Authorization": f"token {token}"} if token else None
            result = client.simulate_get(f"{API}/ann/secret{path}", headers=headers)
            missing = client.simulate_get(f"{API}/ann/nothing{path}", headers=headers)
            assert result.status_code == missing.status_code == (401 if token is None else 404) or (
                result.status_code == missing.status_code == 404
            ), (path, token, result.status_code, missing.status_code)
            assert result.text == missing.text
        allowed = client.simulate_get(
            f"{API}/ann/secret{path}", headers={"Authorization": f"token {tokens['ann']}"}
        )
        assert allowed.status_code in (200, 404), (path, allowed.status_code)


def test_racing_writers_through_the_api(site) -> None:
    """Six writers on one branch at once, each its own file: every answer is 201 or 409, and
    the branch holds exactly the commits answered 201."""
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    start = threading.Barrier(6)
    answers: list[testing.Result] = []

    def writer(number: int) -> None:
        start.wait()
        answers.append(
            call(
                client,
                "POST",
                f"{API}/ann/plans/contents/w{number}.txt",
                tokens["ann"],
                {"content": b64(f"{number}\n".encode())},
            )
        )

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {a.status_code for a in answers} <= {201, 409}
    landed = {json.loads(a.text)["commit"]["sha"] for a in answers if a.status_code == 201}
    assert landed
    history = set(git_text(repo.path, "rev-list", "main").split())
    assert landed <= history and len(history) == 1 + len(landed)


def test_compare_as_git(client: testing.TestClient, demo: Path) -> None:
    _, found = get_json(client, f"{DEMO}/compare/v1.0...feature/x")
    expected = git_text(demo, "log", "--format=%H", "v1.0..feature/x").split()
    assert [c["sha"] for c in found["commits"]] == expected
    assert found["total_commits"] == len(expected)
    base = git_text(demo, "merge-base", "v1.0", "feature/x")
    names = git_text(demo, "diff", "--name-only", base, "feature/x").split()
    assert sorted(f["filename"] for f in found["files"]) == sorted(names)
    _, same = get_json(client, f"{DEMO}/compare/main...main")
    assert same["total_commits"] == 0 and same["commits"] == [] and same["files"] == []
    assert client.simulate_get(f"{DEMO}/compare/main").status_code == 404
    assert client.simulate_get(f"{DEMO}/compare/main...nowhere").status_code == 404


# ------------------------------------------------------------------- pyforgejo, end to end


def test_pyforgejo_reads_and_writes(site) -> None:
    """Every answer parses into pyforgejo's models (generated from Forgejo's description):
    list and read what git has, write through the API, and see it with git."""
    import httpx
    from pyforgejo import PyforgejoApi
    from pyforgejo.core.api_error import ApiError
    from pyforgejo.types import ChangeFileOperation, Identity

    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    base = "http://forge.test"
    with httpx.Client(transport=httpx.WSGITransport(app=client.app), base_url=base) as http:
        api = PyforgejoApi(base_url=base + "/api/v1", api_key=tokens["ann"], httpx_client=http)
        rest = api.repository
        branches = rest.repo_list_branches("ann", "plans")
        assert [b.name for b in branches] == ["main"]
        main = git_text(repo.path, "rev-parse", "main")
        assert branches[0].commit is not None and branches[0].commit.id == main
        made = rest.repo_create_file(
            "ann",
            "plans",
            "docs/a b.md",
            content=b64(b"# A\n"),
            message="Add a page",
            author=Identity(name="Ann Author", email="ann.author@example.org"),
            new_branch="topic/docs",
        )
        assert made.commit is not None and made.content is not None
        assert made.content.path == "docs/a b.md"
        assert git_text(repo.path, "log", "-1", "--format=%an|%s", "topic/docs") == (
            "Ann Author|Add a page"
        )
        updated = rest.repo_update_file(
            "ann",
            "plans",
            "docs/a b.md",
            content=b64(b"# B\n"),
            sha=made.content.sha or "",
            branch="topic/docs",
        )
        assert updated.commit is not None and updated.commit.parents
        assert updated.commit.parents[0].sha == made.commit.sha
        changed = rest.repo_change_files(
            "ann",
            "plans",
            branch="topic/docs",
            files=[
                ChangeFileOperation(operation="create", path="c.txt", content=b64(b"c\n")),
                ChangeFileOperation(
                    operation="update",
                    path="docs/moved.md",
                    from_path="docs/a b.md",
                    content=b64(b"# C\n"),
                    sha=git_text(repo.path, "rev-parse", "topic/docs:docs/a b.md"),
                ),
            ],
        )
        assert changed.files is not None and [f.path for f in changed.files] == [
            "c.txt",
            "docs/moved.md",
        ]
        # A deleted file is null among the files, as Forgejo answers (its handler appends
        # the nil it gets for a file no longer there); pyforgejo's model, a list of
        # ContentsResponse, cannot take that, so this one goes by plain HTTP.
        answer = http.post(
            "/api/v1/repos/ann/plans/contents",
            headers={"Authorization": f"token {tokens['ann']}"},
            json={
                "branch": "topic/docs",
                "files": [
                    {
                        "operation": "delete",
                        "path": "docs/moved.md",
                        "sha": git_text(repo.path, "rev-parse", "topic/docs:docs/moved.md"),
                    }
                ],
            },
        )
        assert answer.status_code == 201 and answer.json()["files"] == [None]
        deleted = rest.repo_delete_file(
            "ann",
            "plans",
            "c.txt",
            sha=git_text(repo.path, "rev-parse", "topic/docs:c.txt"),
            branch="topic/docs",
        )
        assert deleted.commit is not None
        with pytest.raises(ApiError) as stale:
            rest.repo_update_file("ann", "plans", "README.md", content=b64(b"x"), sha="1" * 40)
        assert stale.value.status_code == 409

        tip = git_text(repo.path, "rev-parse", "topic/docs")
        commits = rest.repo_get_all_commits("ann", "plans", sha="topic/docs", limit=10)
        assert [c.sha for c in commits] == git_text(repo.path, "log", "--format=%H", tip).split()
        assert commits[0].commit is not None and commits[0].commit.author is not None
        single = rest.repo_get_single_commit("ann", "plans", tip)
        assert single.sha == tip and single.stats is not None
        refs = rest.repo_list_all_git_refs("ann", "plans")
        assert {r.ref for r in refs} == {"refs/heads/main", "refs/heads/topic/docs"}
        assert [r.ref for r in rest.repo_list_git_refs("ann", "plans", "heads/topic")] == [
            "refs/heads/topic/docs"
        ]
        tree = rest.get_tree("ann", "plans", tip, recursive=True)
        assert tree.tree is not None and {e.path for e in tree.tree} == set(
            git_text(repo.path, "ls-tree", "-r", "-t", "--name-only", tip).split()
        )
        readme = git_text(repo.path, "rev-parse", "main:README.md")
        blob = rest.get_blob("ann", "plans", readme)
        assert base64.b64decode(blob.content or "") == git(repo.path, "show", "main:README.md")
        listing = rest.repo_get_contents_list("ann", "plans", ref="topic/docs")
        assert {c.name for c in listing} == set(
            git_text(repo.path, "ls-tree", "--name-only", "topic/docs").split()
        )
        one = rest.repo_get_contents("ann", "plans", "README.md")
        assert one is not None
        assert b"".join(rest.repo_get_raw_file("ann", "plans", "README.md")) == git(
            repo.path, "show", "main:README.md"
        )
        compared = rest.repo_compare_diff("ann", "plans", "main...topic/docs")
        assert compared.total_commits == int(
            git_text(repo.path, "rev-list", "--count", "main..topic/docs")
        )
        assert compared.files == []  # the branch came back to main's tree
        made_branch = rest.repo_create_branch("ann", "plans", new_branch_name="release/1")
        assert made_branch.name == "release/1"
        assert rest.repo_get_branch("ann", "plans", "release/1").name == "release/1"
        rest.repo_delete_branch("ann", "plans", "release/1")
        assert "release/1" not in git_text(repo.path, "branch", "--list")
        assert rest.repo_list_tags("ann", "plans") == []


def test_the_description_has_every_field_of_the_answers(site) -> None:
    """Each git shape's definition in /swagger.v1.json has exactly a real answer's fields."""
    forge, client, tokens = site
    repo = forge.registry.get("ann", "plans")
    sha = git_text(repo.path, "rev-parse", "main")
    auth = tokens["ann"]
    document = json.loads(client.simulate_get("/swagger.v1.json").text)
    made = call(client, "POST", f"{API}/ann/plans/branches", auth, {"new_branch_name": "b"})
    wrote = call(client, "POST", f"{API}/ann/plans/contents/x.txt", auth, {"content": b64(b"x")})
    several = call(
        client,
        "POST",
        f"{API}/ann/plans/contents",
        auth,
        {"files": [{"operation": "create", "path": "y.txt", "content": b64(b"y")}]},
    )
    removed = call(
        client,
        "DELETE",
        f"{API}/ann/plans/contents/y.txt",
        auth,
        {"sha": git_text(repo.path, "rev-parse", "main:y.txt")},
    )
    git(repo.path, "tag", "-a", "-m", "A tag", "v1", "main")
    forge.moves.refs_moved(repo)
    commit = get_json(client, f"{API}/ann/plans/git/commits/{sha}")[1]
    answers = {
        "Branch": json.loads(made.text),
        "PayloadCommit": json.loads(made.text)["commit"],
        "PayloadUser": json.loads(made.text)["commit"]["author"],
        "PayloadCommitVerification": json.loads(made.text)["commit"]["verification"],
        "Tag": get_json(client, f"{API}/ann/plans/tags/v1")[1],
        "CommitMeta": get_json(client, f"{API}/ann/plans/tags/v1")[1]["commit"],
        "Reference": get_json(client, f"{API}/ann/plans/git/refs")[1][0],
        "GitObject": get_json(client, f"{API}/ann/plans/git/refs")[1][0]["object"],
        "Commit": commit,
        "RepoCommit": commit["commit"],
        "CommitUser": commit["commit"]["author"],
        "CommitStats": commit["stats"],
        "CommitAffectedFiles": commit["files"][0],
        "GitTreeResponse": get_json(client, f"{API}/ann/plans/git/trees/main")[1],
        "GitEntry": get_json(client, f"{API}/ann/plans/git/trees/main")[1]["tree"][0],
        "GitBlobResponse": get_json(
            client, f"{API}/ann/plans/git/blobs/{git_text(repo.path, 'rev-parse', 'main:x.txt')}"
        )[1],
        "ContentsResponse": get_json(client, f"{API}/ann/plans/contents/x.txt")[1],
        "FileLinksResponse": get_json(client, f"{API}/ann/plans/contents/x.txt")[1]["_links"],
        "FileResponse": json.loads(wrote.text),
        "FileCommitResponse": json.loads(wrote.text)["commit"],
        "FilesResponse": json.loads(several.text),
        "FileDeleteResponse": json.loads(removed.text),
        "Compare": get_json(client, f"{API}/ann/plans/compare/b...main")[1],
    }
    for name, answer in answers.items():
        assert set(document["definitions"][name]["properties"]) == set(answer), name
    parent = answers["FileCommitResponse"]["parents"][0]
    assert set(document["definitions"]["CommitMeta"]["properties"]) == set(parent)


# ------------------------------------------------------ a real server, real git over HTTP


def test_api_writes_and_git_over_http_meet(tmp_path: Path) -> None:
    """Against ``floorless serve``: the first file of an empty repository written through
    the API, cloned with git over HTTP; a push on top; an update with the blob id read
    before the push refused (409), then made with the current one; git fetches it."""
    import httpx
    from pyforgejo import PyforgejoApi
    from pyforgejo.core.api_error import ApiError
    from pyforgejo.types import Identity
    from support.serving import serving

    with serving(tmp_path / "repos", tmp_path / "data") as server:
        server.admin(
            "user",
            "create",
            "ann",
            "--email",
            "ann@example.org",
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        token = server.admin("token", "create", "ann", "--scope", "write")
        server.admin("repo", "create", "ann/site")
        with httpx.Client(base_url=server.url, timeout=60) as http:
            api = PyforgejoApi(base_url=server.url + "/api/v1", api_key=token, httpx_client=http)
            first = api.repository.repo_create_file(
                "ann",
                "site",
                "index.md",
                content=b64(b"# Home\n"),
                message="Start the site",
                author=Identity(name="Ann A", email="ann.a@example.org"),
            )
            assert first.content is not None and first.content.sha
            read_before = first.content.sha
            clone = tmp_path / "clone"
            url = server.url.replace("http://", f"http://ann:{token}@") + "/ann/site.git"
            env = git_env()
            subprocess.run(["git", "clone", "-q", url, str(clone)], check=True, env=env)
            assert git_text(clone, "log", "--format=%an <%ae>|%s") == (
                "Ann A <ann.a@example.org>|Start the site"
            )
            assert git_text(clone, "rev-parse", "--abbrev-ref", "HEAD") == "main"
            (clone / "index.md").write_bytes(b"# Home, pushed\n")
            git(clone, "commit", "-q", "-am", "Push an edit")
            git(clone, "push", "-q", "origin", "main")
            with pytest.raises(ApiError) as stale:
                api.repository.repo_update_file(
                    "ann", "site", "index.md", content=b64(b"lost\n"), sha=read_before
                )
            assert stale.value.status_code == 409
            current = api.repository.repo_get_contents("ann", "site", "index.md")
            edited = api.repository.repo_update_file(
                "ann",
                "site",
                "index.md",
                content=b64(b"# Home, both\n"),
                sha=current.sha or "",  # type: ignore[union-attr]
            )
            assert edited.commit is not None
            git(clone, "fetch", "-q", "origin")
            assert git_text(clone, "log", "--format=%s", "origin/main").splitlines() == [
                "Update 'index.md'",
                "Push an edit",
                "Start the site",
            ]
            assert git(clone, "show", "origin/main:index.md") == b"# Home, both\n"


def test_warm_reads_run_no_more_statements_than_their_pages(client: testing.TestClient) -> None:
    """An API read costs the database what the page showing the same thing costs: finding
    the repository and the caller's access; nothing per branch, commit or entry."""
    from support.queries import statements

    pairs = {
        f"{DEMO}/branches": "/alice/demo/branches",
        f"{DEMO}/tags": "/alice/demo/tags",
        f"{DEMO}/commits": "/alice/demo/commits/branch/main",
        f"{DEMO}/commits?path=README.md": "/alice/demo/commits/branch/main/README.md",
        f"{DEMO}/contents/src": "/alice/demo/src/branch/main/src",
        f"{DEMO}/contents/src/app.py": "/alice/demo/src/branch/main/src/app.py",
        f"{DEMO}/raw/README.md": "/alice/demo/raw/branch/main/README.md",
    }

    def warm(url: str) -> int:
        for _ in range(2):
            assert client.simulate_get(url).status_code == 200, url
        counts = {statements(client.simulate_get(url)) for _ in range(2)}
        assert len(counts) == 1, (url, counts)
        return counts.pop()

    for api, page in pairs.items():
        assert warm(api) <= warm(page), (api, page)


def test_an_empty_repository(client: testing.TestClient) -> None:
    """As Forgejo answers an empty repository: no branches, no tags, no refs (404), commits
    409, contents 404."""
    empty = f"{API}/alice/empty"
    assert json.loads(client.simulate_get(f"{empty}/branches").text) == []
    assert json.loads(client.simulate_get(f"{empty}/tags").text) == []
    assert client.simulate_get(f"{empty}/git/refs").status_code == 404
    result = client.simulate_get(f"{empty}/commits")
    assert result.status_code == 409 and "empty" in json.loads(result.text)["message"]
    assert client.simulate_get(f"{empty}/contents").status_code == 404
    assert client.simulate_get(f"{empty}/contents/README.md").status_code == 404
    assert client.simulate_get(f"{empty}/raw/README.md").status_code == 404


def test_raw_ranges_and_head_requests(client: testing.TestClient, demo: Path) -> None:
    """The API's raw file is the web's answer: a byte range, an ETag by blob id; HEAD of an
    archive names it without starting git."""
    data = git(demo, "show", "main:data/blob.bin")
    part = client.simulate_get(f"{DEMO}/raw/data/blob.bin", headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == data[10:20]
    assert part.headers["etag"].strip('"') == git_text(demo, "rev-parse", "main:data/blob.bin")
    with counting() as events:
        head = client.simulate_head(f"{DEMO}/archive/main.zip")
    assert head.status_code == 200 and head.headers["content-type"] == "application/zip"
    assert events == []


def test_a_new_branch_in_an_empty_repository_writes_nothing(site) -> None:
    forge, client, tokens = site
    forge.registry.create("ann", "blank")
    url = f"{API}/ann/blank/contents/a.txt"
    body = {"content": b64(b"a\n"), "new_branch": "topic"}
    result = call(client, "POST", url, tokens["ann"], body)
    assert result.status_code == 422, result.text
    assert git_text(forge.registry.get("ann", "blank").path, "for-each-ref") == ""
    assert call(client, "POST", url, tokens["ann"], {"content": b64(b"a\n")}).status_code == 201


def test_a_commits_json_is_made_once_and_kept_by_its_links_and_id(
    forge: Forge, client: testing.TestClient
) -> None:
    """A commit's JSON never changes for the same forge URL, repository and commit: asked
    again, every commit of the answer is the one kept; asked through another host name, its
    URLs are that host's, not the kept ones."""
    url = f"{DEMO}/commits?sha=main&limit=5"
    first = get_json(client, url)[1]
    hits = forge.shapes.commits.hits
    again = get_json(client, url)[1]
    assert again == first and len(first) == 5  # type: ignore[arg-type]
    assert forge.shapes.commits.hits == hits + 5
    elsewhere = json.loads(client.simulate_get(url, headers={"Host": "other.example"}).text)
    assert [c["sha"] for c in elsewhere] == [c["sha"] for c in first]  # type: ignore[union-attr]
    assert all("//other.example/" in c["url"] for c in elsewhere)
    assert all("//other.example/" not in c["url"] for c in first)  # type: ignore[union-attr]
