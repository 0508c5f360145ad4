"""Where a webhook may be sent: ``webhook_allowed_hosts`` (Forgejo's ``ALLOWED_HOST_LIST``)
applied to every address a receiver's name resolves to, and connections made to the address
that was checked, never by a second lookup (so a name that changes its answer in between,
DNS rebinding, reaches nothing that was not allowed).

An IPv6 transition address (IPv4-mapped, NAT64, 6to4, Teredo...) is judged as the IPv4
address it reaches.
"""

from __future__ import annotations

import fnmatch
import http.client
import ipaddress
import socket
import ssl
from collections.abc import Sequence
from typing import Any

from floorless.core.errors import FloorlessError

_SPECIAL = ("loopback", "private", "external", "*")
_PRIVATE = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


# IPv6 prefixes whose last 32 bits are the IPv4 address a packet ends up at: IPv4-mapped
# (``::ffff:a.b.c.d``), IPv4-translated (SIIT, ``::ffff:0:a.b.c.d``), NAT64's well-known
# prefix (``64:ff9b::a.b.c.d``) and the deprecated IPv4-compatible form (``::a.b.c.d``).
_EMBEDDING = tuple(
    ipaddress.IPv6Network(n) for n in ("::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "::/96")
)
# NAT64's local-use prefix (RFC 8215): where in it the IPv4 address sits is the network's
# choice, so nothing here can say which one is meant.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_UNKNOWN = ipaddress.IPv4Address("240.0.0.0")  # reserved: allowed by nothing but "*"


def _plain(address: Address) -> Address:
    """The IPv4 address an IPv6 transition address reaches, which is what it is to a guard:
    ``::ffff:127.0.0.1``, ``::ffff:0:7f00:1``, ``64:ff9b::7f00:1``, ``::7f00:1``, 6to4's
    ``2002:7f00:1::1`` and Teredo's client (``2001::/32``, stored inverted) are 127.0.0.1.
    ``::`` and ``::1`` stay themselves; an address of NAT64's local-use prefix is reserved."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address in (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1")):
        return address
    if any(address in net for net in _EMBEDDING):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _LOCAL_NAT64:
        return _UNKNOWN
    return address


def kind_of(address: Address) -> str:
    """What an address is, in the words a refusal uses."""
    address = _plain(address)
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if any(address in net for net in _PRIVATE if net.version == address.version):
        return "private"
    if address.is_global:
        return "external"
    return "reserved"


class HostRules:
    """``webhook_allowed_hosts``, as Forgejo's ``ALLOWED_HOST_LIST`` reads it: a host is
    allowed when its name matches a name pattern, or each of its addresses is allowed (by a
    keyword for its kind, an address or a network)."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.keywords = {e.lower() for e in entries if e.lower() in _SPECIAL}
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self.names: list[str] = []
        for entry in entries:
            if entry.lower() in _SPECIAL:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.append(entry.lower())

    def name_allowed(self, host: str) -> bool:
        return any(fnmatch.fnmatchcase(host.lower(), p) for p in self.names)

    def address_allowed(self, address: Address) -> bool:
        if "*" in self.keywords:
            return True
        plain = _plain(address)  # a network listed matches either form of the address
        for each in {address, plain}:
            if any(each in net for net in self.networks if net.version == each.version):
                return True
        return kind_of(plain) in self.keywords


class Refused(FloorlessError):
    """The receiver's host is not one webhooks may be sent to."""


def resolve(rules: HostRules, host: str, port: int) -> list[tuple[Any, ...]]:
    """The addresses to connect to for ``host``: each checked; any refused refuses all."""
    try:
        literal: Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Refused(f"cannot resolve {host}: {exc}") from exc
    if not infos:
        raise Refused(f"{host} has no address")
    if literal is None and rules.name_allowed(host):
        return infos
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not rules.address_allowed(address):
            said = host if literal is not None else f"{host} resolves to {address}, which"
            raise Refused(
                f"refused: {said} is a {kind_of(address)} address, not allowed by"
                " webhook_allowed_hosts"
            )
    return infos


class Connection(http.client.HTTPConnection):
    """An HTTP connection to an address already checked, whatever the name resolves to now."""

    def __init__(self, host: str, port: int, address: tuple[Any, ...], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        family, kind, proto, _, where = self.address
        sock = socket.socket(family, kind, proto)
        sock.settimeout(self.timeout)
        try:
            sock.connect(where)
        except BaseException:
            sock.close()
            raise
        self.sock = self.wrap(sock)

    def wrap(self, sock: socket.socket) -> socket.socket:
        return sock


class TLSConnection(Connection):
    context = ssl.create_default_context()

    def wrap(self, sock: socket.socket) -> socket.socket:
        return self.context.wrap_socket(sock, server_hostname=self.host)
