"""Pull requests as records: numbers shared with issues, a head that moves once however many
threads see it move, a merge that closes the pull request once, and repository features."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.accounts import PASSWORD
from support.forges import start_forge

from floorless.collab.pulls import Features
from floorless.core.errors import BadRequest, NotFound
from floorless.forge import Forge


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    yield forge
    forge.stop()


def _account(forge: Forge, name: str):  # type: ignore[no-untyped-def]
    account = forge.accounts.get(name)
    assert account is not None
    return account


def test_issues_and_pull_requests_share_one_sequence(forge: Forge) -> None:
    ann = _account(forge, "ann")
    first = forge.issues.create("ann", "plans", ann, "A bug", "")
    pull = forge.pulls.create(
        "ann", "plans", ann, "A fix", "Fixes #1", "main", ("ann", "plans", "fix"), "a" * 40
    )
    second = forge.issues.create("ann", "plans", ann, "Another", "")
    assert (first.number, pull.number, second.number) == (1, 2, 3)
    assert pull.issue.is_pull and pull.ref == "refs/pull/2/head" and pull.same_repo
    assert forge.issues.kind_of("ann", "plans", 2) is True
    assert forge.issues.existing("ann", "plans", {1, 2, 9}) == {1: False, 2: True}
    with pytest.raises(NotFound):  # an issue's number names no pull request, and back
        forge.pulls.get("ann", "plans", 1)
    with pytest.raises(NotFound):
        forge.issues.get("ann", "plans", 2)
    listed = forge.pulls.page("ann", "plans")
    assert [i.number for i in listed.page.issues] == [2]
    assert listed.pulls[2].head_label == "fix"
    assert [i.number for i in forge.issues.page("ann", "plans").issues] == [3, 1]


def test_a_moved_head_is_recorded_once(forge: Forge) -> None:
    ann = _account(forge, "ann")
    pull = forge.pulls.create(
        "ann", "plans", ann, "A fix", "", "main", ("ann", "plans", "fix"), "a" * 40
    )
    results: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(forge.pulls.moved_head(pull, "b" * 40, False, ann))
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    now = forge.pulls.get("ann", "plans", pull.number)
    assert now.head_oid == "b" * 40 and now.check_state == "checking"
    # the merger's thread may also see that these records' branches are not in the repository
    # (a ``head_deleted`` event): what counts here is one push however many threads saw it
    events = forge.issues.timeline(now.issue)
    pushes = [(e.kind, e.old_value, e.body) for e in events if e.kind == "pushed"]
    assert pushes == [("pushed", "a" * 40, "b" * 40)]


def test_a_check_of_a_stale_head_is_dropped(forge: Forge) -> None:
    ann = _account(forge, "ann")
    pull = forge.pulls.create(
        "ann", "plans", ann, "A fix", "", "main", ("ann", "plans", "fix"), "a" * 40
    )
    forge.pulls.moved_head(pull, "b" * 40, True, None)
    forge.pulls.record_check(pull, "c" * 40, "a" * 40, "conflict", conflicts=("x.py",))
    assert forge.pulls.get("ann", "plans", pull.number).check_state == "checking"
    fresh = forge.pulls.get("ann", "plans", pull.number)
    forge.pulls.record_check(fresh, "c" * 40, "b" * 40, "conflict", "d" * 40, ("x.py", "y"))
    checked = forge.pulls.get("ann", "plans", pull.number)
    assert checked.checked and checked.conflicts == ("x.py", "y")


def test_a_merge_closes_the_pull_request_once(forge: Forge) -> None:
    ann, ben = _account(forge, "ann"), _account(forge, "ben")
    pull = forge.pulls.create(
        "ann", "plans", ben, "A fix", "", "main", ("ann", "plans", "fix"), "a" * 40
    )
    assert forge.pulls.mark_merged(pull, ann, "e" * 40, "squash")
    assert not forge.pulls.mark_merged(pull, ann, "f" * 40, "merge")
    merged = forge.pulls.get("ann", "plans", pull.number)
    assert merged.merged and merged.issue.closed and merged.merged_oid == "e" * 40
    assert merged.merged_by == "ann" and merged.merge_style == "squash"
    kinds = [e.kind for e in forge.issues.timeline(merged.issue)]
    assert kinds.count("merged") == 1 and set(kinds) <= {"merged", "head_deleted"}


def test_a_closed_pull_request_is_not_marked_merged(forge: Forge) -> None:
    ann = _account(forge, "ann")
    pull = forge.pulls.create(
        "ann", "plans", ann, "A fix", "", "main", ("ann", "plans", "fix"), "a" * 40
    )
    forge.issues.close(pull.issue, ann, "not_planned")
    with pytest.raises(BadRequest):
        forge.pulls.mark_merged(pull, ann, "e" * 40, "merge")
    assert not forge.pulls.get("ann", "plans", pull.number).merged  # rolled back whole


def test_features_default_on_and_are_kept_by_name(forge: Forge) -> None:
    assert forge.pulls.features("ann", "plans") == Features()
    forge.pulls.set_features("ann", "plans", Features(True, False, ("squash", "rebase"), "rebase"))
    assert forge.pulls.features("ann", "plans") == Features(
        True, False, ("squash", "rebase"), "rebase"
    )
    with pytest.raises(BadRequest):
        forge.pulls.set_features("ann", "plans", Features(merge_styles=(), default_merge="x"))
    renamed = forge.lifecycle.rename(forge.registry.get("ann", "plans"), "ideas")
    assert forge.pulls.features(renamed.owner, renamed.name).pulls is False
