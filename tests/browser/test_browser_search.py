"""Code search in headless Chromium, at desktop and phone widths, in both themes: the search
box of a repository's header (reached with ``/``), the site-wide search from the explore
page's Code tab, results that link to their line, and pages no wider than the screen."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
import support.browser
from support.browser import DESKTOP, PHONE, STEP_TIMEOUT_MS, Watcher, _no_horizontal_overflow
from support.forges import patience

# the shared fixtures this module's tests ask for
browser = support.browser.browser
server = support.browser.server

pytestmark = pytest.mark.browser


def _wait_indexed(base: str) -> None:
    deadline = time.monotonic() + patience(60)
    while True:
        with urllib.request.urlopen(f"{base}/alice/demo/search?q=greet", timeout=30) as answer:
            if b"<mark>" in answer.read():
                return
        assert time.monotonic() < deadline, "the demo repository was never indexed for search"
        time.sleep(0.2)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_search_from_the_header_and_the_explore_page(
    browser,
    server: str,
    size: dict[str, int],
    scheme: str,
) -> None:
    _wait_indexed(server)
    context = browser.new_context(viewport=size, color_scheme=scheme)
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    watcher = Watcher(page)
    page.goto(f"{server}/alice/demo")
    watcher.problems.clear()  # the home page's own (its README's images): not search's
    page.keyboard.press("/")
    box = page.locator("form[role='search'] input[name='q']").first
    assert box.evaluate("element => element === document.activeElement")
    box.fill("class Greeting")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/alice/demo/search\?q=class"))
    assert page.locator("mark", has_text="class Greeting").count() == 1
    _no_horizontal_overflow(page)
    assert watcher.problems == [], "\n".join(watcher.problems)
    page.locator("tr.hit td.ln a").first.click()
    page.wait_for_url(re.compile(r"/alice/demo/src/commit/[0-9a-f]{40}/src/app\.py#L\d+$"))
    line = page.url.rsplit("#L", 1)[1]
    assert "class Greeting" in page.locator(f"[id='L{line}']").inner_text()

    watcher.problems.clear()  # the file page's own: not code search's to answer for
    page.goto(f"{server}/?q=greet")
    page.get_by_role("link", name="Code", exact=True).click()
    page.wait_for_url(re.compile(r"/-/search\?q=greet"))
    assert page.locator("section.search-file").count() >= 1
    page.locator("input[name='q']").first.fill("/gre+t\\(/")
    page.locator("form.code-search button[type='submit']").click()
    page.wait_for_url(re.compile(r"/-/search\?q=%2Fgre"))
    assert page.locator("mark").count() >= 1
    _no_horizontal_overflow(page)
    page.locator("input[name='q']").first.fill("/(a+)+$/")
    page.locator("form.code-search button[type='submit']").click()
    page.wait_for_load_state()
    assert "exponential" in page.locator("[role='alert']").inner_text()
    _no_horizontal_overflow(page)
    refused = [p for p in watcher.problems if "400" in p and "/-/search?q=%2F%28a" in p]
    problems = [p for p in watcher.problems if p not in refused]  # the refused pattern's 400
    assert refused and problems == [], "\n".join(watcher.problems)
    context.close()
