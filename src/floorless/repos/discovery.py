"""Which directories below the repositories directory are repositories, under which names.

On network storage a listing or a stat can fail for a moment (``ESTALE`` after a server
restart, ``EIO``, a timeout) and answer fine a second later. Such a failure is not an
answer: it never reads as "no such directory" or "not a repository". Only ``ENOENT`` and
``ENOTDIR`` say that something is not there; every other error is reported in
``Discovery.unreadable``, and what lies below that directory is unknown to this scan.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# First path segments that belong to the forge itself, never to an owner.
RESERVED = frozenset(
    {"-", "raw", "explore", "static", "api", "assets", "user", "login", "admin", "attachments"}
)
_DEFAULT_DESCRIPTION = "Unnamed repository"
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})


def valid_name(name: str) -> bool:
    return bool(NAME.fullmatch(name)) and name not in RESERVED and not name.endswith(".git")


def is_absence(exc: OSError) -> bool:
    """Whether ``exc`` says the path is not there, rather than that it could not be read."""
    return exc.errno in _ABSENT


def exists(path: Path) -> bool:
    """Whether ``path`` exists (a symbolic link counts); raise OSError when the storage cannot
    tell."""
    try:
        os.lstat(path)
    except OSError as exc:
        if is_absence(exc):
            return False
        raise
    return True


def git_dir_of(path: Path) -> tuple[Path, bool] | None:
    """The git directory of a bare repository or a checkout at ``path``, and whether it is bare;
    None when ``path`` is not one. Raises OSError when the storage cannot tell."""
    try:
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            return path, True
        dotgit = path / ".git"
        if dotgit.is_dir() and (dotgit / "HEAD").is_file():
            return dotgit, False
        if dotgit.is_file():
            line = dotgit.read_text(errors="replace").strip()
            if line.startswith("gitdir:"):
                target = (path / line[len("gitdir:") :].strip()).resolve()
                if (target / "HEAD").is_file():
                    return target, False
    except OSError as exc:  # pathlib's is_file and is_dir already answer False for absences
        if is_absence(exc):
            return None
        raise
    return None


def read_description(git_dir: Path) -> str | None:
    """The repository's one-line description ("" when it has none); None when it cannot be
    read now."""
    try:
        text = (git_dir / "description").read_text(errors="replace").strip()
    except OSError as exc:
        return "" if is_absence(exc) else None
    return "" if text.startswith(_DEFAULT_DESCRIPTION) else text[:500]


@dataclass
class Discovery:
    """What one scan of the repositories directory found."""

    # (owner, name, git_dir, bare) of every repository, sorted, the first found for a name
    repos: list[tuple[str, str, Path, bool]] = field(default_factory=list)
    # directories the scan could not read, and why: what lies below them is unknown, not gone
    unreadable: dict[Path, str] = field(default_factory=dict)

    def unknown(self, path: Path) -> bool:
        """Whether ``path`` is, or lies below, a directory this scan could not read."""
        return any(path == bad or bad in path.parents for bad in self.unreadable)


def discover(root: Path, default_owner: str) -> Discovery:
    """Every repository below ``root``, and the directories that could not be read."""
    result = Discovery()
    found: dict[tuple[str, str], tuple[Path, bool]] = {}

    def locate(directory: Path) -> tuple[Path, bool] | OSError | None:
        try:
            return git_dir_of(directory)
        except OSError as exc:
            result.unreadable[directory] = _why(exc)
            return exc

    def claim(owner: str, name: str, located: tuple[Path, bool] | OSError | None) -> None:
        if isinstance(located, tuple) and (owner, name) not in found:
            found[(owner, name)] = located

    name = root.resolve().name.removesuffix(".git")
    if valid_name(name):
        claim(default_owner, name, locate(root))
    # the root itself missing is a storage problem (an unmounted share), not an empty forge
    for entry in _subdirs(root, result, missing_is_error=True):
        located = locate(entry)
        if isinstance(located, OSError):
            continue  # neither a repository nor an owner's directory, as far as anyone knows
        if located is not None:
            name = entry.name.removesuffix(".git")
            if valid_name(name):
                claim(default_owner, name, located)
            continue
        if not valid_name(entry.name):
            continue
        for sub in _subdirs(entry, result):
            name = sub.name.removesuffix(".git")
            if valid_name(name) and (entry.name, name) not in found:
                claim(entry.name, name, locate(sub))
    result.repos = [(o, n, path, bare) for (o, n), (path, bare) in sorted(found.items())]
    return result


def _subdirs(path: Path, result: Discovery, missing_is_error: bool = False) -> list[Path]:
    """The directories in ``path`` (hidden ones left out); those that cannot be read, and
    ``path`` itself if it cannot be listed, go to ``result.unreadable``."""
    try:
        entries = sorted(path.iterdir())
    except OSError as exc:
        if missing_is_error or not is_absence(exc):
            result.unreadable[path] = _why(exc)
        return []
    subdirs = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir():
                subdirs.append(entry)
        except OSError as exc:
            result.unreadable[entry] = _why(exc)
    return subdirs


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
