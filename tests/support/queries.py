"""Counting the database statements a page runs, warm."""

from __future__ import annotations

from falcon import testing

from support.accounts import Browser


def statements(result: testing.Result) -> int:
    for item in result.headers["server-timing"].split(","):
        name, *params = (p.strip() for p in item.split(";"))
        if name == "query":
            (dur,) = [p for p in params if p.startswith("dur=")]
            return int(dur[4:])
    raise AssertionError("no query count in Server-Timing")


def warm_counts(browser: Browser, url: str) -> int:
    for _ in range(2):  # the first renders and caches
        assert browser.get(url).status_code == 200, url
    counts = {statements(browser.get(url)) for _ in range(2)}
    assert len(counts) == 1, (url, counts)
    return counts.pop()
