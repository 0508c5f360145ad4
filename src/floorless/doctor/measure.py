"""What one git child pays where it runs: its config reads, and ``git rev-parse`` timed A/B.

At start-up every git child looks for its config files: the system file (``/etc/gitconfig``)
unless ``GIT_CONFIG_NOSYSTEM``, then either ``GIT_CONFIG_GLOBAL`` or both
``$XDG_CONFIG_HOME/git/config`` (``$HOME/.config/git/config``) and ``$HOME/.gitconfig``.
Each probe is a stat; each file found is opened, stat'ed, read and closed. On a network or
host-shared filesystem each of those calls can be a round trip. ``time_config_files`` times
exactly those calls here, in this process.

``time_rev_parse`` then times the whole child: ``git rev-parse --git-dir`` in a real
repository, alternately with the forge's environment (A) and with the same environment whose
HOME (and XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, TMPDIR when set) is a fresh directory on local
storage holding copies of the same config files (B), and, when the repository is a real one,
in a throwaway repository on local storage as well (C). A - B is what the forge's HOME adds to
every git child; B - C is what the repository's storage adds. Children are timed with a
blocking wait and a separate watchdog thread (``subprocess``'s timeout polls, which would
add up to tens of milliseconds to a short child).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from floorless.core.errors import DiagnosisError
from floorless.doctor.mounts import FLAGGED, Mount, mount_of

CHILD_TIMEOUT = 60.0
MIN_RUNS = 3
_SEARCH_ENTRIES = 400  # directory entries a repository search may look at
_TRUE = ("1", "true", "yes", "on")


def _env_bool(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def config_files(environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """The config files a git child with this environment probes at start-up, labelled."""
    files: list[tuple[str, Path]] = []
    if not _env_bool(environ.get("GIT_CONFIG_NOSYSTEM")):
        files.append(("system", Path(environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")))
    if environ.get("GIT_CONFIG_GLOBAL"):
        files.append(("global", Path(environ["GIT_CONFIG_GLOBAL"])))
        return files
    home = environ.get("HOME")
    xdg = environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
    if xdg:
        files.append(("xdg", Path(xdg, "git", "config")))
    if home:
        files.append(("global", Path(home, ".gitconfig")))
    return files


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass
class FileTiming:
    """Medians, in milliseconds, of the calls git makes on one config file."""

    label: str
    path: Path
    exists: bool
    stat_ms: float
    read_ms: float | None  # open + fstat + read + close; None when the file is absent
    runs: int
    error: str | None = None

    @property
    def total_ms(self) -> float:
        return self.stat_ms + (self.read_ms or 0.0)


def _read_whole(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fstat(fd)
        while os.read(fd, 65536):
            pass
    finally:
        os.close(fd)


def time_config_file(label: str, path: Path, runs: int) -> FileTiming:
    stats: list[float] = []
    reads: list[float] = []
    exists = False
    error: str | None = None
    for _ in range(runs):
        began = time.perf_counter()
        try:
            os.stat(path)
            exists = True
        except (FileNotFoundError, NotADirectoryError):
            exists = False
        except OSError as exc:
            error = exc.strerror or str(exc)
        stats.append((time.perf_counter() - began) * 1000)
        if exists and error is None:
            began = time.perf_counter()
            try:
                _read_whole(path)
            except OSError as exc:
                error = exc.strerror or str(exc)
            reads.append((time.perf_counter() - began) * 1000)
    return FileTiming(
        label=label,
        path=path,
        exists=exists,
        stat_ms=median(stats),
        read_ms=median(reads) if reads else None,
        runs=runs,
        error=error,
    )


def time_config_files(environ: Mapping[str, str], runs: int) -> list[FileTiming]:
    return [time_config_file(label, path, runs) for label, path in config_files(environ)]


# --- git children --------------------------------------------------------------------------


def find_git(configured: str | None = None, path: str | None = None) -> str:
    """The git executable: ``configured`` (a path or a name), else ``git`` on PATH."""
    name = configured or "git"
    found = shutil.which(name, path=path if path is not None else os.environ.get("PATH"))
    if found is None:
        if configured:
            raise DiagnosisError(f"git executable {configured!r} not found or not executable")
        raise DiagnosisError(
            "no `git` on PATH: doctor times git children, so it needs the git the forge runs "
            "(put it on PATH or pass --git PATH)"
        )
    return found


def git_version(git: str) -> str:
    try:
        done = subprocess.run(
            [git, "version"], capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
        )
    except OSError as exc:
        raise DiagnosisError(f"cannot run {git}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise DiagnosisError(f"{git} version did not answer within {CHILD_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        raise DiagnosisError(f"{git} version failed: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class ChildResult:
    seconds: float
    returncode: int
    stderr: str


def time_child(
    argv: list[str], environ: Mapping[str, str], cwd: Path, timeout: float = CHILD_TIMEOUT
) -> ChildResult:
    """Run one child to completion; its wall time, measured with a blocking wait."""
    began = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv,
            env=dict(environ),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise DiagnosisError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        _out, err = proc.communicate()  # no timeout: a blocking read and wait
    finally:
        watchdog.cancel()
    elapsed = time.perf_counter() - began
    return ChildResult(elapsed, proc.returncode, err.decode("utf-8", "replace").strip())


def _is_repository(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def find_repository(root: Path) -> Path | None:
    """A git repository at or below ``root`` (two levels: ``OWNER/NAME.git``), looking at a
    bounded number of directory entries; None if there is none or it cannot be listed."""
    budget = [_SEARCH_ENTRIES]

    def children(directory: Path) -> Iterator[Path]:
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    budget[0] -= 1
                    if budget[0] < 0:
                        return
                    if entry.is_dir() and not entry.name.startswith("."):
                        yield Path(entry.path)
        except OSError:
            return

    def git_dir(path: Path) -> Path | None:
        try:
            if _is_repository(path):
                return path
            if _is_repository(path / ".git"):
                return path / ".git"
        except OSError:
            return None
        return None

    found = git_dir(root)
    if found is not None:
        return found
    for first in sorted(children(root)):
        found = git_dir(first)
        if found is not None:
            return found
        for second in sorted(children(first)):
            found = git_dir(second)
            if found is not None:
                return found
    return None


@dataclass
class SpawnTiming:
    """``git rev-parse`` with the forge's HOME (A), a local HOME (B), a local repository (C)."""

    repository: Path
    throwaway: bool  # no repository was found: A and B ran in a throwaway local repository
    local_dir: Path
    local_mount: Mount | None
    forge_ms: list[float] = field(default_factory=list)
    local_home_ms: list[float] = field(default_factory=list)
    local_repo_ms: list[float] = field(default_factory=list)
    failure: str | None = None
    seconds: float = 0.0

    @property
    def forge_median(self) -> float:
        return median(self.forge_ms)

    @property
    def local_home_median(self) -> float:
        return median(self.local_home_ms)

    @property
    def home_penalty(self) -> float:
        """Milliseconds the forge's HOME adds to every git child."""
        return max(0.0, self.forge_median - self.local_home_median)

    @property
    def repository_penalty(self) -> float | None:
        """Milliseconds the repository's storage adds to every git child."""
        if not self.local_repo_ms:
            return None
        return max(0.0, self.local_home_median - median(self.local_repo_ms))


def local_scratch_parent(mounts: list[Mount]) -> tuple[Path, Mount | None]:
    """A writable directory on local storage (disk or tmpfs) for the reference HOME."""
    # Only a parent for mkdtemp's private directory, never a fixed file name in it.
    fixed = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108
    candidates = [os.environ.get("TMPDIR"), *fixed, tempfile.gettempdir()]
    for candidate in candidates:
        if not candidate or not os.path.isdir(candidate) or not os.access(candidate, os.W_OK):
            continue
        mount = mount_of(candidate, mounts)
        if mount is None or mount.kind not in FLAGGED:
            return Path(candidate), mount
    fallback = Path(tempfile.gettempdir())
    return fallback, mount_of(fallback, mounts)


def _local_environ(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    """``environ`` with HOME and everything git reads below it moved to ``home``, the same
    config files copied there."""
    local = dict(environ)
    local["HOME"] = str(home)
    if "XDG_CONFIG_HOME" in environ:
        local["XDG_CONFIG_HOME"] = str(home / ".config")
    if "GIT_CONFIG_GLOBAL" in environ:
        local["GIT_CONFIG_GLOBAL"] = str(home / ".gitconfig")
    if "TMPDIR" in environ:
        local["TMPDIR"] = str(home / "tmp")
        (home / "tmp").mkdir(exist_ok=True)
    ours = dict(config_files(local))
    for label, path in config_files(environ):
        target = ours.get(label)
        if label == "system" or target is None:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(path, target)
        except OSError:
            continue  # absent or unreadable there: absent here too
    return local


@contextmanager
def _scratch(parent: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="floorless-doctor-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def time_rev_parse(
    git: str,
    environ: Mapping[str, str],
    repository: Path | None,
    mounts: list[Mount],
    runs: int,
    max_seconds: float,
) -> SpawnTiming:
    """Time ``git rev-parse`` A/B(/C), alternating, ``runs`` each at most, stopping after
    ``max_seconds`` once every side has ``MIN_RUNS``."""
    parent, local_mount = local_scratch_parent(mounts)
    with _scratch(parent) as scratch:
        home = scratch / "home"
        home.mkdir()
        local = _local_environ(environ, home)
        throwaway = scratch / "throwaway.git"
        made = time_child([git, "init", "-q", "--bare", str(throwaway)], local, scratch)
        if made.returncode != 0:
            raise DiagnosisError(f"git init of a throwaway repository failed: {made.stderr}")
        timing = SpawnTiming(
            repository=repository or throwaway,
            throwaway=repository is None,
            local_dir=parent,
            local_mount=local_mount,
        )
        base = [git, "-c", "safe.directory=*"]
        sides: list[tuple[list[float], list[str], Mapping[str, str]]] = [
            (timing.forge_ms, [*base, f"--git-dir={timing.repository}", "rev-parse"], environ),
            (timing.local_home_ms, [*base, f"--git-dir={timing.repository}", "rev-parse"], local),
        ]
        if repository is not None:
            local_repo = [*base, f"--git-dir={throwaway}", "rev-parse"]
            sides.append((timing.local_repo_ms, local_repo, local))
        began = time.perf_counter()
        for run in range(runs + 1):  # run 0 warms up (git's binary, the page cache)
            elapsed = time.perf_counter() - began
            if run > MIN_RUNS and elapsed > max_seconds:
                break
            for samples, argv, env in sides:
                result = time_child([*argv, "--git-dir"], env, scratch)
                if result.returncode != 0:
                    timing.failure = (
                        f"git rev-parse in {timing.repository} failed "
                        f"(exit {result.returncode}): {result.stderr or 'no message'}"
                    )
                    timing.seconds = time.perf_counter() - began
                    return timing
                if run > 0:
                    samples.append(result.seconds * 1000)
        timing.seconds = time.perf_counter() - began
        return timing
