"""The slow-storage simulator needs FUSE: skip where it cannot mount, fail under CI."""

from __future__ import annotations

import os

import pytest

from bench import slowfs


def fuse_or_skip() -> None:
    reason = slowfs.fuse_available()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"FUSE is needed in CI: {reason} (scripts/install-bench-deps.sh)")
        pytest.skip(reason)
