"""Path walks that cross a long history by the path's postings (``CommitGraph.postings``).

A path's history and a directory's last-commit column take the commits that did not change the
path against their first parent in runs, not one by one. Here the answers are held against the
walk that reads every commit (``LogWalk`` with git's simplification, and ``last_changes``
without the directory), on random graphs with merges, equal timestamps and parents dated after
their children, and the work is counted.
"""

from __future__ import annotations

import random
from array import array

import pytest

from floorless.git.history import BranchWalk, CommitGraph, LogWalk, PathWalk

pytestmark = pytest.mark.unit

PATHS = [b"a/x", b"a/y", b"a/b/z", b"a/b/w", b"c", b"d/e"]


def _ids(graph: CommitGraph, paths: set[bytes]) -> array[int]:
    """The ids of ``paths`` and of every directory above them, as the indexer stores them."""
    ids: set[int] = set()
    for path in paths:
        pid = graph.path_id(path, create=True)
        assert pid is not None
        while pid >= 0:
            ids.add(pid)
            pid = graph.path_parent[pid]
    return array("I", sorted(ids))


def random_graph(seed: int, commits: int = 400) -> CommitGraph:
    """Mostly a first-parent line of consecutive ids (as ``git rev-list --topo-order``
    numbers one), with side lines merged back, skewed and equal times, rare changes."""
    rng = random.Random(seed)
    graph = CommitGraph()
    tips = [0]
    for node in range(commits):
        if node == 0:
            parents: list[int] = []
        elif rng.random() < 0.1 and node > 2:  # a side line, or a merge of one
            fork = rng.randrange(max(0, node - 30), node)
            parents = [fork] if rng.random() < 0.5 else [node - 1, rng.choice(tips[-30:])]
        else:
            parents = [node - 1]
        when = rng.choice([node, node, node, node // 10 * 10, node + 50, node - 40])
        slots = []
        for _ in range(max(1, len(parents))):
            changed = {p for p in PATHS if rng.random() < 0.04}
            slots.append(_ids(graph, changed))
        graph.add(node.to_bytes(4, "big"), when, parents, slots)
        tips.append(node)
    return graph


def full_walk(graph: CommitGraph, start: int, path: bytes) -> list[int]:
    pid = graph.path_ids.get(path)
    walk = LogWalk([start], graph.times.__getitem__, graph.path_simplifier(pid))
    walk.extend(10**9, graph.parents.__getitem__, graph.times.__getitem__)
    return walk.shown


@pytest.mark.parametrize("seed", range(12))
def test_a_path_walk_shows_what_reading_every_commit_shows(seed: int) -> None:
    graph = random_graph(seed)
    rng = random.Random(seed)
    for path in [*PATHS, b"a", b"a/b", b"d"]:
        start = rng.randrange(len(graph))
        expected = full_walk(graph, start, path)
        walk = graph.walk([start], path)
        assert isinstance(walk, PathWalk)
        # in pages, with budgets that stop it anywhere, as the indexer extends it
        while not walk.done:
            size = rng.randint(1, 7)
            while not graph.history(walk, len(walk.shown) + size, budget=rng.randint(1, 60)):
                pass
        assert walk.shown == expected, path


@pytest.mark.parametrize("seed", range(12))
def test_last_changes_in_a_directory_match_reading_every_commit(seed: int) -> None:
    graph = random_graph(seed)
    rng = random.Random(seed)
    for directory, names in ((b"a", [b"x", b"y", b"b", b"gone"]), (b"a/b", [b"z", b"w"])):
        paths = [directory + b"/" + n for n in names]
        for _ in range(10):
            start = rng.randrange(len(graph))
            expected = graph.last_changes(start, paths)
            assert graph.last_changes(start, paths, within=directory) == expected


@pytest.mark.parametrize("seed", range(12))
def test_a_merges_other_parents_need_only_what_the_first_parent_changed(seed: int) -> None:
    """The indexer keeps, for a merge's other parents, only the paths that also differ from
    the first (``git/treesame.py``): every walk and every last change answers as with each
    parent's whole diff, since git's simplification asks another parent only of a path that
    differs from the first."""
    whole = random_graph(seed)
    kept = CommitGraph()
    for path in whole.path_names:
        kept.path_id(path, create=True)
    for node in range(len(whole)):
        slots = _slots(whole, node)
        first = set(slots[0])
        narrowed = [slots[0], *(array("I", [i for i in s if i in first]) for s in slots[1:])]
        kept.add(whole.oids[node], whole.times[node], list(whole.parents[node]), narrowed)
    assert sum(len(s) for n in range(len(kept)) for s in _slots(kept, n)) < sum(
        len(s) for n in range(len(whole)) for s in _slots(whole, n)
    )  # (the random graphs' merges do change paths against their other parents)
    rng = random.Random(seed)
    for path in [*PATHS, b"a", b"a/b", b"d"]:
        for _ in range(5):
            start = rng.randrange(len(whole))
            assert full_walk(kept, start, path) == full_walk(whole, start, path)
            walk = kept.walk([start], path)
            assert kept.history(walk, 10**6) and walk.shown == full_walk(whole, start, path)
    for start in rng.sample(range(len(whole)), 20):
        assert kept.last_changes(start, PATHS) == whole.last_changes(start, PATHS)
        assert kept.last_changes(start, PATHS[:4], within=b"a") == whole.last_changes(
            start, PATHS[:4]
        )


@pytest.mark.parametrize("seed", range(12))
def test_a_branch_walk_shows_what_reading_every_commit_shows(seed: int) -> None:
    """Without a path, in pages with budgets that stop it anywhere: the commits and their
    order of the walk that takes every commit through the queue."""
    graph = random_graph(seed)
    rng = random.Random(seed)
    for _ in range(8):
        starts = rng.sample(range(len(graph)), rng.choice([1, 1, 2, 3]))
        expected = LogWalk(starts, graph.times.__getitem__)
        expected.extend(10**9, graph.parents.__getitem__, graph.times.__getitem__)
        walk = graph.walk(starts, None)
        assert isinstance(walk, BranchWalk)
        while not walk.done:
            size = rng.randint(1, 7)
            while not graph.history(walk, len(walk.shown) + size, budget=rng.randint(1, 60)):
                pass
        assert walk.shown == expected.shown


def test_a_line_of_history_is_walked_in_runs() -> None:
    """5,000 commits on one line with a side branch merged at the top: every commit shown,
    a handful taken through the queue."""
    graph = CommitGraph()
    for node in range(5000):
        graph.add(node.to_bytes(4, "big"), 1000 + node, [node - 1] if node else [], [array("I")])
    side = graph.add(b"side", 500, [10], [array("I")])  # dated before the whole line
    top = graph.add(b"top!", 99999, [4999, side], [array("I"), array("I")])
    walk = graph.walk([top], None)
    assert graph.history(walk, 10**6)
    assert walk.shown[:3] == [top, 4999, 4998] and len(walk.shown) == 5002
    assert walk.shown[-1] == side  # the oldest, though its parent is 10
    assert walk.stepped == 3  # the top (a merge), the line in one run, then the side


def test_a_rare_path_is_walked_in_runs_not_commit_by_commit() -> None:
    """5,000 commits on one line, the path changed by three of them: the walk visits them
    all, but takes only a handful one at a time."""
    graph = CommitGraph()
    rare, busy = {100, 2500, 4900}, _ids(graph, {b"src/busy"})
    for node in range(5000):
        changed = _ids(graph, {b"src/busy", b"src/rare"}) if node in rare else busy
        graph.add(node.to_bytes(4, "big"), 1000 + node, [node - 1] if node else [], [changed])
    walk = graph.walk([4999], b"src/rare")
    assert graph.history(walk, 10)
    assert walk.shown == [4900, 2500, 100] and walk.done
    assert walk.visited == 5000
    assert walk.stepped <= 12
    last = graph.last_changes(4999, [b"src/rare", b"src/busy"], within=b"src")
    assert last == {b"src/rare": 4900, b"src/busy": 4999}
    budgeted = graph.walk([4999], b"src/rare")  # a budget still counts every commit
    assert graph.history(budgeted, 10, budget=1000) is False
    assert budgeted.visited == 1000 and budgeted.shown == [4900]


@pytest.mark.parametrize("seed", range(4))
def test_postings_indexed_newest_first_are_sorted_once_and_walked_alike(seed: int) -> None:
    """The indexer adds every commit's topology first, then changed paths newest slices
    first: postings arrive out of order. Walks give the same answers before and after
    ``order_postings`` sorts them, which leaves every path's postings ascending; a
    directory's column searches them in order and makes no set of them."""
    model = random_graph(seed)
    graph = CommitGraph()
    for node in range(len(model)):
        graph.add(model.oids[node], model.times[node], list(model.parents[node]), None)
    for path in model.path_names:  # the same ids: parents are named before their children
        assert graph.path_id(path, create=True) == model.path_ids[path]
    slots = [_slots(model, node) for node in range(len(model))]
    for high in range(len(model), 0, -50):  # slices of 50, the newest first
        for node in range(max(0, high - 50), high):
            graph.set_changes(node, slots[node], ordered=True)
    assert any(list(n) != sorted(n) for n in graph.postings.values())
    directory, names = b"a", [b"x", b"y", b"b", b"gone"]
    paths = [directory + b"/" + n for n in names]
    starts = random.Random(seed).sample(range(len(model)), 8)
    before = [graph.last_changes(s, paths, within=directory) for s in starts]
    graph.order_postings()
    assert all(list(n) == sorted(n) for n in graph.postings.values())
    after = [graph.last_changes(s, paths, within=directory) for s in starts]
    assert before == after == [model.last_changes(s, paths) for s in starts]
    within = graph.path_ids[directory]
    assert not graph.touching(within).has_set()


def _slots(graph: CommitGraph, node: int) -> list[array[int]]:
    """The changed path ids of each of ``node``'s slots in ``graph``."""
    first = graph._slot_start[node]
    return [
        graph._ids[graph._at[slot] : graph._at[slot] + graph._len[slot]]
        for slot in range(first, graph._slot_start[node + 1])
    ]
