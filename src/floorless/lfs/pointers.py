"""Git LFS pointer files: the few lines git keeps in place of a file LFS tracks.

A pointer is ``version https://git-lfs.github.com/spec/v1``, then ``oid sha256:<64 hex>`` and
``size <bytes>``, keys sorted, one per line, under 1024 bytes in all (the specification's
``docs/spec.md``). A blob that is anything else is an ordinary file, whatever it resembles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_POINTER = 1024  # bytes: a larger blob is never a pointer
_VERSION = b"version https://git-lfs.github.com/spec/v1\n"
_LEGACY = b"version https://hawser.github.com/spec/v1\n"
_POINTER = re.compile(
    rb"(?:ext-[0-9]-[a-z0-9-]+ sha256:[0-9a-f]{64}\n)*"
    rb"oid sha256:(?P<oid>[0-9a-f]{64})\n"
    rb"size (?P<size>0|[1-9][0-9]{0,17})\n\Z"
)


@dataclass(frozen=True)
class Pointer:
    oid: str
    size: int

    def text(self) -> bytes:
        return _VERSION + f"oid sha256:{self.oid}\nsize {self.size}\n".encode()


def parse(data: bytes) -> Pointer | None:
    """The pointer ``data`` is, or None when it is an ordinary file."""
    if len(data) >= MAX_POINTER or not data.startswith((_VERSION, _LEGACY)):
        return None
    found = _POINTER.match(data, len(_VERSION) if data.startswith(_VERSION) else len(_LEGACY))
    if found is None:
        return None
    return Pointer(found["oid"].decode(), int(found["size"]))
