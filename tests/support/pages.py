"""Reading a page's Server-Timing header."""

from __future__ import annotations

from falcon import testing


def server_timing(result: testing.Result) -> dict[str, float]:
    """The ``Server-Timing`` header as ``{name: dur}``."""
    header = result.headers["server-timing"]
    found: dict[str, float] = {}
    for item in header.split(","):
        name, *params = (p.strip() for p in item.split(";"))
        for param in params:
            if param.startswith("dur="):
                found[name] = float(param[4:])
    return found
