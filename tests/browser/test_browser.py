"""End-to-end: the real ``floorless serve`` process driven by a real headless Chromium.

Needs the Debian packages ``chromium`` (and ``git``), installed by
``scripts/install-test-deps.sh``, and the ``playwright`` Python package (the ``test`` extra),
which drives the system Chromium: no browser is ever downloaded.  Without Chromium the test
fails; set ``FLOORLESS_SKIP_BROWSER=1`` to skip it instead.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import support.browser
from support.browser import DEMO, DESKTOP, PHONE, STEP_TIMEOUT_MS, Watcher, _no_horizontal_overflow
from support.gitfixtures import build_many_refs, git_text, many_refs_tag
from support.serving import serving

from floorless.web.views.refswitch import SHOWN

# the shared fixtures this module's tests ask for
browser = support.browser.browser
server = support.browser.server

pytestmark = pytest.mark.browser

STARTUP_TIMEOUT = 60.0
















def _save_screenshot(page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    shutil.copyfile(shot, f"/tmp/floorless-{name}.png")




def _as_if_not_indexed(route) -> None:
    """Serve a tree page as the server does before the index can name each entry's commit."""
    response = route.fetch()
    html = response.text()
    assert 'data-ready="yes"' in html
    html = html.replace('data-ready="yes"', 'data-ready="no"')
    html = re.sub(r'<td class="lastmsg">.*?</td>', '<td class="lastmsg"></td>', html)
    html = re.sub(r'<td class="lastdate">.*?</td>', '<td class="lastdate"></td>', html)
    route.fulfill(response=response, body=html)


def _blame_groups(repo: Path, path: str) -> list[str]:
    """The commit of each run of consecutive lines git blame attributes to one commit."""
    porcelain = git_text(repo, "blame", "--line-porcelain", "main", "--", path)
    runs: list[str] = []
    for line in porcelain.splitlines():
        head = line.split(" ")
        is_header = len(head) >= 3 and len(head[0]) == 40 and not head[0].strip("0123456789abcdef")
        if is_header and (not runs or runs[-1] != head[0]):
            runs.append(head[0])
    return runs


def test_browse_demo_repository(browser, server: str, fixture_root: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    repo = fixture_root / f"{DEMO}.git"
    app_py = git_text(repo, "show", "main:src/app.py").split("\n")
    src_last = git_text(repo, "log", "-1", "--format=%s", "main", "--", "src")
    readme_last = git_text(repo, "log", "-1", "--format=%s", "main", "--", "README.md")
    history = git_text(repo, "log", "--format=%H %s", "main", "--", "src/app.py").splitlines()
    blame_runs = _blame_groups(repo, "src/app.py")

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    watcher = Watcher(page)
    try:
        # Explore: every repository is listed; follow alice/demo.
        page.goto(server + "/")
        expect(page).to_have_title("Explore · floorless")
        expect(page.get_by_role("heading", name="Repositories")).to_be_visible()
        demo_link = page.locator("a.repo-name", has_text=DEMO)
        expect(demo_link).to_have_count(1)
        demo_link.click()

        # Repository home: README rendered, file list, last-commit column filled in.
        expect(page).to_have_url(f"{server}/{DEMO}")
        expect(page).to_have_title(f"{DEMO} · floorless")
        expect(page.locator(".repo-title")).to_have_text("alice / demo")
        readme = page.locator("section.readme .markdown")
        expect(readme.locator("h1")).to_have_text("Demo")
        expect(readme.locator("h1")).to_be_visible()
        expect(readme.locator("table")).to_be_visible()  # GFM table rendered, not raw pipes
        expect(readme.locator("script")).to_have_count(0)  # raw HTML in the README is sanitized
        files = page.locator("table.files")
        names = files.locator("td.name a")
        for name in ("src", "docs", "README.md"):
            expect(names.filter(has_text=name).first).to_be_visible()
        # The column is either rendered ready or filled in by app.js once the index answers.
        expect(files).to_have_attribute("data-ready", "yes")
        expect(page.locator("p.indexing")).to_have_count(0)
        src_row = files.locator("tr[data-name]", has=page.locator("td.name a", has_text="src"))
        expect(src_row.locator("td.lastmsg a")).to_have_text(src_last)
        expect(src_row.locator("td.lastdate time")).to_contain_text("ago")
        readme_row = files.locator(
            "tr[data-name]", has=page.locator("td.name a", has_text="README.md")
        )
        expect(readme_row.locator("td.lastmsg a")).to_have_text(readme_last)
        for row in files.locator("tr[data-name]").all():
            assert row.locator("td.lastmsg").inner_text().strip(), row.inner_text()
        _save_screenshot(page, tmp_path, "home")

        # app.js fills the column in by itself: serve the page as if the index weren't ready.
        rendered = [c.inner_text() for c in files.locator("td.lastmsg, td.lastdate").all()]
        page.route(f"{server}/{DEMO}", _as_if_not_indexed)
        page.reload()
        expect(files).to_have_attribute("data-ready", "yes")
        expect(files.locator("td.lastmsg, td.lastdate")).to_have_text(rendered)
        expect(src_row.locator("td.lastmsg a")).to_have_attribute("href", re.compile("/commit/"))
        page.unroute(f"{server}/{DEMO}")

        # Into src/ and then src/app.py.
        names.filter(has_text="src").first.click()
        expect(page).to_have_title(f"src at main · {DEMO} · floorless")
        expect(page.locator("nav.crumbs strong")).to_have_text("src")
        page.locator("table.files td.name a", has_text="app.py").click()
        expect(page).to_have_title(f"app.py at main · {DEMO} · floorless")
        file_url = page.url
        code = page.locator("table.code")
        expect(code).to_be_visible()
        expect(code.locator("tr")).to_have_count(len(app_py))
        expect(code.locator("tr#L1 td.ln a")).to_have_text("1")
        expect(code.locator(f"tr#L{len(app_py)} td.ln a")).to_have_text(str(len(app_py)))
        expect(code.locator("tr#L1 td.src")).to_have_text(app_py[0])
        expect(page.locator(".filebar")).to_contain_text(f"{len(app_py)} lines")
        # Highlighted: tokens are wrapped in spans and the theme gives them their own colour.
        keyword = code.locator("tr#L3 td.src pre span", has_text="from").first
        expect(keyword).to_be_visible()
        plain = code.locator("tr#L3 td.src pre")
        assert keyword.evaluate("e => getComputedStyle(e).color") != plain.evaluate(
            "e => getComputedStyle(e).color"
        ), "code.css gives keywords no colour of their own"

        # #L3-L5 highlights exactly those rows (app.js), also on a hash change.
        page.goto(file_url + "#L3-L5")
        expect(page.locator("table.code tr.hl")).to_have_count(3)
        for n in (3, 4, 5):
            expect(page.locator(f"tr#L{n}")).to_have_class("hl")
        for n in (2, 6):
            expect(page.locator(f"tr#L{n}")).not_to_have_class("hl")
        # Click a line number, shift-click another: that range is selected.
        page.locator("tr#L7 td.ln a").click()
        page.locator("tr#L9 td.ln a").click(modifiers=["Shift"])
        expect(page).to_have_url(file_url + "#L7-L9")
        expect(page.locator("table.code tr.hl")).to_have_count(3)
        expect(page.locator("tr#L8")).to_have_class("hl")
        page.goto(file_url + "#L3-L5")
        expect(page.locator("tr#L4")).to_have_class("hl")
        page.mouse.move(0, 0)
        _save_screenshot(page, tmp_path, "file")

        # Blame: one group per run of lines from one commit, as git blame says.
        page.locator(".filebar .actions a", has_text="Blame").click()
        expect(page).to_have_title(f"Blame app.py at main · {DEMO} · floorless")
        groups = page.locator("table.blame td.blame-commit")
        expect(groups).to_have_count(len(blame_runs))
        expect(groups.first.locator("a.sha")).to_have_text(blame_runs[0][:10])
        expect(page.locator("table.blame tr")).to_have_count(len(app_py))

        # Back to the file, then its history.
        page.go_back()
        expect(page).to_have_title(f"app.py at main · {DEMO} · floorless")
        page.locator(".filebar .actions a", has_text="History").click()
        expect(page).to_have_title(f"Commits to app.py on main · {DEMO} · floorless")
        # While the path history is still being indexed the page refreshes itself.
        summaries = page.locator("ol.commit-list li a.summary")
        expect(summaries).to_have_text([line.split(" ", 1)[1] for line in history])

        # The newest commit: its page shows the diff of src/app.py.
        first_id, first_summary = history[0].split(" ", 1)
        summaries.first.click()
        expect(page).to_have_url(f"{server}/{DEMO}/commit/{first_id}")
        expect(page).to_have_title(f"{first_summary} · {first_id[:10]} · {DEMO} · floorless")
        expect(page.locator("h1.commit-summary")).to_have_text(first_summary)
        expect(page.locator(".commit-meta code")).to_have_text(first_id)
        diff = page.locator("section.file-diff", has=page.locator("h3", has_text="src/app.py"))
        expect(diff).to_be_visible()
        expect(diff.locator("table.diff tr.hunk").first).to_be_visible()
        expect(diff.locator("table.diff tr.add").first).to_be_visible()
        expect(page.locator("p.diffstat")).to_contain_text("changed")
        commit_url = page.url

        # A phone-sized viewport: nothing overflows horizontally.
        page.set_viewport_size(PHONE)
        for url in (
            f"{server}/{DEMO}",
            file_url,
            commit_url,
            file_url.replace("/src/", "/blame/", 1),
        ):
            page.goto(url)
            expect(page.locator("main")).to_be_visible()
            _no_horizontal_overflow(page)
        page.goto(f"{server}/{DEMO}")
        expect(page.locator("table.files")).to_be_visible()
        expect(page.locator("section.readme .markdown h1")).to_have_text("Demo")
        _no_horizontal_overflow(page)
        page.screenshot(path=str(tmp_path / "home-phone.png"), full_page=True)
    finally:
        context.close()
    assert watcher.problems == [], "\n".join(watcher.problems)


def test_sign_in_and_manage_a_private_repository(browser, tmp_path: Path) -> None:
    """Sign in, create a private repository, push to it with git, make a token, share and
    publish it in its settings, sign out: the pages a person administers a forge with."""
    from playwright.sync_api import expect
    from support.githttp import git

    password = "a long password"
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        for name in ("ann", "ben"):
            running.admin(
                "user",
                "create",
                name,
                "--email",
                f"{name}@example.org",
                "--password-stdin",
                stdin=password + "\n",
            )
        context = browser.new_context(viewport=DESKTOP)
        page = context.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        watcher = Watcher(page)
        try:
            page.goto(server + "/")
            page.get_by_role("link", name="Sign in").click()
            page.get_by_label("User name").fill("ann")
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("header.site")).to_contain_text("ann")
            expect(page.get_by_role("button", name="Sign out")).to_be_visible()

            page.get_by_role("link", name="New repository").click()
            page.get_by_label("Name", exact=True).fill("diary")
            page.get_by_label("Description").fill("Things that happened")
            page.get_by_label("Private: only you").check()
            page.get_by_role("button", name="Create repository").click()
            expect(page).to_have_url(f"{server}/ann/diary")
            expect(page.locator(".repo-title .badge")).to_have_text("Private")

            work = tmp_path / "work"
            git("init", "-q", str(work))
            (work / "README.md").write_text("# Diary\n\nDay one.\n")
            git("add", "README.md", cwd=work)
            git("commit", "-q", "-m", "Day one", cwd=work)
            host = server.removeprefix("http://")
            secret = password.replace(" ", "%20")
            git("push", "-q", f"http://ann:{secret}@{host}/ann/diary.git", "main", cwd=work)
            page.reload()
            expect(page.locator("section.readme h1")).to_have_text("Diary")

            page.get_by_role("link", name="Tokens").click()
            page.get_by_label("Name").fill("laptop")
            page.get_by_label("Scope").select_option("read")
            page.get_by_role("button", name="Create token").click()
            token = page.get_by_label("New token").input_value()
            assert token.startswith("flt_")
            page.get_by_label("New token").focus()  # selected whole, ready to copy
            selected = (
                "() => document.activeElement.selectionEnd - document.activeElement.selectionStart"
            )
            assert page.evaluate(selected) == len(token)
            page.reload()  # shown once: a reload shows only its prefix and makes no other
            expect(page.get_by_label("New token")).to_have_count(0)
            expect(page.locator("table.list tbody tr")).to_have_count(1)
            expect(page.locator("table.list")).to_contain_text("laptop")
            page.goto(server + "/-/tokens")
            expect(page.locator("table.list")).to_contain_text(token[:8])
            assert token not in page.content()

            page.goto(f"{server}/ann/diary")
            page.get_by_role("link", name="Settings").click()
            page.get_by_label("User name").fill("ben")
            page.get_by_label("Role").select_option("write")
            page.get_by_role("button", name="Add or change").click()
            expect(page.locator("table.list")).to_contain_text("ben")
            page.set_viewport_size(PHONE)
            for path in ("/ann/diary/settings", "/-/tokens", "/-/new"):
                page.goto(server + path)
                _no_horizontal_overflow(page)
            page.set_viewport_size(DESKTOP)
            page.goto(f"{server}/ann/diary/settings")
            page.get_by_label("Public").check()
            page.get_by_role("button", name="Save").click()
            page.goto(f"{server}/ann/diary")
            expect(page.locator(".repo-title .badge")).to_have_count(0)

            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_role("link", name="Sign in")).to_be_visible()
            page.goto(f"{server}/ann/diary")  # public now: readable signed out
            expect(page.locator("section.readme h1")).to_have_text("Diary")
            page.goto(f"{server}/-/login")
            page.set_viewport_size(PHONE)
            _no_horizontal_overflow(page)
        finally:
            context.close()
    assert watcher.problems == [], "\n".join(watcher.problems)


def test_ref_switcher_loads_filters_and_follows(browser, tmp_path: Path) -> None:
    """The switcher's list is fetched when it opens: newest first and bounded, filtered as one
    types, walked with the arrow keys, closed with Escape; a tag link opens the same file at
    that tag."""
    from playwright.sync_api import expect

    tags = SHOWN + 70
    build_many_refs(tmp_path / "repos" / "alice" / "many.git", tags, 3, commits=tags)
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        context = browser.new_context(viewport=DESKTOP)
        page = context.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        watcher = Watcher(page)
        try:
            page.goto(f"{server}/alice/many/src/branch/main/src/app.py")
            expect(page).to_have_title("app.py at main · alice/many · floorless")
            switcher = page.locator("details.refswitch")
            expect(switcher.locator("a", has_text=many_refs_tag(1))).to_have_count(0)

            # Opened from the keyboard: the filter box takes the focus, the list arrives.
            switcher.locator("summary").focus()
            page.keyboard.press("Enter")
            expect(switcher).to_have_attribute("open", "")
            box = switcher.get_by_label("Filter branches and tags")
            expect(box).to_be_focused()
            groups = switcher.locator(".refgroup")
            tag_links = groups.filter(has_text="Tags").locator("a")
            expect(tag_links).to_have_count(SHOWN)
            expect(tag_links.first).to_have_text(many_refs_tag(tags))
            expect(groups.filter(has_text="Branches").locator("a").first).to_have_text("main")
            expect(groups.filter(has_text="Branches").locator("a[aria-current]")).to_have_text(
                "main"
            )

            # Arrow keys walk from the box into the list and back; Escape closes.
            page.keyboard.press("ArrowDown")
            expect(switcher.locator(".refgroup a").first).to_be_focused()
            page.keyboard.press("ArrowDown")
            expect(switcher.locator(".refgroup a").nth(1)).to_be_focused()
            page.keyboard.press("ArrowUp")
            page.keyboard.press("ArrowUp")
            expect(box).to_be_focused()
            page.keyboard.press("Escape")
            expect(switcher).not_to_have_attribute("open", "")
            expect(switcher.locator("summary")).to_be_focused()

            # Filtering asks the server again: the matching tags alone, newest first.
            switcher.locator("summary").click()
            expect(box).to_be_focused()
            box.fill("REL-1")

            # newest first: every tenth tag is annotated, dated when it was made, after every
            # commit (git's creatordate); the others by their commits (tag n on commit n)
            def created(n: int) -> tuple[bool, int]:
                return (n % 10 != 0, -n)

            expected = sorted(
                (n for n in range(1, tags + 1) if many_refs_tag(n).startswith("rel-1")),
                key=created,
            )[:SHOWN]
            expect(tag_links).to_have_text([many_refs_tag(n) for n in expected])
            expect(switcher).to_contain_text("No branches match")
            box.fill("rel-11")
            expect(tag_links).to_have_text(
                [many_refs_tag(n) for n in (110, 119, 118, 117, 116, 115, 114, 113, 112, 111, 11)]
            )
            _save_screenshot(page, tmp_path, "refswitch")

            # Following a tag keeps the page and the path.
            tag_links.filter(has_text=re.compile(r"^rel-11$")).click()
            expect(page).to_have_url(f"{server}/alice/many/src/tag/rel-11/src/app.py")
            expect(page).to_have_title("app.py at rel-11 · alice/many · floorless")
            expect(page.locator("details.refswitch summary")).to_contain_text("Tag: rel-11")
        finally:
            context.close()
    assert watcher.problems == [], "\n".join(watcher.problems)
