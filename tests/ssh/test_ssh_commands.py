"""The command an SSH client asks for: git's two services on ``owner/name``, as git and the
tools people use write it, and nothing else."""

from __future__ import annotations

import pytest

from floorless.core.errors import BadRequest
from floorless.ssh.commands import Command, parse

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("git-upload-pack 'alice/pub.git'", Command("git-upload-pack", "alice", "pub")),
        ("git-upload-pack '/alice/pub.git'", Command("git-upload-pack", "alice", "pub")),
        ("git-receive-pack 'alice/pub'", Command("git-receive-pack", "alice", "pub")),
        ("git upload-pack 'alice/pub.git'", Command("git-upload-pack", "alice", "pub")),
        ("git-upload-pack '~/alice/pub.git'", Command("git-upload-pack", "alice", "pub")),
        ("git-upload-pack alice/pub.git/", Command("git-upload-pack", "alice", "pub")),
        ('git-receive-pack "team/a.b-c_d.git"', Command("git-receive-pack", "team", "a.b-c_d")),
        # as git lfs asks, over SSH, where the repository's LFS endpoint is
        (
            "git-lfs-authenticate /alice/pub.git upload",
            Command("git-lfs-authenticate", "alice", "pub", "upload"),
        ),
        (
            "git-lfs-authenticate 'alice/pub.git' download",
            Command("git-lfs-authenticate", "alice", "pub", "download"),
        ),
    ],
)
def test_what_git_sends(text: str, expected: Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ls",
        "git-upload-archive 'alice/pub.git'",
        "git-lfs-authenticate alice/pub.git delete",
        "git-lfs-authenticate alice/pub.git",
        "git-lfs-authenticate '../x.git' upload",
        "git-lfs-transfer alice/pub.git upload",  # the pure SSH protocol: git lfs falls back
        "git-upload-pack",
        "git-upload-pack 'alice/pub.git' extra",
        "git-upload-pack 'alice/pub.git",  # an unclosed quote
        "git-upload-pack '../etc/passwd'",
        "git-upload-pack 'alice/../bob/x.git'",
        "git-upload-pack 'alice/./x.git'",
        "git-upload-pack 'alice'",
        "git-upload-pack 'a/b/c.git'",
        "git-upload-pack 'alice//pub.git'",
        "git-upload-pack 'alice/my repo.git'",
        'git-upload-pack "alice/pub\'.git"',
        "git-upload-pack 'alice/pub\\.git'",
        "git-upload-pack 'alice/.git'",
        "git-upload-pack 'alice/pub.git'\0",
        "git-upload-pack 'alice/pub.git'\nrm -rf /",
        "git-upload-pack '" + "a" * 5000 + "/x.git'",
    ],
)
def test_anything_else_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse(text)
    assert str(refused.value)
