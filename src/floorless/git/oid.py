"""What an object id is: whatever git accepts, SHA-1 (40 hex digits, 20 bytes) or SHA-256
(64 hex digits, 32 bytes), and an abbreviation of either from 4 hex digits up.

The one place that knows the lengths: URLs, cursors, ``git blame`` output and protocol
requests all recognise ids through these functions, so a SHA-256 repository's ids are never
refused for their length.
"""

from __future__ import annotations

import re

RAW_LENGTHS = (20, 32)
MIN_ABBREVIATION = 4

_FULL = re.compile(r"[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?")
_ABBREVIATED = re.compile(rf"[0-9a-fA-F]{{{MIN_ABBREVIATION},64}}")


def _text(value: str | bytes) -> str | None:
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return value


def is_full(value: str | bytes) -> bool:
    """Whether ``value`` is a whole object id in hex (either case), of either hash."""
    text = _text(value)
    return text is not None and _FULL.fullmatch(text) is not None


def is_abbreviation(value: str | bytes) -> bool:
    """Whether ``value`` could name an object as git's ``rev-parse`` would take it: 4 to 64
    hex digits (a whole id is an abbreviation of itself)."""
    text = _text(value)
    return text is not None and _ABBREVIATED.fullmatch(text) is not None


def is_raw(value: bytes) -> bool:
    """Whether ``value`` has the length of a binary object id of either hash."""
    return len(value) in RAW_LENGTHS


def parse_full(value: str | bytes) -> bytes | None:
    """The binary id that the hex ``value`` spells, or None when it is not a whole id."""
    text = _text(value)
    if text is None or not is_full(text):
        return None
    return bytes.fromhex(text)


def parse_list(value: str, limit: int) -> list[bytes] | None:
    """A comma-separated list of at most ``limit`` whole ids ("" is none), or None when any
    part is not one."""
    parts = value.split(",") if value else []
    if len(parts) > limit:
        return None
    found = []
    for part in parts:
        oid = parse_full(part)
        if oid is None:
            return None
        found.append(oid)
    return found
