"""Forgejo's and Gitea's ``app.ini``: the directories that decide what each git child pays.

Both read the file with the same INI library, whose rules this module follows:

- ``KEY = VALUE`` lines (``:`` also separates), ``[section]`` headers, keys before the first
  header in the top-level (default) section; ``;`` and ``#`` start comments, also after a
  value, unless the value is quoted with ``"``, `````` or ``\"\"\"``;
- ``%(NAME)s`` is replaced by ``NAME``'s value from the same section, then from its parent
  sections (``repository`` for ``repository.local``), then from the top-level section,
  repeatedly; a name found nowhere stays as written;
- keys and section names are case-sensitive.

The directories and their documented defaults, resolved as the forge resolves them:

============  ==============================  ======================================
directory     key                             default, and what a relative path joins
============  ==============================  ======================================
work path     ``WORK_PATH`` (top level)       ``$FORGEJO_WORK_DIR``/``$GITEA_WORK_DIR``,
                                              else the binary's directory
app data      ``[server] APP_DATA_PATH``      ``data``; relative to the work path
repositories  ``[repository] ROOT``           ``<app data>/forgejo-repositories``
                                              (Gitea: ``gitea-repositories``); work path
git HOME      ``[git] HOME_PATH``             ``home``; relative to app data
local copies  ``[repository.local]``          ``tmp/local-repo``; relative to app data
              ``LOCAL_COPY_PATH``
uploads       ``[repository.upload]``         ``data/tmp/uploads``; relative to the work
              ``TEMP_PATH``                   path
============  ==============================  ======================================
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from floorless.core.errors import DiagnosisError

FORGEJO = "forgejo"
GITEA = "gitea"
PRODUCTS = {FORGEJO: "Forgejo", GITEA: "Gitea"}

_SECTION = re.compile(r"^\[(?P<name>[^\]]*)\]\s*(?:[;#].*)?$")
_REFERENCE = re.compile(r"%\(([^)]*)\)s")
_DEPTH = 99  # substitutions per value, as the INI library allows


@dataclass
class IniFile:
    """A parsed app.ini: raw values by section ("" is the top level), interpolated on read."""

    path: Path
    sections: dict[str, dict[str, str]]
    unresolved: list[str] = field(default_factory=list)

    def raw(self, section: str, key: str) -> str | None:
        """The value as written, looked up in the section, then its parents (not the top)."""
        name = section
        while True:
            found = self.sections.get(name, {}).get(key)
            if found is not None or "." not in name:
                return found
            name = name.rpartition(".")[0]

    def get(self, section: str, key: str) -> str | None:
        """The value with ``%(NAME)s`` references replaced; None when the key is absent."""
        value = self.raw(section, key)
        if value is None:
            return None
        for _ in range(_DEPTH):
            match = _REFERENCE.search(value)
            if match is None:
                break
            name = match.group(1)
            # The same section (a key naming itself skips it), then the top level.
            replacement = None if name == key else self.raw(section, name)
            if replacement is None:
                replacement = self.sections.get("", {}).get(name)
            if replacement is None:
                where = f"[{section}]" if section else "the top of the file"
                top = " or at the top of the file" if section else ""
                note = (
                    f"{where} {key} = {self.raw(section, key)}: %({name})s names no key in "
                    f"{where}{top}, so the forge uses the text literally"
                )
                if note not in self.unresolved:
                    self.unresolved.append(note)
                break
            value = value.replace(match.group(0), replacement)
        return value


def _unquote(value: str) -> str:
    for quote in ('"""', "`", '"'):
        if value.startswith(quote):
            end = value.find(quote, len(quote))
            if end >= len(quote):
                return value[len(quote) : end]
    for marker in (";", "#"):
        cut = value.find(marker)
        if cut >= 0:
            value = value[:cut]
    return value.strip()


def parse_ini(text: str, path: Path) -> IniFile:
    sections: dict[str, dict[str, str]] = {"": {}}
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in ";#":
            continue
        header = _SECTION.match(stripped)
        if header:
            current = header.group("name").strip()
            if current.upper() == "DEFAULT":
                current = ""
            sections.setdefault(current, {})
            continue
        positions = [p for p in (stripped.find("="), stripped.find(":")) if p > 0]
        if not positions:
            raise DiagnosisError(f"{path}, line {number}: not KEY = VALUE or [section]: {line!r}")
        cut = min(positions)
        key = stripped[:cut].strip().strip('`"')
        sections[current][key] = _unquote(stripped[cut + 1 :].strip())
    return IniFile(path, sections)


def read_ini(path: Path) -> IniFile:
    """Read an app.ini; every way it can fail becomes one clear ``DiagnosisError``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DiagnosisError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DiagnosisError(f"{path}: is a directory, not an app.ini file") from None
    except PermissionError:
        raise DiagnosisError(
            f"{path}: permission denied (run doctor as the forge's user, or as root)"
        ) from None
    except OSError as exc:
        raise DiagnosisError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DiagnosisError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_ini(text, path)


@dataclass(frozen=True)
class ResolvedPath:
    """A directory as the forge resolves it, and where that came from."""

    path: Path
    origin: str


@dataclass(frozen=True)
class ForgeLayout:
    product: str  # FORGEJO or GITEA
    ini: IniFile
    work: ResolvedPath
    app_data: ResolvedPath
    git_home: ResolvedPath
    repositories: ResolvedPath
    local_copies: ResolvedPath
    uploads: ResolvedPath
    git_executable: str | None

    @property
    def name(self) -> str:
        return PRODUCTS[self.product]


def _join(base: Path, value: str) -> Path:
    path = Path(value)
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _work_path(
    ini: IniFile, product: str, environ: Mapping[str, str], work_path: Path | None
) -> ResolvedPath:
    configured = ini.get("", "WORK_PATH")
    if configured:
        if not Path(configured).is_absolute():
            raise DiagnosisError(
                f"{ini.path}: WORK_PATH = {configured} must be an absolute path "
                f"(the forge refuses to start with a relative one)"
            )
        return ResolvedPath(Path(os.path.normpath(configured)), "WORK_PATH")
    if work_path is not None:
        return ResolvedPath(work_path.absolute(), "--work-path")
    names = ("FORGEJO_WORK_DIR", "GITEA_WORK_DIR") if product == FORGEJO else ("GITEA_WORK_DIR",)
    for name in names:
        if environ.get(name):
            return ResolvedPath(Path(environ[name]), f"${name}")
    config = ini.path.absolute()
    if config.parent.name == "conf" and config.parent.parent.name == "custom":
        return ResolvedPath(config.parents[2], "the app.ini's place in WORK/custom/conf/")
    return ResolvedPath(
        config.parent,
        "assumed: the app.ini's directory (set WORK_PATH in app.ini or pass --work-path)",
    )


def resolve_layout(
    path: Path,
    product: str,
    environ: Mapping[str, str] | None = None,
    work_path: Path | None = None,
) -> ForgeLayout:
    """Every directory that matters, from the app.ini at ``path``, as ``product`` reads it."""
    environ = os.environ if environ is None else environ
    ini = read_ini(path)
    work = _work_path(ini, product, environ, work_path)

    def setting(
        section: str, key: str, default: str, base: Path, default_text: str
    ) -> ResolvedPath:
        value = ini.get(section, key)
        label = f"[{section}] {key}" if section else key
        if value:
            return ResolvedPath(_join(base, value), label)
        return ResolvedPath(_join(base, default), f"{label} (default: {default_text})")

    app_data = setting("server", "APP_DATA_PATH", "data", work.path, "WORK_PATH/data")
    repo_dir = "forgejo-repositories" if product == FORGEJO else "gitea-repositories"
    repositories = setting(
        "repository", "ROOT", str(app_data.path / repo_dir), work.path, f"APP_DATA_PATH/{repo_dir}"
    )
    git_home = setting("git", "HOME_PATH", "home", app_data.path, "%(APP_DATA_PATH)s/home")
    local_copies = setting(
        "repository.local", "LOCAL_COPY_PATH", "tmp/local-repo", app_data.path,
        "APP_DATA_PATH/tmp/local-repo",
    )  # fmt: skip
    uploads = setting(
        "repository.upload", "TEMP_PATH", "data/tmp/uploads", work.path,
        "WORK_PATH/data/tmp/uploads",
    )  # fmt: skip
    return ForgeLayout(
        product=product,
        ini=ini,
        work=work,
        app_data=app_data,
        git_home=git_home,
        repositories=repositories,
        local_copies=local_copies,
        uploads=uploads,
        git_executable=ini.get("git", "PATH") or None,
    )
