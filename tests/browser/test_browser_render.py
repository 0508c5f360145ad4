"""The proof, in a real Chromium, that a repository's SVG never runs script on the forge's
origin: shown as an image in a README it is drawn and its script stays inert; opened
directly in a tab it is text (the forge's own pages allow no frames at all)."""

from __future__ import annotations

from pathlib import Path

import pytest
import support.browser
from support.browser import DESKTOP, STEP_TIMEOUT_MS, Watcher
from support.markup import build_docs
from support.serving import serving

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser


def test_svg_images_show_and_never_run_script(browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    build_docs(tmp_path / "repos" / "alice" / "docs.git")
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        server = running.url
        context = browser.new_context(viewport=DESKTOP)
        page = context.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        watcher = Watcher(page)
        requests: list[str] = []
        svg_types: list[str] = []
        page.on("request", lambda request: requests.append(request.url))

        def answered(response) -> None:
            if response.url.endswith("logo.svg"):
                svg_types.append(response.headers.get("content-type", ""))

        page.on("response", answered)
        try:
            # In the README: drawn (an image of its size), its script inert.
            page.goto(f"{server}/alice/docs")
            logo = page.locator(".readme img[alt=logo]")
            expect(logo).to_have_count(1)
            page.wait_for_function(
                "document.querySelector('.readme img[alt=logo]').complete", timeout=STEP_TIMEOUT_MS
            )
            assert logo.evaluate("img => img.naturalWidth") == 40
            assert svg_types == ["image/svg+xml"]
            title = page.title()
            assert "pwned" not in title

            # The file page shows it the same way.
            page.goto(f"{server}/alice/docs/src/branch/main/logo.svg")
            image = page.locator(".image img")
            page.wait_for_function(
                "document.querySelector('.image img').complete", timeout=STEP_TIMEOUT_MS
            )
            assert image.evaluate("img => img.naturalWidth") == 40
            assert "pwned" not in page.title()

            # Opened directly: text, not a document that could run anything.
            raw = f"{server}/alice/docs/raw/branch/main/logo.svg"
            page.goto(raw)
            assert page.evaluate("document.contentType") == "text/plain"
            assert "pwned" not in page.title()
            assert "<script>" in page.locator("body").inner_text()

            assert "pwned" not in page.title()
            assert all("/pwned" not in url for url in requests), requests
            assert watcher.problems == [], watcher.problems
        finally:
            context.close()


def test_asciidoc_in_the_browser(browser, tmp_path: Path) -> None:
    """Rendered by Asciidoctor: hostile documents run nothing (no dialog, no request they
    name, no title changed), a table's cells are one line tall, and a phone's width holds
    the page."""
    from support.asciidoc import HOSTILE, build
    from support.browser import PHONE, page_in

    build(tmp_path / "repos" / "alice" / "docs.git")
    with serving(tmp_path / "repos", tmp_path / "data") as running:
        base = f"{running.url}/alice/docs/src/branch/main"
        with page_in(browser, DESKTOP) as (page, _):
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            for name in HOSTILE:
                page.goto(f"{base}/hostile/{name}")
                page.wait_for_load_state("load")
                assert page.locator(".markdown.rendered h1").count() == 1, name
                assert page.title().startswith(name), page.title()
            assert dialogs == []
            page.goto(f"{running.url}/alice/docs")
            cell = page.locator(".readme td").first
            line = cell.evaluate("td => parseFloat(getComputedStyle(td).lineHeight)")
            padding = cell.evaluate(
                "td => parseFloat(getComputedStyle(td).paddingTop)"
                " + parseFloat(getComputedStyle(td).paddingBottom)"
            )
            assert cell.bounding_box()["height"] <= line + padding + 2
        with page_in(browser, PHONE) as (page, _):
            page.goto(f"{running.url}/alice/docs")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], width
