"""End-to-end in headless Chromium: files attached to an issue's comments, as people attach
them. A file dropped into the comment's text is uploaded at once and linked in it (an image
shown as one); a file chosen in the form's file input goes with the form; both are listed
under their comments once posted, and download."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import support.browser
from support.browser import DESKTOP, STEP_TIMEOUT_MS, Watcher
from support.serving import serving

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser

PASSWORD = "a long password"
# a 1x1 PNG
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

DROP = """([area, name, type, data]) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([new Uint8Array(data)], name, { type }));
    for (const kind of ["dragover", "drop"]) {
        const event = { dataTransfer: transfer, bubbles: true, cancelable: true };
        area.dispatchEvent(new DragEvent(kind, event));
    }
}"""


def test_a_dropped_image_and_a_chosen_file_attach_to_comments(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP_TIMEOUT_MS)
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        running.admin(
            "user", "create", "ann", "--email", "ann@example.org", "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
        context = browser.new_context(viewport=DESKTOP)
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
            page.get_by_label("Name", exact=True).fill("notes")
            page.get_by_role("button", name="Create repository").click()
            expect(page).to_have_url(f"{server}/ann/notes")
            page.goto(f"{server}/ann/notes/issues/new")
            page.get_by_label("Title").fill("Pictures")
            page.get_by_role("button", name="Open issue").click()
            expect(page).to_have_url(f"{server}/ann/notes/issues/1")

            # a dropped image: uploaded at once, its link put in the text
            form = page.locator("form:has(input[name=action][value=comment])")
            area = form.get_by_label("Comment (Markdown)")
            area.fill("Look: ")
            page.evaluate(DROP, [area.element_handle(), "pixel.png", "image/png", list(PIXEL)])
            linked = re.compile(r"^Look: !\[pixel\.png\]\(/attachments/[0-9a-f-]{36}\)$")
            expect(area).to_have_value(linked)
            expect(page.locator("form input[type=hidden][name=files]")).to_have_count(1)
            page.get_by_role("button", name="Comment", exact=True).click()
            comment = page.locator("li.comment").last
            expect(comment.locator("ul.attachments")).to_contain_text("pixel.png")
            expect(comment.locator(".markdown img")).to_have_count(1)
            width = comment.locator(".markdown img").evaluate("img => img.naturalWidth")
            assert width == 1  # the image downloads and shows

            # a file chosen in the form goes with it
            form.get_by_label("Comment (Markdown)").fill("And the notes")
            form.get_by_label("Attach files").set_input_files(
                [{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"some notes\n"}]
            )
            page.get_by_role("button", name="Comment", exact=True).click()
            second = page.locator("li.comment").last
            expect(second.locator("ul.attachments")).to_contain_text("notes.txt")
            link = second.locator("ul.attachments a").get_attribute("href")
            assert link is not None and link.startswith("/attachments/")
            downloaded = page.request.get(server + link)
            assert downloaded.status == 200 and downloaded.body() == b"some notes\n"
            assert watcher.problems == []
        finally:
            context.close()
