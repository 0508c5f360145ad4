"""The access policy, table-driven: every repository route, every kind of viewer, public and
private. A viewer who may not read a private repository gets exactly what a missing
repository gets; pushing needs write; listings never show what their viewer may not read."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from falcon import inspect, testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git_text

from floorless.forge import Forge
from floorless.git.protocol import pkt_line
from floorless.web.app import create_app

VIEWERS = ("anonymous", "reader", "writer", "admin", "other", "owner")
CAN_READ_PRIVATE = {"reader", "writer", "admin", "owner"}
CAN_WRITE = {"writer", "admin", "owner"}
ACCOUNT = {"owner": "alice", "admin": "root"}  # "admin" is a reserved name


@dataclass
class Site:
    forge: Forge
    client: testing.TestClient
    tokens: dict[str, str]
    main: str


@pytest.fixture(scope="module")
def site(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("access")
    shutil.copytree(fixture_root / "alice" / "demo.git", root / "repos" / "alice" / "demo.git")
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    accounts = forge.accounts
    people = {
        name: accounts.create_user(name, f"{name}@example.org", "long enough", admin=name == "root")
        for name in ("alice", "reader", "writer", "root", "other")
    }
    repo = forge.registry.get("alice", "demo")
    forge.policy.set_collaborator(repo, people["reader"], "read")
    forge.policy.set_collaborator(repo, people["writer"], "write")
    forge.issues.create("alice", "demo", people["alice"], "A README question", "")
    forge.webhooks.create(repo.id, None, url="https://hooks.example.org/in", active=False)
    forge.triage.save_milestone("alice", "demo", None, "v1", "", "")
    release = forge.releases.create(repo, people["alice"].id, "v1.0", title="One")
    notes = iter([b"the notes", b""])
    forge.attachments.upload(
        repo.id, people["alice"].id, "notes.txt", lambda _: next(notes), release_id=release.id
    )
    model = iter([b"a model", b""])
    forge.lfs.upload(repo.id, LFS_OID, 7, lambda _: next(model))
    forge.locks.create(repo.id, people["alice"].id, "alices.bin")
    tokens = {
        viewer: accounts.create_token(people[ACCOUNT.get(viewer, viewer)], "write")[0]
        for viewer in VIEWERS
        if viewer != "anonymous"
    }
    main = git_text(root / "repos" / "alice" / "demo.git", "rev-parse", "main")
    # pull request #2: main's newer commits into the release branch
    pull = forge.pulls.create(
        "alice",
        "demo",
        people["alice"],
        "Bring release up",
        "",
        "release",
        ("alice", "demo", "main"),
        main,
    )
    forge.moves.set_pull_ref(repo, pull.number, main)
    yield Site(forge, testing.TestClient(create_app(forge)), tokens, main)
    forge.stop()


def _empty_pack() -> bytes:
    header = b"PACK" + struct.pack(">II", 2, 0)
    return header + hashlib.sha1(header).digest()


def _push_body(main: str, branch: str) -> bytes:
    command = f"{'0' * 40} {main} refs/heads/{branch}\0 report-status\n".encode()
    return pkt_line(command) + b"0000" + _empty_pack()


LS_REFS = pkt_line(b"command=ls-refs\n") + b"0001" + pkt_line(b"peel\n") + b"0000"

# (route template, URL, method, needs write, is a git route)
READ_PAGES = [
    ("/{owner}/{repo}", "/alice/demo", "GET"),
    ("/{owner}/{repo}", "/alice/demo?go-get=1", "GET"),
    ("/{owner}/{repo}/src", "/alice/demo/src", "GET"),
    ("/{owner}/{repo}/src/{kind}", "/alice/demo/src/main", "GET"),
    ("/{owner}/{repo}/src/{kind}/{tail:path}", "/alice/demo/src/branch/main/README.md", "GET"),
    ("/{owner}/{repo}/raw/{kind}", "/alice/demo/raw/main", "GET"),
    ("/{owner}/{repo}/raw/{kind}/{tail:path}", "/alice/demo/raw/branch/main/README.md", "GET"),
    ("/{owner}/{repo}/media/{kind}", "/alice/demo/media/main", "GET"),
    ("/{owner}/{repo}/media/{kind}/{tail:path}", "/alice/demo/media/branch/main/README.md", "GET"),
    ("/{owner}/{repo}/commits", "/alice/demo/commits", "GET"),
    ("/{owner}/{repo}/commits/{kind}", "/alice/demo/commits/main", "GET"),
    ("/{owner}/{repo}/commits/{kind}/{tail:path}", "/alice/demo/commits/branch/main", "GET"),
    ("/{owner}/{repo}/commit/{sha}", "/alice/demo/commit/{main}", "GET"),
    (
        "/{owner}/{repo}/commit/{sha}/-/diff/{tail:path}",
        "/alice/demo/commit/{main}/-/diff/README.md",
        "GET",
    ),
    (
        "/{owner}/{repo}/commit/{sha}/-/lines/{tail:path}",
        "/alice/demo/commit/{main}/-/lines/README.md?start=1&end=3",
        "GET",
    ),
    ("/{owner}/{repo}/commit/{sha}", "/alice/demo/commit/main", "GET"),
    ("/{owner}/{repo}/tree/{ref}", "/alice/demo/tree/main", "GET"),
    ("/{owner}/{repo}/tree/{ref}/{tail:path}", "/alice/demo/tree/main/docs", "GET"),
    ("/{owner}/{repo}/blob/{ref}", "/alice/demo/blob/main", "GET"),
    ("/{owner}/{repo}/blob/{ref}/{tail:path}", "/alice/demo/blob/main/README.md", "GET"),
    ("/{owner}/{repo}/commit/{sha}/{tail:path}", "/alice/demo/commit/feature/x", "GET"),
    ("/{owner}/{repo}/blame/{kind}", "/alice/demo/blame/main", "GET"),
    ("/{owner}/{repo}/blame/{kind}/{tail:path}", "/alice/demo/blame/branch/main/README.md", "GET"),
    ("/{owner}/{repo}/branches", "/alice/demo/branches", "GET"),
    ("/{owner}/{repo}/tags", "/alice/demo/tags", "GET"),
    ("/{owner}/{repo}/tags.atom", "/alice/demo/tags.atom", "GET"),
    ("/{owner}/{repo}/tags.rss", "/alice/demo/tags.rss", "GET"),
    ("/{owner}/{repo}/releases", "/alice/demo/releases", "GET"),
    ("/{owner}/{repo}/releases.atom", "/alice/demo/releases.atom", "GET"),
    ("/{owner}/{repo}/releases.rss", "/alice/demo/releases.rss", "GET"),
    ("/{owner}/{repo}/releases/latest", "/alice/demo/releases/latest", "GET"),
    ("/{owner}/{repo}/releases/tag/{tail:path}", "/alice/demo/releases/tag/v1.0", "GET"),
    (
        "/{owner}/{repo}/releases/download/{tail:path}",
        "/alice/demo/releases/download/v1.0/notes.txt",
        "GET",
    ),
    ("/{owner}/{repo}/search", "/alice/demo/search?q=README", "GET"),
    ("/{owner}/{repo}/archive/{tail:path}", "/alice/demo/archive/main.tar.gz", "GET"),
    ("/{owner}/{repo}/atom/branch/{tail:path}", "/alice/demo/atom/branch/main", "GET"),
    ("/{owner}/{repo}/rss/branch/{tail:path}", "/alice/demo/rss/branch/main", "GET"),
    ("/{owner}/{repo}/-/last/{sha}", "/alice/demo/-/last/{main}", "GET"),
    ("/{owner}/{repo}/-/last/{sha}/{tail:path}", "/alice/demo/-/last/{main}/docs", "GET"),
    ("/{owner}/{repo}/-/refs", "/alice/demo/-/refs?for=blame&at=README.md", "GET"),
    ("/{owner}/{repo}/-/paths/{tree}", "/alice/demo/-/paths/{tree}", "GET"),
    ("/{owner}/{repo}/find/{kind}", "/alice/demo/find/main?q=read", "GET"),
    ("/{owner}/{repo}/find/{kind}/{tail:path}", "/alice/demo/find/branch/main?q=read", "GET"),
    ("/{owner}/{repo}/issues", "/alice/demo/issues?state=all", "GET"),
    ("/{owner}/{repo}/issues/{number}", "/alice/demo/issues/1", "GET"),
    ("/{owner}/{repo}/labels", "/alice/demo/labels", "GET"),
    ("/{owner}/{repo}/milestones", "/alice/demo/milestones", "GET"),
    ("/{owner}/{repo}/milestone/{milestone}", "/alice/demo/milestone/1", "GET"),
    ("/{owner}/{repo}/pulls", "/alice/demo/pulls?state=all", "GET"),
    ("/{owner}/{repo}/pulls/{number}", "/alice/demo/pulls/2", "GET"),
    ("/{owner}/{repo}/pulls/{number}", "/alice/demo/pulls/2.diff", "GET"),
    ("/{owner}/{repo}/pulls/{number}/commits", "/alice/demo/pulls/2/commits", "GET"),
    ("/{owner}/{repo}/pulls/{number}/files", "/alice/demo/pulls/2/files", "GET"),
    ("/{owner}/{repo}/compare", "/alice/demo/compare", "GET"),
    ("/{owner}/{repo}/compare/{spec:path}", "/alice/demo/compare/release...main", "GET"),
    ("/{owner}/{repo}/compare/{spec:path}", "/alice/demo/compare/release...main.patch", "GET"),
]
GIT_READ = [
    ("/{owner}/{repo}/info/refs", "/alice/demo.git/info/refs?service=git-upload-pack", "GET"),
    ("/{owner}/{repo}/git-upload-pack", "/alice/demo.git/git-upload-pack", "POST"),
]
GIT_WRITE = [
    ("/{owner}/{repo}/info/refs", "/alice/demo.git/info/refs?service=git-receive-pack", "GET"),
    ("/{owner}/{repo}/git-receive-pack", "/alice/demo.git/git-receive-pack", "POST"),
]
# Git LFS: (template, URL, method, needs write, JSON body). {oid} is an object alice/demo holds.
_LFS = "/{owner}/{repo}/info/lfs"
_LFS_URL = "/alice/demo.git/info/lfs"
LFS_OID = hashlib.sha256(b"a model").hexdigest()
_OBJECT = {"oid": LFS_OID, "size": 7}
LFS_ROUTES = [
    (_LFS + "/objects/batch", _LFS_URL + "/objects/batch", "POST", False,
     {"operation": "download", "objects": [_OBJECT]}),
    (_LFS + "/objects/{oid}", _LFS_URL + "/objects/" + LFS_OID, "GET", False, None),
    (_LFS + "/locks", _LFS_URL + "/locks", "GET", False, None),
    (_LFS + "/objects/batch", _LFS_URL + "/objects/batch", "POST", True,
     {"operation": "upload", "objects": [_OBJECT]}),
    (_LFS + "/objects/{oid}", _LFS_URL + "/objects/" + LFS_OID, "PUT", True, None),
    (_LFS + "/verify", _LFS_URL + "/verify", "POST", True, _OBJECT),
    (_LFS + "/locks", _LFS_URL + "/locks", "POST", True, {"path": "{viewer}.bin"}),
    (_LFS + "/locks/verify", _LFS_URL + "/locks/verify", "POST", True, {}),
    (_LFS + "/locks/{id}/unlock", _LFS_URL + "/locks/1/unlock", "POST", True, {"force": True}),
]  # fmt: skip
ADMIN_PAGES = [
    ("/{owner}/{repo}/settings", "/alice/demo/settings", "GET"),
    ("/{owner}/{repo}/settings/hooks", "/alice/demo/settings/hooks", "GET"),
    ("/{owner}/{repo}/settings/hooks/{hook}", "/alice/demo/settings/hooks/1", "GET"),
    ("/{owner}/{repo}/settings/keys", "/alice/demo/settings/keys", "GET"),
]
_REVIEWS = "/{owner}/{repo}/pulls/{number}/files/reviews"
SIGNED_IN_PAGES = [
    ("/{owner}/{repo}/issues/new", "/alice/demo/issues/new", "GET"),
    ("/{owner}/{repo}/issues/attachments", "/alice/demo/issues/attachments", "POST"),
    ("/{owner}/{repo}/fork", "/alice/demo/fork", "GET"),
    ("/{owner}/{repo}/releases/new", "/alice/demo/releases/new", "GET"),
    ("/{owner}/{repo}/releases/edit/{tail:path}", "/alice/demo/releases/edit/v1.0", "GET"),
    ("/{owner}/{repo}/issues/{number}/triage", "/alice/demo/issues/1/triage", "POST"),
    (_REVIEWS + "/comments", "/alice/demo/pulls/1/files/reviews/comments", "POST"),
    (_REVIEWS + "/comments/{comment}", "/alice/demo/pulls/1/files/reviews/comments/1", "POST"),
    (_REVIEWS + "/submit", "/alice/demo/pulls/1/files/reviews/submit", "POST"),
    ("/{owner}/{repo}/pulls/{number}/merge", "/alice/demo/pulls/2/merge", "POST"),
]
LISTINGS = ["/", "/?q=demo", "/alice"]


def test_the_table_covers_every_repository_route(site: Site) -> None:
    routes = {r.path for r in inspect.inspect_routes(create_app(site.forge))}
    repository_routes = {r for r in routes if r.startswith("/{owner}/{repo}")}
    covered = {row[0] for row in READ_PAGES + GIT_READ + GIT_WRITE + ADMIN_PAGES + SIGNED_IN_PAGES}
    covered |= {row[0] for row in LFS_ROUTES}
    assert repository_routes == covered


def request(
    site: Site, viewer: str, method: str, url: str, extra_headers: dict | None = None, **extra
) -> testing.Result:
    headers = {"Git-Protocol": "version=2", **(extra_headers or {})}
    if viewer != "anonymous":
        headers["Authorization"] = f"token {site.tokens[viewer]}"
    if "{tree}" in url:  # the file finder's list, by the main branch's tree id
        handle = site.forge.live.open(site.forge.registry.get("alice", "demo"))
        url = url.replace("{tree}", str(handle[site.main].tree_id))
    url = url.replace("{main}", site.main)
    path, _, query = url.partition("?")
    return site.client.simulate_request(method, path, query_string=query, headers=headers, **extra)


def set_private(site: Site, private: bool) -> None:
    site.forge.registry.set_private("alice", "demo", private)


def _unknown(site: Site, viewer: str, method: str, url: str, **extra: object) -> testing.Result:
    return request(site, viewer, method, url.replace("/alice/demo", "/alice/nothing"), **extra)


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_pages_raw_archives_feeds_and_go_get(site: Site, viewer: str, private: bool) -> None:
    set_private(site, private)
    allowed = not private or viewer in CAN_READ_PRIVATE
    for _, url, method in READ_PAGES:
        result = request(site, viewer, method, url)
        if allowed:
            assert result.status_code in (200, 302), (url, result.status_code, result.text[:200])
            assert b"repository not found" not in result.content
        else:
            missing = _unknown(site, viewer, method, url)
            assert result.status_code == missing.status_code == 404, url
            assert result.content == missing.content  # not a word more than for a missing one
            assert b"README" not in result.content


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_git_clone_and_fetch(site: Site, viewer: str, private: bool) -> None:
    set_private(site, private)
    allowed = not private or viewer in CAN_READ_PRIVATE
    for _, url, method in GIT_READ:
        body = LS_REFS if method == "POST" else None
        headers = {"Content-Type": "application/x-git-upload-pack-request"} if body else {}
        result = request(site, viewer, method, url, body=body, extra_headers=headers)
        if allowed:
            assert result.status_code == 200, (url, result.text[:200])
            if method == "POST":
                assert f"{site.main} refs/heads/main".encode() in result.content
            continue
        expected = 401 if viewer == "anonymous" else 404
        missing = _unknown(site, viewer, method, url, body=body, extra_headers=headers)
        assert result.status_code == missing.status_code == expected, url
        assert result.text == missing.text
        if expected == 401:
            assert result.headers["www-authenticate"].startswith("Basic")


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_git_push(site: Site, viewer: str, private: bool) -> None:
    set_private(site, private)
    branch = f"pushed-by-{viewer}-{'private' if private else 'public'}"
    (_, info_url, _), (_, post_url, _) = GIT_WRITE
    info = request(site, viewer, "GET", info_url)
    push = request(
        site,
        viewer,
        "POST",
        post_url,
        body=_push_body(site.main, branch),
        extra_headers={"Content-Type": "application/x-git-receive-pack-request"},
    )
    refs = git_text(site.forge.registry.get("alice", "demo").path, "for-each-ref")
    if viewer in CAN_WRITE:
        assert info.status_code == push.status_code == 200
        assert b"unpack ok" in push.content and b"ok refs/heads/" + branch.encode() in push.content
        assert f"refs/heads/{branch}" in refs
        return
    assert f"refs/heads/{branch}" not in refs
    if viewer == "anonymous":
        expected = 401
    elif private and viewer not in CAN_READ_PRIVATE:
        expected = 404
    else:  # a reader may propose changes (refs/for/, AGit): git's report refuses the rest
        assert info.status_code == push.status_code == 200
        assert b"ng refs/heads/" + branch.encode() + b" you may read alice/demo" in push.content
        return
    assert info.status_code == push.status_code == expected


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_git_lfs(site: Site, viewer: str, private: bool) -> None:
    """Git LFS as git: reading to download and list locks, writing for the rest; refused
    outsiders get exactly a missing repository's answer, anonymous callers are asked to sign in."""
    set_private(site, private)
    reads = not private or viewer in CAN_READ_PRIVATE
    for _, url, method, write, payload in LFS_ROUTES:
        body = b"a model" if method == "PUT" else None
        if payload is not None:
            body = json.dumps(payload).replace("{viewer}", f"{viewer}-{private}").encode()
        headers = {"Content-Type": "application/vnd.git-lfs+json"}
        result = request(site, viewer, method, url, body=body, extra_headers=headers)
        where = (method, url, write, result.status_code, result.text[:200])
        if reads and (not write or viewer in CAN_WRITE):
            if url.endswith("/unlock"):  # forced by an administrator: gone for the next
                assert (
                    result.status_code == 200
                    or "administrators" in result.text
                    or ("no such lock" in result.text)
                ), where
                continue
            assert result.status_code < 400, where
            if url.endswith("/objects/batch"):
                assert "actions" in result.text or write, where  # held: no upload asked
            continue
        if reads:  # a reader, or anyone on a public repository: may not write
            expected = 401 if viewer == "anonymous" else 403
            assert result.status_code == expected, where
            continue
        expected = 401 if viewer == "anonymous" else 404
        missing = _unknown(site, viewer, method, url, body=body, extra_headers=headers)
        assert result.status_code == missing.status_code == expected, where
        assert result.text == missing.text
        assert result.headers["content-type"] == "application/vnd.git-lfs+json"
    if reads:
        got = request(site, viewer, "GET", _LFS_URL + "/objects/" + LFS_OID)
        assert got.content == b"a model"


def test_a_read_token_cannot_push(site: Site) -> None:
    set_private(site, False)
    writer = site.forge.accounts.get("writer")
    assert writer is not None
    plain, _ = site.forge.accounts.create_token(writer, "read")
    result = site.client.simulate_get(
        "/alice/demo/info/refs",
        query_string="service=git-receive-pack",
        headers={"Authorization": f"token {plain}"},
    )
    assert result.status_code == 403 and "read scope" in result.text


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_settings_need_admin(site: Site, viewer: str, private: bool) -> None:
    set_private(site, private)
    for _, url, method in ADMIN_PAGES:
        result = request(site, viewer, method, url)
        if viewer == "anonymous":
            assert result.status_code == 303 and "/-/login" in result.headers["location"]
        elif viewer in ("admin", "owner"):
            assert result.status_code == 200, url
        elif private and viewer not in CAN_READ_PRIVATE:
            assert result.status_code == 404, url
        else:
            assert result.status_code == 403, url


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_explore_search_and_owner_lists(site: Site, viewer: str, private: bool) -> None:
    set_private(site, private)
    visible = not private or viewer in CAN_READ_PRIVATE
    for url in LISTINGS:
        result = request(site, viewer, "GET", url)
        assert result.status_code == 200, url
        assert ("alice/demo" in result.text) == visible, url
        assert ("1 repository" in result.text) == visible, url


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
@pytest.mark.parametrize("viewer", VIEWERS)
def test_a_new_issue_needs_a_signed_in_reader(site: Site, viewer: str, private: bool) -> None:
    """Whoever may not read the repository gets what a missing one gets; a reader without a
    browser session (a token, or nobody) is sent to sign in first."""
    set_private(site, private)
    for _, url, method in SIGNED_IN_PAGES:
        result = request(site, viewer, method, url)
        if private and viewer not in CAN_READ_PRIVATE:
            missing = _unknown(site, viewer, method, url)
            assert result.status_code == missing.status_code == 404, url
            assert result.content == missing.content
        else:
            assert result.status_code == 303 and "/-/login" in result.headers["location"]
