"""End-to-end in headless Chromium: a pull request's whole life on the web, as a team lives it.

An agent's account pushes a branch with the real git client and opens a pull request from the
compare page; the repository's owner reads the files tab, comments on a line, approves and
merges with a merge commit; then the real git client fetches the base and finds the merge
git itself would have made: the head's commits and the old base as its parents, and the
line commented on in the merged file. Both sessions run at once, in two browser contexts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import support.browser
from support.browser import DESKTOP, PHONE, STEP_TIMEOUT_MS, Watcher, _no_horizontal_overflow
from support.githttp import git
from support.serving import serving

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser

PASSWORD = "a long password"


def _sign_in(browser, server: str, name: str):  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    watcher = Watcher(page)
    page.goto(server + "/-/login")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("header.site")).to_contain_text(name)
    return context, page, watcher


def test_compare_open_comment_on_a_line_approve_and_merge(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP_TIMEOUT_MS)
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        host = server.removeprefix("http://")
        secret = PASSWORD.replace(" ", "%20")
        for name in ("ann", "agent"):
            running.admin(
                "user",
                "create",
                name,
                "--email",
                f"{name}@example.org",
                "--password-stdin",
                stdin=PASSWORD + "\n",
            )
        owner, ann, ann_watch = _sign_in(browser, server, "ann")
        helper, agent, agent_watch = _sign_in(browser, server, "agent")
        try:
            # ann makes the repository and lets the agent push to it
            ann.goto(server + "/-/new")
            ann.get_by_label("Name", exact=True).fill("app")
            ann.get_by_role("button", name="Create repository").click()
            expect(ann).to_have_url(f"{server}/ann/app")
            ann.goto(f"{server}/ann/app/settings")
            ann.get_by_label("User name").fill("agent")
            ann.get_by_label("Role").select_option("write")
            ann.get_by_role("button", name="Add or change").click()
            expect(ann.locator("table.list")).to_contain_text("agent")

            work = tmp_path / "work"
            git("init", "-q", "-b", "main", str(work))
            (work / "greet.py").write_text("def greet(name):\n    return 'Helo ' + name\n")
            git("add", "greet.py", cwd=work)
            git("commit", "-q", "-m", "Greet people", cwd=work)
            git("push", "-q", f"http://ann:{secret}@{host}/ann/app.git", "main", cwd=work)
            git("switch", "-q", "-c", "fix-greeting", cwd=work)
            (work / "greet.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
            git("commit", "-q", "-am", "Fix the greeting's spelling", cwd=work)
            pushed = f"http://agent:{secret}@{host}/ann/app.git"
            git("push", "-q", pushed, "fix-greeting", cwd=work)
            head = git("rev-parse", "HEAD", cwd=work).stdout.strip()
            base = git("rev-parse", "main", cwd=work).stdout.strip()
            # meanwhile the base moves on: the merge must be a real one
            git("switch", "-q", "main", cwd=work)
            (work / "NOTES.md").write_text("# Notes\n")
            git("add", "NOTES.md", cwd=work)
            git("commit", "-q", "-m", "Start the notes", cwd=work)
            git("push", "-q", f"http://ann:{secret}@{host}/ann/app.git", "main", cwd=work)
            base = git("rev-parse", "main", cwd=work).stdout.strip()

            # the agent opens the pull request from the compare page
            agent.goto(f"{server}/ann/app/compare/main...fix-greeting")
            expect(agent.locator(".commit-list")).to_contain_text("Fix the greeting's spelling")
            agent.get_by_label("Title").fill("Fix the greeting <script>alert(1)</script>")
            agent.get_by_label("Description (Markdown)").fill(
                "## Why\n\n- *Helo* is misspelt\n- see `greet.py`\n"
            )
            agent.get_by_role("button", name="Create pull request").click()
            expect(agent).to_have_url(f"{server}/ann/app/pulls/1")
            expect(agent.locator("h2.issue-title")).to_contain_text("Fix the greeting <script>")
            expect(agent.locator(".markdown h2")).to_have_text("Why")
            expect(agent.locator(".markdown em")).to_have_text("Helo")

            # ann reads the files tab and comments on the changed line
            ann.goto(f"{server}/ann/app/pulls")
            ann.get_by_role("link", name="Fix the greeting <script>alert(1)</script>").click()
            expect(ann).to_have_url(f"{server}/ann/app/pulls/1")
            ann.goto(f"{server}/ann/app/pulls/1/files")
            expect(ann.locator("body")).to_contain_text("Hello, ")
            form = ann.locator("details.review-line").first
            form.locator("summary").click()
            form.locator("select[name=side]").select_option("new")
            form.locator("input[name=line]").fill("2")
            form.locator("textarea[name=body]").fill("Nice catch: a **comma** too.")
            form.get_by_role("button", name="Start a review").click()
            expect(ann.locator("body")).to_contain_text("a comma too")
            submit = ann.locator("details.review-submit")
            if submit.get_attribute("open") is None:
                submit.locator("summary").click()
            submit.get_by_label("Approve").check()
            submit.locator("textarea[name=body]").fill("Looks good to me.")
            submit.get_by_role("button", name="Submit review").click()

            # the conversation shows the approval; the check has found it mergeable
            ann.goto(f"{server}/ann/app/pulls/1")
            expect(ann.locator(".timeline")).to_contain_text("approved")
            expect(ann.locator(".timeline")).to_contain_text("Looks good to me.")
            for _ in range(100):  # the check runs in the background after each push
                if ann.get_by_role("button", name="Merge").count():
                    break
                ann.wait_for_timeout(100)
                ann.reload()
            ann.locator("#merge-box select[name=style]").select_option("merge")
            ann.get_by_role("button", name="Merge").click()
            expect(ann.locator("#merge-box")).to_contain_text("merged this")

            agent.reload()
            expect(agent.locator("#merge-box")).to_contain_text("merged this")
            agent.set_viewport_size(PHONE)
            for path in ("/ann/app/pulls/1", "/ann/app/pulls/1/files", "/ann/app/pulls"):
                agent.goto(server + path)
                _no_horizontal_overflow(agent)
        finally:
            owner.close()
            helper.close()

        # what git sees: a merge of the head into the moved base, as git merge --no-ff makes
        git("fetch", "-q", f"http://ann:{secret}@{host}/ann/app.git", "main", cwd=work)
        merged = git("rev-parse", "FETCH_HEAD", cwd=work).stdout.strip()
        parents = git("rev-list", "--parents", "-n", "1", merged, cwd=work).stdout.split()[1:]
        assert parents == [base, head]
        shown = git("show", f"{merged}:greet.py", cwd=work).stdout
        assert "Hello, " in shown
        assert git("show", f"{merged}:NOTES.md", cwd=work).stdout == "# Notes\n"
        git("fsck", "--no-progress", cwd=work)
    problems = ann_watch.problems + agent_watch.problems
    assert problems == [], "\n".join(problems)
