"""A real ``floorless serve`` and a headless system Chromium for the browser tests, with the
viewports they use and a watcher of the page's errors."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.serving import serving

INSTALL_HINT = "run scripts/install-test-deps.sh (as root) to install it"


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


STEP_TIMEOUT_MS = 20_000


DEMO = "alice/demo"


PHONE = {"width": 390, "height": 844}


DESKTOP = {"width": 1280, "height": 900}


def _unavailable(reason: str) -> None:
    """Fail (or, with FLOORLESS_SKIP_BROWSER=1, skip) because the browser can't run here."""
    if os.environ.get("FLOORLESS_SKIP_BROWSER") == "1":
        pytest.skip(f"{reason} (FLOORLESS_SKIP_BROWSER=1)")
    pytest.fail(f"{reason}; set FLOORLESS_SKIP_BROWSER=1 to skip the browser tests", pytrace=False)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    _unavailable(f"Chromium is not installed: {INSTALL_HINT}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def server(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``floorless serve`` over the fixture repositories, for a module's tests that only read
    (a test that writes starts a server of its own); yields its base URL."""
    with serving(fixture_root, tmp_path_factory.mktemp("data")) as running:
        yield running.url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """A headless system Chromium (never a downloaded one), one for a module's tests (each opens
    contexts of its own, which share no cookie or storage), closed after them. Not one for the
    whole run: playwright's sync API holds an event loop in the thread while it is open, and
    the other tests' ``asyncio.run`` may not run inside one."""
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        # launch() gives every run a fresh temporary --user-data-dir of its own.
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            env={**os.environ, "HOME": str(tmp_path_factory.mktemp("home"))},
        )
        try:
            yield browser
        finally:
            browser.close()


# The demo README's hostile `<img src=x onerror=...>` stays an image, its handler dropped, as
# GitHub keeps it: an image of a file the repository does not have, so this one 404 is expected.
MISSING_IMAGE = f"/{DEMO}/raw/branch/main/x"


class Watcher:
    """Collects console errors, uncaught exceptions and failed responses of a page."""

    def __init__(self, page) -> None:
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"uncaught exception: {exc}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, message) -> None:
        if message.type == "error" and not message.location.get("url", "").endswith(MISSING_IMAGE):
            self.problems.append(f"console error: {message.text} at {message.location}")

    def _failed(self, request) -> None:
        # A request cut short by leaving the page (e.g. app.js polling) is no failure.
        if "ERR_ABORTED" not in (request.failure or ""):
            self.problems.append(f"request failed: {request.url} ({request.failure})")

    def _response(self, response) -> None:
        if response.status >= 400 and not response.url.endswith(MISSING_IMAGE):
            self.problems.append(f"HTTP {response.status} for {response.url}")


@contextmanager
def page_in(browser, viewport: dict[str, int], scheme: str = "light") -> Iterator[tuple]:
    """A fresh page at ``viewport`` in the ``scheme`` colour theme, with its watcher, closed
    after; playwright's ``expect`` waits up to STEP_TIMEOUT_MS."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    try:
        yield page, Watcher(page)
    finally:
        context.close()


def _no_horizontal_overflow(page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    if widths[0] > widths[1] + 1:
        culprits = page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.className)"""
        )
        raise AssertionError(f"{page.url} overflows horizontally {widths}: {culprits}")
