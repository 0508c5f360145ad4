"""A long conversation: an issue with many comments opens with its first and last entries
and a link to those between, in the same few statements whatever its length, and each
comment's Markdown is rendered once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD
from support.forges import start_forge
from support.queries import statements

from floorless.forge import Forge
from floorless.web import markup
from floorless.web.app import create_app
from floorless.web.views.issues import TIMELINE_FIRST, TIMELINE_LAST, TIMELINE_MORE

COMMENTS = TIMELINE_FIRST + TIMELINE_LAST + TIMELINE_MORE + 20


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("long")
    forge = start_forge(root / "repos", root / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    ann = forge.accounts.get("ann")
    assert ann is not None
    short = forge.issues.create("ann", "plans", ann, "Short", "One *line*")
    forge.issues.comment(short, ann, "only one, as #2 says")
    long = forge.issues.create("ann", "plans", ann, "Long", "Many comments follow")
    for n in range(1, COMMENTS + 1):
        forge.issues.comment(long, ann, f"comment **{n}** (see #2)")
    yield forge
    forge.stop()


def shown_comments(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"<p>comment <strong>(\d+)</strong> \(see ", html)]


def test_a_long_timeline_shows_its_ends_and_a_link_to_the_rest(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    first = client.simulate_get("/ann/plans/issues/2")
    assert first.status_code == 200
    expected = [*range(1, TIMELINE_FIRST + 1), *range(COMMENTS - TIMELINE_LAST + 1, COMMENTS + 1)]
    assert shown_comments(first.text) == expected
    hidden = COMMENTS - TIMELINE_FIRST - TIMELINE_LAST
    assert f"{hidden} more items in between: show {TIMELINE_MORE} more" in first.text
    more = re.search(r'href="([^"]+)#event-gap"', first.text)
    assert (
        more is not None
        and more.group(1) == f"/ann/plans/issues/2?shown={TIMELINE_FIRST + TIMELINE_MORE}"
    )
    second = client.simulate_get(
        "/ann/plans/issues/2", params={"shown": str(TIMELINE_FIRST + TIMELINE_MORE)}
    )
    opened = TIMELINE_FIRST + TIMELINE_MORE
    assert shown_comments(second.text) == [
        *range(1, opened + 1),
        *range(COMMENTS - TIMELINE_LAST + 1, COMMENTS + 1),
    ]
    everything = client.simulate_get("/ann/plans/issues/2", params={"shown": "999999"})
    assert shown_comments(everything.text) == list(range(1, COMMENTS + 1))
    assert "in between" not in everything.text
    for nonsense in ("-1", "x", "1e9", ""):  # the default window
        odd = client.simulate_get("/ann/plans/issues/2", params={"shown": nonsense})
        assert odd.status_code == 200 and shown_comments(odd.text) == expected


def test_a_long_timeline_costs_the_statements_of_a_short_one(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    for url in ("/ann/plans/issues/1", "/ann/plans/issues/2"):
        client.simulate_get(url)
    short = statements(client.simulate_get("/ann/plans/issues/1"))
    long = statements(client.simulate_get("/ann/plans/issues/2"))
    assert long == short


def test_each_comment_is_rendered_once(forge: Forge, monkeypatch: pytest.MonkeyPatch) -> None:
    client = testing.TestClient(create_app(forge))
    client.simulate_get("/ann/plans/issues/2")  # renders and caches
    rendered: list[str] = []
    real = markup.render_markdown

    def counting(text: str, *args: object, **kwargs: object) -> str:
        rendered.append(text)
        return real(text, *args, **kwargs)  # type: ignore[arg-type]

    cut: list[str] = []
    real_cut = markup._linkable_pieces

    def cutting(html: str, found: dict[str, set[str]]) -> list[tuple[str, bool]]:
        cut.append(html)
        return real_cut(html, found)

    monkeypatch.setattr("floorless.web.views.issues.render_markdown", counting)
    monkeypatch.setattr(markup, "_linkable_pieces", cutting)
    again = client.simulate_get("/ann/plans/issues/2")
    assert again.status_code == 200 and rendered == [] and cut == []
    assert again.text.count('href="/ann/plans/issues/2"') >= 2  # the links are still there


def _totals(forge: Forge, owner: str, name: str) -> dict[tuple[int, str], int]:
    rows = forge.db.query(
        "SELECT is_pull, state, total FROM issue_totals WHERE owner = ? AND name = ?",
        (owner, name),
    )
    return {(int(r["is_pull"]), r["state"]): int(r["total"]) for r in rows if r["total"]}


def _counted(forge: Forge, owner: str, name: str) -> dict[tuple[int, str], int]:
    rows = forge.db.query(
        "SELECT is_pull, state, COUNT(*) AS n FROM issues WHERE owner = ? AND name = ?"
        " GROUP BY is_pull, state",
        (owner, name),
    )
    return {(int(r["is_pull"]), r["state"]): int(r["n"]) for r in rows}


def test_the_kept_totals_follow_every_change(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        ann = forge.accounts.get("ann")
        assert ann is not None
        forge.registry.create("ann", "plans")
        issues = [forge.issues.create("ann", "plans", ann, f"Issue {n}", "") for n in range(5)]
        pull = forge.pulls.create(
            "ann", "plans", ann, "A fix", "", "main", ("ann", "plans", "fix"), "a" * 40
        )
        forge.issues.close(issues[0], ann, "completed")
        forge.issues.close(issues[1], ann, "not_planned")
        forge.issues.reopen(issues[1], ann)
        forge.pulls.mark_merged(pull, ann, "b" * 40, "merge")
        assert (
            _totals(forge, "ann", "plans")
            == _counted(forge, "ann", "plans")
            == {
                (0, "open"): 4,
                (0, "closed"): 1,
                (1, "closed"): 1,
            }
        )
        renamed = forge.lifecycle.rename(forge.registry.get("ann", "plans"), "ideas")
        assert _totals(forge, "ann", "plans") == {}
        assert _totals(forge, "ann", "ideas") == _counted(forge, "ann", "ideas")
        forge.lifecycle.delete(renamed)
        assert _totals(forge, "ann", "ideas") == {}
    finally:
        forge.stop()


def _words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_list_reads_the_kept_totals_and_a_search_counts(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    assert "Open 2" in _words(client.simulate_get("/ann/plans/issues").text)
    forge.db.execute(
        "UPDATE issue_totals SET total = 9999 WHERE owner = 'ann' AND name = 'plans'"
        " AND is_pull = 0 AND state = 'open'"
    )
    try:
        # another page than the one the cache now holds (a write that only a test makes
        # behind the triggers' back does not move the activity version)
        listed = _words(client.simulate_get("/ann/plans/issues", params={"state": "open"}).text)
        assert "Open 9999" in listed  # the kept total, not a count of the rows
        searched = _words(client.simulate_get("/ann/plans/issues", params={"q": "long"}).text)
        assert "Open 1" in searched  # a search counts what it matches
    finally:
        forge.db.execute(
            "UPDATE issue_totals SET total = 2 WHERE owner = 'ann' AND name = 'plans'"
            " AND is_pull = 0 AND state = 'open'"
        )
