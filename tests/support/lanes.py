"""The unit lane's promise, kept: a test marked ``unit`` starts no forge and no process.

The unit lane (``./check --unit``, ``pytest -m unit``) is the one a developer runs after every
edit, so it must stay quick whatever is added to it; a forge start (a migrated database and
its threads) or a process (git, a server) is what makes a test slow, so a unit test that
starts one fails at once instead of slowing the lane down unnoticed. The guard covers the
test's set-up (its fixtures, however wide their scope) and its call, not its tear-down, where
pytest ends fixtures that earlier, non-unit tests started.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from floorless.forge import Forge

MARKER = "unit"
# what starting a process looks like to an audit hook (subprocess, os.system, fork and exec)
_SPAWNS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork"}
)


class UnitLaneError(AssertionError):
    """A unit test started a forge or a process: it belongs in another lane."""


class _Guard:
    def __init__(self) -> None:
        self.test: str | None = None  # the unit test being set up or run, if any
        self.thread = 0  # the thread it runs in: others (a session forge's) may spawn

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.test is not None and event in _SPAWNS and threading.get_ident() == self.thread:
            raise UnitLaneError(f"{self.test}: a unit test started a process ({event})")


GUARD = _Guard()
sys.addaudithook(GUARD.audit)  # an audit hook cannot be removed: it checks GUARD.test


def _refuse_start(forge: Forge) -> None:
    raise UnitLaneError(f"{GUARD.test}: a unit test started a forge")


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker(MARKER) is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Forge, "start", _refuse_start)
        GUARD.test, GUARD.thread = item.nodeid, threading.get_ident()
        try:
            yield
        finally:
            GUARD.test = None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(item):
        return (yield)
