"""A small HTTP client for timing pages: one kept-alive connection per host, bodies read in
full, every failure a ``DiagnosisError`` with a sentence a person can act on."""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin, urlsplit

from floorless import __version__
from floorless.core.errors import DiagnosisError

MAX_REDIRECTS = 5
MAX_BODY = 64 * 1024 * 1024
USER_AGENT = f"floorless-probe/{__version__}"


@dataclass
class Response:
    url: str
    status: int
    headers: Message
    body: bytes
    seconds: float  # request sent to last body byte read

    def header_values(self, name: str) -> list[str]:
        return list(self.headers.get_all(name) or [])

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def check_url(url: str) -> str:
    """The URL if it is an absolute http(s) URL with a host; otherwise a clear error."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DiagnosisError(f"{url!r} is not an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 (validates the port)
    except ValueError:
        raise DiagnosisError(f"{url!r}: the port is not a number from 0 to 65535") from None
    return url


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the forge running, on this host and port?)"
    if isinstance(exc, socket.gaierror):
        return f"host name not found ({exc.strerror or exc})"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, http.client.HTTPException):
        return f"not an HTTP answer ({type(exc).__name__}: {exc})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


class Client:
    """Sequential GETs; a connection is reused while the server keeps it open."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._connections: dict[tuple[str, str, int], http.client.HTTPConnection] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connection(self, scheme: str, host: str, port: int) -> http.client.HTTPConnection:
        key = (scheme, host, port)
        connection = self._connections.get(key)
        if connection is None:
            if scheme == "https":
                connection = http.client.HTTPSConnection(host, port, timeout=self.timeout)
            else:
                connection = http.client.HTTPConnection(host, port, timeout=self.timeout)
            self._connections[key] = connection
        return connection

    def _drop(self, key: tuple[str, str, int]) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            connection.close()

    def get(self, url: str) -> Response:
        """One GET, timed; a kept-alive connection the server closed meanwhile is retried once."""
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        key = (scheme, host, port)
        headers = {"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": "identity"}
        for attempt in (1, 2):
            reused = key in self._connections
            connection = self._connection(scheme, host, port)
            began = time.perf_counter()
            try:
                connection.request("GET", target, headers=headers)
                answer = connection.getresponse()
                body = answer.read(MAX_BODY)
                seconds = time.perf_counter() - began
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop(key)
                if reused and attempt == 1:
                    continue
                raise DiagnosisError(f"GET {url}: {_describe(exc)}") from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop(key)
                raise DiagnosisError(f"GET {url}: {_describe(exc)}") from None
            if answer.will_close:
                self._drop(key)
            return Response(url, answer.status, answer.headers, body, seconds)
        raise AssertionError("unreachable")  # pragma: no cover

    def follow(self, url: str) -> Response:
        """GET, following redirects (at most ``MAX_REDIRECTS``)."""
        for _ in range(MAX_REDIRECTS + 1):
            response = self.get(url)
            location = response.headers.get("Location")
            if response.status not in (301, 302, 303, 307, 308) or not location:
                return response
            url = check_url(urljoin(url, location))
        raise DiagnosisError(f"GET {url}: more than {MAX_REDIRECTS} redirects")
