"""Opening issues and signing people in through the web, for the issue tests."""

from __future__ import annotations

import re

from falcon import testing

from support.accounts import Browser


def person(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser


def open_issue(browser: Browser, repo: str, title: str, body: str = "") -> int:
    result = browser.post(f"/{repo}/issues/new", {"title": title, "body": body})
    assert result.status_code == 303, result.text[:500]
    found = re.fullmatch(rf"/{repo}/issues/(\d+)", result.headers["location"])
    assert found
    return int(found.group(1))
