"""Counting processes: an audit hook of the tests' own counts every process started while a
page is answered (independent of floorless's own counter)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from falcon import testing

SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.system", "os.fork"})


class _Spawns:
    """Audit hooks cannot be removed: one hook for the module, counting only while active,
    and only on the thread that activated it (the test client runs the app in that thread)."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.events: list[tuple[str, tuple]] = []

    def __call__(self, event: str, args: tuple) -> None:
        if event in SPAWN_EVENTS and self.thread == threading.get_ident():
            self.events.append((event, args))


_SPAWNS = _Spawns()
sys.addaudithook(_SPAWNS)  # once, when this module is first imported


@contextmanager
def counting() -> Iterator[list[tuple[str, tuple]]]:
    _SPAWNS.events = []
    _SPAWNS.thread = threading.get_ident()
    try:
        yield _SPAWNS.events
    finally:
        _SPAWNS.thread = None


def spawn_timing(result: testing.Result) -> int:
    for item in result.headers["server-timing"].split(","):
        name, *params = (p.strip() for p in item.split(";"))
        if name == "spawn":
            for param in params:
                if param.startswith("dur="):
                    return int(float(param[4:]))
    raise AssertionError("no spawn in Server-Timing")


def get(client: testing.TestClient, url: str, **kwargs) -> tuple[testing.Result, int]:
    with counting() as events:
        result = client.simulate_get(url, **kwargs)
    assert result.status_code in (200, 206, 304), (url, result.status_code, result.text[:300])
    return result, len(events)
