"""floorless's history answers, compared with the git CLI on the fixture repositories.

The in-memory index (``CommitGraph``) answers ``git log -- path`` (default history
simplification, default ordering) and ``git log -1 -- dir/entry``; libgit2 answers the
branch commit list. Every answer here is checked against what ``git`` itself prints, and
cursor pagination (a page going on from the one before) must rebuild the full list.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

import pytest
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import (
    DEMO_INVALID_UTF8_PATH,
    EPOCH_START,
    HISTORY_COMMITS,
    HISTORY_FILES,
    HISTORY_MERGE_EVERY,
    HISTORY_MERGE_OFFSET,
    HISTORY_README_COMMITS,
    FastImportStream,
    git,
    git_text,
    history_path,
)

import floorless.index.answers
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.git.history import CommitGraph
from floorless.repos.registry import Repo
from floorless.web.app import create_app
from floorless.web.history import libgit2_page

MERGES = "bob/merges.git"
DEMO = "alice/demo.git"
HISTORY = "alice/history.git"

# --------------------------------------------------------------------------- git's answers


def _arg(path: bytes) -> str:
    return os.fsdecode(path)


def git_log(
    repo: Path,
    rev: str,
    path: bytes | None = None,
    max_count: int | None = None,
) -> list[str]:
    """``git log --format=%H rev [-- path]``; pathspecs literal, so a path means itself."""
    args = ["--literal-pathspecs", "log", "--format=%H"]
    if max_count is not None:
        args.append(f"--max-count={max_count}")
    args.append(rev)
    if path is not None:
        args += ["--", _arg(path)]
    return git(repo, *args).decode().split()


def git_branches(repo: Path) -> dict[str, str]:
    out = git_text(repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def git_all_commits(repo: Path) -> list[str]:
    return git(repo, "rev-list", "--all").decode().split()


def with_parents(paths: set[bytes]) -> set[bytes]:
    """``paths`` and every directory above each of them."""
    found = set()
    for path in paths:
        while path:
            found.add(path)
            path = path.rpartition(b"/")[0]
    return found


def git_paths_ever(repo: Path) -> list[bytes]:
    """Every file path any commit touched, and the directories above them."""
    out = git(repo, "log", "--all", "-m", "--format=", "--name-only", "-z", "--no-renames")
    return sorted(with_parents({p.strip(b"\n") for p in out.split(b"\0") if p.strip(b"\n")}))


def git_directories(repo: Path, rev: str) -> dict[bytes, list[bytes]]:
    """Directory (b"" for the root) -> names of its entries, in the tree at ``rev``."""
    out = git(repo, "ls-tree", "-r", "-t", "-z", rev)
    dirs: dict[bytes, list[bytes]] = {b"": []}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        parent, _, name = path.rpartition(b"/")
        dirs.setdefault(parent, []).append(name)
        if meta.split()[1] == b"tree":
            dirs.setdefault(path, [])
    return dirs


# ---------------------------------------------------------------------- floorless's answers


def repo_of(forge: Forge, relative: str) -> Repo:
    owner, name = relative.split("/")
    return forge.registry.get(owner, name.removesuffix(".git"))


def graph_of(forge: Forge, relative: str) -> CommitGraph:
    graph = forge.indexer.graph(repo_of(forge, relative).id)
    assert graph is not None
    return graph


def fl_history(
    graph: CommitGraph, start: str, path: bytes | None, limit: int = 100_000
) -> list[str]:
    walk = graph.walk([graph.seq[bytes.fromhex(start)]], path)
    assert graph.history(walk, limit)
    return [graph.oids[s].hex() for s in walk.page(0, limit).commits]


def fl_history_pages(
    graph: CommitGraph, start: str, path: bytes | None, size: int, most: int | None = None
) -> list[str]:
    """Walk ``size``-commit pages, each going on from the previous page's cursor (the start
    and a count): on one kept walk, and on a walk made again from the start for each page
    (a walk no longer kept); both must give the same pages."""
    kept = graph.walk([graph.seq[bytes.fromhex(start)]], path)
    shown: list[str] = []
    more = True
    while more and (most is None or len(shown) < most):
        skip = len(shown)
        pages = []
        for walk in (kept, graph.walk([graph.seq[bytes.fromhex(start)]], path)):
            assert graph.history(walk, skip + size)
            pages.append(walk.page(skip, size))
        assert pages[0] == pages[1]
        page = pages[0]
        assert len(page.commits) <= size
        shown += [graph.oids[s].hex() for s in page.commits]
        if page.more and path is None:
            assert len(page.commits) == size  # a short page is the last one
        more = page.more
    return shown


def libgit2_pages(
    forge: Forge, relative: str, tip: str, size: int, most: int | None = None
) -> list[str]:
    """The branch's pages as the commits list asks for them, from its kept walk."""
    repo = repo_of(forge, relative)
    shown: list[str] = []
    more = True
    while more and (most is None or len(shown) < most):
        page = forge.answers.branch_history(repo, bytes.fromhex(tip), len(shown), size)
        assert page is not None
        assert len(page.commits) <= size
        if page.more:
            assert len(page.commits) == size
        shown += [c.hex() for c in page.commits]
        more = page.more
    return shown


# ------------------------------------------------------------------------------- history


def _history_mismatches(
    root: Path, graph: CommitGraph, starts: Sequence[str], paths: Sequence[bytes]
) -> tuple[int, list[str]]:
    compared, wrong = 0, []
    for start in starts:
        for path in paths:
            expected = git_log(root, start, path)
            got = fl_history(graph, start, path)
            compared += 1
            if got != expected:
                wrong.append(f"{start[:10]} -- {path!r}: git {expected} floorless {got}")
    return compared, wrong


@pytest.mark.parametrize("relative", [MERGES, DEMO])
def test_path_history_matches_git_log_for_every_path(
    forge: Forge, fixture_root: Path, relative: str
) -> None:
    root = fixture_root / relative
    graph = graph_of(forge, relative)
    paths = [*git_paths_ever(root), b"never-existed.txt", b"lib/never", b"li"]
    # every branch tip, and every older commit too (the fixtures are small)
    starts = list(dict.fromkeys([*git_branches(root).values(), *git_all_commits(root)]))
    compared, wrong = _history_mismatches(root, graph, starts, paths)
    assert not wrong, "\n".join(wrong)
    assert len(starts) == (35 if relative == MERGES else 13)
    assert compared == len(starts) * len(paths)


def _history_sample_paths() -> list[bytes]:
    files = [history_path(i).encode() for i in range(0, HISTORY_FILES, 3)]
    dirs = [b"dir0", b"dir3", b"side"]
    sides = [
        b"side/topic%d.txt" % HISTORY_MERGE_OFFSET,
        b"side/topic%d.txt" % (HISTORY_MERGE_OFFSET + 10 * HISTORY_MERGE_EVERY),
    ]
    return [b"rare.txt", b"README.md", *dirs, *files, *sides, b"absent.txt", b"dir0/absent"]


def test_path_history_matches_git_log_in_a_long_history(forge: Forge, fixture_root: Path) -> None:
    root = fixture_root / HISTORY
    graph = graph_of(forge, HISTORY)
    tip = git_branches(root)["main"]
    paths = _history_sample_paths()
    assert len(paths) >= 25
    compared, wrong = _history_mismatches(root, graph, [tip], paths)
    assert not wrong, "\n".join(wrong)
    assert compared == len(paths)
    # sanity: the fixture's known shapes came out as git says
    assert len(git_log(root, tip, b"rare.txt")) == 3
    assert len(git_log(root, tip, b"README.md")) == len(HISTORY_README_COMMITS)


def test_history_of_an_invalid_utf8_path(
    forge: Forge, client: testing.TestClient, fixture_root: Path
) -> None:
    root = fixture_root / DEMO
    graph = graph_of(forge, DEMO)
    repo = repo_of(forge, DEMO)
    tip = git_branches(root)["main"]
    expected = git_log(root, tip, DEMO_INVALID_UTF8_PATH)
    assert len(expected) == 1
    assert fl_history(graph, tip, DEMO_INVALID_UTF8_PATH) == expected
    names = git_directories(root, tip)[b""]
    assert DEMO_INVALID_UTF8_PATH in names
    last = forge.answers.last_commits(repo, bytes.fromhex(tip), b"", names)
    assert last is not None
    assert last[DEMO_INVALID_UTF8_PATH] == bytes.fromhex(expected[0])
    older = git_text(root, "rev-parse", f"{tip}~3")
    assert fl_history(graph, older, DEMO_INVALID_UTF8_PATH) == git_log(
        root, older, DEMO_INVALID_UTF8_PATH
    )
    # and the history page of that path, addressed by its exact bytes (as a WSGI server
    # hands them over: PATH_INFO is the raw bytes read as latin-1; falcon's test client would
    # turn a %FF into U+FFFD)
    url = "/alice/demo/commits/branch/main/" + DEMO_INVALID_UTF8_PATH.decode("latin-1")
    result = client.simulate_get(quote(url, safe="/"), extras={"PATH_INFO": url})
    assert result.status_code == 200
    assert list(dict.fromkeys(_COMMIT_LINK.findall(result.text))) == expected


# -------------------------------------------------------------------- last commit per entry


def _last_mismatches(
    forge: Forge, root: Path, relative: str, starts: Sequence[str]
) -> tuple[int, list[str]]:
    repo = repo_of(forge, relative)
    compared, wrong = 0, []
    for start in starts:
        for directory, names in git_directories(root, start).items():
            got = forge.answers.last_commits(repo, bytes.fromhex(start), directory, names)
            assert got is not None, f"{start} not indexed"
            for name in names:
                path = directory + b"/" + name if directory else name
                expected = git_text(
                    root, "--literal-pathspecs", "log", "-1", "--format=%H", start, "--", _arg(path)
                )
                answer = got[name]
                compared += 1
                if (answer.hex() if answer else "") != expected:
                    wrong.append(f"{start[:10]} {path!r}: git {expected} floorless {answer}")
    return compared, wrong


@pytest.mark.parametrize("relative", [MERGES, DEMO])
def test_last_commit_per_entry_matches_git(forge: Forge, fixture_root: Path, relative: str) -> None:
    root = fixture_root / relative
    starts = list(dict.fromkeys([*git_branches(root).values(), *git_all_commits(root)]))
    compared, wrong = _last_mismatches(forge, root, relative, starts)
    assert not wrong, "\n".join(wrong)
    assert compared >= (150 if relative == MERGES else 100)


def test_last_commit_per_entry_in_a_long_history(forge: Forge, fixture_root: Path) -> None:
    root = fixture_root / HISTORY
    tip = git_branches(root)["main"]
    # an older start point too: the one just before the last side-branch merge
    older = git_text(root, "rev-parse", f"{tip}~{HISTORY_COMMITS - 10_250 + 1}")
    repo = repo_of(forge, HISTORY)
    compared = 0
    for start in (tip, older):
        dirs = git_directories(root, start)
        for directory in (b"", b"dir0", b"dir2", b"side"):
            names = dirs[directory]  # always every entry: answers are cached per directory
            got = forge.answers.last_commits(repo, bytes.fromhex(start), directory, names)
            assert got is not None
            for name in names:
                path = directory + b"/" + name if directory else name
                expected = git_text(root, "log", "-1", "--format=%H", start, "--", _arg(path))
                assert got[name] == bytes.fromhex(expected), (start, path)
                compared += 1
    assert compared >= 40


def test_last_change_of_every_path_ever_from_every_commit(forge: Forge, fixture_root: Path) -> None:
    """Also paths absent at the start commit (deleted, or not yet added): none, or the
    deletion."""
    root = fixture_root / MERGES
    graph = graph_of(forge, MERGES)
    paths = [*git_paths_ever(root), b"zzz-never"]
    wrong = []
    for start in git_all_commits(root):
        got = graph.last_changes(graph.seq[bytes.fromhex(start)], paths)
        assert got is not None
        for path in paths:
            expected = git_log(root, start, path, max_count=1)
            answer = got[path]
            if ([] if answer is None else [graph.oids[answer].hex()]) != expected:
                wrong.append(f"{start[:10]} {path!r}: git {expected} floorless {answer}")
    assert not wrong, "\n".join(wrong)


# -------------------------------------------------------------------------------- counts


@pytest.mark.parametrize("relative", [MERGES, DEMO, HISTORY])
def test_commit_count_matches_rev_list(forge: Forge, fixture_root: Path, relative: str) -> None:
    root = fixture_root / relative
    repo = repo_of(forge, relative)
    starts = list(git_branches(root).values())
    if relative != HISTORY:
        starts += git_all_commits(root)
    for start in dict.fromkeys(starts):
        expected = int(git_text(root, "rev-list", "--count", start))
        assert forge.answers.commit_count(repo.id, bytes.fromhex(start)) == expected, start
    if relative == HISTORY:
        assert int(git_text(root, "rev-list", "--count", "main")) > HISTORY_COMMITS


# ------------------------------------------------------------------------ branch log order


@pytest.mark.parametrize("relative", [MERGES, DEMO])
def test_branch_log_order_matches_git(forge: Forge, fixture_root: Path, relative: str) -> None:
    root = fixture_root / relative
    handle = forge.live.open(repo_of(forge, relative))
    for branch, tip in git_branches(root).items():
        expected = git_log(root, tip)
        page = libgit2_page(handle, [bytes.fromhex(tip)], 100_000)
        assert [c.hex() for c in page.commits] == expected, branch
        assert not page.more
        for size in (1, 2, 3, 5, 50):
            assert libgit2_pages(forge, relative, tip, size) == expected, (branch, size)


def test_branch_log_order_in_a_long_history(forge: Forge, fixture_root: Path) -> None:
    root = fixture_root / HISTORY
    tip = git_branches(root)["main"]
    expected = git_log(root, tip, max_count=500)
    handle = forge.live.open(repo_of(forge, HISTORY))
    page = libgit2_page(handle, [bytes.fromhex(tip)], 200)
    assert [c.hex() for c in page.commits] == expected[:200]
    assert page.more
    assert libgit2_pages(forge, HISTORY, tip, 50, most=500) == expected
    # across a side-branch merge, where the walk holds two lines at once
    merge = git_text(root, "rev-parse", f"{tip}~{HISTORY_COMMITS - 10_250}")
    assert git_text(root, "log", "-1", "--format=%s", merge).endswith("merge side branch")
    expected = git_log(root, merge, max_count=60)
    assert libgit2_pages(forge, HISTORY, merge, 7, most=60)[:60] == expected


# ---------------------------------------------------------------------- path history pages


def test_path_history_pages_rebuild_the_full_list(forge: Forge, fixture_root: Path) -> None:
    root = fixture_root / MERGES
    graph = graph_of(forge, MERGES)
    compared = 0
    for tip in dict.fromkeys(git_branches(root).values()):
        for path in git_paths_ever(root):
            expected = git_log(root, tip, path)
            for size in (1, 2, 3):
                assert fl_history_pages(graph, tip, path, size) == expected, (tip, path, size)
                compared += 1
        for size in (1, 4):  # no path: the whole branch, as libgit2 pages do it
            assert fl_history_pages(graph, tip, None, size) == git_log(root, tip)
    assert compared > 100


def test_path_history_pages_in_a_long_history(forge: Forge, fixture_root: Path) -> None:
    root = fixture_root / HISTORY
    graph = graph_of(forge, HISTORY)
    tip = git_branches(root)["main"]
    for path, size, most in (
        (b"dir0", 50, 500),
        (b"rare.txt", 1, None),
        (b"README.md", 2, None),
        (b"side", 3, None),
    ):
        got = fl_history_pages(graph, tip, path, size, most)
        expected = git_log(root, tip, path)
        if most is not None:
            expected = expected[: len(got)]
            assert len(got) >= most
        assert got == expected, path
    assert fl_history_pages(graph, tip, None, 50, most=500) == git_log(root, tip, max_count=500)


# ---------------------------------------------------------------------------- through HTTP

_COMMIT_LINK = re.compile(r'href="/(?:[^/"]+)/(?:[^/"]+)/commit/([0-9a-f]{40})"')
_NEXT_LINK = re.compile(r'<a rel="next" href="\?([^"]+)"')


def walk_pages(client: testing.TestClient, url: str, most: int = 1000) -> tuple[list[str], int]:
    """The commit ids of every page from ``url`` on, following ``rel="next"``; and pages."""
    shown: list[str] = []
    query: str | None = None
    pages = 0
    while pages < most:
        result = client.simulate_get(url, query_string=query)
        assert result.status_code == 200, result.text
        pages += 1
        shown += dict.fromkeys(_COMMIT_LINK.findall(result.text))
        found = _NEXT_LINK.search(result.text)
        if found is None:
            return shown, pages
        query = html.unescape(found.group(1))
    raise AssertionError("too many pages")


@pytest.fixture(scope="module")
def small_pages(
    fixture_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[testing.TestClient]:
    """A forge over a copy of merges.git that shows two commits per page."""
    repos = tmp_path_factory.mktemp("small-pages")
    shutil.copytree(fixture_root / MERGES, repos / MERGES, symlinks=True)
    forge = start_forge(repos, tmp_path_factory.mktemp("small-pages-data"), commits_per_page=2)
    try:
        repo = repo_of(forge, MERGES)
        tips = forge.live.snapshot(repo).tips()
        wait_for(lambda: all(forge.indexer.ready(repo.id, c) for c in tips))
        yield testing.TestClient(create_app(forge))
    finally:
        forge.stop()


def test_http_path_history_follows_next_links(
    client: testing.TestClient, small_pages: testing.TestClient, fixture_root: Path
) -> None:
    root = fixture_root / MERGES
    for path in ("lib", "lib/c.txt", "top.txt", "README"):
        expected = git_log(root, "main", path.encode())
        shown, pages = walk_pages(client, f"/bob/merges/commits/branch/main/{path}")
        assert shown == expected, path
        shown, pages = walk_pages(small_pages, f"/bob/merges/commits/branch/main/{path}")
        assert shown == expected, path
        assert pages >= (len(expected) + 1) // 2
    assert len(git_log(root, "main", b"lib")) > 2  # so the small pages really paginate


def test_http_branch_history_follows_next_links(
    small_pages: testing.TestClient, fixture_root: Path
) -> None:
    root = fixture_root / MERGES
    for branch in ("main", "topic-c", "cross-y"):
        shown, pages = walk_pages(small_pages, f"/bob/merges/commits/branch/{branch}")
        expected = git_log(root, branch)
        assert shown == expected, branch
        assert pages == (len(expected) + 1) // 2


def test_http_rare_file_history(client: testing.TestClient, fixture_root: Path) -> None:
    root = fixture_root / HISTORY
    shown, _ = walk_pages(client, "/alice/history/commits/branch/main/rare.txt")
    expected = git_log(root, "main", b"rare.txt")
    assert shown == expected
    subjects = [git_text(root, "log", "-1", "--format=%s", c) for c in shown]
    assert subjects == ["commit 9000", "commit 4000", "commit 3"]


# ----------------------------------------------------------- shapes the fixtures lack

EDGES = "dave/edges.git"
TIES = "dave/ties.git"
SKEW = "dave/skew.git"


def _edges_stream() -> FastImportStream:
    """Merges TREESAME to several parents, an octopus, a file turned directory, an unrelated
    root merged in, an empty commit, an evil deletion, a ``--no-ff`` merge, a timestamp tie."""
    s = FastImportStream()
    main = "refs/heads/main"
    base = s.commit(
        main, "base\n", [], {"a.txt": b"1", "d/x.txt": b"x1", "t": b"t", "keep.txt": b"k"}
    )
    same = s.commit("refs/heads/same", "same change on a side\n", [base], {"a.txt": b"2"})
    m1 = s.commit(main, "same change on main\n", [base], {"a.txt": b"2"})
    mm1 = s.commit(main, "merge: TREESAME to both parents\n", [m1, same])
    r1 = s.commit("refs/heads/revert", "change d/x.txt\n", [mm1], {"d/x.txt": b"tmp"})
    r2 = s.commit("refs/heads/revert", "revert d/x.txt\n", [r1], {"d/x.txt": b"x1"})
    m2 = s.commit(main, "change keep.txt\n", [mm1], {"keep.txt": b"k2"})
    mm2 = s.commit(main, "merge a change and its revert\n", [m2, r2])
    o1 = s.commit("refs/heads/oct1", "add b.txt\n", [mm2], {"b.txt": b"b"})
    o2 = s.commit("refs/heads/oct2", "add c.txt\n", [mm2], {"c.txt": b"c"})
    m3 = s.commit(main, "change a.txt\n", [mm2], {"a.txt": b"3"})
    octo = s.commit(main, "octopus\n", [m3, o1, o2], {"b.txt": b"b", "c.txt": b"c"})
    td = s.commit(main, "t becomes a directory\n", [octo], {"t": None, "t/in.txt": b"in"})
    orphan = s.commit(
        "refs/heads/orphan", "unrelated root\n", [], {"o.txt": b"o", "a.txt": b"other"}
    )
    mo = s.commit(main, "merge unrelated histories\n", [td, orphan], {"o.txt": b"o"})
    empty = s.commit(main, "empty\n", [mo])
    n1 = s.commit("refs/heads/del", "add n.txt\n", [empty], {"n.txt": b"n"})
    md = s.commit(
        main, "evil merge deleting keep.txt\n", [empty, n1], {"keep.txt": None, "n.txt": b"n"}
    )
    f1 = s.commit("refs/heads/ff", "f.txt\n", [md], {"f.txt": b"f"})
    f2 = s.commit("refs/heads/ff", "a.txt on ff\n", [f1], {"a.txt": b"4", "d/y.txt": b"y"})
    noff = s.commit(
        main, "merge --no-ff\n", [md, f2], {"f.txt": b"f", "a.txt": b"4", "d/y.txt": b"y"}
    )
    tie = s.clock.tick()
    t1 = s.commit("refs/heads/tie1", "tie one\n", [noff], {"d/x.txt": b"t1"}, when=tie)
    t2 = s.commit("refs/heads/tie2", "tie two\n", [noff], {"d/y.txt": b"t2"}, when=tie)
    mt = s.commit(main, "merge the ties\n", [noff, t1, t2], {"d/x.txt": b"t1", "d/y.txt": b"t2"})
    last = s.commit(main, "last\n", [mt], {"a.txt": b"5"})
    four = s.clock.tick()  # an octopus of four parents sharing one timestamp
    quads = [
        s.commit(f"refs/heads/q{i}", f"q{i}\n", [last], {f"q/{i}.txt": b"q"}, when=four)
        for i in range(4)
    ]
    s.commit(main, "merge four at once\n", quads, {f"q/{i}.txt": b"q" for i in range(4)})
    s.reset("refs/heads/ff", f1)  # f2 is reachable through main only
    return s


def _ties_stream() -> FastImportStream:
    """A ``--no-ff`` merge whose commits share one timestamp."""
    s = FastImportStream()
    main = "refs/heads/main"
    base = s.commit(main, "base\n", [], {"a": b"0"}, when=EPOCH_START)
    one = s.commit("refs/heads/topic", "one\n", [base], {"a": b"1"}, when=EPOCH_START + 60)
    two = s.commit("refs/heads/topic", "two\n", [one], {"a": b"2"}, when=EPOCH_START + 60)
    s.commit(main, "merge\n", [one, two], {"a": b"2"}, when=EPOCH_START + 120)
    return s


def _skew_stream() -> FastImportStream:
    """A parent committed long after its children (a machine with a wrong clock)."""
    s = FastImportStream()
    main = "refs/heads/main"
    base = s.commit(main, "base\n", [], {"a": b"0"}, when=EPOCH_START)
    late = s.commit(main, "clock ahead\n", [base], {"a": b"x"}, when=EPOCH_START + 10**6)
    one = s.commit(main, "one\n", [late], {"a": b"1"}, when=EPOCH_START + 200)
    two = s.commit("refs/heads/topic", "two\n", [late], {"b": b"1"}, when=EPOCH_START + 100)
    s.commit(main, "merge\n", [one, two], {"a": b"1", "b": b"1"}, when=EPOCH_START + 300)
    return s


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Forge, Path]]:
    """A forge (no background threads) over small repositories built for awkward shapes,
    each indexed by one direct ``Indexer.update``."""
    root = tmp_path_factory.mktemp("edges")
    for relative, stream in (
        (EDGES, _edges_stream()),
        (TIES, _ties_stream()),
        (SKEW, _skew_stream()),
    ):
        target = root / relative
        target.mkdir(parents=True)
        git(target, "init", "--quiet", "--bare", "-b", "main")
        stream.run(target)
    forge = Forge(Settings.load(environ={}, data=tmp_path_factory.mktemp("edges-data"), repos=root))
    forge.start(background=False)
    for relative in (EDGES, TIES, SKEW):
        repo = repo_of(forge, relative)
        # raised KeyError before: a --no-ff merge's first parent indexed after its children
        assert forge.indexer.update(repo, forge.live.state(repo).snapshot()) == len(
            git_all_commits(root / relative)
        )
    yield forge, root
    forge.stop()


@pytest.mark.parametrize("relative", [EDGES, TIES, SKEW])
def test_awkward_shapes_match_git(edges: tuple[Forge, Path], relative: str) -> None:
    forge, root = edges
    repo_dir = root / relative
    graph = graph_of(forge, relative)
    repo = repo_of(forge, relative)
    handle = forge.live.open(repo)
    starts = git_all_commits(repo_dir)
    paths = [*git_paths_ever(repo_dir), b"missing"]
    compared, wrong = _history_mismatches(repo_dir, graph, starts, paths)
    assert not wrong, "\n".join(wrong)
    last, wrong = _last_mismatches(forge, repo_dir, relative, starts)
    assert not wrong, "\n".join(wrong)
    for start in starts:
        assert [
            c.hex() for c in libgit2_page(handle, [bytes.fromhex(start)], 1000).commits
        ] == git_log(repo_dir, start), start
        assert fl_history(graph, start, None) == git_log(repo_dir, start), start
        expected = int(git_text(repo_dir, "rev-list", "--count", start))
        assert forge.answers.commit_count(repo.id, bytes.fromhex(start)) == expected
    assert compared == len(starts) * len(paths)
    assert last >= len(starts)


def test_awkward_shapes_paginate_like_git(edges: tuple[Forge, Path]) -> None:
    forge, root = edges
    repo_dir = root / EDGES
    graph = graph_of(forge, EDGES)
    tip = git_branches(repo_dir)["main"]
    for path in [*git_paths_ever(repo_dir), None]:
        expected = git_log(repo_dir, tip, path)
        for size in (1, 2, 3, 4):
            assert fl_history_pages(graph, tip, path, size) == expected, (path, size)
    for size in (1, 2, 3, 4):
        assert libgit2_pages(forge, EDGES, tip, size) == git_log(repo_dir, tip), size


@pytest.mark.parametrize("relative", [TIES, SKEW])
def test_pages_across_timestamp_ties_and_clock_skew(
    edges: tuple[Forge, Path], relative: str
) -> None:
    forge, root = edges
    repo_dir = root / relative
    tip = git_branches(repo_dir)["main"]
    expected = git_log(repo_dir, tip)
    graph = graph_of(forge, relative)
    for size in (1, 2, 3):
        assert libgit2_pages(forge, relative, tip, size) == expected, size
        assert fl_history_pages(graph, tip, None, size) == expected, size


def test_long_path_walk_is_deferred_then_served_from_the_index(
    forge: Forge,
    fixture_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A path changed rarely in a long history needs a long walk: the page answers at once
    that it is being prepared (and refreshes), the walk runs in the background, and the same
    page then comes from the stored answer without walking again."""
    monkeypatch.setattr(floorless.index.answers, "INLINE_BUDGET", 100)
    client = testing.TestClient(create_app(forge))  # its own page cache: nothing rendered yet
    # from a commit no other test starts a walk at: the forge keeps the walks it made
    start = git_text(fixture_root / HISTORY, "rev-parse", "main~1")
    url = f"/alice/history/commits/commit/{start}/rare.txt"
    expected = git_log(fixture_root / HISTORY, start, b"rare.txt")
    first = client.simulate_get(url)
    assert first.status_code == 200
    assert "being prepared" in first.text
    # the page fetches itself again (app.js) rather than reloading: no Refresh header
    assert "refresh" not in first.headers and 'data-poll="page"' in first.text
    wait_for(lambda: "being prepared" not in client.simulate_get(url).text)

    walks = []
    original = CommitGraph.history

    def counting(self, *args, **kwargs):
        walks.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CommitGraph, "history", counting)
    shown, _ = walk_pages(client, url)
    assert shown == expected
    assert walks == []


def test_an_answer_for_one_entry_leaves_the_others_to_be_found(
    tmp_path: Path, fixture_root: Path
) -> None:
    """A directory's last commits kept for one entry (as the API's contents of a file asks
    them, where no page asked for the directory before) are no answer for the others: they
    are found when the whole directory is asked for, and the kept answer grows."""
    shutil.copytree(fixture_root / DEMO, tmp_path / "repos" / DEMO)
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        wait_indexed(forge)
        root = tmp_path / "repos" / DEMO
        repo = repo_of(forge, DEMO)
        start = git_text(root, "rev-parse", "main~3")
        names = git_directories(root, start)[b""]
        assert len(names) > 3
        key = bytes.fromhex(start) + b"\0"
        one = forge.answers.last_commits(repo, bytes.fromhex(start), b"", names[:1])
        assert one is not None and one[names[0]] is not None
        # the answer as a question about one entry alone leaves it
        forge.answers.cache.put(
            repo.id, "last", key, json.dumps({names[0].hex(): one[names[0]].hex()})
        )
        compared, wrong = _last_mismatches(forge, root, DEMO, [start])
        assert compared >= len(names) and not wrong, "\n".join(wrong)
        kept = forge.answers.cache.get(repo.id, "last", key)
        assert kept is not None and set(json.loads(kept)) == {n.hex() for n in names}
    finally:
        forge.stop()
