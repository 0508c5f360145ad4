"""Git's environment: private, on fast local storage, for libgit2 and for every git child.

Every git config read that could cross a slow filesystem is switched off or pointed into the
runtime directory: ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL``, ``HOME`` and
``XDG_CONFIG_HOME`` for children; empty config search paths for libgit2, so opening a
repository reads no system, global or XDG config at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel, ObjectType

from floorless.core.errors import GitCommandError

_GIT = shutil.which("git") or "git"


def hook_scripts(python: str) -> dict[str, str]:
    """The hooks a push through floorless runs (``floorless.collab.githooks``): two in Python,
    and the update hook, once per ref, in the shell (it reads the pre-receive hook's refusals)."""
    hooks = "floorless.collab.githooks"
    return {
        "pre-receive": f'#!/bin/sh\nexec "{python}" -P -m {hooks}.pre_receive\n',
        "proc-receive": f'#!/bin/sh\nexec "{python}" -P -m {hooks}.proc_receive\n',
        "update": (
            "#!/bin/sh\n"
            '# only what the pre-receive hook allowed moves: "$1" is the ref\n'
            '[ -n "$FLOORLESS_HOOK_DIR" ] || exit 1\n'
            'exec grep -qxF -e "$1" "$FLOORLESS_HOOK_DIR/allowed"\n'
        ),
    }


_configured_libgit2 = False
_lock = threading.Lock()


class GitEnvironment:
    """The runtime directory and the environment every git child receives."""

    def __init__(
        self,
        runtime_dir: Path,
        mapped_bytes: int = 32 << 20,
        object_cache_bytes: int = 32 << 20,
    ) -> None:
        self.runtime_dir = runtime_dir
        self.mapped_bytes = mapped_bytes
        self.object_cache_bytes = object_cache_bytes
        self.home = runtime_dir / "home"
        self.config = self.home / "gitconfig"
        self.tmp = runtime_dir / "tmp"
        self.hooks = runtime_dir / "hooks"  # the only hooks a push through floorless runs

    def prepare(self) -> None:
        """Create the runtime directory with an empty git config; point libgit2 at nothing,
        and bound the memory it keeps (``bound_libgit2_memory``)."""
        for directory in (self.home, self.tmp):
            directory.mkdir(parents=True, exist_ok=True)
        if not self.config.exists():
            self.config.write_text("")
        self.hooks.mkdir(parents=True, exist_ok=True)
        for name, script in hook_scripts(sys.executable).items():
            hook = (
                self.hooks / name
            )  # floorless.collab.githooks: every push through floorless runs them
            if not hook.exists() or hook.read_text() != script:
                scratch = hook.with_name(f"{name}.new")
                scratch.write_text(script)
                scratch.chmod(0o755)
                scratch.replace(hook)
        isolate_libgit2()
        bound_libgit2_memory(self.mapped_bytes, self.object_cache_bytes)

    def environ(self) -> dict[str, str]:
        """The complete environment for a git child: nothing inherited but PATH. It also
        names the floorless thread that starts the child, so that a tool watching the machine
        tells the children of background work (``fl-bg-*``) from a request's."""
        return {
            "FLOORLESS_THREAD": threading.current_thread().name,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(self.config),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ATTR_NOSYSTEM": "1",
            "LC_ALL": "C",
            "TMPDIR": str(self.tmp),
        }

    def command(self, git_dir: Path, *args: str) -> list[str]:
        """A git command line with an explicit ``--git-dir``: no discovery walk."""
        return [_GIT, f"--git-dir={git_dir}", *args]

    def popen(
        self,
        git_dir: Path,
        args: Sequence[str],
        extra_env: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            self.command(git_dir, *args),
            env={**self.environ(), **(extra_env or {})},
            cwd=str(self.tmp),
            **kwargs,
        )

    def run(self, git_dir: Path, args: Sequence[str], timeout: float = 60.0) -> bytes:
        """Run a git child to completion and return its output; raise on failure."""
        proc = self.popen(git_dir, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise GitCommandError(f"git {args[0]} took longer than {timeout:.0f} s") from exc
        if proc.returncode != 0:
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise GitCommandError(
                f"git {args[0]} failed: {message[-1] if message else proc.returncode}"
            )
        return out


# Objects libgit2 keeps in memory once read, by type, up to these sizes (its defaults: 4 KiB
# for commits and trees, no blobs). Objects never change, and a loose object read again
# would cost an open and a read on the storage each time: a warm page must cost none.
OBJECT_CACHE_LIMITS = {
    ObjectType.BLOB: 1 << 20,
    ObjectType.TREE: 1 << 20,
    ObjectType.COMMIT: 1 << 16,
    ObjectType.TAG: 1 << 16,
}


# Pack files libgit2 keeps open at most, across repositories (its default: no limit). Past
# it, the least recently used pack is closed and its windows unmapped; reopening one costs
# an open and a read of its index, far less than a page's work.
MAPPED_FILE_LIMIT = 128


def bound_libgit2_memory(mapped_bytes: int, object_cache_bytes: int) -> None:
    """Bound what libgit2 holds for the whole process: ``mapped_bytes`` of mapped pack
    windows (a quarter of it per window, at least 1 MiB) and ``object_cache_bytes`` of
    parsed objects.

    Its 64-bit defaults are 1 GiB windows, up to 8 GiB mapped and 256 MiB of objects: a
    server that had read a 100,000-commit pack kept all of it mapped, 140 of its 346 MB
    resident idle. Mapped pack pages are the page cache's and cost little to map again;
    what a warm page reads again is in the object cache, which this keeps bounded too.
    The settings are the process's: the last forge prepared sets them."""
    pygit2.settings.mwindow_size = max(mapped_bytes // 4, 1 << 20)
    pygit2.settings.mwindow_mapped_limit = mapped_bytes
    pygit2.settings.mwindow_file_limit = MAPPED_FILE_LIMIT
    pygit2.settings.cache_max_size(object_cache_bytes)


def isolate_libgit2() -> None:
    """Make libgit2 read no system, XDG, global or ProgramData config (an empty path each),
    and keep the objects pages read again (``OBJECT_CACHE_LIMITS``) in memory."""
    global _configured_libgit2
    with _lock:
        if _configured_libgit2:
            return
        for level in (
            ConfigLevel.SYSTEM,
            ConfigLevel.XDG,
            ConfigLevel.GLOBAL,
            ConfigLevel.PROGRAMDATA,
        ):
            pygit2.settings.search_path[level] = ""
        for kind, limit in OBJECT_CACHE_LIMITS.items():
            pygit2.settings.cache_object_limit(kind, limit)
        _configured_libgit2 = True
