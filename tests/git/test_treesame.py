"""A merge's other parents, asked in process only of the paths its first parent's diff names
(``git/treesame.py``), and an index that keeps no more than that.

The answers are held against git's own ``diff-tree`` of the merge and that parent, on merges
that delete, add, change a mode, turn a file into a directory, move a submodule and name a
path that is not UTF-8; the index's size is counted on a history whose main line changes many
files while each topic is out, where diffing the second parents whole grows with the square
of the history.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from support.gitfixtures import MODE_EXEC, MODE_GITLINK, Entry, FastImportStream, git, git_text

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.git.treesame import differing

SUBMODULE_A, SUBMODULE_B = b"1" * 40, b"2" * 40
LATIN1 = b"docs/caf\xe9.txt"


# the topic: a file changed, one deleted, a mode changed, a file turned into a directory, the
# submodule moved, the path that is not UTF-8 changed
TOPIC: dict[str | bytes, bytes | Entry | None] = {
    "src/a.py": b"a, on the topic\n",
    "src/deep/c.py": None,
    "tool": Entry(b"run\n", MODE_EXEC),
    "lib/x": None,
    "lib/x/inner": b"now a directory\n",
    "vendor/mod": Entry(SUBMODULE_B, MODE_GITLINK),
    LATIN1: b"latin, changed\n",
}


def _with_directories(paths: set[bytes]) -> set[bytes]:
    found: set[bytes] = set()
    for path in paths:
        while path not in found:
            found.add(path)
            head, slash, _ = path.rpartition(b"/")
            if not slash:
                break
            path = head
    return found


def _diff(repo: Path, commit: str, parent: str) -> set[bytes]:
    """What git says differs between the two, files and the directories above them."""
    out = git(repo, "diff-tree", "-r", "-z", "--no-renames", "--name-only", parent, commit)
    return _with_directories({p for p in out.split(b"\0") if p})


def _build(repo: Path) -> dict[str, str]:
    """Merges of every kind of change; the names of the commits, as ids."""
    git(repo.parent, "init", "-q", "--bare", "-b", "main", str(repo))
    s = FastImportStream()
    base = s.commit(
        "refs/heads/main",
        "base",
        files={
            "README": b"hello\n",
            "src/a.py": b"a\n",
            "src/b.py": b"b\n",
            "src/deep/c.py": b"c\n",
            "tool": b"run\n",
            "lib/x": b"x\n",
            "vendor/mod": Entry(SUBMODULE_A, MODE_GITLINK),
            LATIN1: b"latin\n",
        },
    )
    topic = s.commit(
        "refs/heads/topic",
        "topic",
        [base],
        files=TOPIC,
    )
    # meanwhile the main line changes many files the topic never touched, and one it did
    main = base
    for i in range(20):
        main = s.commit("refs/heads/main", f"main {i}", [main], files={f"many/f{i}": b"%d\n" % i})
    main = s.commit("refs/heads/main", "main: a.py too", [main], files={"src/a.py": b"a, main\n"})
    # the merge takes the topic's a.py: it differs from the main line there and not from the
    # topic; README changed in the merge itself differs from both
    s.commit(
        "refs/heads/main",
        "merge the topic",
        [main, topic],
        files={**TOPIC, "README": b"hello, merged\n"},
    )
    s.run(repo)
    return {
        "base": git_text(repo, "merge-base", "main^1", "topic"),
        "topic": git_text(repo, "rev-parse", "topic"),
        "main": git_text(repo, "rev-parse", "main^1"),
        "merge": git_text(repo, "rev-parse", "main"),
    }


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("treesame") / "merges.git"
    return repo, _build(repo)


def test_the_other_parent_is_asked_exactly_as_git_diffs_it(
    merged: tuple[Path, dict[str, str]],
) -> None:
    repo, ids = merged
    handle = pygit2.Repository(str(repo))
    first = _diff(repo, ids["merge"], ids["main"])
    # what the first parent's diff names: the topic's changes and the merge's own, every kind
    assert {b"src/a.py", b"src/deep/c.py", b"tool", b"lib/x", b"lib/x/inner"} <= first
    assert {b"vendor/mod", LATIN1, b"README"} <= first
    found = differing(
        handle, pygit2.Oid(hex=ids["merge"]), pygit2.Oid(hex=ids["topic"]), set(first)
    )
    assert found == _diff(repo, ids["merge"], ids["topic"]) & first
    # the topic's own changes are as the topic had them: only the merge's README differs
    assert found == {b"README"}
    # against the main line's tip the other way round: all of it differs
    back = differing(handle, pygit2.Oid(hex=ids["topic"]), pygit2.Oid(hex=ids["main"]), first)
    assert back == _diff(repo, ids["topic"], ids["main"]) & first
    assert {b"src/a.py", b"tool", b"lib/x/inner", b"vendor/mod", LATIN1} <= back


def test_what_is_the_same_or_missing_on_both_sides_is_left_out(
    merged: tuple[Path, dict[str, str]],
) -> None:
    repo, ids = merged
    handle = pygit2.Repository(str(repo))
    asked = {b"src", b"src/b.py", b"src/nothing/here", b"many", b"many/f3"}
    found = differing(handle, pygit2.Oid(hex=ids["main"]), pygit2.Oid(hex=ids["base"]), asked)
    assert found == {b"many", b"many/f3", b"src"} & _diff(repo, ids["main"], ids["base"])
    assert b"src" in found  # a.py moved on the main line: src differs, b.py does not
    assert b"src/b.py" not in found


def _topics(repo: Path, topics: int, main_commits: int) -> None:
    """``topics`` topics forked from the root, out while the main line changes a file in each
    of ``main_commits`` commits, then merged one after the other: a merge's second parent
    differs from it in everything the main line did since the root."""
    git(repo.parent, "init", "-q", "--bare", "-b", "main", str(repo))
    s = FastImportStream()
    root = s.commit("refs/heads/main", "root", files={"README": b"root\n"})
    tips = [
        s.commit(f"refs/heads/t{t}", f"topic {t}", [root], files={f"topic/{t}": b"t\n"})
        for t in range(topics)
    ]
    main = root
    for i in range(main_commits):
        main = s.commit("refs/heads/main", f"main {i}", [main], files={f"main/{i}": b"m\n"})
    for t, tip in enumerate(tips):
        main = s.commit("refs/heads/main", f"merge {t}", [main, tip], files={f"topic/{t}": b"t\n"})
    s.run(repo)


def test_the_index_grows_with_the_commits_not_with_what_the_main_line_did_meanwhile(
    tmp_path: Path,
) -> None:
    repos = tmp_path / "repos" / "merges"
    repos.mkdir(parents=True)
    topics, main_commits = 20, 100
    _topics(repos / "topics.git", topics, main_commits)
    forge = Forge(Settings.load(environ={}, data=tmp_path / "data", repos=tmp_path / "repos"))
    forge.start(background=False)  # the test's update alone indexes
    try:
        repo = forge.registry.get("merges", "topics")
        forge.indexer.update(repo, forge.live.snapshot(repo))
        graph = forge.indexer.graph(repo.id)
        assert graph is not None and graph.indexed == len(graph) == 1 + topics * 2 + main_commits
        merges = [n for n in range(len(graph)) if len(graph.parents[n]) == 2]
        slots = [graph.slot_ids(n) for n in merges]
        # a topic's merge differs from the main line in the topic's file and its directory,
        # and from the topic's tip in the directory alone (which holds the topics merged
        # before it): diffed whole, the second parent would also differ in every file the
        # main line added
        assert len(merges) == topics
        names = [[[graph.path_names[i] for i in ids] for ids in s or []] for s in slots]
        assert names[0] == [[b"topic", b"topic/0"], []]
        assert all(
            n == [[b"topic", f"topic/{t}".encode()], [b"topic"]] for t, n in enumerate(names) if t
        )
        stored = sum(len(ids) for n in range(len(graph)) for ids in graph.slot_ids(n) or [])
        # the root's README; a topic's, a main commit's and a merge's first parent: a file
        # and its directory; the merges' second parents after the first: a directory
        assert stored == 1 + 2 * topics + 2 * main_commits + 2 * topics + (topics - 1)
        # and the answers are git's
        tip = graph.seq[bytes.fromhex(git_text(repo.path, "rev-parse", "main"))]
        for path in (b"README", b"topic", b"topic/7", b"main", b"main/42"):
            walk = graph.walk([tip], path)
            assert graph.history(walk, 10**6) is True
            shown = [graph.oids[n].hex() for n in walk.shown]
            assert shown == git_text(repo.path, "rev-list", "main", "--", path.decode()).split()
    finally:
        forge.stop()
