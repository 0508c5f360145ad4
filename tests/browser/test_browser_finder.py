"""End-to-end in headless Chromium: the file finder, the keyboard shortcuts, the copy buttons and
the ref switcher's closing, at desktop and phone widths, in the light and the dark theme.

The finder's order is checked against ``rank`` (the server's ranking of the page without
script) over git's own listing, so the script and the page cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import support.browser
from support.browser import DESKTOP, PHONE, STEP_TIMEOUT_MS, Watcher, _no_horizontal_overflow
from support.gitfixtures import DEMO_INVALID_UTF8_PATH, git, git_text
from support.serving import serving

from floorless.web.views.finder import rank

# the shared fixtures this module's tests ask for
browser = support.browser.browser

pytestmark = pytest.mark.browser

DEMO = "alice/demo"
FILE = "src/app.py"

# The contrast of two colours as WCAG defines it, computed in the page from computed styles.
CONTRAST = """(element) => {
  function rgb(text) { return text.match(/[\\d.]+/g).slice(0, 3).map(Number); }
  function lum(c) {
    var v = c.map(function (x) {
      x /= 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  }
  var style = getComputedStyle(element), bg = element, back = style.backgroundColor;
  while (back === "rgba(0, 0, 0, 0)" && bg.parentElement) {
    bg = bg.parentElement;
    back = getComputedStyle(bg).backgroundColor;
  }
  var a = lum(rgb(style.color)), b = lum(rgb(back));
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


@pytest.fixture(scope="module")
def site(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ``floorless serve`` over the fixture repositories for every width and theme."""
    with serving(fixture_root, tmp_path_factory.mktemp("finder-data")) as running:
        yield running.url


def _listing(repo: Path) -> list[tuple[bytes, str]]:
    out = git_text(repo, "ls-tree", "-r", "-z", "--name-only", "main")
    paths = sorted(p.encode("utf-8", "surrogateescape") for p in out.split("\0") if p)
    return [(p, p.decode("utf-8", "replace")) for p in paths]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_finder_shortcuts_and_copying(
    browser,
    site: str,
    fixture_root: Path,
    viewport: dict[str, int],
    scheme: str,
) -> None:
    from playwright.sync_api import expect

    repo = fixture_root / f"{DEMO}.git"
    main = git_text(repo, "rev-parse", "main")
    listing = _listing(repo)
    base = f"{site}/{DEMO}"
    context = browser.new_context(
        viewport=viewport,
        color_scheme=scheme,
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    watcher = Watcher(page)
    try:
        page.goto(f"{base}/src/branch/main/{FILE}")
        expect(page.locator("a.go-file")).to_be_visible()
        _no_horizontal_overflow(page)

        # t: the finder opens with its box focused; the list arrives once, by tree id.
        with page.expect_response(lambda r: "/-/paths/" in r.url) as fetched:
            page.keyboard.press("t")
        assert fetched.value.status == 200
        finder = page.locator("dialog.finder")
        expect(finder).to_be_visible()
        box = finder.get_by_role("combobox", name="Go to file")
        expect(box).to_be_focused()
        options = finder.locator("li[role=option]")
        expect(options).to_have_count(min(50, len(listing)))
        _no_horizontal_overflow(page)

        # Typing filters as the server's ranking does; the non-UTF-8 name shows replaced.
        for query in ("d", "ge", "txt", "dme", "app", "bad"):
            box.fill(query)
            expected = [p.decode("utf-8", "replace") for p in rank(listing, query)][:50]
            expect(options).to_have_text(expected)
        box.fill("bad")
        expect(options.first.locator("a")).to_have_attribute(
            "href", f"/{DEMO}/src/branch/main/{quote(DEMO_INVALID_UTF8_PATH, safe='/')}"
        )

        # Arrows move the choice, and the chosen row is legible in either theme.
        box.fill("md")
        expect(options.nth(0)).to_have_attribute("aria-selected", "true")
        page.keyboard.press("ArrowDown")
        expect(options.nth(1)).to_have_attribute("aria-selected", "true")
        expect(options.nth(0)).to_have_attribute("aria-selected", "false")
        assert finder.locator("li[aria-selected=true] a").evaluate(CONTRAST) >= 4.5
        page.keyboard.press("ArrowUp")
        expect(options.nth(0)).to_have_attribute("aria-selected", "true")

        # Escape closes it; Enter opens the chosen file.
        page.keyboard.press("Escape")
        expect(finder).not_to_be_visible()
        page.keyboard.press("t")
        expect(finder).to_be_visible()
        box.fill("guide")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{base}/src/branch/main/docs/guide.md")

        # On a page of no ref, t finds in the home page's ref.
        page.goto(f"{base}/branches")
        page.keyboard.press("t")
        expect(finder).to_be_visible()
        box.fill("app")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{base}/src/branch/main/{FILE}")

        # y: the same page at its commit, the selected line kept.
        page.goto(f"{base}/src/branch/main/{FILE}#L2")
        page.keyboard.press("y")
        expect(page).to_have_url(f"{base}/src/commit/{main}/{FILE}#L2")
        page.wait_for_load_state()  # the new page's keys listened for before the next one

        # l: jump to a line.
        page.keyboard.press("l")
        line = page.locator("dialog.goto-line")
        expect(line).to_be_visible()
        line.get_by_label("Jump to line").fill("3")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{base}/src/commit/{main}/{FILE}#L3")
        expect(page.locator("tr#L3")).to_have_class("hl")

        # A selected line's permanent link, copied.
        page.locator("tr#L3 button.copy-line").click()
        expect(page.locator("tr#L3 button.copy-line")).to_have_text("Copied")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == f"{base}/src/commit/{main}/{FILE}#L3"

        # The file's path and contents, copied.
        page.goto(f"{base}/src/branch/main/{FILE}")
        copy_path, copy_contents = page.locator(".filebar button.copy").all()
        expect(copy_path).to_have_text("Copy path")
        copy_path.click()
        expect(copy_path).to_have_text("Copied")  # (its name changes: found by place)
        assert page.evaluate("navigator.clipboard.readText()") == FILE
        expect(copy_contents).to_have_text("Copy contents")
        copy_contents.click()
        expect(copy_contents).to_have_text("Copied")
        contents = git(repo, "show", f"main:{FILE}").decode()
        assert page.evaluate("navigator.clipboard.readText()") == contents

        # ?: the list of shortcuts; Escape closes it.
        page.keyboard.press("?")
        help_box = page.locator("dialog.shortcuts")
        expect(help_box).to_be_visible()
        expect(help_box.locator("dt")).to_have_text(["t", "/", "y", "b", "h", "l", "?", "Esc"])
        _no_horizontal_overflow(page)
        page.keyboard.press("Escape")
        expect(help_box).not_to_be_visible()

        # b and h: blame and history of the file.
        page.keyboard.press("b")
        expect(page).to_have_url(f"{base}/blame/branch/main/{FILE}")
        page.wait_for_load_state()
        page.keyboard.press("h")
        expect(page).to_have_url(f"{base}/commits/branch/main/{FILE}")

        # The clone URL, copied from the home page.
        page.goto(base)
        clone = page.get_by_label("Clone URL")
        page.locator(".clone button.copy").click()
        assert page.evaluate("navigator.clipboard.readText()") == clone.input_value()
        assert clone.input_value() == f"{site}/{DEMO}.git"
        _no_horizontal_overflow(page)

        # / focuses the page's search box; keys typed there are text, not shortcuts.
        page.goto(f"{base}/find/branch/main")
        page.keyboard.press("/")
        search = page.locator("form[role=search] input[name=q]").first
        expect(search).to_be_focused()
        page.keyboard.type("tby")
        expect(search).to_have_value("tby")
        expect(page.locator("dialog[open]")).to_have_count(0)
        expect(page).to_have_url(f"{base}/find/branch/main")

        # The finder's page of its own (what "Go to file" opens without script): ?q= filters.
        box = page.get_by_role("searchbox", name="Go to file")
        box.fill("guide")
        box.press("Enter")
        expect(page).to_have_url(f"{base}/find/branch/main?q=guide")
        expect(page.locator("ul.find-results a").first).to_have_text("docs/guide.md")
        _no_horizontal_overflow(page)

        # The ref switcher closes on Escape wherever the focus is, and on a click outside.
        page.goto(f"{base}/src/branch/main/{FILE}")
        switcher = page.locator("details.refswitch")
        switcher.locator("summary").click()
        expect(switcher).to_have_attribute("open", "")
        expect(switcher.locator(".refgroup a[aria-current]")).to_have_text("main")
        page.locator("footer.site").click()
        expect(switcher).not_to_have_attribute("open", "")
        switcher.locator("summary").click()
        expect(switcher).to_have_attribute("open", "")
        page.locator("footer.site").focus()
        page.evaluate("document.activeElement.blur()")
        page.keyboard.press("Escape")
        expect(switcher).not_to_have_attribute("open", "")
    finally:
        context.close()
    assert watcher.problems == [], "\n".join(watcher.problems)
