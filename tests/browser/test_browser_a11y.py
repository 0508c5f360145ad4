"""Accessibility and phone layout, in a real headless Chromium: axe-core (from npm, installed
by ``scripts/install-test-deps.sh`` into ``.cache/axe``) runs inside each reading page, at a
desktop and a phone width, in the light and the dark theme, and must find no contrast and no
structural violation; at the phone width no element may be wider than the viewport.

The pages are those a reader meets first: explore and its search, code search (the site's
and a repository's), the file finder, a repository's home, a file, a commit, a blame, the
history, branches, tags and issues, and the 404 pages (inside a repository, and for none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import support.browser
from support.browser import DESKTOP, PHONE, STEP_TIMEOUT_MS, _unavailable
from support.gitfixtures import git_text

# the shared fixtures this module's tests ask for
browser = support.browser.browser
server = support.browser.server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
DEMO = "alice/demo"
# WCAG 2.0/2.1 A and AA, and axe's best practices (landmarks, headings, ...): everything axe
# checks but the experimental rules.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


def _axe_source() -> str:
    if not AXE.is_file():
        _unavailable("axe-core is not installed: run scripts/install-test-deps.sh")
    return AXE.read_text()


def _pages(fixture_root: Path) -> dict[str, str]:
    repo = fixture_root / f"{DEMO}.git"
    head = git_text(repo, "rev-parse", "main").strip()
    return {
        "explore": "/",
        "search": "/?q=demo",
        "code-search": "/-/search?q=greet",
        "repo-code-search": f"/{DEMO}/search?q=def",
        "finder": f"/{DEMO}/find/branch/main",
        "home": f"/{DEMO}",
        "file": f"/{DEMO}/src/branch/main/src/app.py",
        "commit": f"/{DEMO}/commit/{head}",
        "blame": f"/{DEMO}/blame/branch/main/src/app.py",
        "commits": f"/{DEMO}/commits/branch/main",
        "branches": f"/{DEMO}/branches",
        "tags": f"/{DEMO}/tags",
        "releases": f"/{DEMO}/releases",
        "issues": f"/{DEMO}/issues",
        "repo-404": f"/{DEMO}/src/branch/main/no/such/file",
        "404": "/nobody/nothing",
    }


def _violations(page, axe: str) -> list[str]:
    page.add_script_tag(content=axe)
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
        ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.slice(0, 4).map(n => n.target.join(' ') + ': '"
        " + n.failureSummary.split('\\n').slice(1).join(' '))})))",
        TAGS,
    )
    return [json.dumps(v) for v in result]


def _wider_than_viewport(page) -> list[str]:
    return page.evaluate(
        """() => {
            const width = document.documentElement.clientWidth;
            const out = [];
            if (document.documentElement.scrollWidth > width + 1)
                out.push('document ' + document.documentElement.scrollWidth);
            for (const e of document.querySelectorAll('body *')) {
                const box = e.getBoundingClientRect();
                if (box.width === 0) continue;
                let clipped = false;  // inside a scrolling box: it scrolls, the page does not
                for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
                    const o = getComputedStyle(p).overflowX;
                    if (o === 'auto' || o === 'scroll' || o === 'hidden') { clipped = true; break; }
                }
                if (!clipped && (box.right > width + 1 || box.left < -1))
                    out.push(e.tagName.toLowerCase() + '.' + e.className
                             + ' ' + Math.round(box.right));
            }
            return out.slice(0, 8);
        }"""
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_reading_pages_pass_axe(
    browser, server: str, fixture_root: Path, scheme: str, viewport: dict[str, int]
) -> None:
    axe = _axe_source()
    # bypass_csp: the forge's policy (rightly) refuses inline scripts, axe's included
    context = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    problems: dict[str, list[str]] = {}
    try:
        for name, path in _pages(fixture_root).items():
            response = page.goto(server + path)
            assert response is not None
            expected = 404 if name.endswith("404") else 200
            assert response.status == expected, (name, response.status)
            found = _violations(page, axe)
            if viewport is PHONE:
                found += [f"wider than the viewport: {e}" for e in _wider_than_viewport(page)]
            if found:
                problems[name] = found
    finally:
        context.close()
    assert not problems, json.dumps(problems, indent=1)
