"""A push's answer, made by floorless from git's: the same for a hidden object as for none.

``git receive-pack`` checks that what a push points at exists; floorless's hook then checks
that the pusher may reach it (``pushgate.py``). Left to itself, git would answer the two
refusals differently: a missing object is ``missing necessary objects`` with git's own
``fatal: bad object`` line on the side band, a hidden one a hook's refusal. So git is asked
without the side band (its messages go to the server's log, not to the client), and its
report is rewritten here: each update the hook refused for its objects reads exactly as
git's own refusal of a missing object, a pack whose thin bases the pusher may not use reads
as a pack git could not complete, and the hooks' messages for the pusher (a pull request's
address, why a protected branch refused) go on the side band the client asked for.

The request's first pkt-lines are its updates (``old new ref``, the first with the client's
capabilities after a NUL), then a flush, then the push options and a flush when the client
asked for them, then the pack, whose 12-byte header says how many objects it holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from floorless.core.errors import BadRequest

SIDE_BANDS = (b"side-band-64k", b"side-band")
MAX_PREFIX = 64 << 20  # bytes of updates and options before the pack
MAX_UPDATES = 10_000  # refs one push may update (git.git has about 1,000)
FLUSH = b"0000"


def pkt(payload: bytes) -> bytes:
    return b"%04x" % (len(payload) + 4) + payload


@dataclass
class Request:
    """The start of a push's body: its updates, the client's capabilities, the number of
    objects its pack announces (None without a pack), and the body as git is to read it
    (the side band removed from the capabilities), the rest of the body after it."""

    updates: list[tuple[str, str, str]] = field(default_factory=list)
    capabilities: list[bytes] = field(default_factory=list)
    pack_count: int | None = None
    head: bytes = b""
    rest: Iterator[bytes] = field(default_factory=lambda: iter(()))

    @property
    def side_band(self) -> bytes | None:
        return next((c for c in SIDE_BANDS if c in self.capabilities), None)


def read_request(body: Iterator[bytes]) -> Request:
    """Read the updates, options and the pack's header from ``body``; BadRequest when they
    are malformed."""
    reader = _Reader(body)
    found = Request()
    if reader.empty():
        found.rest = iter(())
        return found  # an empty body: git answers it
    section = reader.section()
    head = bytearray()
    for payload in section:
        line, nul, caps = payload.rstrip(b"\n").partition(b"\0")
        if line.startswith(b"shallow "):
            head += pkt(payload)
            continue
        if not found.updates and nul:
            found.capabilities = caps.split()
            kept = b" ".join(c for c in found.capabilities if c not in SIDE_BANDS)
            payload = line + b"\0" + kept + b"\n"
        elif nul:  # capabilities belong to the first update alone: git would read them
            payload = line + b"\n"
        try:
            parts = line.decode("utf-8").split(" ", 2)
        except UnicodeDecodeError as exc:
            raise BadRequest("a ref name pushed through floorless must be UTF-8") from exc
        if len(parts) != 3:
            raise BadRequest("git refused the request: a push's update is not 'old new ref'")
        found.updates.append((parts[0], parts[1], parts[2]))
        if len(found.updates) > MAX_UPDATES:
            raise BadRequest(f"a push updates at most {MAX_UPDATES} refs: push them in parts")
        head += pkt(payload)
    head += FLUSH
    if found.updates and b"push-options" in found.capabilities:
        for option in reader.section():
            head += pkt(option)
        head += FLUSH
    found.pack_count = reader.pack_count()
    found.head = bytes(head)
    found.rest = _chain(reader.left(), body)
    return found


class _Reader:
    """pkt-lines read from a body as they arrive."""

    def __init__(self, body: Iterator[bytes]) -> None:
        self.body = body
        self.buffer = bytearray()
        self.at = 0

    def need(self, size: int) -> bool:
        while len(self.buffer) < self.at + size:
            piece = next(self.body, None)
            if piece is None:
                return False
            self.buffer.extend(piece)
            if len(self.buffer) > MAX_PREFIX:
                raise BadRequest("malformed git request: the push commands never end")
        return True

    def empty(self) -> bool:
        return not self.need(1)

    def section(self) -> list[bytes]:
        """The payloads up to the next flush."""
        found: list[bytes] = []
        while True:
            if not self.need(4):
                raise BadRequest("malformed git request: the push commands never end")
            size = section_length(bytes(self.buffer[self.at : self.at + 4]))
            if size == 0:
                self.at += 4
                return found
            if not self.need(size):
                raise BadRequest("malformed git request: the push commands never end")
            found.append(bytes(self.buffer[self.at + 4 : self.at + size]))
            self.at += size

    def pack_count(self) -> int | None:
        if self.need(12) and self.buffer[self.at : self.at + 4] == b"PACK":
            return int.from_bytes(self.buffer[self.at + 8 : self.at + 12], "big")
        return None

    def left(self) -> bytes:
        return bytes(self.buffer[self.at :])


def section_length(raw: bytes) -> int:
    """The length a pkt-line of a push's commands or options announces in its 4 bytes: 0
    for the flush that ends the section; BadRequest for anything else not a data line."""
    if len(raw) != 4 or raw.strip(b"0123456789abcdefABCDEF"):  # (int() takes " +1_")
        raise BadRequest("malformed git request: bad pkt-line length")
    size = int(raw, 16)
    if size != 0 and not 5 <= size <= 65520:
        raise BadRequest(f"malformed git request: pkt-line length {size}")
    return size


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def parse_report(data: bytes) -> list[bytes]:
    """git's report (pkt-lines up to a flush) as its lines, without their newlines."""
    lines = []
    at = 0
    while at + 4 <= len(data):
        try:
            size = int(data[at : at + 4], 16)
        except ValueError:
            break
        if size == 0:
            break
        if size < 4 or at + size > len(data):
            break
        lines.append(data[at + 4 : at + size].rstrip(b"\n"))
        at += size
    return lines


def rewrite(
    lines: Sequence[bytes],
    refusals: dict[str, str],
    unusable_pack: bool,
    refs: Sequence[str],
) -> list[bytes]:
    """git's report with floorless's refusals in it: each refused ref's line reads ``ng REF
    REASON`` (its ``option`` lines dropped); with ``unusable_pack``, the report git gives
    for a pack it cannot complete, for every ref of the push."""
    if unusable_pack:
        return [b"unpack index-pack abnormal exit"] + [
            b"ng " + ref.encode() + b" unpacker error" for ref in refs
        ]
    out: list[bytes] = []
    skipping = False
    for line in lines:
        if line.startswith(b"option "):
            if not skipping:
                out.append(line)
            continue
        skipping = False
        if line.startswith((b"ok ", b"ng ")):
            ref = line[3:].split(b" ", 1)[0].decode("utf-8", "replace")
            if ref in refusals:
                out.append(b"ng " + line[3:].split(b" ", 1)[0] + b" " + refusals[ref].encode())
                skipping = True
                continue
        out.append(line)
    return out


def answer(lines: Sequence[bytes], messages: Sequence[str], side_band: bytes | None) -> bytes:
    """The answer to send: the report's pkt-lines, on band 1 with ``messages`` on band 2
    before it when the client asked for a side band."""
    report = b"".join(pkt(line + b"\n") for line in lines) + FLUSH if lines else b""
    if side_band is None:
        return report
    size = 65515 if side_band == b"side-band-64k" else 995
    out = bytearray()
    text = "".join(m.rstrip("\n") + "\n" for m in messages).encode("utf-8", "replace")
    for start in range(0, len(text), size):
        out += pkt(b"\x02" + text[start : start + size])
    for start in range(0, len(report), size):
        out += pkt(b"\x01" + report[start : start + size])
    return bytes(out + FLUSH)
