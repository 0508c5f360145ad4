"""A git file cut short under libgit2's mapping is an error, not the end of the process; any
other SIGBUS still is. Each case runs in a process of its own, the one that may die."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.forges import patience

from floorless.git import sigbus

pytestmark = pytest.mark.skipif(not sigbus.supported(), reason="Linux on x86-64 or AArch64")

# Builds a bare repository whose one pack holds a 2 MB blob past a 1 MB one (blobs are packed
# by name), opens it, maps the pack by reading the tree, then cuts the pack to 12 bytes (its
# header) and reads the far blob, in a thread, from the part of the mapping now gone.
SCRIPT = """
import os, subprocess, sys, threading
import pygit2
from floorless.git import sigbus

root, guarded = sys.argv[1], sys.argv[2] == "1"
work, bare = os.path.join(root, "work"), os.path.join(root, "bare.git")
env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org",
       "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"}
subprocess.run(["git", "init", "-q", "-b", "main", work], check=True)
with open(os.path.join(work, "a.bin"), "wb") as fh:
    fh.write(os.urandom(1 << 20))
with open(os.path.join(work, "z.bin"), "wb") as fh:
    fh.write(os.urandom(2 << 20))
subprocess.run(["git", "-C", work, "add", "."], check=True, env=env)
subprocess.run(["git", "-C", work, "commit", "-qm", "two"], check=True, env=env)
subprocess.run(["git", "clone", "-q", "--bare", "--no-local", work, bare], check=True)
if guarded:
    assert sigbus.guard() and sigbus.guard()  # once; the second call changes nothing
repo = pygit2.Repository(bare)
tree = repo.revparse_single("main").peel(pygit2.Tree)
far = tree["z.bin"].id
packs = os.path.join(bare, "objects", "pack")
(name,) = [n for n in os.listdir(packs) if n.endswith(".pack")]
os.truncate(os.path.join(packs, name), 12)
outcome = []

def read():
    try:
        outcome.append(len(repo[far].data))
    except (pygit2.GitError, KeyError, ValueError) as exc:
        outcome.append(type(exc).__name__)

thread = threading.Thread(target=read)
thread.start()
thread.join()
print(outcome[0], sigbus.faults(), sigbus.news() != [], sigbus.news())
"""


def run(tmp_path: Path, guarded: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path), str(int(guarded))],
        capture_output=True,
        text=True,
        timeout=patience(120),
        check=False,
    )


def test_without_the_guard_a_pack_cut_short_ends_the_process(tmp_path: Path) -> None:
    done = run(tmp_path, guarded=False)
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stderr)


def test_with_it_a_pack_cut_short_is_an_error_for_the_read_alone(tmp_path: Path) -> None:
    done = run(tmp_path, guarded=True)
    assert done.returncode == 0, done.stderr
    outcome, faults, told, again = done.stdout.split(maxsplit=3)
    assert outcome in ("GitError", "KeyError", "ValueError")  # never the blob's bytes
    assert int(faults) >= 1 and told == "True" and again.strip() == "[]"  # told once


def test_any_other_sigbus_still_ends_the_process(tmp_path: Path) -> None:
    """A file that is no git object store's, mapped and cut short: the handler gives the
    fault back to the default action."""
    script = """
        import mmap, os, sys
        from floorless.git import sigbus
        assert sigbus.guard()
        path = sys.argv[1]
        with open(path, "wb") as fh:
            fh.write(b"x" * (4 * mmap.PAGESIZE))
        with open(path, "r+b") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            os.truncate(path, 1)
            print(mapped[3 * mmap.PAGESIZE])
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path / "plain.bin")],
        capture_output=True,
        text=True,
        timeout=patience(60),
        check=False,
    )
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr)
