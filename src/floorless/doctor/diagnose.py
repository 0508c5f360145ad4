"""Put it together: the directories, their filesystems, the timings, the verdict, the fix.

The verdict (and ``floorless doctor``'s exit status) follows fixed thresholds:

- **problem** (2): the forge's git HOME adds at least ``SLOW_SPAWN_MS`` (20 ms) to every git
  child, measured A/B against a local HOME; or ``git rev-parse`` fails with the forge's
  environment; or a directory that must exist is missing, is not a directory or cannot be
  read. 20 ms is five times what a whole ``git rev-parse`` costs on local storage, and about
  6 children make a Forgejo or Gitea page: 120 ms of floor on every repository page.
- **warning** (1): git HOME adds ``WARN_SPAWN_MS`` (5 ms) or more; or a config file git reads
  at start-up takes ``SLOW_FILE_MS`` (1 ms) or more to stat and read; or git HOME sits on a
  network, host-shared or userspace filesystem even though it measured fast (its cache hides
  the cost until it expires); or floorless's SQLite database is on such a filesystem.
- otherwise **healthy** (0).
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from floorless.core.config import Settings
from floorless.doctor.appini import ForgeLayout, ResolvedPath
from floorless.doctor.measure import (
    FileTiming,
    find_git,
    find_repository,
    git_version,
    time_config_files,
    time_rev_parse,
)
from floorless.doctor.mounts import MEMORY, Mount, mount_of, read_mounts
from floorless.doctor.report import (
    HEALTHY,
    INFO,
    PROBLEM,
    WARNING,
    DirectoryCheck,
    Finding,
    Report,
)
from floorless.git.env import GitEnvironment

SLOW_SPAWN_MS = 20.0
WARN_SPAWN_MS = 5.0
SLOW_FILE_MS = 1.0
FORGE_SPAWNS_PER_PAGE = 6


@dataclass(frozen=True)
class Options:
    runs: int = 10
    max_seconds: float = 30.0
    git: str | None = None


@dataclass(frozen=True)
class _Target:
    """What to examine: named directories, git's environment there, spawns per page."""

    name: str
    config: Path | None
    directories: list[tuple[str, str, ResolvedPath, str]]  # role, label, path, if missing
    environ: dict[str, str]
    spawns: dict[str, int]


def _check(role: str, label: str, where: ResolvedPath, mounts: list[Mount]) -> DirectoryCheck:
    path = where.path
    state = "ok"
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            state = "not a directory"
        else:
            with os.scandir(path) as entries:
                next(entries, None)
    except (FileNotFoundError, NotADirectoryError):
        state = "missing"
    except PermissionError:
        state = "permission denied"
    except OSError as exc:
        state = exc.strerror or str(exc)
    return DirectoryCheck(role, label, path, where.origin, state, mount_of(path, mounts))


def _floorless_target(settings: Settings) -> _Target:
    env = GitEnvironment(settings.runtime_dir)
    environ = env.environ()
    # `floorless serve` creates the default repositories directory, not one it was given.
    default_repos = settings.repos == settings.data / "repositories"
    repos_missing = WARNING if default_repos else PROBLEM
    return _Target(
        name="floorless",
        config=None,
        directories=[
            ("home", "git HOME", ResolvedPath(env.home, "runtime_dir/home"), WARNING),
            ("repositories", "repositories", ResolvedPath(settings.repos, "repos"), repos_missing),
            ("data", "data", ResolvedPath(settings.data, "data"), WARNING),
        ],
        environ=environ,
        spawns={"browse pages": 0, "blame (cache miss), archive": 1},
    )


def _forge_target(layout: ForgeLayout) -> _Target:
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(layout.git_home.path),
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    return _Target(
        name=layout.name,
        config=layout.ini.path,
        directories=[
            ("home", "git HOME", layout.git_home, WARNING),
            ("repositories", "repositories", layout.repositories, PROBLEM),
            ("app_data", "app data", layout.app_data, PROBLEM),
            ("work", "work path", layout.work, PROBLEM),
            ("local_copies", "local copies", layout.local_copies, INFO),
            ("uploads", "uploads", layout.uploads, INFO),
        ],
        environ=environ,
        spawns={"repository page": FORGE_SPAWNS_PER_PAGE},
    )


def diagnose_floorless(settings: Settings, options: Options) -> Report:
    report = _diagnose(_floorless_target(settings), options, layout=None, settings=settings)
    report.ssh = ssh_settings(settings)
    return report


def ssh_settings(settings: Settings) -> dict[str, object]:
    """git over SSH as these settings make it: where the built-in server listens, the clone
    URLs the pages show, the relay socket OpenSSH's forced command uses, and the host keys'
    fingerprints, which a client shows on its first connection (compare them)."""
    from floorless.ssh import server, wire  # (the forge's modules: only for this part)

    host = settings.ssh_host or settings.host
    public = settings.base_url or f"http://{settings.host}:{settings.port}"
    address = wire.socket_address(settings)
    shown = address if not address.startswith("\0") else "@" + address[1:]
    return {
        "listen": f"{host}:{settings.ssh_port}" if settings.ssh_port else "",
        "clone_url": settings.ssh_clone_url(public, "OWNER/NAME"),
        "relay_socket": f"{shown} ({'a server answers' if _answers(address) else 'no server'})",
        "host_keys": server.fingerprints(settings),
    }


def diagnose_forge(layout: ForgeLayout, options: Options) -> Report:
    return _diagnose(_forge_target(layout), options, layout=layout, settings=None)


def _diagnose(
    target: _Target, options: Options, layout: ForgeLayout | None, settings: Settings | None
) -> Report:
    git = find_git(options.git or (layout.git_executable if layout else None))
    version = git_version(git)
    mounts = read_mounts()
    directories = [
        _check(role, label, where, mounts) for role, label, where, _ in target.directories
    ]
    files = time_config_files(target.environ, options.runs)
    repos = next(d for d in directories if d.role == "repositories")
    repository = find_repository(repos.path) if repos.state == "ok" else None
    spawn = time_rev_parse(
        git, target.environ, repository, mounts, options.runs, options.max_seconds
    )
    report = Report(
        target=target.name,
        config=target.config,
        git=version,
        environ={k: v for k, v in target.environ.items() if k != "PATH"},
        directories=directories,
        files=files,
        spawn=spawn,
        spawns_per_page=target.spawns,
    )
    missing_level = {role: level for role, _, _, level in target.directories}
    _directory_findings(report, missing_level, floorless=settings is not None)
    _timing_findings(report, floorless=settings is not None)
    if layout is not None:
        for note in layout.ini.unresolved:
            report.findings.append(Finding(WARNING, note))
        if layout.work.origin.startswith("assumed"):
            report.findings.append(Finding(INFO, f"work path {layout.work.origin}"))
    report.fix = _fix(report, layout, settings, mounts)
    return report


def _directory_findings(
    report: Report, missing_level: Mapping[str, str], *, floorless: bool
) -> None:
    """One finding per directory that is missing, unusable or on flagged storage (git HOME's
    and the repositories' storage are judged by their timings instead)."""
    for d in report.directories:
        flagged = d.mount is not None and d.mount.flagged
        on = f" is on {d.mount.describe()}" if d.mount is not None and flagged else ""
        if d.state == "missing":
            level = missing_level[d.role]
            made = "floorless creates it at start" if floorless else "the forge creates it"
            hint = f" yet ({made})" if level != PROBLEM else ""
            where = f", on {d.mount.describe()}" if on and d.mount else ""
            report.findings.append(
                Finding(level, f"{d.label} {d.path} does not exist{hint}{where}")
            )
        elif d.state != "ok":
            report.findings.append(Finding(PROBLEM, f"{d.label} {d.path}: {d.state}"))
        elif not flagged or d.role in ("home", "repositories"):
            continue
        elif d.role == "data" and floorless:
            report.findings.append(
                Finding(
                    WARNING,
                    f"data {d.path}{on}: floorless's SQLite database lives there; keep it on "
                    f"local storage",
                )
            )
        else:
            report.findings.append(Finding(INFO, f"{d.label} {d.path}{on}"))


def _timing_findings(report: Report, *, floorless: bool) -> None:
    spawn = report.spawn
    home = next(d for d in report.directories if d.role == "home")
    fs = f" on {home.mount.describe()}" if home.mount else ""
    home_flagged = False
    if spawn.failure:
        report.findings.append(Finding(PROBLEM, spawn.failure))
    else:
        penalty = spawn.home_penalty
        measured = (
            f"adds {penalty:.1f} ms to every git child: git rev-parse takes "
            f"{spawn.forge_median:.1f} ms with it and {spawn.local_home_median:.1f} ms with a "
            f"local HOME"
        )
        if penalty >= SLOW_SPAWN_MS:
            finding = Finding(PROBLEM, f"git HOME {home.path}{fs} {measured}", "home")
        elif penalty >= WARN_SPAWN_MS:
            finding = Finding(WARNING, f"git HOME {home.path}{fs} {measured}", "home")
        elif home.mount is not None and home.mount.flagged:
            finding = Finding(
                WARNING,
                f"git HOME {home.path}{fs} measured fast ({penalty:.1f} ms per git child), "
                f"but such a filesystem's cache can hide the cost until it expires",
                "home",
            )
        else:
            finding = Finding(
                HEALTHY, f"git HOME {home.path}{fs} adds {penalty:.1f} ms per git child"
            )
        home_flagged = finding.level != HEALTHY
        report.findings.append(finding)
    for timing in report.files:
        if timing.label != "system" and home_flagged:
            continue  # explained by the finding above; the table shows each file
        if timing.error:
            report.findings.append(Finding(WARNING, f"{timing.path}: {timing.error}"))
        elif timing.total_ms >= SLOW_FILE_MS:
            report.findings.append(
                Finding(
                    WARNING,
                    f"{_file_note(timing, floorless)}: {timing.total_ms:.1f} ms to stat and "
                    f"read, at every git child's start",
                    "" if timing.label == "system" else "home",
                )
            )
    _repository_finding(report, floorless=floorless)


def _repository_finding(report: Report, *, floorless: bool) -> None:
    repos = next(d for d in report.directories if d.role == "repositories")
    if repos.state != "ok" or repos.mount is None:
        return
    penalty = report.spawn.repository_penalty
    where = f"repositories {repos.path} are on {repos.mount.describe()}"
    added = "" if penalty is None else f", which adds {penalty:.1f} ms to each"
    if floorless:
        if repos.mount.flagged:
            report.findings.append(
                Finding(
                    INFO,
                    f"{where}: pages read them in-process with cached refs and open handles, "
                    f"not through git children",
                )
            )
    elif penalty is not None and penalty >= SLOW_SPAWN_MS:
        report.findings.append(
            Finding(
                WARNING,
                f"{where}: every git child reads its repository there{added}; no setting "
                f"removes that part of the floor",
            )
        )
    elif repos.mount.flagged:
        report.findings.append(
            Finding(INFO, f"{where}: every git child reads its repository there{added}")
        )


def _file_note(timing: FileTiming, floorless: bool) -> str:
    if timing.label == "system" and not floorless:
        return (
            f"{timing.path} (the system config, which Forgejo and Gitea before 1.24 read; "
            f"GIT_CONFIG_NOSYSTEM=1 in the forge's environment skips it)"
        )
    return str(timing.path)


def _suggest_home(product: str, mounts: list[Mount]) -> str:
    for base in ("/var/lib", "/var/cache", "/srv", "/opt"):
        mount = mount_of(base, mounts)
        if os.path.isdir(base) and (mount is None or not mount.flagged):
            return f"{base}/{product.lower()}-git-home"
    run = mount_of("/run", mounts)
    if os.path.isdir("/run") and run is not None and run.kind == MEMORY:
        return f"/run/{product.lower()}-git-home"
    return "/a/directory/on/local/disk"


def _home_needs_fix(report: Report) -> bool:
    return any(f.level in (PROBLEM, WARNING) and f.topic == "home" for f in report.findings)


def _fix(
    report: Report, layout: ForgeLayout | None, settings: Settings | None, mounts: list[Mount]
) -> list[str]:
    if not _home_needs_fix(report):
        return []
    if layout is not None:
        name = layout.name
        return [
            f"In {layout.ini.path}, give git a HOME on local storage:",
            "",
            "    [git]",
            f"    HOME_PATH = {_suggest_home(name, mounts)}",
            "",
            f"{name} writes its .gitconfig there at every start, so the directory may be "
            f"ephemeral (tmpfs, or recreated at boot) and needs no backup; copy any .gnupg "
            f"keyring or hand-written settings over from {layout.git_home.path} first. "
            f"Then restart {name}.",
        ]
    assert settings is not None
    data = settings.data
    return [
        "Give floorless's runtime directory a place on local storage (it holds only git's "
        f"private HOME and temporary files; default {data}/run), with the `runtime_dir` "
        "setting, in the TOML file:",
        "",
        '    runtime_dir = "/var/lib/floorless-run"',
        "",
        "or as FLOORLESS_RUNTIME_DIR=/var/lib/floorless-run in floorless's environment. "
        "It may be ephemeral. Then restart floorless.",
    ]


def _answers(address: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(address) == 0
