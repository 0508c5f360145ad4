"""The real ``git lfs`` client as the tests run it: git's LFS filter configured on each command
line, never in a global file the tests (or the machine's user) share."""

from __future__ import annotations

import shutil

import pytest

FILTER = [
    "-c", "filter.lfs.clean=git-lfs clean -- %f",
    "-c", "filter.lfs.smudge=git-lfs smudge -- %f",
    "-c", "filter.lfs.process=git-lfs filter-process",
    "-c", "filter.lfs.required=true",
]  # fmt: skip

needs_git_lfs = pytest.mark.skipif(
    shutil.which("git-lfs") is None, reason="git-lfs is not installed"
)
