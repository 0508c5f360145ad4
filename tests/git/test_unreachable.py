"""Unreachable means gone: once its branch is deleted, a commit (and what only it held) is not
served by id on any page nor over git's protocol, and ``floorless admin gc`` removes it from
disk. The pure pieces (request parsing, reachability marks, what a commit introduces) are
checked against git itself."""

from __future__ import annotations

import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ObjectType
from support.forges import start_forge, wait_for
from support.githttp import PASSWORD, commit, git, rev
from support.serving import Server, serving

from floorless.core.errors import BadRequest
from floorless.git.history import CommitGraph
from floorless.git.protocol import pkt_line
from floorless.git.unreachable import (
    err_packet,
    find_commit,
    introduced,
    mark_reachable,
    requested_ids,
    screen_wants,
)

# -- the pure pieces -----------------------------------------------------------------------------

A, B = "a" * 40, "b" * 40


def test_wants_of_a_v2_fetch_and_object_info():
    body = (
        pkt_line(b"command=fetch\n")
        + pkt_line(b"agent=git/2\n")
        + b"0001"
        + pkt_line(f"want {A}\n".encode())
        + pkt_line(f"have {B}\n".encode())
        + pkt_line(b"want-ref refs/heads/main\n")
        + pkt_line(b"done\n")
        + b"0000"
    )
    assert requested_ids(body) == [bytes.fromhex(A)]
    info = pkt_line(b"command=object-info\n") + b"0001" + pkt_line(f"oid {B}\n".encode()) + b"0000"
    assert requested_ids(info) == [bytes.fromhex(B)]


def test_wants_of_a_v0_fetch():
    body = (
        pkt_line(f"want {A} multi_ack_detailed side-band-64k ofs-delta\n".encode())
        + pkt_line(f"want {B}\n".encode())
        + b"0000"
        + pkt_line(f"have {A}\n".encode())
        + pkt_line(b"done\n")
    )
    assert requested_ids(body) == [bytes.fromhex(A), bytes.fromhex(B)]


def test_a_refused_want_is_gits_err_packet(tmp_path: Path):
    body = pkt_line(b"command=fetch\n") + b"0001" + pkt_line(f"want {A}\n".encode()) + b"0000"
    pieces = [body[:7], body[7:30], body[30:]]  # lines cut across pieces
    replay, refused = screen_wants(iter(pieces), lambda oid: True, tmp_path)
    assert refused is None and b"".join(replay) == body
    replay, refused = screen_wants(iter(pieces), lambda oid: oid != bytes.fromhex(A), tmp_path)
    assert refused == err_packet(f"upload-pack: not our ref {A}")
    assert list(replay) == []
    assert refused.startswith(b"%04x" % len(refused)) and refused[4:8] == b"ERR "
    _, refused = screen_wants(iter([pkt_line(b"want nothex\n")]), lambda oid: True, tmp_path)
    assert refused is not None and b"ERR " in refused
    with pytest.raises(BadRequest):
        screen_wants(iter([b"00zzwant"]), lambda oid: True, tmp_path)
    with pytest.raises(BadRequest):
        screen_wants(iter([b"0009want"]), lambda oid: True, tmp_path)


def _graph(edges: dict[str, tuple[str, ...]]) -> CommitGraph:
    """A graph from names (parents listed before children)."""
    graph = CommitGraph()
    for name, parents in edges.items():
        graph.add(name.encode(), 0, tuple(graph.seq[p.encode()] for p in parents), ((),))
    return graph


def _marked(graph: CommitGraph, marks: bytearray) -> set[str]:
    return {graph.oids[i].decode() for i, m in enumerate(marks) if m}


def test_marks_follow_deletions_and_fast_forwards():
    graph = _graph({"r": (), "a": ("r",), "b": ("a",), "x": ("r",), "y": ("x",)})
    both = mark_reachable(graph, [b"b", b"y"])
    assert _marked(graph, both) == {"r", "a", "b", "x", "y"}
    # the branch at y is deleted: the walk from b alone does not meet y, so all is re-marked
    one = mark_reachable(graph, [b"b"], both, [b"b", b"y"])
    assert _marked(graph, one) == {"r", "a", "b"}
    # a fast-forward of b to c: only c is walked, the old marks stand
    graph.add(b"c", 0, (graph.seq[b"b"],), ((),))
    forward = mark_reachable(graph, [b"c"], one, [b"b"])
    assert _marked(graph, forward) == {"r", "a", "b", "c"}
    # b rewound to a: b and c are no longer reached
    assert _marked(graph, mark_reachable(graph, [b"a"], forward, [b"c"])) == {"r", "a"}


@pytest.fixture
def history(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    git("init", "-q", str(work))
    commit(work, "a.txt", "one\n", "one")
    (work / "dir").mkdir()
    commit(work, "dir/b.txt", "two\n", "two")
    git("checkout", "-q", "-b", "side", cwd=work)
    commit(work, "dir/c.txt", "side\n", "side")
    commit(work, "a.txt", "one\n" * 2, "side again")
    git("checkout", "-q", "main", cwd=work)
    commit(work, "d.txt", "main\n", "main")
    return work / ".git"


def _objects(git_dir: Path, *revs: str) -> set[str]:
    out = git("--git-dir", str(git_dir), "rev-list", "--objects", *revs).stdout
    return {line.split()[0] for line in out.splitlines()}


def test_introduced_objects_cover_what_a_deleted_branch_leaves(history: Path):
    """What only the side branch holds (git's own answer) is among the objects its commits
    introduced, and nothing main still reaches was missed as a commit."""
    repo = pygit2.Repository(str(history))
    only_side = _objects(history, "side", "--not", "main") - set(
        git("--git-dir", str(history), "rev-list", "side", "--not", "main").stdout.split()
    )
    left = git("--git-dir", str(history), "rev-list", "side", "--not", "main").stdout.split()
    found: set[str] = set()
    for oid in left:
        found |= {x.hex() for x in introduced(repo, repo.get(oid))}
    assert only_side and only_side <= found
    tips = [bytes.fromhex(rev(history, "main"))]
    assert find_commit(repo, tips, bytes.fromhex(left[0]), None) is False
    root = git("--git-dir", str(history), "rev-list", "--max-parents=0", "main").stdout.strip()
    assert find_commit(repo, tips, bytes.fromhex(root), None) is True
    assert find_commit(repo, tips, bytes.fromhex(root), 1) is None


# -- a real server -------------------------------------------------------------------------------


@dataclass
class Pushed:
    server: Server
    url: str  # the clone URL, with a token
    git_dir: Path  # the repository on the server's disk
    doomed: str  # a commit only the deleted branch reached
    secret: str  # a blob only that commit held
    shared: str  # a commit of a deleted branch that another branch still reaches
    short: str  # an abbreviation of ``doomed`` (4 hex digits, unless another object shares them)


def status(server: Server, path: str) -> int:
    try:
        with urllib.request.urlopen(server.url + path, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def settled(server: Server, path: str) -> int:
    """The status once the index caught up (503 only says it has not yet)."""
    found: list[int] = []

    def answered() -> bool:
        found.append(status(server, path))
        return found[-1] != 503

    wait_for(answered)
    return found[-1]


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    root = tmp_path_factory.mktemp("unreachable")
    with serving(root / "repos", root / "data") as server:
        server.admin(
            "user", "create", "alice", "--email", "alice@example.org", "--admin",
            "--password-stdin", stdin=PASSWORD + "\n",
        )  # fmt: skip
        server.admin("repo", "create", "alice/demo")
        token = server.admin("token", "create", "alice", "--scope", "write")
        url = f"http://alice:{token}@{server.url.removeprefix('http://')}/alice/demo.git"
        work = root / "work"
        git("init", "-q", str(work))
        commit(work, "README.md", "# demo\n", "first")
        git("checkout", "-q", "-b", "doomed", cwd=work)
        (work / "secret.txt").write_text("the password is hunter2\n")
        doomed = commit(work, "secret.txt", "the password is hunter2\n", "oops")
        secret = git("rev-parse", "HEAD:secret.txt", cwd=work).stdout.strip()
        git("checkout", "-q", "-b", "shared", "main", cwd=work)
        shared = commit(work, "notes.txt", "kept\n", "kept elsewhere")
        git("branch", "other", shared, cwd=work)
        git("push", "-q", url, "main", "doomed", "shared", "other", cwd=work)
        git_dir = root / "repos" / "alice" / "demo.git"
        assert rev(git_dir, "doomed") == doomed
        short = git("--git-dir", str(git_dir), "rev-parse", "--short=4", doomed).stdout.strip()
        yield Pushed(server, url, git_dir, doomed, secret, shared, short)


def _paths_of(pushed: Pushed, commit_id: str) -> str:
    """The file finder's list of the tree of ``commit_id`` (which only it has)."""
    return f"/alice/demo/-/paths/{rev(pushed.git_dir, commit_id + '^{tree}')}"


def _pages(commit_id: str, short: str) -> list[str]:
    return [
        f"/alice/demo/commit/{commit_id}",
        f"/alice/demo/commit/{short}",
        f"/alice/demo/commit/{commit_id}.patch",
        f"/alice/demo/commit/{commit_id}.diff",
        f"/alice/demo/src/commit/{commit_id}/",
        f"/alice/demo/raw/commit/{commit_id}/README.md",
        f"/alice/demo/commits/commit/{commit_id}",
        f"/alice/demo/commits/branch/main?after={commit_id}",
        f"/alice/demo/archive/{commit_id}.tar.gz",
    ]


@pytest.fixture(scope="module")
def deleted(pushed: Pushed) -> Pushed:
    """The branches ``doomed`` and ``shared`` deleted by a real ``git push --delete``, once
    every page of the doomed commit answered."""
    for path in [
        *_pages(pushed.doomed, pushed.short),
        f"/alice/demo/raw/blob/{pushed.secret}",
        _paths_of(pushed, pushed.doomed),
    ]:
        assert settled(pushed.server, path) == 200, path
    git("push", "-q", pushed.url, "--delete", "doomed", "shared")
    return pushed


@pytest.mark.network
def test_pages_of_a_deleted_branchs_commit_answer_404(deleted: Pushed):
    server, doomed = deleted.server, deleted.doomed
    for path in _pages(doomed, deleted.short):
        assert settled(server, path) == 404, path
    assert settled(server, f"/alice/demo/raw/commit/{doomed}/secret.txt") == 404
    assert settled(server, f"/alice/demo/raw/blob/{deleted.secret}") == 404
    assert settled(server, _paths_of(deleted, doomed)) == 404  # the file finder's list
    # still reached from another branch: still served
    for path in _pages(deleted.shared, deleted.shared[:12]):
        assert settled(server, path) == 200, path


@pytest.mark.network
def test_git_fetch_of_a_deleted_branchs_commit_fails(deleted: Pushed, tmp_path: Path):
    doomed, shared = deleted.doomed, deleted.shared
    client = tmp_path / "client"
    git("init", "-q", str(client))
    for version in ("2", "0"):
        refused = git(
            "-c", f"protocol.version={version}", "fetch", deleted.url, doomed, cwd=client,
            check=False,
        )  # fmt: skip
        assert refused.returncode != 0, version
        assert f"not our ref {doomed}" in refused.stderr, refused.stderr
        assert not (client / ".git" / "objects" / doomed[:2] / doomed[2:]).exists()
        git("-c", f"protocol.version={version}", "fetch", "-q", deleted.url, shared, cwd=client)
    # a partial clone still fetches the blobs it lacks, by id, on checkout
    partial = tmp_path / "partial"
    git("clone", "-q", "--filter=blob:none", deleted.url, str(partial))
    assert (partial / "README.md").read_text() == "# demo\n"


@pytest.mark.network
def test_admin_gc_removes_a_deleted_branch_from_disk(deleted: Pushed):
    """One git process per repository; the objects are gone, the rest intact."""
    server, doomed, shared = deleted.server, deleted.doomed, deleted.shared
    assert pygit2.Repository(str(deleted.git_dir)).get(doomed) is not None
    out = server.admin("gc", "alice/demo")
    assert re.search(r"1 of 1 repositories collected \(1 git processes\)", out), out
    repo = pygit2.Repository(str(deleted.git_dir))
    assert repo.get(doomed) is None and repo.get(deleted.secret) is None
    assert repo.get(shared) is not None
    assert settled(server, f"/alice/demo/commit/{shared}") == 200
    assert settled(server, f"/alice/demo/commit/{doomed}") == 404
    assert settled(server, "/alice/demo/src/branch/main/README.md") == 200
    fsck = subprocess.run(
        ["git", "--git-dir", str(deleted.git_dir), "fsck", "--no-dangling"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0, fsck.stderr


def test_scheduled_gc_collects_repositories_whose_refs_moved(tmp_path: Path):
    """The maintenance loop runs ``git gc --prune=now`` every ``gc_interval`` seconds on the
    repositories whose refs moved: a branch deleted on disk is gone from it."""
    repos = tmp_path / "repos"
    git("init", "-q", "--bare", str(repos / "alice" / "demo.git"))
    work = tmp_path / "work"
    git("init", "-q", str(work))
    commit(work, "README.md", "# demo\n", "first")
    git("checkout", "-q", "-b", "doomed", cwd=work)
    doomed = commit(work, "secret.txt", "hunter2\n", "oops")
    git("push", "-q", str(repos / "alice" / "demo.git"), "main", "doomed", cwd=work)
    git_dir = repos / "alice" / "demo.git"
    forge = start_forge(repos, tmp_path / "data", gc_interval=0.5, ref_check_interval=0.1)
    try:
        repo = forge.registry.get("alice", "demo")
        wait_for(lambda: forge.indexer.ready(repo.id, bytes.fromhex(doomed)) is not None)
        git("--git-dir", str(git_dir), "branch", "-D", "doomed")
        wait_for(lambda: pygit2.Repository(str(git_dir)).get(doomed) is None)
        snapshot = forge.live.snapshot(repo)
        assert b"doomed" not in snapshot.branches
        main = bytes.fromhex(rev(git_dir, "main"))
        assert forge.gate.reachable(repo, snapshot, ObjectType.COMMIT, main, None)
        doomed_id = bytes.fromhex(doomed)
        assert not forge.gate.reachable(repo, snapshot, ObjectType.COMMIT, doomed_id, None)
    finally:
        forge.stop()


def test_a_cherry_picked_branchs_files_stay_served_once_it_is_deleted(tmp_path: Path):
    """A branch whose commit was cherry-picked (or rebased, or squash-merged) onto main and
    then deleted left its commit unreachable, but its files are main's too: they are served by
    id (a partial clone fetches them so), while a file only the deleted branch held is not."""
    repos = tmp_path / "repos"
    git_dir = repos / "alice" / "demo.git"
    git("init", "-q", "--bare", str(git_dir))
    work = tmp_path / "work"
    git("init", "-q", str(work))
    commit(work, "README.md", "# demo\n", "first")
    git("checkout", "-q", "-b", "topic", cwd=work)
    picked = commit(work, "topic.txt", "a feature\n", "feature")
    commit(work, "secret.txt", "only on topic\n", "secret")
    git("checkout", "-q", "main", cwd=work)
    commit(work, "NEWS", "main moved on\n", "news")
    git("cherry-pick", picked, cwd=work)
    git("push", "-q", str(git_dir), "main", "topic", cwd=work)
    shared = rev(git_dir, "main:topic.txt")
    secret = rev(git_dir, "topic:secret.txt")
    forge = start_forge(repos, tmp_path / "data", ref_check_interval=0.1)
    try:
        repo = forge.registry.get("alice", "demo")
        wait_for(lambda: forge.indexer.ready(repo.id, bytes.fromhex(picked)) is not None)
        git("--git-dir", str(git_dir), "branch", "-D", "topic")
        forge.moves.refs_moved(repo)

        def answer(blob: str) -> bool | None:
            snapshot = forge.live.snapshot(repo)
            return forge.gate.reachable(repo, snapshot, ObjectType.BLOB, bytes.fromhex(blob), None)

        wait_for(lambda: answer(secret) is not None)
        assert answer(secret) is False
        assert answer(shared) is True
        assert (
            forge.gate.reachable(
                repo, forge.live.snapshot(repo), ObjectType.COMMIT, bytes.fromhex(picked), None
            )
            is False
        )
        allowed = forge.gate.fetchable(repo)
        assert allowed(bytes.fromhex(shared)) is True
        assert allowed(bytes.fromhex(secret)) is False
    finally:
        forge.stop()


def test_a_want_not_known_yet_is_refused_at_once_with_a_retry(tmp_path: Path):
    """While reachability is not known, a fetch is told to try again: it does not hold a
    request thread waiting for the indexer."""
    body = pkt_line(b"command=fetch\n") + b"0001" + pkt_line(b"want " + b"ab" * 20 + b"\n")
    body += pkt_line(b"done\n") + b"0000"
    _, refused = screen_wants([body], lambda oid: None, tmp_path)
    assert refused is not None and b"being indexed" in refused
    _, refused = screen_wants([body], lambda oid: False, tmp_path)
    assert refused is not None and b"not our ref " + b"ab" * 20 in refused
    replay, refused = screen_wants([body], lambda oid: True, tmp_path)
    assert refused is None and b"".join(replay) == body
