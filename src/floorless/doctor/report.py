"""A doctor's report: what was found and measured, as text for people and JSON for machines."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floorless.doctor.measure import FileTiming, SpawnTiming, median
from floorless.doctor.mounts import Mount

PROBLEM = "problem"
WARNING = "warning"
INFO = "info"
HEALTHY = "ok"

EXIT_HEALTHY = 0
EXIT_WARNING = 1
EXIT_PROBLEM = 2
EXIT_UNKNOWN = 3  # could not measure: bad input, no git (monitoring's "unknown")

_ORDER = {PROBLEM: 0, WARNING: 1, INFO: 2, HEALTHY: 3}


@dataclass
class DirectoryCheck:
    role: str
    label: str
    path: Path
    origin: str
    state: str  # "ok", "missing", "not a directory", "permission denied", ...
    mount: Mount | None


@dataclass
class Finding:
    level: str
    message: str
    topic: str = ""  # "home" for findings about git HOME's storage: they call for the fix


@dataclass
class Report:
    target: str  # "floorless", "Forgejo" or "Gitea"
    config: Path | None
    git: str
    environ: dict[str, str]
    directories: list[DirectoryCheck]
    files: list[FileTiming]
    spawn: SpawnTiming
    spawns_per_page: dict[str, int]
    findings: list[Finding] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    ssh: dict[str, Any] = field(default_factory=dict)  # git over SSH (floorless's alone)

    @property
    def status(self) -> str:
        levels = {f.level for f in self.findings}
        if PROBLEM in levels:
            return PROBLEM
        if WARNING in levels:
            return WARNING
        return HEALTHY

    @property
    def exit_code(self) -> int:
        return {PROBLEM: EXIT_PROBLEM, WARNING: EXIT_WARNING}.get(self.status, EXIT_HEALTHY)

    def floor_ms(self) -> dict[str, dict[str, float]]:
        """Estimated git-child time per page now, and with a local HOME, per page kind."""
        now, local = self.spawn.forge_median, self.spawn.local_home_median
        return {
            page: {"spawns": spawns, "now_ms": spawns * now, "local_home_ms": spawns * local}
            for page, spawns in self.spawns_per_page.items()
        }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _mount_json(mount: Mount | None) -> dict[str, Any] | None:
    if mount is None:
        return None
    return {
        "fstype": mount.fstype,
        "kind": mount.kind,
        "flagged": mount.flagged,
        "mountpoint": mount.mountpoint,
        "source": mount.source,
    }


def to_json(report: Report) -> str:
    spawn = report.spawn
    document = {
        "target": report.target,
        "config": None if report.config is None else str(report.config),
        "status": report.status,
        "exit_code": report.exit_code,
        "git": report.git,
        "git_environment": report.environ,
        "directories": [
            {
                "role": d.role,
                "label": d.label,
                "path": str(d.path),
                "origin": d.origin,
                "state": d.state,
                "filesystem": _mount_json(d.mount),
            }
            for d in report.directories
        ],
        "config_files": [
            {
                "label": t.label,
                "path": str(t.path),
                "exists": t.exists,
                "stat_ms": _ms(t.stat_ms),
                "read_ms": _ms(t.read_ms),
                "runs": t.runs,
                "error": t.error,
            }
            for t in report.files
        ],
        "rev_parse": {
            "repository": str(spawn.repository),
            "throwaway_repository": spawn.throwaway,
            "local_directory": str(spawn.local_dir),
            "local_filesystem": _mount_json(spawn.local_mount),
            "forge_home_ms": [_ms(v) for v in spawn.forge_ms],
            "local_home_ms": [_ms(v) for v in spawn.local_home_ms],
            "local_repository_ms": [_ms(v) for v in spawn.local_repo_ms],
            "forge_home_median_ms": _ms(spawn.forge_median),
            "local_home_median_ms": _ms(spawn.local_home_median),
            "local_repository_median_ms": _ms(median(spawn.local_repo_ms))
            if spawn.local_repo_ms
            else None,
            "home_penalty_ms": _ms(spawn.home_penalty),
            "repository_penalty_ms": _ms(spawn.repository_penalty),
            "seconds": _ms(spawn.seconds),
            "failure": spawn.failure,
        },
        "floor": {
            page: {k: _ms(v) if k != "spawns" else v for k, v in values.items()}
            for page, values in report.floor_ms().items()
        },
        "ssh": report.ssh or None,
        "findings": [
            {"level": f.level, "message": f.message, "topic": f.topic} for f in report.findings
        ],
        "fix": "\n".join(report.fix),
    }
    return json.dumps(document, indent=2)


def text_table(rows: list[list[str]], right: frozenset[int] | set[int] = frozenset()) -> list[str]:
    """Rows as aligned text columns (those in ``right`` right-aligned), indented two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return lines


def _file_cells(timing: FileTiming) -> list[str]:
    if timing.error:
        return [timing.label, str(timing.path), f"{timing.stat_ms:.2f}", timing.error]
    read = "absent" if timing.read_ms is None else f"{timing.read_ms:.2f}"
    return [timing.label, str(timing.path), f"{timing.stat_ms:.2f}", read]


def to_text(report: Report) -> str:
    spawn = report.spawn
    title = f"floorless doctor: {report.target}"
    if report.config is not None:
        title += f", {report.config}"
    lines = [title, f"{report.git}", "", "Directories"]
    rows = [["", "path", "filesystem", "state", "from"]]
    for d in report.directories:
        fs = d.mount.describe() if d.mount else "?"
        rows.append([d.label, str(d.path), fs, d.state, d.origin])
    lines += text_table(rows)

    runs = report.files[0].runs if report.files else 0
    lines += ["", f"Config files every git child probes at start-up (medians of {runs}, ms)"]
    rows = [["", "path", "stat", "open+read"]]
    rows += [_file_cells(t) for t in report.files]
    lines += text_table(rows, right={2, 3})

    where = "a throwaway repository" if spawn.throwaway else str(spawn.repository)
    runs = len(spawn.forge_ms)
    lines += ["", f"git rev-parse in {where} (one git child; medians of {runs} runs)"]
    if spawn.failure:
        lines.append(f"  {spawn.failure}")
    else:
        local_fs = f", {spawn.local_mount.fstype}" if spawn.local_mount else ""
        rows = [
            ["with the forge's git HOME", f"{spawn.forge_median:.1f} ms"],
            [
                f"with a local HOME ({spawn.local_dir}{local_fs})",
                f"{spawn.local_home_median:.1f} ms",
            ],
        ]
        if spawn.local_repo_ms:
            local_repo = f"{median(spawn.local_repo_ms):.1f} ms"
            rows.append(["in a throwaway local repository, local HOME", local_repo])
        lines += text_table(rows, right={1})
        summary = f"git HOME adds {spawn.home_penalty:.1f} ms to every git child"
        if spawn.repository_penalty is not None:
            summary += f"; the repository's storage adds {spawn.repository_penalty:.1f} ms"
        lines.append(f"  {summary}")

    lines += ["", "Estimated git time per page"]
    rows = [["", "git children", "now", "with a local HOME"]]
    for page, values in report.floor_ms().items():
        rows.append(
            [
                page,
                f"{values['spawns']:.0f}",
                f"{values['now_ms']:.0f} ms",
                f"{values['local_home_ms']:.0f} ms",
            ]
        )
    lines += text_table(rows, right={1, 2, 3})

    if report.ssh:
        lines += ["", "git over SSH"]
        lines += text_table([[label, str(value)] for label, value in _ssh_rows(report.ssh)])

    lines += ["", "Findings"]
    for finding in sorted(report.findings, key=lambda f: _ORDER.get(f.level, 9)):
        lines += textwrap.wrap(
            f"{finding.level.upper():8} {finding.message}",
            100,
            initial_indent="  ",
            subsequent_indent=" " * 11,
            break_on_hyphens=False,
        )
    if report.fix:
        lines += ["", "Fix"]
        for line in report.fix:
            if not line or line.startswith(" "):
                lines.append(f"  {line}" if line else "")
            else:
                lines += textwrap.wrap(line, 92, initial_indent="  ", subsequent_indent="  ")
    lines += ["", f"Status: {report.status} (exit {report.exit_code})"]
    return "\n".join(lines) + "\n"


def _ssh_rows(ssh: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("built-in server", ssh["listen"] or "off (ssh_port = 0)"),
        ("clone URLs", ssh["clone_url"] or "none shown"),
        ("OpenSSH relay socket", ssh["relay_socket"]),
    ]
    keys = ssh["host_keys"] or ["not made yet (the first `floorless serve` makes them)"]
    rows += [("host key" if n == 0 else "", key) for n, key in enumerate(keys)]
    return rows
