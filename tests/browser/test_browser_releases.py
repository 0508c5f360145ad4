"""End-to-end in headless Chromium: a release made through its form on a real ``floorless
serve``, with two files chosen in the file input, seen in the list and downloaded whole, then
edited (a new title, one file deleted)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import support.browser
from support.browser import DESKTOP, STEP_TIMEOUT_MS, Watcher, _no_horizontal_overflow
from support.githttp import git
from support.serving import serving

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser

PASSWORD = "a long password"


def test_a_release_with_files_made_in_the_form(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP_TIMEOUT_MS)
    tool = bytes(range(256)) * 2048 + b"the end"  # half a MiB: many pieces of the stream
    (tmp_path / "tool-linux").write_bytes(tool)
    (tmp_path / "NOTES.txt").write_text("Read me first.\n")
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        host = server.removeprefix("http://")
        running.admin(
            "user", "create", "ann", "--email", "ann@example.org", "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
        context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        watcher = Watcher(page)
        try:
            page.goto(server + "/-/login")
            page.get_by_label("User name").fill("ann")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("header.site")).to_contain_text("ann")
            page.goto(server + "/-/new")
            page.get_by_label("Name", exact=True).fill("app")
            page.get_by_role("button", name="Create repository").click()
            expect(page).to_have_url(f"{server}/ann/app")
            work = tmp_path / "work"
            git("init", "-q", "-b", "main", str(work))
            (work / "app.py").write_text("print('hello')\n")
            git("add", "app.py", cwd=work)
            git("commit", "-q", "-m", "Say hello", cwd=work)
            secret = PASSWORD.replace(" ", "%20")
            git("push", "-q", f"http://ann:{secret}@{host}/ann/app.git", "main", cwd=work)
            head = git("rev-parse", "HEAD", cwd=work).stdout.strip()

            # the list offers a new release to its writer; the form makes it at main
            page.goto(f"{server}/ann/app/releases")
            page.get_by_role("link", name="New release").click()
            expect(page).to_have_url(f"{server}/ann/app/releases/new")
            expect(page.get_by_label("Target", exact=False)).to_have_value("main")
            page.get_by_label("Tag name").fill("v1.0")
            page.get_by_label("Title").fill("First light")
            page.get_by_label("Notes (Markdown)").fill("The **first** one.")
            page.get_by_label("Add files").set_input_files(
                [str(tmp_path / "tool-linux"), str(tmp_path / "NOTES.txt")]
            )
            page.get_by_role("button", name="Publish release").click()
            expect(page).to_have_url(f"{server}/ann/app/releases/tag/v1.0")

            page.goto(f"{server}/ann/app/releases")
            release = page.locator("article.release").first
            expect(release.locator("h3")).to_contain_text("First light")
            expect(release.locator(".markdown strong")).to_have_text("first")
            expect(release.locator(".sha")).to_have_text(head[:10])
            assets = release.locator(".release-assets li")
            expect(assets).to_have_count(3)  # the two files, then the source archives
            expect(assets.nth(0)).to_contain_text("tool-linux")
            expect(assets.nth(0)).to_contain_text("0 downloads")
            expect(assets.nth(1)).to_contain_text("NOTES.txt")
            _no_horizontal_overflow(page)

            with page.expect_download() as downloading:
                assets.nth(0).get_by_role("link", name="tool-linux").click()
            saved = tmp_path / "downloaded"
            downloading.value.save_as(saved)
            assert downloading.value.suggested_filename == "tool-linux"
            assert hashlib.sha256(saved.read_bytes()).digest() == hashlib.sha256(tool).digest()
            page.reload()
            expect(page.locator(".release-assets li").nth(0)).to_contain_text("1 download")

            # the tag the release made is on the tags page, linked to its release
            page.goto(f"{server}/ann/app/tags")
            page.get_by_role("link", name="Release", exact=True).click()
            expect(page).to_have_url(f"{server}/ann/app/releases/tag/v1.0")

            # edited: a new title and notes, the notes file deleted, the tool kept
            page.goto(f"{server}/ann/app/releases")
            page.locator("article.release").first.get_by_role("link", name="Edit").click()
            expect(page).to_have_url(f"{server}/ann/app/releases/edit/v1.0")
            expect(page.get_by_label("Title")).to_have_value("First light")
            page.get_by_label("Title").fill("First light, again")
            page.get_by_label("Notes (Markdown)").fill("Now *better*.")
            page.locator("label.check", has_text="NOTES.txt").locator("input").check()
            page.get_by_role("button", name="Save release").click()
            expect(page).to_have_url(f"{server}/ann/app/releases/tag/v1.0")
            page.goto(f"{server}/ann/app/releases")
            edited = page.locator("article.release").first
            expect(edited.locator("h3")).to_contain_text("First light, again")
            expect(edited.locator(".markdown em")).to_have_text("better")
            files = edited.locator(".release-assets li")
            expect(files).to_have_count(2)  # the tool, then the source archives
            expect(files.nth(0)).to_contain_text("tool-linux")
            expect(edited.locator(".release-assets")).not_to_contain_text("NOTES.txt")
            gone = page.request.get(f"{server}/ann/app/releases/download/v1.0/NOTES.txt")
            assert gone.status == 404
            assert watcher.problems == []
        finally:
            context.close()
