"""Pagination is exact: every commits list and path history, followed page by page through its
``Older`` links, is ``git log [-- path]`` itself, with no commit twice and none missing.

The histories here are the ones a cursor gets wrong: parents dated after their children (a
clock running ahead, or one running behind), a parent dated after one child whose other,
older child comes up pages later (the shape flask's ``78b56dbf`` and ``a22d143f`` have),
runs of commits sharing one timestamp, merges whose sides run on skewed clocks, path
histories over all of those, and seeded random DAGs of a few hundred commits mixing it all.
Each list is followed end to end through the in-process client at several small page sizes,
with the walks kept between pages, with no walk kept (every page walks again from its
start), and with a budget so small that pages are finished in the background.
"""

from __future__ import annotations

import dataclasses
import html
import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from falcon import testing
from support.forges import wait_for
from support.gitfixtures import EPOCH_START, FastImportStream, git, git_text

import floorless.index.answers
from floorless.core.config import Settings
from floorless.core.errors import RepositoryBroken
from floorless.forge import Forge
from floorless.git.history import LogWalk
from floorless.repos.registry import Repo
from floorless.web.app import create_app

SIZES = (3, 4, 5)
OWNER = "pages"

# ------------------------------------------------------------------------ the histories


def flask_shape() -> FastImportStream:
    """A parent dated after one of its children: ``late`` is walked right after ``a1`` (its
    newer child), while ``b1`` (its older child) comes up on a later page and names it
    again; and a second such parent further down, under a merge."""
    s = FastImportStream()
    main, side = "refs/heads/main", "refs/heads/side"
    t = EPOCH_START
    root = s.commit(main, "root\n", [], {"a.txt": b"0", "d/x.txt": b"0"}, when=t)
    late = s.commit(main, "clock ahead\n", [root], {"a.txt": b"late"}, when=t + 500)
    a1 = s.commit(main, "a1\n", [late], {"a.txt": b"a1"}, when=t + 1000)
    a2 = s.commit(main, "a2\n", [a1], {"d/x.txt": b"a2"}, when=t + 1100)
    b1 = s.commit(side, "b1 (older than its parent)\n", [late], {"b.txt": b"b1"}, when=t + 100)
    b2 = s.commit(side, "b2\n", [b1], {"a.txt": b"b2"}, when=t + 200)
    merge = s.commit(main, "merge side\n", [a2, b2], {"b.txt": b"b1"}, when=t + 1200)
    tip = merge
    for i in range(12):  # a run of ordinary commits, then the shape again further down
        tip = s.commit(main, f"m{i}\n", [tip], {"d/x.txt": b"m%d" % i}, when=t + 1300 + 10 * i)
    late2 = s.commit(main, "clock ahead again\n", [tip], {"a.txt": b"late2"}, when=t + 9000)
    c1 = s.commit(main, "c1\n", [late2], {"a.txt": b"c1"}, when=t + 9500)
    d1 = s.commit(side, "d1 (older than its parent)\n", [late2], {"d/y.txt": b"d1"}, when=t + 1500)
    d2 = s.commit(side, "d2\n", [d1], {"a.txt": b"d2"}, when=t + 1600)
    d3 = s.commit(side, "d3\n", [d2], {"d/y.txt": b"d3"}, when=t + 1700)
    s.commit(main, "merge side again\n", [c1, d3], {"d/y.txt": b"d3"}, when=t + 9600)
    return s


def ties() -> FastImportStream:
    """Every commit at one instant: git's order is its queue's, ties in the order queued."""
    s = FastImportStream()
    main = "refs/heads/main"
    tip = s.commit(main, "root\n", [], {"a.txt": b"0"}, when=EPOCH_START)
    for i in range(8):
        base = tip
        sides = []
        for j in range(3):
            side = base
            for k in range(2):
                path = f"s{j}/f.txt" if k else "a.txt"
                side = s.commit(
                    f"refs/heads/s{j}", f"{i}.{j}.{k}\n", [side], {path: b"%d%d%d" % (i, j, k)},
                    when=EPOCH_START,
                )  # fmt: skip
            sides.append(side)
        tip = s.commit(
            main, f"merge {i}\n", [base, *sides], {"a.txt": b"m%d" % i}, when=EPOCH_START
        )
    return s


def skewed_merges() -> FastImportStream:
    """Merges whose sides run on skewed clocks: one side a day ahead of the main line, one
    side a year behind, one whose commits step backwards in time; and equal timestamps at the
    merges."""
    s = FastImportStream()
    main = "refs/heads/main"
    t = EPOCH_START
    tip = s.commit(main, "root\n", [], {"a.txt": b"0", "d/x.txt": b"0"}, when=t)
    for i in range(6):
        now = t + 1000 * (i + 1)
        ahead = behind = backwards = tip
        for k in range(3):
            ahead = s.commit(
                f"refs/heads/ahead{i}", f"ahead {i}.{k}\n", [ahead], {"d/x.txt": b"a%d%d" % (i, k)},
                when=now + 86_400 + k,
            )  # fmt: skip
            behind = s.commit(
                f"refs/heads/behind{i}", f"behind {i}.{k}\n", [behind],
                {"b.txt": b"b%d%d" % (i, k)}, when=now - 31_536_000 + k,
            )  # fmt: skip
            backwards = s.commit(
                f"refs/heads/back{i}", f"backwards {i}.{k}\n", [backwards],
                {"a.txt": b"r%d%d" % (i, k)}, when=now - 100 * k,
            )  # fmt: skip
        main_side = s.commit(main, f"main {i}\n", [tip], {"d/y.txt": b"%d" % i}, when=now)
        tip = s.commit(
            main, f"merge {i}\n", [main_side, ahead, behind, backwards][: 2 + i % 3],
            {"a.txt": b"m%d" % i}, when=now if i % 2 else now + 86_400 + 2,
        )  # fmt: skip
    return s


PATHS = ("a.txt", "b.txt", "d/x.txt", "d/y.txt", "e/z.txt")


def random_dag(seed: int, commits: int = 300, branches: int = 4) -> FastImportStream:
    """A seeded random history: branches taking turns, merges of two or three parents (some
    of old commits), a few unrelated roots, and commit dates that step forward, stay equal,
    jump far ahead or fall far behind their parents'."""
    rng = random.Random(seed)
    s = FastImportStream()
    now = EPOCH_START
    files = {p: b"0 " + p.encode() for p in PATHS[:3]}
    root = s.commit("refs/heads/main", "root\n", [], files, when=now)
    trees = {root: files}
    tips = {"refs/heads/main": root, **{f"refs/heads/b{i}": root for i in range(branches - 1)}}
    for i in range(commits):
        if rng.random() < 0.6:
            now += rng.choice([0, 0, 1, 60])
        when, draw = now, rng.random()
        if draw < 0.08:
            when = now + rng.choice([1, 30, 3600, 10**6])  # a clock ahead
        elif draw < 0.16:
            when = now - rng.choice([1, 30, 3600, 10**6])  # a clock behind
        elif draw < 0.22:
            when = EPOCH_START  # one instant many commits share
        ref = rng.choice(sorted(tips))
        parents = [tips[ref]]
        if rng.random() < 0.2:
            others = sorted(set(tips.values()) - {parents[0]})
            if rng.random() < 0.3:
                others.append(rng.choice(sorted(trees)))  # an old commit, not a tip
            others = [o for o in dict.fromkeys(others) if o != parents[0]]
            if others:
                parents += rng.sample(others, min(len(others), rng.choice([1, 1, 2])))
        tree = dict(trees[parents[0]])
        change: dict[str, bytes | None] = {}
        for path in PATHS if len(parents) > 1 else ():  # a merge takes some paths from a side
            if rng.random() < 0.4:
                value = trees[rng.choice(parents[1:])].get(path)
                if tree.get(path) != value:
                    change[path] = value
        for path in rng.sample(PATHS, rng.choice([0, 1, 1, 2] if len(parents) == 1 else [0, 1])):
            change[path] = None if rng.random() < 0.1 else f"{i} {path}".encode()
        change = {p: v for p, v in change.items() if v is not None or p in tree}
        if rng.random() < 0.03:  # an unrelated root, merged in later perhaps
            parents, tree, change = [], {}, {"a.txt": f"root {i}".encode()}
        mark = s.commit(ref, f"c{i}\n", parents, change, when=when)
        for path, value in change.items():
            if value is None:
                tree.pop(path, None)
            else:
                tree[path] = value
        trees[mark] = tree
        tips[ref] = mark
    return s


HISTORIES: dict[str, Callable[[], FastImportStream]] = {
    "flask": flask_shape,
    "ties": ties,
    "skewed": skewed_merges,
    **{f"random{seed}": (lambda seed=seed: random_dag(seed)) for seed in range(3)},
}

# ------------------------------------------------------------------------------ helpers


def git_log(repo: Path, rev: str, path: str | None = None) -> list[str]:
    args = ["--literal-pathspecs", "log", "--format=%H", rev]
    return git(repo, *args, *(["--", path] if path else [])).decode().split()


def branches(repo: Path) -> dict[str, str]:
    out = git_text(repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def paths_ever(repo: Path) -> list[str]:
    """Every file and directory any commit has (``d``, ``d/x.txt``, ...)."""
    out = git_text(repo, "log", "--all", "--format=", "--name-only")
    files = {line for line in out.splitlines() if line}
    return sorted(files | {os.path.dirname(f) for f in files} - {""})


@dataclass
class Served:
    forge: Forge
    root: Path
    sizes: tuple[int, ...] = SIZES  # the page sizes followed

    def repo(self, name: str) -> Repo:
        return self.forge.registry.get(OWNER, name)

    def client(self, size: int) -> testing.TestClient:
        """A client whose commits lists show ``size`` commits a page."""
        original = self.forge.settings
        self.forge.settings = dataclasses.replace(original, commits_per_page=size)
        try:
            return testing.TestClient(create_app(self.forge))
        finally:
            self.forge.settings = original


def serve(root: Path, data: Path) -> Served:
    """A forge (no background threads) over the histories, each indexed at once."""
    forge = Forge(Settings.load(environ={}, data=data, repos=root))
    forge.start(background=False)
    served = Served(forge, root)
    for name in HISTORIES:
        repo = served.repo(name)
        forge.indexer.update(repo, forge.live.state(repo).snapshot())
    return served


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pagination")
    for name, build in HISTORIES.items():
        target = root / OWNER / f"{name}.git"
        target.mkdir(parents=True)
        git(target, "init", "--quiet", "--bare", "-b", "main")
        build().run(target)
    return root


@pytest.fixture(scope="module", params=["kept", "not kept", "background"])
def served(
    request: pytest.FixtureRequest, histories: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The forge with its walks kept between pages; with none kept (each page walks again
    from its start); and with none kept and a budget of a few commits a request (each page
    is finished in the background while the page refreshes)."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param != "kept":
            patch.setattr(floorless.index.answers, "WALK_MEMORY_BYTES", 0)
        if request.param == "background":
            patch.setattr(floorless.index.answers, "INLINE_BUDGET", 4)
            patch.setattr(floorless.index.answers, "GRAPH_BRANCH_BUDGET", 4)
        served = serve(histories, tmp_path_factory.mktemp("pagination-data"))
        # pages finished in the background take a poll each: fewer sizes there
        served.sizes = {"kept": SIZES, "not kept": SIZES[::2], "background": SIZES[-1:]}[
            request.param
        ]
        try:
            yield served
        finally:
            served.forge.stop()


_SUMMARY = re.compile(r'<a class="summary" href="/[^"]+/commit/([0-9a-f]{40})"')
_NEXT = re.compile(r'<a rel="next" href="\?([^"]*)"')


def page(client: testing.TestClient, url: str, query: str | None = None) -> str:
    """A page, once ready (one finished in the background refreshes until it is)."""
    result = client.simulate_get(url, query_string=query)
    if "being prepared" in result.text:
        assert 'data-poll="page"' in result.text  # it fetches itself again (app.js)
        wait_for(lambda: "being prepared" not in client.simulate_get(url, query_string=query).text)
        result = client.simulate_get(url, query_string=query)
    assert result.status_code == 200, result.text
    return result.text


def follow(client: testing.TestClient, url: str, size: int, path: bool) -> list[str]:
    """Every page of ``url``, from the first through each ``Older`` link to the last: the
    commits in order."""
    shown: list[str] = []
    query: str | None = None
    for _ in range(1000):
        text = page(client, url, query)
        commits = _SUMMARY.findall(text)
        found = _NEXT.search(text)
        assert len(commits) <= size
        if found is not None and not path:
            assert len(commits) == size  # only the last page of a branch is short
        shown += commits
        if found is None:
            return shown
        query = html.unescape(found.group(1))
        assert re.fullmatch(r"after=[0-9a-f]{40}&skip=[0-9]{1,10}", query), query
    raise AssertionError("too many pages")


# -------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", HISTORIES)
def test_every_branch_pages_as_git_log(served: Served, name: str) -> None:
    repo = served.root / OWNER / f"{name}.git"
    for size in served.sizes:
        client = served.client(size)
        for branch, tip in branches(repo).items():
            expected = git_log(repo, tip)
            assert len(expected) == len(set(expected))
            shown = follow(client, f"/{OWNER}/{name}/commits/branch/{branch}", size, False)
            assert shown == expected, (branch, size)


@pytest.mark.parametrize("name", HISTORIES)
def test_every_path_history_pages_as_git_log(served: Served, name: str) -> None:
    repo = served.root / OWNER / f"{name}.git"
    tips = branches(repo)
    picked = ["main", *sorted(set(tips) - {"main"})[:1]]  # the whole set takes too long
    for size in served.sizes:
        client = served.client(size)
        for branch in picked:
            for path in paths_ever(repo):
                expected = git_log(repo, tips[branch], path)
                url = f"/{OWNER}/{name}/commits/branch/{branch}/{path}"
                assert follow(client, url, size, True) == expected, (branch, path, size)


def test_the_histories_have_what_a_cursor_gets_wrong(histories: Path) -> None:
    """Each history has parents dated after their children; the flask shape's pages really
    cut between a late parent's children; the ties share one instant."""
    for name in HISTORIES:
        repo = histories / OWNER / f"{name}.git"
        out = git_text(repo, "log", "--all", "--format=%H %ct %P")
        when = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()}
        late = [
            parent
            for line in out.splitlines()
            for parent in line.split()[2:]
            if when[parent] > int(line.split()[1])
        ]
        if name != "ties":
            assert late, name
        else:
            assert set(when.values()) == {EPOCH_START}
    repo = histories / OWNER / "flask.git"
    order = git_log(repo, "main")
    out = git_text(repo, "log", "--format=%H %ct %P", "main")
    when = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()}
    late = [  # (a parent dated after a child, that child)
        (parent, line.split()[0])
        for line in out.splitlines()
        for parent in line.split()[2:]
        if when[parent] > when[line.split()[0]]
    ]
    for size in SIZES:  # at every page size, such a child comes a page after its parent
        assert any(order.index(p) // size < order.index(c) // size for p, c in late), size


def test_a_bookmarked_page_stays_put_when_the_branch_moves(
    histories: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The cursor names the list's start commit: a commit pushed meanwhile shifts nothing."""
    served = serve(histories, tmp_path_factory.mktemp("pagination-moved"))
    try:
        client = served.client(4)
        url = f"/{OWNER}/flask/commits/branch/main"
        query = html.unescape(_NEXT.search(page(client, url)).group(1))  # type: ignore[union-attr]
        second = _SUMMARY.findall(page(client, url, query))
        assert len(second) == 4
        repo = served.root / OWNER / "flask.git"
        tip = git_text(repo, "rev-parse", "main")
        tree = git_text(repo, "rev-parse", "main^{tree}")
        pushed = git(repo, "commit-tree", tree, "-p", tip, "-m", "pushed", when=EPOCH_START + 10**7)
        git(repo, "update-ref", "refs/heads/main", pushed.decode().strip(), tip)
        try:
            served.forge.moves.refs_moved(served.repo("flask"))
            assert _SUMMARY.findall(page(client, url))[0] == pushed.decode().strip()
            assert _SUMMARY.findall(page(client, url, query)) == second
        finally:
            git(repo, "update-ref", "refs/heads/main", tip)
    finally:
        served.forge.stop()


def test_a_malformed_cursor_is_a_bad_request(served: Served) -> None:
    client = served.client(3)
    tip = branches(served.root / OWNER / "flask.git")["main"]
    url = f"/{OWNER}/flask/commits/branch/main"
    for query in (f"after={tip},{tip}", f"after={tip}&skip=-1", f"after={tip}&skip=1e3",
                  f"after={tip}&skip=" + "9" * 11, "after=zz"):  # fmt: skip
        assert client.simulate_get(url, query_string=query).status_code == 400, query
    past = page(client, url, f"after={tip}&skip=100000")
    assert _SUMMARY.findall(past) == [] and _NEXT.search(past) is None


def test_a_walk_that_fails_to_read_a_commit_keeps_its_place() -> None:
    """An error reading a commit (raised to the page) leaves the kept walk as it was: once
    the commit reads, the walk goes on exactly as one never interrupted."""
    rng = random.Random(7)
    parents = {n: [n - 1, *([rng.randrange(n)] if n > 1 and n % 3 == 0 else [])] for n in range(60)}
    parents[0] = []
    when = {n: rng.choice([n, n, 0, 100]) for n in parents}  # ties and skew
    whole = LogWalk([59], when.__getitem__)
    assert whole.extend(100, parents.__getitem__, when.__getitem__)
    assert len(whole.shown) > 30
    failing = {whole.shown[i] for i in (5, 17, 30)}

    def flaky(node: int) -> list[int]:
        if node in failing:
            failing.discard(node)
            raise RepositoryBroken("cannot read commit")
        return parents[node]

    walk = LogWalk([59], when.__getitem__)
    errors = 0
    while True:
        try:
            if walk.extend(len(walk.shown) + 4, flaky, when.__getitem__, budget=3) and walk.done:
                break
        except RepositoryBroken:
            errors += 1
    assert errors == 3
    assert walk.shown == whole.shown and len(set(walk.shown)) == len(whole.shown)
