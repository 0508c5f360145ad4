"""Merging pull requests, checked against git itself: a merge commit's tree is
``git merge --no-ff``'s, a squash's ``git merge --squash``'s, a rebase replays what
``git rebase`` replays; conflicts are those ``git merge-tree --write-tree`` names; the
follower takes in pushes to heads and bases; concurrent merges and a racing push lose
nothing, and a merge interrupted between moving the ref and recording it is finished."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from support.accounts import PASSWORD
from support.forges import database_for, start_forge, wait_for
from support.gitfixtures import _run, git, git_text
from support.merging import commit, push, repo_of, settle, tip

from floorless.accounts.accounts import Account
from floorless.collab.pulls import Features, Pull
from floorless.core.errors import BadRequest, Conflict
from floorless.forge import Forge
from floorless.git import merge as engine
from floorless.repos.registry import Repo


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "", PASSWORD)
    forge.registry.create("ann", "plans")
    yield forge
    forge.stop()


def ann(forge: Forge) -> Account:
    return forge.accounts.require("ann")








@pytest.fixture
def work(forge: Forge, tmp_path: Path) -> Path:
    """A clone of ann/plans with ``main`` and a ``topic`` branch, both pushed."""
    path = tmp_path / "work"
    _run(["init", "-q", "-b", "main", str(path)], cwd=tmp_path)
    git(path, "remote", "add", "origin", str(repo_of(forge).path))
    lines = "".join(f"line {n}\n" for n in range(1, 21))
    commit(path, "Start", a=lines, b="b\n", c="c\n")
    git(path, "checkout", "-q", "-b", "topic")
    commit(path, "Topic one\n\nWhy one.", a=lines.replace("line 2\n", "line two\n"), d="d\n")
    commit(path, "Topic two", b="b, better\n")
    git(path, "checkout", "-q", "main")
    commit(path, "Main moves", a=lines.replace("line 19\n", "line nineteen\n"), e="e\n")
    push(forge, path, "main", "topic")
    return path






def open_pull(forge: Forge, head: str = "topic", base: str = "main", title: str = "Topic") -> Pull:
    repo = repo_of(forge)
    handle = forge.live.open(repo)
    tip = str(handle.references[f"refs/heads/{head}"].target)
    pull = forge.pulls.create(
        "ann", "plans", ann(forge), title, "", base, ("ann", "plans", head), tip
    )
    forge.moves.set_pull_ref(repo, pull.number, tip)
    settle(forge)
    return forge.pulls.get("ann", "plans", pull.number)


def fresh(forge: Forge, pull: Pull) -> Pull:
    return forge.pulls.get("ann", "plans", pull.number)




def tree(path: Path, rev: str) -> str:
    return git_text(path, "rev-parse", f"{rev}^{{tree}}")


def fsck(forge: Forge) -> None:
    git(repo_of(forge).path, "fsck", "--strict", "--no-dangling")


def test_a_merge_commit_is_what_git_merge_no_ff_makes(forge: Forge, work: Path) -> None:
    pull = open_pull(forge)
    assert pull.check_state == "mergeable" and pull.checked_base == tip(forge, "main")
    base, head = tip(forge, "main"), tip(forge, "topic")
    merged = forge.merger.merge(
        repo_of(forge), pull, ann(forge), "merge", base, head, url="http://x/ann/plans/pulls/1"
    )
    assert tip(forge, "main") == merged
    bare = repo_of(forge).path
    assert git_text(bare, "log", "-1", "--format=%P", merged) == f"{base} {head}"
    assert git_text(bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>", merged) == (
        "ann <ann@example.org>|ann <ann@example.org>"
    )
    assert git_text(bare, "log", "-1", "--format=%B", merged) == (
        "Merge pull request 'Topic' (#1) from topic into main\n\n"
        "Reviewed-on: http://x/ann/plans/pulls/1"
    )
    git(work, "fetch", "-q", "origin")
    git(work, "merge", "-q", "--no-ff", "-m", "git's", "origin/topic")
    assert tree(work, "HEAD") == tree(bare, merged)
    fsck(forge)
    done = fresh(forge, pull)
    assert done.merged and done.issue.state == "closed" and done.merged_oid == merged
    assert (done.merged_by, done.merge_style) == ("ann", "merge")
    settle(forge)  # the follower leaves a merged pull request alone
    assert [e.kind for e in forge.issues.timeline(done.issue)] == ["merged"]


def test_a_squash_is_what_git_merge_squash_makes(forge: Forge, work: Path) -> None:
    pull = open_pull(forge)
    base = tip(forge, "main")
    merged = forge.merger.merge(repo_of(forge), pull, forge.accounts.require("ben"), "squash")
    bare = repo_of(forge).path
    assert git_text(bare, "log", "-1", "--format=%P", merged) == base
    assert git_text(bare, "log", "-1", "--format=%an <%ae>", merged) == "ben <ben@floorless>"
    assert git_text(bare, "log", "-1", "--format=%B", merged) == (
        "Topic (#1)\n\n* Topic one\n\nWhy one.\n\n* Topic two"
    )
    git(work, "fetch", "-q", "origin")
    git(work, "merge", "-q", "--squash", "origin/topic")
    git(work, "commit", "-q", "-m", "git's squash")
    assert tree(work, "HEAD") == tree(bare, merged)
    fsck(forge)
    assert fresh(forge, pull).merge_style == "squash"


def test_a_rebase_replays_what_git_rebase_replays(forge: Forge, work: Path) -> None:
    pull = open_pull(forge)
    base = tip(forge, "main")
    merged = forge.merger.merge(repo_of(forge), pull, ann(forge), "rebase")
    bare = repo_of(forge).path
    git(work, "checkout", "-q", "topic")
    git(work, "rebase", "-q", "main")
    ours = git_text(bare, "log", "--format=%T %an %s", f"{base}..{merged}").splitlines()
    theirs = git_text(work, "log", "--format=%T %an %s", "main..topic").splitlines()
    assert ours == theirs and len(ours) == 2
    assert git_text(bare, "rev-parse", f"{merged}~2") == base
    assert git_text(bare, "log", "-1", "--format=%cn", merged) == "ann"
    assert git_text(bare, "log", "-1", "--format=%B", f"{merged}~1") == "Topic one\n\nWhy one."
    fsck(forge)


def test_fast_forward_only_moves_the_base_to_the_head_or_refuses(forge: Forge, work: Path) -> None:
    diverged = open_pull(forge)
    with pytest.raises(Conflict, match="cannot fast-forward"):
        forge.merger.merge(repo_of(forge), diverged, ann(forge), "fast-forward-only")
    git(work, "checkout", "-q", "-b", "ahead", "main")
    ahead = commit(work, "Ahead", f="f\n")
    push(forge, work, "ahead")
    pull = open_pull(forge, "ahead")
    assert pull.check_state == "mergeable"
    assert forge.merger.merge(repo_of(forge), pull, ann(forge), "fast-forward-only") == ahead
    assert tip(forge, "main") == ahead
    assert fresh(forge, pull).merge_style == "fast-forward-only"
    # the other one is still open and checked against the new base
    settle(forge)
    assert fresh(forge, diverged).checked_base == ahead


def test_conflicts_are_the_files_git_merge_tree_names(forge: Forge, work: Path) -> None:
    git(work, "checkout", "-q", "-b", "clash", "topic")
    commit(work, "Clash", b="b, mine\n", c=None, g="theirs\n", **{"x__y": "deep\n"})
    git(work, "checkout", "-q", "main")
    commit(work, "Main clash", b="b, main\n", c="c, edited\n", g="ours\n", **{"x__y": "no\n"})
    push(forge, work, "main", "clash")
    pull = open_pull(forge, "clash")
    bare = repo_of(forge).path
    run = subprocess.run(
        ["git", f"--git-dir={bare}", "merge-tree", "--write-tree", "--name-only",
         "--no-messages", "main", "clash"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    named = run.stdout.splitlines()[1:]
    assert pull.check_state == "conflict"
    assert list(pull.conflicts) == sorted(named) == ["b", "c", "g", "x/y"]
    before = tip(forge, "main")
    with pytest.raises(Conflict, match="conflict"):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "merge")
    with pytest.raises(Conflict, match="does not apply"):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "rebase")
    assert tip(forge, "main") == before and not fresh(forge, pull).merged


def test_unrelated_histories_cannot_merge(forge: Forge, work: Path) -> None:
    git(work, "checkout", "-q", "--orphan", "other")
    git(work, "rm", "-q", "-rf", ".")
    commit(work, "Elsewhere", z="z\n")
    push(forge, work, "other")
    pull = open_pull(forge, "other")
    assert pull.check_state == "unrelated" and pull.merge_base == ""
    for style in ("merge", "squash", "rebase", "fast-forward-only"):
        with pytest.raises(Conflict, match="no history"):
            forge.merger.merge(repo_of(forge), pull, ann(forge), style)


def test_styles_the_repository_does_not_allow_are_refused(forge: Forge, work: Path) -> None:
    forge.pulls.set_features(
        "ann", "plans", Features(merge_styles=("squash",), default_merge="squash")
    )
    pull = open_pull(forge)
    with pytest.raises(BadRequest, match="does not allow"):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "merge")
    with pytest.raises(BadRequest):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "octopus")


def test_the_follower_takes_in_pushes_force_pushes_deletions_and_merges_by_hand(
    forge: Forge, work: Path
) -> None:
    pull = open_pull(forge)
    repo = repo_of(forge)
    first = pull.head_oid
    git(work, "checkout", "-q", "topic")
    second = commit(work, "Topic three", h="h\n")
    push(forge, work, "topic")
    now = fresh(forge, pull)
    assert now.head_oid == second and now.check_state == "mergeable"
    assert now.checked_head == second
    assert git_text(repo.path, "rev-parse", pull.ref) == second
    git(work, "reset", "-q", "--hard", "HEAD~2")
    third = commit(work, "Topic again", i="i\n")
    push(forge, work, "topic")
    now = fresh(forge, pull)
    assert now.head_oid == third and git_text(repo.path, "rev-parse", pull.ref) == third
    git(work, "push", "-q", "origin", ":topic")
    forge.maintenance.check_refs()
    settle(forge)
    forge.merger.follow(repo)  # a second look (another node) records nothing more
    now = fresh(forge, pull)
    assert now.check_state == "head_gone"
    events = [(e.kind, e.old_value, e.body) for e in forge.issues.timeline(now.issue)]
    assert events == [
        ("pushed", first, second),
        ("force_pushed", second, third),
        ("head_deleted", "", "topic"),
    ]
    # the branch comes back, and is merged by hand
    push(forge, work, "topic")
    assert fresh(forge, pull).check_state == "mergeable"
    git(work, "checkout", "-q", "main")
    git(work, "merge", "-q", "--no-ff", "-m", "by hand", "topic")
    push(forge, work, "main")
    done = fresh(forge, pull)
    assert done.merged and done.merge_style == "push" and done.merged_oid == third
    assert done.issue.state == "closed" and done.merged_by == ""


def test_two_merges_into_one_base_at_once_both_land(forge: Forge, work: Path) -> None:
    git(work, "checkout", "-q", "-b", "second", "main")
    commit(work, "Second", s="s\n")
    push(forge, work, "second")
    pulls = [open_pull(forge), open_pull(forge, "second", title="Second")]
    base = tip(forge, "main")
    results: list[object] = []
    barrier = threading.Barrier(2)  # (no expected base: each would refuse the other's move)

    def merge(pull: Pull) -> None:
        barrier.wait()
        try:
            results.append(
                forge.merger.merge(repo_of(forge), pull, ann(forge), "merge", "", pull.head_oid)
            )
        except Exception as exc:  # reported below
            results.append(exc)

    threads = [threading.Thread(target=merge, args=(pull,)) for pull in pulls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(r, str) for r in results), results
    bare = repo_of(forge).path
    final = tip(forge, "main")
    assert final in results
    for pull in pulls:
        assert fresh(forge, pull).merged
        git(bare, "merge-base", "--is-ancestor", pull.head_oid, final)
        git(bare, "merge-base", "--is-ancestor", str(fresh(forge, pull).merged_oid), final)
    assert git_text(bare, "rev-list", "--count", "--merges", f"{base}..{final}") == "2"
    fsck(forge)


def test_a_push_racing_a_merge_loses_nothing(
    forge: Forge, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = open_pull(forge)
    git(work, "checkout", "-q", "main")
    racing = commit(work, "Pushed meanwhile", r="r\n")
    swap = forge.merger.swap
    tries: list[str] = []

    def push_first(repo: Repo, ref: str, new: str, old: str) -> bool:
        if not tries:  # a push lands between the computation and the swap
            git(work, "push", "-q", "origin", "main")
        tries.append(old)
        return swap(repo, ref, new, old)

    monkeypatch.setattr(forge.merger, "swap", push_first)
    merged = forge.merger.merge(repo_of(forge), pull, ann(forge), "squash")
    assert len(tries) == 2 and tries[1] == racing
    assert tip(forge, "main") == merged
    assert git_text(repo_of(forge).path, "rev-parse", f"{merged}^") == racing
    assert fresh(forge, pull).merged_oid == merged
    fsck(forge)


def test_a_merge_interrupted_after_the_ref_moved_is_finished_by_the_follower(
    forge: Forge, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = open_pull(forge)
    forge.merger.stop()  # this node's follower is as dead as the merge

    def die(*args: object) -> None:
        raise SystemExit("killed between the ref and the record")

    monkeypatch.setattr(forge.merger, "finish", die)
    with pytest.raises(SystemExit):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "squash")
    moved = tip(forge, "main")
    assert not fresh(forge, pull).merged  # the crash point: ref moved, nothing recorded
    forge.merger.follow(repo_of(forge))  # another node's follower, or this one restarted
    done = fresh(forge, pull)
    assert done.merged and done.merged_oid == moved
    assert (done.merge_style, done.merged_by) == ("squash", "ann")


def test_a_merge_whose_swap_failed_leaves_no_intent(
    forge: Forge, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = open_pull(forge)
    monkeypatch.setattr(forge.merger, "swap", lambda *args: False)
    before = tip(forge, "main")
    with pytest.raises(Conflict, match="kept moving"):
        forge.merger.merge(repo_of(forge), pull, ann(forge), "merge")
    assert tip(forge, "main") == before
    now = fresh(forge, pull)
    assert not now.merged and now.merged_oid == "" and now.issue.state == "open"


def test_stale_closed_and_merged_pull_requests_are_refused(forge: Forge, work: Path) -> None:
    pull = open_pull(forge)
    repo, base, head = repo_of(forge), tip(forge, "main"), pull.head_oid
    with pytest.raises(Conflict, match="main has moved"):
        forge.merger.merge(repo, pull, ann(forge), "merge", "0" * 40, head)
    with pytest.raises(Conflict, match="topic has moved"):
        forge.merger.merge(repo, pull, ann(forge), "merge", base, "0" * 40)
    forge.issues.close(pull.issue, ann(forge), "completed")
    with pytest.raises(Conflict, match="closed"):
        forge.merger.merge(repo, pull, ann(forge), "merge", base, head)
    forge.issues.reopen(fresh(forge, pull).issue, ann(forge))
    forge.merger.merge(repo, pull, ann(forge), "merge", base, head)
    with pytest.raises(Conflict, match="merged already"):
        forge.merger.merge(repo, pull, ann(forge), "merge")
    assert tip(forge, "main") == fresh(forge, pull).merged_oid


def test_engine_analysis_of_an_empty_head(tmp_path: Path, work: Path, forge: Forge) -> None:
    handle = pygit2.Repository(str(repo_of(forge).path))
    base, head = tip(forge, "main"), tip(forge, "topic")
    found = engine.analyse(handle, head, base)  # the other way round: main into topic
    assert found.state == "mergeable"
    start = git_text(repo_of(forge).path, "rev-parse", "main~1")
    assert engine.analyse(handle, base, start).state == "empty"
    assert engine.merge_base(handle, base, head) == start


def test_a_pair_is_checked_once_whoever_looks_again(
    forge: Forge, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = open_pull(forge)
    analysed: list[tuple[str, str]] = []
    analyse = engine.analyse

    def counted(handle: pygit2.Repository, base: str, head: str) -> engine.Analysis:
        analysed.append((base, head))
        return analyse(handle, base, head)

    monkeypatch.setattr(engine, "analyse", counted)
    objects = len(list(repo_of(forge).path.glob("objects/??/*")))
    for _ in range(3):  # pushes elsewhere, refs/pull moves, other nodes: nothing new
        forge.merger.follow(repo_of(forge))
    assert analysed == []
    git(work, "checkout", "-q", "main")
    moved = commit(work, "Main again", j="j\n")
    push(forge, work, "main")
    forge.merger.follow(repo_of(forge))
    assert analysed == [(moved, pull.head_oid)]
    assert fresh(forge, pull).checked_base == moved
    # a check writes no object: those of the push alone (a commit, a tree, a blob)
    assert len(list(repo_of(forge).path.glob("objects/??/*"))) == objects + 3


_DIE_MID_MERGE = """
import dataclasses, os, sys
from pathlib import Path
from floorless.core.config import Settings
from floorless.forge import Forge

settings = Settings.load(environ={}, data=Path(sys.argv[1]), repos=Path(sys.argv[2]))
if sys.argv[3]:  # the tests' PostgreSQL database
    settings = dataclasses.replace(settings, database=sys.argv[3])
forge = Forge(settings)
forge.start(background=False)
forge.merger.finish = lambda *args: os._exit(9)  # killed right after the base ref moved
repo = forge.registry.get("ann", "plans")
pull = forge.pulls.get("ann", "plans", 1)
forge.merger.merge(repo, pull, forge.accounts.require("ann"), "rebase")
"""


def test_a_process_killed_mid_merge_leaves_a_state_the_next_start_completes(
    forge: Forge, work: Path, tmp_path: Path
) -> None:
    pull = open_pull(forge)
    base = tip(forge, "main")
    forge.stop()
    env = dict(os.environ)
    died = subprocess.run(
        [sys.executable, "-c", _DIE_MID_MERGE, str(tmp_path / "data"), str(tmp_path / "repos"),
         database_for(tmp_path / "data") or ""],
        env=env, capture_output=True, check=False,
    )  # fmt: skip
    assert died.returncode == 9, died.stderr.decode()[-2000:]
    moved = tip(forge, "main")
    assert moved != base and git_text(repo_of(forge).path, "rev-parse", f"{moved}~2") == base
    again = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        wait_for(lambda: again.pulls.get("ann", "plans", pull.number).merged)
        done = again.pulls.get("ann", "plans", pull.number)
        assert (done.merged_oid, done.merge_style, done.merged_by) == (moved, "rebase", "ann")
        kinds = [e.kind for e in again.issues.timeline(done.issue)]
        assert kinds == ["merged"]
    finally:
        again.stop()


def test_a_base_or_head_that_names_no_branch_is_refused_clearly(forge: Forge, work: Path) -> None:
    repo, who = repo_of(forge), ann(forge)
    head = tip(forge, "topic")
    for base_branch, head_branch, words in [
        ("no..such", "topic", "base branch no..such is gone"),
        ("gone", "topic", "base branch gone is gone"),
        ("main", "bad..name", "head branch bad..name is gone"),
    ]:
        pull = forge.pulls.create(
            "ann", "plans", who, "Odd", "", base_branch, ("ann", "plans", head_branch), head
        )
        with pytest.raises(Conflict, match=re.escape(words)):
            forge.merger.merge(repo, pull, who, "merge")
    settle(forge)
