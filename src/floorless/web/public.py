"""The forge's public address as a request sees it: what every absolute link a page, an API
answer or a feed writes begins with. Beside the views and the API's resources, which both
use it, so that neither imports the other."""

from __future__ import annotations

import re

import falcon

from floorless.core.config import Settings

# A DNS name or an IPv4/IPv6 address, with an optional port: nothing that could break out of
# a URL or an attribute.
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def public_url(settings: Settings, req: falcon.Request) -> str:
    """The forge's public base URL (no trailing slash): ``base_url`` when set, else the
    request's host when it is a well-formed host name, else the listening address."""
    if settings.base_url:
        return settings.base_url.rstrip("/")
    if _HOST.fullmatch(req.netloc):
        return f"{req.scheme}://{req.netloc}"
    return f"{req.scheme}://{settings.host}:{settings.port}"
