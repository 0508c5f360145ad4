"""Jinja2 templates and the small formatting helpers pages share."""

from __future__ import annotations

import re
from collections.abc import Hashable
from datetime import UTC, datetime
from typing import Any

import jinja2

from floorless.core import dates, timing
from floorless.core.caches import Cache, approximate_size
from floorless.core.config import Settings
from floorless.forgejo import urls
from floorless.web import auth, marks
from floorless.web.languages import Languages
from floorless.web.pages import PageCache


def text(value: bytes | str | None) -> str:
    """A name for display: exact when UTF-8, with replacement characters otherwise."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xmlsafe(value: str) -> str:
    """Text without the control characters XML 1.0 forbids (commit messages may hold them)."""
    return _XML_INVALID.sub("\ufffd", value)


def reltime(when: datetime | float | None, now: datetime | None = None) -> str:
    if when is None:
        return "never"
    now = now or datetime.now(UTC)
    seconds = int((now - dates.to_datetime(when)).total_seconds())
    if seconds < 0:
        return "in the future"
    for unit, size in (
        ("year", 31_536_000),
        ("month", 2_592_000),
        ("week", 604_800),
        ("day", 86_400),
        ("hour", 3600),
        ("minute", 60),
    ):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


def isotime(when: datetime | float | None) -> str:
    if when is None:
        return ""
    return dates.to_datetime(when).isoformat()


def exact(when: datetime | float | None) -> str:
    """The exact date and time of a relative one, shown on hover (``<time title>``)."""
    if when is None:
        return ""
    return dates.display(dates.to_datetime(when))


def filesize(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _fragment_caches(size_bytes: int) -> dict[str, Cache[Hashable, object]]:
    """Highlighted files and blames, READMEs, commit diffs, the Markdown of issues and pull
    requests (by a digest of its text and what its relative links resolve against), the
    file finder's path lists (by tree id): ``size_bytes`` each."""
    return {
        name: Cache.lru(size_bytes, getsizeof=approximate_size)
        for name in ("highlight", "readme", "diff", "markdown", "paths")
    }


class Renderer:
    def __init__(self, site_name: str) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("floorless.web", "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
            undefined=jinja2.StrictUndefined,
            # templates ship with the code: no stat of each template file on every page
            # (and no new template paired with old code when files change under a server)
            auto_reload=False,
        )
        self.env.filters.update(
            text=text,
            xmlsafe=xmlsafe,
            reltime=reltime,
            isotime=isotime,
            exact=exact,
            stamp=dates.display,
            rfc2822=dates.rfc2822,
            filesize=filesize,
        )
        self.env.globals["site_name"] = site_name
        self.env.globals["urls"] = urls  # every link a template writes comes from here
        self.env.globals["symbols"] = marks.SYMBOLS  # of commit statuses (_status.html)
        # Rendered fragments keyed by object ids: they never need invalidating. None keeps
        # anything until create_app sizes them from the settings (configure).
        self.caches = _fragment_caches(0)
        self.languages = Languages()  # the home page's language bars, by tree id
        self.pages = PageCache(0, 0.0)

    def configure(self, settings: Settings) -> None:
        """Make the caches anew, sized from ``settings``."""
        self.caches = _fragment_caches(settings.render_cache_bytes)
        self.pages = PageCache(settings.page_cache_bytes, settings.page_cache_seconds)

    def page(self, template: str, **context: Any) -> str:
        requester = auth.current()
        context.setdefault("viewer", requester.viewer)
        context.setdefault("csrf", requester.csrf)
        with timing.phase("render"):
            return self.env.get_template(template).render(**context)
