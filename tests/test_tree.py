"""The repository tracks code and documentation, never runtime data: no database, no key, no
token, no data directory (a forge's secret key in git signs anyone's session cookie)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# names runtime data goes by: floorless's own and what a data directory holds
RUNTIME = re.compile(
    r"(^|/)(secret\.key|[^/]*\.sqlite3(-wal|-shm|-journal)?|[^/]*\.db|[^/]*\.pem|[^/]*\.token"
    r"|floorless-data/.*|srv/.*|run/home/.*)$"
)
# what a key or token looks like inside a file: floorless's tokens, PEM keys
SECRET_TEXT = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----|\bflt_[A-Za-z0-9_-]{40,}")


def tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return [name for name in out.decode("utf-8", "surrogateescape").split("\0") if name]


def test_no_runtime_data_is_tracked() -> None:
    assert [name for name in tracked() if RUNTIME.search(name)] == []


def test_no_tracked_file_holds_a_key_or_token() -> None:
    found = []
    for name in tracked():
        path = ROOT / name
        small = path.is_file() and path.stat().st_size < 5_000_000
        if small and SECRET_TEXT.search(path.read_bytes()):
            found.append(name)
    assert found == []


def test_the_patterns_catch_what_they_are_for() -> None:
    for name in ("srv/data/secret.key", "floorless.sqlite3", "data/floorless.sqlite3-wal",
                 "floorless-data/run/home/gitconfig", "x/secret.key"):  # fmt: skip
        assert RUNTIME.search(name), name
    for name in ("src/floorless/db/schema.py", "docs/configuration.md", "tests/test_tree.py"):
        assert not RUNTIME.search(name), name
    dashes = b"-" * 5  # spelled apart, so this file does not hold what it looks for
    assert SECRET_TEXT.search(dashes + b"BEGIN OPENSSH PRIVATE KEY" + dashes)
    assert SECRET_TEXT.search(b"flt_" + b"x" * 43)


# Subjects stay under 72 characters in the commits after this one; earlier history is as it
# was written (the package's split into domain folders ran to 85, two commits after it to 73
# and 75).
SUBJECTS_SINCE = "5abfe77"


def test_commit_subjects_are_under_72_characters() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", SUBJECTS_SINCE + "^{commit}"],
        capture_output=True,
    )
    if known.returncode != 0:
        pytest.skip("a shallow clone: the history the rule starts from is not here")
    subjects = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--format=%s", f"{SUBJECTS_SINCE}^..HEAD"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.splitlines()
    assert len(subjects[-1]) >= 72, "the range starts at the last subject that ran over"
    assert [s for s in subjects[:-1] if len(s) >= 72] == []
