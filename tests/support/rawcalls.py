"""Calling the WSGI app with exact path bytes, which the test client cannot send."""

from __future__ import annotations

import falcon
from falcon import testing


def _call(app: falcon.App, raw_path: bytes) -> tuple[str, dict[str, str], bytes]:
    """Call the WSGI app with exactly these path bytes (which the test client cannot send)."""
    environ = testing.create_environ()
    environ["PATH_INFO"] = raw_path.decode("latin-1")
    captured: dict[str, object] = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = status
        captured["headers"] = {k.lower(): v for k, v in headers}

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return captured["status"], captured["headers"], body  # type: ignore[return-value]
