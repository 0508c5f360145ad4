"""Diff and blame tools in a real headless Chromium against ``floorless serve``, at desktop
and phone widths: the split view chosen and remembered, a file collapsed and opened again,
context between hunks loaded in place, and "blame prior to this change" followed to the
blame of the old path at the parent. The browser and its checks are test_browser's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import support.browser
from support.blame import build as build_blame
from support.browser import DESKTOP, PHONE, _no_horizontal_overflow, page_in
from support.diffs import build as build_diffs
from support.gitfixtures import git_text
from support.serving import serving

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], dict[str, str], Path]]:
    repos = tmp_path / "repos"
    diffs = build_diffs(repos / "alice" / "diffs.git")
    blame = build_blame(repos / "alice" / "tools.git")
    with serving(repos, tmp_path / "data") as running:
        yield running.url, diffs, blame, repos


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_split_view_collapse_and_context(browser, site, viewport, scheme) -> None:
    from playwright.sync_api import expect

    server, ids, _, repos = site
    new = git_text(repos / "alice" / "diffs.git", "show", f"{ids['change']}:code.txt").split("\n")
    with page_in(browser, viewport, scheme) as (page, watcher):
        url = f"{server}/alice/diffs/commit/{ids['change']}"
        page.goto(url)
        code = page.locator("section.file-diff", has=page.locator("h3", has_text="code.txt"))
        expect(code.locator("table.diff")).to_be_visible()
        expect(code.locator("table.diff.split")).to_have_count(0)
        # the changed word is marked
        expect(code.locator("ins.wd", has_text="changed").first).to_be_visible()

        # split: chosen by its link, then remembered on the next diff without the parameter
        page.locator("nav.diff-options a", has_text="Split").click()
        expect(page).to_have_url(re.compile(r"\?style=split$"))
        expect(code.locator("table.diff.split")).to_be_visible()
        row = code.locator("tr.chg", has=page.locator("td.code.removed"))
        expect(row.first.locator("td.code.added")).to_be_visible()
        page.goto(url)
        expect(code.locator("table.diff.split")).to_be_visible()
        _no_horizontal_overflow(page)

        # context hidden above the second hunk loads in place, in order, as git has it
        expand = code.locator("a.expand[data-where='above']").last
        first, last = int(expand.get_attribute("data-start")), int(expand.get_attribute("data-end"))
        before = code.locator("tr.ctx").count()
        expand.click()
        expect(code.locator("tr.ctx")).to_have_count(before + min(20, last - first + 1))
        shown = code.locator(f"tr.ctx:has(td[data-side='new']:text-is('{last}')) td.code").last
        expect(shown).to_have_text(new[last - 1])
        _no_horizontal_overflow(page)

        # a file collapses and opens again, without leaving the page
        summary = code.locator("summary")
        summary.click()
        expect(code.locator("table.diff")).to_be_hidden()
        summary.click()
        expect(code.locator("table.diff")).to_be_visible()

        # back to unified, remembered too
        page.locator("nav.diff-options a", has_text="Unified").click()
        page.goto(url)
        expect(code.locator("table.diff.split")).to_have_count(0)
        expect(code.locator("table.diff")).to_be_visible()
        assert watcher.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_blame_prior_and_ignored_revisions(browser, site, viewport, scheme) -> None:
    from playwright.sync_api import expect

    server, _, ids, _ = site
    with page_in(browser, viewport, scheme) as (page, watcher):
        page.goto(f"{server}/alice/tools/blame/branch/main/new.py")
        expect(page.locator(".blame-ages .age")).to_have_count(6)
        expect(page.locator(".blame-ignored")).to_contain_text("passed over")
        # no line is the re-indent's while it is passed over
        expect(page.locator(f"a.sha[href$='/commit/{ids['c']}']")).to_have_count(0)
        _no_horizontal_overflow(page)
        prior = page.locator("a.prior").first
        expect(prior).to_be_visible()
        prior.click()
        expect(page).to_have_url(f"{server}/alice/tools/blame/commit/{ids['a']}/old.py#L2")
        expect(page.locator("table.blame tr[id^='L']")).to_have_count(12)
        expect(page.locator(f"a.sha[href$='/commit/{ids['a']}']")).to_have_count(1)
        page.go_back()
        page.locator(".blame-ignored a", has_text="Show them").click()
        expect(page).to_have_url(re.compile(r"\?ignore_revs=0$"))
        expect(page.locator(f"a.sha[href$='/commit/{ids['c']}']")).to_have_count(1)
        assert watcher.problems == []


LONG_NAME = "a_very_long_identifier_" + "that_keeps_going_" * 20 + "end"


def _build_long(path: Path) -> str:
    """A commit adding a line far wider than a phone (one identifier, no space to break at)
    beside a short one; its id."""
    import pygit2

    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", 1_700_000_000, 0)

    def tree(data: bytes) -> pygit2.Oid:
        index = pygit2.Index()
        index.add(pygit2.IndexEntry("long.py", repo.create_blob(data), pygit2.enums.FileMode.BLOB))
        return index.write_tree(repo)

    base = repo.create_commit("refs/heads/main", sig, sig, "Base\n", tree(b"x = 1\n"), [])
    line = f"x = 1\n{LONG_NAME} = 2\n".encode()
    return str(repo.create_commit("refs/heads/main", sig, sig, "Long\n", tree(line), [base]))


def _scrolls_whole(page, box: str) -> None:
    """``box`` (a selector) scrolls sideways, and the long identifier in it sits on one line:
    its text's box is as tall as one line of its cell's neighbours."""
    wide = page.evaluate(
        """(box) => { const e = document.querySelector(box);
            return [e.scrollWidth, e.clientWidth, getComputedStyle(e).overflowX]; }""",
        box,
    )
    assert wide[0] > wide[1] + 100 and wide[2] in ("auto", "scroll"), (box, wide)
    heights = page.evaluate(
        """([box, name]) => {
            const all = [...document.querySelectorAll(box + ' *')];
            const has = (e, t) =>
                e.textContent.trim() === t || (t === name && e.textContent.includes(name));
            const deepest = t =>
                all.filter(e => has(e, t) && ![...e.children].some(c => has(c, t)));
            const h = e => e.getBoundingClientRect().height;
            return [Math.max(...deepest(name).map(h)), Math.max(...deepest('x = 1').map(h))]; }""",
        [box, LONG_NAME],
    )
    assert heights[0] > 0 and heights[0] <= heights[1] + 1, (box, heights)


@pytest.mark.parametrize("style", ["unified", "split"])
def test_long_lines_scroll_in_their_box_on_a_phone(browser, tmp_path, style) -> None:
    """At 390 px a commit's diff (unified and split), the file and its blame keep a long
    identifier on one line in a box that scrolls sideways; the page itself never does."""
    repos = tmp_path / "repos"
    commit = _build_long(repos / "alice" / "wide.git")
    with page_in(browser, PHONE) as (page, watcher), serving(repos, tmp_path / "data") as running:
        server = running.url
        query = "?style=split" if style == "split" else ""
        page.goto(f"{server}/alice/wide/commit/{commit}{query}")
        page.wait_for_selector("section.file-diff table.diff")
        _no_horizontal_overflow(page)
        _scrolls_whole(page, "section.file-diff .diff-scroll")
        if style == "unified":
            page.goto(f"{server}/alice/wide/src/branch/main/long.py")
            page.wait_for_selector("table.code")
            _no_horizontal_overflow(page)
            _scrolls_whole(page, "table.code")
            page.goto(f"{server}/alice/wide/blame/branch/main/long.py")
            page.wait_for_selector("table.blame")
            _no_horizontal_overflow(page)
            _scrolls_whole(page, ".blame-wrap")
        assert watcher.problems == []
