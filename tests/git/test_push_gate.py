"""What a push may point a ref at, over real HTTP with real git: what it sent, and what the
pusher can read. A fork borrows its parent's objects, yet a push into it that names a
deleted branch's commit, or one the parent gained after it went private, is refused exactly
as a push naming an id that does not exist: same answer, byte for byte, whether by an empty
pack, by a thin pack whose delta copies a hidden blob, or by AGit. Ordinary pushes (new
commits, a fork brought up to date with its parent, a branch at a commit the refs reach)
still work."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import support.pushes
from support.githttp import commit, git
from support.pushes import MADE_UP, ZERO, World, api, entry, object_id, pack, receive_pack, varint

# the shared fixtures this module's tests ask for
world = support.pushes.world

pytestmark = pytest.mark.network



def head(work: Path, what: str = "HEAD") -> str:
    return git("rev-parse", what, cwd=work).stdout.strip()










def copy_all(size: int) -> bytes:
    """A delta that makes its base again: copy bytes 0 to ``size`` (under 64 KiB)."""
    return varint(size) + varint(size) + bytes([0x80 | 0x10 | 0x20, size & 0xFF, size >> 8])














def test_an_empty_pack_cannot_point_a_fork_at_what_its_parent_hides(world: World) -> None:
    site = world.site
    empty = pack()
    answers = {
        name: receive_pack(site, "bob/proj", "bob", [f"{ZERO} {oid} refs/heads/leak"], empty)
        for name, oid in (
            ("deleted branch", world.secret),
            ("after private", world.later),
            ("made up", MADE_UP),
        )
    }
    assert b"ng refs/heads/leak missing necessary objects" in answers["made up"]
    assert answers["deleted branch"] == answers["made up"] == answers["after private"]
    assert b"bad object" not in answers["made up"]  # git's own words would tell them apart
    status, _ = site.page(f"/bob/proj/commit/{world.secret}", user="bob")
    assert status == 404
    listing = git("ls-remote", site.url("bob/proj", "bob")).stdout
    assert "leak" not in listing
    # a pull request from that branch cannot be opened: there is none
    status, _ = api(
        site, "POST", "/repos/bob/proj/pulls", "bob",
        {"head": "leak", "base": "main", "title": "Leak"},
    )  # fmt: skip
    assert status in (404, 422)


def test_one_refused_update_refuses_the_push_as_a_missing_object_does(world: World) -> None:
    """A push with one update naming what it may not reach keeps nothing: the same whether
    that object is hidden or does not exist at all."""
    site = world.site
    main = head(world.work, "HEAD~1")  # the fork's main: what bob may build on
    answers = []
    for oid in (world.secret, MADE_UP):
        updates = [f"{ZERO} {oid} refs/heads/bad", f"{ZERO} {main} refs/heads/good"]
        answers.append(receive_pack(site, "bob/proj", "bob", updates, pack()))
    assert answers[0] == answers[1]
    assert b"ng refs/heads/good missing necessary objects" in answers[0]
    listing = git("ls-remote", site.url("bob/proj", "bob")).stdout
    assert "refs/heads/good" not in listing and "refs/heads/bad" not in listing


def test_a_thin_pack_cannot_copy_a_hidden_blob(world: World) -> None:
    """A delta against the deleted branch's blob would make a new blob with its content:
    refused as a delta against a base that does not exist is."""
    site = world.site
    secret = b"password=hunter2\n"
    answers = []
    for base in (world.secret_blob, MADE_UP):
        stolen = object_id("blob", secret)
        tree = b"100644 stolen.txt\0" + bytes.fromhex(stolen)
        tree_id = object_id("tree", tree)
        body = (
            f"tree {tree_id}\nauthor b <b@b> 1700000000 +0000\n"
            f"committer b <b@b> 1700000000 +0000\n\nsteal\n"
        ).encode()
        data = pack(
            entry(7, copy_all(len(secret)), bytes.fromhex(base)),
            entry(2, tree),
            entry(1, body),
        )
        updates = [f"{ZERO} {object_id('commit', body)} refs/heads/stolen"]
        answers.append(receive_pack(site, "bob/proj", "bob", updates, data))
    assert b"ng refs/heads/stolen unpacker error" in answers[1]
    assert answers[0] == answers[1]
    assert "stolen" not in git("ls-remote", site.url("bob/proj", "bob")).stdout


def test_agit_cannot_open_a_pull_request_of_a_deleted_commit(world: World) -> None:
    site = world.site
    status, _ = api(site, "PATCH", "/repos/alice/proj", "alice", {"private": False})
    assert status == 200
    try:
        answers = [
            receive_pack(site, "alice/proj", "carol", [f"{ZERO} {oid} refs/for/main/peek"], pack())
            for oid in (world.secret, MADE_UP)
        ]
        assert answers[0] == answers[1]
        assert b"ng refs/for/main/peek missing necessary objects" in answers[0]
        status, found = api(site, "GET", "/repos/alice/proj/pulls?state=all", "alice")
        assert status == 200 and found == []
    finally:
        api(site, "PATCH", "/repos/alice/proj", "alice", {"private": True})


def test_the_push_advertisement_of_a_fork_names_none_of_its_parents_refs(world: World) -> None:
    request = urllib.request.Request(
        f"{world.site.server.url}/bob/proj.git/info/refs?service=git-receive-pack",
        headers={
            "Authorization": "Basic "
            + base64.b64encode(f"bob:{world.site.token('bob')}".encode()).decode()
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    assert b".have" not in text and world.later.encode() not in text


def test_ordinary_pushes_into_a_fork_still_work(world: World, tmp_path: Path) -> None:
    site = world.site
    work = tmp_path / "bob"
    git("clone", "-q", site.url("bob/proj", "bob"), str(work))
    mine = commit(work, "idea.txt", "an idea\n", "An idea")
    git("push", "-q", "origin", "HEAD:refs/heads/idea", cwd=work)
    git("push", "-q", "origin", "HEAD~1:refs/heads/at-main", cwd=work)
    listing = git("ls-remote", site.url("bob/proj", "bob")).stdout
    assert f"{mine}\trefs/heads/idea" in listing and "refs/heads/at-main" in listing
    # a thin pack against what the fork has: a change to a file it holds
    commit(work, "README.md", "# project\nmore\n", "More")
    git("push", "-q", "origin", "HEAD:refs/heads/idea", cwd=work)
    assert head(work) in git("ls-remote", site.url("bob/proj", "bob")).stdout


def test_a_fork_brought_up_to_date_with_its_readable_parent(world: World, tmp_path: Path) -> None:
    """carol forks the public parent, which gains commits; she fetches them and pushes them
    to her fork: a thin pack built on what her fork has, of commits the parent's refs reach."""
    site = world.site
    status, _ = api(site, "PATCH", "/repos/alice/proj", "alice", {"private": False})
    assert status == 200
    try:
        status, _ = api(site, "POST", "/repos/alice/proj/forks", "carol")
        assert status == 202
        commit(world.work, "README.md", "# project\nnews\n", "News")
        git("push", "-q", "origin", "main", cwd=world.work)
        work = tmp_path / "carol"
        git("clone", "-q", site.url("carol/proj", "carol"), str(work))
        git("pull", "-q", "--ff-only", site.url("alice/proj", "carol"), "main", cwd=work)
        git("push", "-q", "origin", "main", cwd=work)
        assert head(world.work) in git("ls-remote", site.url("carol/proj", "carol")).stdout
    finally:
        api(site, "PATCH", "/repos/alice/proj", "alice", {"private": True})
