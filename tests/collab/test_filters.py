"""``IssueFilter``: a list's query read once, written back into its links as it was read, and
the conditions it adds to a statement."""

from __future__ import annotations

import pytest

from floorless.collab.filters import IssueFilter
from floorless.core.errors import BadRequest
from floorless.forgejo import urls


class Repo:
    owner = "ann"
    name = "plans"


def test_a_query_reads_back_as_the_links_write_it() -> None:
    query = {
        "state": "closed",
        "q": "  two   words ",
        "author": " ann ",
        "label": "bug",
        "milestone": "1.0",
        "assignee": "ben",
        "page": "ignored",
    }
    found = IssueFilter.from_query(query.get, pull=True)
    assert found == IssueFilter("closed", True, "two words", "ann", "bug", "1.0", "ben")
    written = {k: v for k, v in found.params().items() if v is not None}
    assert IssueFilter.from_query(written.get, pull=True) == found
    assert urls.listing(Repo(), found, before=7) == (
        "/ann/plans/pulls?state=closed&q=two%20words&author=ann&label=bug&milestone=1.0"
        "&assignee=ben&before=7"
    )


def test_the_default_list_is_open_issues_with_a_bare_url() -> None:
    found = IssueFilter.from_query({}.get, pull=False)
    assert found == IssueFilter() and found.plain and not found.searched
    assert urls.listing(Repo(), found) == urls.issues(Repo()) == "/ann/plans/issues"
    assert urls.pulls(Repo(), label="bug") == "/ann/plans/pulls?label=bug"


def test_a_state_outside_open_closed_all_is_refused() -> None:
    with pytest.raises(BadRequest):
        IssueFilter.from_query({"state": "merged"}.get, pull=False)


def test_long_words_are_cut_and_a_chip_keeps_only_kind_and_state() -> None:
    found = IssueFilter.from_query({"q": "x" * 500, "author": "y" * 500}.get, pull=False)
    assert len(found.q) == 200 and len(found.author) == 100
    chip = found.but(state="all").only(label="bug")
    assert chip == IssueFilter("all", False, label="bug")


def test_each_thing_asked_for_is_one_condition() -> None:
    assert IssueFilter().conditions() == ([], [])
    where, params = IssueFilter(
        q="50%_off!", label_ids=(1, 2), milestone_ids=(3,), author_id=4, since=5.0
    ).conditions()
    assert len(where) == 6 and params == ["%50!%!_off!!%", 1, 2, 3, 4, 5.0]
    assert not IssueFilter(assignee="ann").plain and IssueFilter(assignee="ann").searched
