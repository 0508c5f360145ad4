"""The command an SSH client asks to run: ``git-upload-pack 'owner/name.git'`` (clone and
fetch) or ``git-receive-pack 'owner/name.git'`` (push), as git writes it, or
``git-lfs-authenticate owner/name.git download|upload``, as ``git lfs`` asks where a
repository's LFS endpoint is and with what header to reach it. Nothing else runs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from floorless.core.errors import BadRequest

SERVICES = {
    "git-upload-pack": "git-upload-pack",
    "git-receive-pack": "git-receive-pack",
    "git upload-pack": "git-upload-pack",
    "git receive-pack": "git-receive-pack",
}
LFS_AUTHENTICATE = "git-lfs-authenticate"
LFS_OPERATIONS = ("download", "upload")
MAX_COMMAND = 4096
ONLY = (
    "floorless serves git over SSH and nothing else: clone, fetch and push"
    " (git-upload-pack, git-receive-pack)"
)


@dataclass(frozen=True)
class Command:
    service: str  # "git-upload-pack", "git-receive-pack" or "git-lfs-authenticate"
    owner: str
    name: str  # without ".git"
    operation: str = ""  # git-lfs-authenticate's: download or upload


def parse(text: str) -> Command:
    """The service and repository ``text`` asks for; BadRequest saying why not."""
    if len(text) > MAX_COMMAND or "\0" in text or "\n" in text:
        raise BadRequest(ONLY)
    try:
        words = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise BadRequest(ONLY) from exc
    operation = ""
    if len(words) == 3 and words[0] == LFS_AUTHENTICATE:
        if words[2] not in LFS_OPERATIONS:
            raise BadRequest("git-lfs-authenticate takes owner/name.git download or upload")
        operation = words.pop()
    elif len(words) == 3 and words[0] == "git":
        words = [f"git {words[1]}", words[2]]
    if len(words) != 2 or (words[0] not in SERVICES and not operation):
        raise BadRequest(ONLY)
    path = words[1]
    for start in ("~/", "/"):
        path = path.removeprefix(start)
    parts = path.removesuffix("/").split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise BadRequest(f"{words[1]!r} is not a repository: give owner/name.git")
    owner, name = parts
    name = name.removesuffix(".git")
    if not name or any(ch.isspace() or ch in "\\'\"" for ch in owner + name):
        raise BadRequest(f"{words[1]!r} is not a repository: give owner/name.git")
    return Command(SERVICES.get(words[0], LFS_AUTHENTICATE), owner, name, operation)
