"""Who the client is and how it reached us, believing a reverse proxy only when it is trusted.

``X-Forwarded-For`` and ``X-Forwarded-Proto`` are headers anyone can send. They are read only
on a request whose peer is in ``trusted_proxies``; each proxy appends the address it was
reached from, so the client is the right-most address in ``X-Forwarded-For`` that is not
itself a trusted proxy (anything left of it could have been written by the client).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import falcon

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Networks from addresses or CIDRs (validated by the settings)."""
    return tuple(ipaddress.ip_network(v, strict=False) for v in values)


def parse_address(text: str) -> Address | None:
    """An address as a peer or a proxy writes it (``[::1]`` and IPv4-mapped IPv6 included)."""
    text = text.strip().removeprefix("[").removesuffix("]")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def within(text: str, nets: tuple[Network, ...]) -> bool:
    address = parse_address(text)
    return address is not None and any(address in net for net in nets)


class Proxies:
    def __init__(self, trusted: Iterable[str]) -> None:
        self.trusted = networks(trusted)

    def trusts(self, req: falcon.Request) -> bool:
        """The request's peer is one of the trusted proxies."""
        return bool(self.trusted) and within(req.remote_addr or "", self.trusted)

    def client_address(self, req: falcon.Request) -> str:
        """The address the request came from, as far as the trusted proxies vouch for it."""
        found = req.context.get("client_address")
        if isinstance(found, str):
            return found
        peer = req.remote_addr or ""
        address = peer
        if self.trusts(req):
            hops = [h.strip() for h in (req.get_header("X-Forwarded-For") or "").split(",")]
            hops = [h for h in hops if h]
            address = hops[0] if hops else peer  # every hop a trusted proxy: the first one
            for hop in reversed(hops):
                if not within(hop, self.trusted):
                    address = hop
                    break
        canonical = parse_address(address)
        address = str(canonical) if canonical is not None else address[:100]
        req.context.client_address = address
        return address

    def unvouched(self, req: falcon.Request) -> bool:
        """The request says it was forwarded for someone, by a proxy that is not trusted: the
        peer's address is the proxy's, not the client's."""
        forwarded = req.get_header("X-Forwarded-For") or req.get_header("Forwarded")
        return bool(forwarded) and not self.trusts(req)

    def scheme(self, req: falcon.Request) -> str:
        """``https`` or ``http``: how the client reached the first trusted proxy, or us."""
        if self.trusts(req):
            said = (req.get_header("X-Forwarded-Proto") or "").split(",")[-1].strip().lower()
            if said in ("http", "https"):
                return said
        return str(req.scheme)
