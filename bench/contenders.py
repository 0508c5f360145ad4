"""Start and stop the peer git web viewers the benchmark compares floorless with.

Each contender serves every bare repository below a directory ``repos`` (``owner/name.git``,
or ``name.git`` directly below it), listens on 127.0.0.1 only, on a port chosen at run time,
and keeps its configuration, sockets and logs in a fresh directory under ``workdir`` (a
socket path too long for ``sun_path`` moves to a short directory under /tmp). Every
process is started in a session of its own, so that stopping a contender ends its whole
process group (workers, CGI children and their git children included), by id.

cgit
    nginx (``daemon off``, one worker, its own pid file and logs) passes every request but
    cgit's static files to ``fcgiwrap`` over a unix socket; fcgiwrap runs ``cgit.cgi`` once
    per request, with ``WORKERS`` prefork children. The generated ``cgitrc`` has
    ``virtual-root=/`` and one explicit ``repo.url``/``repo.path`` pair per repository (no
    ``scan-path``, which cgit would repeat on every uncached request), so ``/{owner}/{name}/``
    is the repository. ``enable-blame=1`` turns on cgit's blame page (cgit 1.2 has one,
    off by default). ``cache-size=0`` by default; ``cgit_cache=True`` turns on cgit's page
    cache (``cache-root`` in the temp dir, ``cache-size=1000``).
gitweb
    The same nginx + fcgiwrap pair runs ``gitweb.cgi`` (Perl, one interpreter per request)
    with a generated ``gitweb.conf`` (``$projectroot``, blame enabled) named by
    ``GITWEB_CONFIG``; ``GITWEB_CONFIG_COMMON`` names a file that does not exist so that no
    system-wide file is read. Pages are gitweb's query-string URLs (``?p=owner/name.git;a=``).
klaus
    ``klaus.make_app`` under gunicorn (klaus's documented deployment; the ``klaus`` CLI runs
    werkzeug's development server and cannot give repositories an owner), ``WORKERS`` sync
    workers, each owner a klaus namespace: ``/~{owner}/{name}/``.

git's HOME: fcgiwrap hands its own environment to every CGI it runs (nginx adds only the
request's variables), so fcgiwrap and gunicorn are started with ``HOME=git_home`` and
``XDG_CONFIG_HOME=git_home/.config``; gitweb's and klaus's git children inherit them. cgit
links libgit instead of running git, and unsets ``HOME`` and ``XDG_CONFIG_HOME`` itself
before it opens a repository, so it never reads the global git config wherever HOME is.

Use :func:`running` (a context manager) or :func:`start` and :meth:`Contender.stop`;
:func:`available` says why a contender cannot run on this machine.
"""

from __future__ import annotations

import contextlib
import grp
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

NAMES = ("cgit", "gitweb", "klaus")
PAGE_KINDS = ("home", "dir", "file", "raw", "commits", "history", "commit", "blame", "explore")

WORKERS = 4  # fcgiwrap prefork children, gunicorn workers
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
START_ATTEMPTS = 3  # a free port can be taken between choosing it and binding it

CGIT_CGI = Path("/usr/lib/cgit/cgit.cgi")
CGIT_STATIC = Path("/usr/share/cgit")
GITWEB_CGI = Path("/usr/share/gitweb/gitweb.cgi")
GITWEB_STATIC = Path("/usr/share/gitweb/static")
FASTCGI_PARAMS = Path("/etc/nginx/fastcgi_params")

_INSTALL_HINT = "run scripts/install-bench-deps.sh"
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes


class ContenderError(RuntimeError):
    """A contender could not be started (its logs are quoted in the message)."""


class _EarlyExit(ContenderError):
    """A process of the contender exited before the contender answered."""


@dataclass
class Contender:
    """A running peer: where it listens, its page URLs, and the processes it owns.

    ``pid`` is the front server (nginx's master, gunicorn's arbiter); ``pids`` every process
    started directly, each the leader of its own process group.
    """

    name: str
    base_url: str
    urls: dict[str, str | None]
    pid: int
    pids: tuple[int, ...] = ()
    directory: Path | None = None  # configuration and logs
    _launch: _Launch | None = field(default=None, repr=False)

    def processes(self) -> list[int]:
        """Every live (non-zombie) process of the contender: leaders, workers, CGI children."""
        return self._launch.processes() if self._launch else []

    def stop(self) -> None:
        """End every process the contender started, front server first; idempotent."""
        if self._launch:
            self._launch.stop()


# --------------------------------------------------------------------------- availability


def _which(program: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(program, path=path)


def available(name: str) -> str | None:
    """None if contender ``name`` can run here, else a human-readable reason."""
    if name not in NAMES:
        raise ValueError(f"unknown contender {name!r}; expected one of {', '.join(NAMES)}")
    if name == "klaus":
        modules = [m for m in ("klaus", "gunicorn") if importlib.util.find_spec(m) is None]
        if modules:
            return (
                f"klaus: Python package {', '.join(modules)} not installed in {sys.prefix}; "
                + _INSTALL_HINT
            )
        missing = [] if _which("git") else ["git"]
    else:
        cgi = CGIT_CGI if name == "cgit" else GITWEB_CGI
        missing = [] if cgi.is_file() else [name]
        missing += [p for p in ("nginx", "fcgiwrap", "git") if _which(p) is None]
    if missing:
        noun = "package" if len(missing) == 1 else "packages"
        return f"{name}: Debian {noun} {', '.join(missing)} not installed; {_INSTALL_HINT}"
    return None


# ---------------------------------------------------------------------------- processes


def _live_processes() -> Iterator[tuple[int, int]]:
    """(pid, process group) of every process that is not a zombie, from /proc."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] not in (b"Z", b"X"):
            yield int(entry.name), int(fields[2])


def _group_members(pgid: int) -> list[int]:
    return [pid for pid, group in _live_processes() if group == pgid]


def _stop_group(proc: subprocess.Popen[bytes]) -> list[int]:
    """SIGTERM the process group led by ``proc``, then SIGKILL whatever outlives the grace;
    return the pids that survive even that (none, in practice).

    The group is signalled as a whole only while its leader is unreaped (so its id cannot
    have been reused); members left after that (fcgiwrap's children outlive their parent)
    are signalled one by one, by pid.
    """
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + STOP_TIMEOUT
    while members := _group_members(proc.pid):
        sig = signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if time.monotonic() > deadline + STOP_TIMEOUT:
            return members
        time.sleep(0.01)
    return []


@dataclass
class _Launch:
    """A contender being started in ``tmp``: the processes so far (each a process group
    leader, started in order), the logs to quote if it fails, its URLs, scratch dirs."""

    tmp: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    urls: dict[str, str | None] = field(default_factory=dict)
    cleanup: list[Path] = field(default_factory=list)

    def spawn(self, args: list[str], env: dict[str, str], log: Path) -> None:
        """Start ``args`` in a session of its own, its output appended to ``log``."""
        with open(log, "ab") as out:
            self.procs.append(
                subprocess.Popen(
                    args,
                    env=env,
                    cwd=self.tmp,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def processes(self) -> list[int]:
        groups = {proc.pid for proc in self.procs}
        return sorted(pid for pid, pgid in _live_processes() if pgid in groups)

    def stop(self) -> None:
        survivors = []
        for proc in reversed(self.procs):
            survivors += _stop_group(proc)
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)
        self.cleanup.clear()
        if survivors:
            raise ContenderError(f"processes {survivors} survive SIGKILL")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return ""
    return f"\n--- {path.name}:\n{text[-limit:]}" if text.strip() else ""


def _wait_ready(
    url: str, procs: list[subprocess.Popen[bytes]], logs: list[Path], timeout: float
) -> None:
    """Poll ``url`` until it answers 200, while every process stays alive. One request may
    take up to what is left of ``timeout`` (on slow storage a CGI's first page takes tens of
    seconds: giving up on it early would only start another behind it)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while (left := deadline - time.monotonic()) > 0:
        for proc in procs:
            if proc.poll() is not None:
                raise _EarlyExit(
                    f"{proc.args!r} exited with {proc.returncode}"
                    + "".join(_tail(log) for log in logs)
                )
        try:
            with urllib.request.urlopen(url, timeout=max(left, 1)) as response:  # noqa: S310
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            last = f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            last = str(error)
        time.sleep(0.01)
    raise ContenderError(
        f"{url} not ready in {timeout:.0f} s ({last})" + "".join(_tail(log) for log in logs)
    )


def _git_env(git_home: Path) -> dict[str, str]:
    """The environment every contender process (and so every git child) starts with."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(git_home),
        "XDG_CONFIG_HOME": str(git_home / ".config"),
        "LANG": "C.UTF-8",
    }


# ------------------------------------------------------------------------- repositories


@dataclass(frozen=True)
class _Repo:
    owner: str | None
    name: str
    path: Path

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.name}" if self.owner else self.name


def _is_bare(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _bare_repos(repos: Path) -> list[_Repo]:
    """The bare repositories ``name.git`` and ``owner/name.git`` below ``repos``."""
    found = []
    for path in sorted(repos.iterdir()):
        if path.name.endswith(".git") and _is_bare(path):
            found.append(_Repo(None, path.name[:-4], path.resolve()))
        elif path.is_dir() and not path.name.startswith("."):
            for sub in sorted(path.iterdir()):
                if sub.name.endswith(".git") and _is_bare(sub):
                    found.append(_Repo(path.name, sub.name[:-4], sub.resolve()))
    return found


@dataclass(frozen=True)
class _Pages:
    """What the benchmark looks at in the one repository."""

    repo: _Repo
    branch: str
    file: str
    directory: str
    history_path: str
    commit: str


def _q(text: str) -> str:
    return quote(text, safe="/")


# ------------------------------------------------------------------------ nginx + fcgiwrap


def nginx_main(work: Path, workers: int, http: str) -> str:
    """An nginx.conf for an nginx run unprivileged, with every file of its own in ``work``;
    ``http`` is the inside of its http block."""
    user = ""
    if os.geteuid() == 0:  # workers would drop to nobody, who may not reach ``work``
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    temp = "\n".join(
        f"    {kind}_temp_path {work / (kind + '_temp')};"
        for kind in ("client_body", "fastcgi", "proxy", "uwsgi", "scgi")
    )
    return f"""\
{user}
worker_processes {workers};
pid {work / "nginx.pid"};
error_log {work / "nginx-error.log"} warn;
events {{
    worker_connections 1024;
}}
http {{
{temp}
{http}
}}
"""


def _nginx_conf(tmp: Path, port: int, socket_path: Path, locations: str) -> str:
    return nginx_main(
        tmp,
        1,
        f"""\
    access_log {tmp / "nginx-access.log"};
    types {{
        text/css css;
        image/png png;
        image/x-icon ico;
        application/javascript js;
        text/plain txt;
    }}
    upstream cgi {{
        server unix:{socket_path};
    }}
    server {{
        listen 127.0.0.1:{port};
        server_name 127.0.0.1;
{locations}
    }}""",
    )


def _cgi_location(script: Path, extra: str = "") -> str:
    return f"""\
        location / {{
            include {FASTCGI_PARAMS};
            fastcgi_param SCRIPT_FILENAME {script};
{extra}            fastcgi_pass cgi;
        }}"""


def _cgitrc(tmp: Path, repos: list[_Repo], cache: bool) -> str:
    cache_lines = (
        f"cache-root={tmp / 'cgit-cache'}\ncache-size=1000\n" if cache else "cache-size=0\n"
    )
    entries = "".join(f"repo.url={r.slug}\nrepo.path={r.path}\n" for r in repos)
    return (
        "virtual-root=/\n"
        "css=/cgit.css\nlogo=/cgit.png\nfavicon=/favicon.ico\n"
        "enable-blame=1\n"
        f"{cache_lines}"
        f"{entries}"
    )


def _cgit_urls(base: str, p: _Pages) -> dict[str, str | None]:
    root = f"{base}/{_q(p.repo.slug)}"
    h = f"?h={quote(p.branch, safe='')}"
    return {
        "home": f"{root}/",
        "dir": f"{root}/tree/{_q(p.directory)}{h}",
        "file": f"{root}/tree/{_q(p.file)}{h}",
        "raw": f"{root}/plain/{_q(p.file)}{h}",
        "commits": f"{root}/log/{h}",
        "history": f"{root}/log/{_q(p.history_path)}{h}",
        "commit": f"{root}/commit/?id={p.commit}",
        "blame": f"{root}/blame/{_q(p.file)}{h}",
        "explore": f"{base}/",
    }


def _gitweb_conf(tmp: Path, repos: Path) -> str:
    def perl(text: str | Path) -> str:
        return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"

    return (
        f"$projectroot = {perl(repos.resolve())};\n"
        f"$git_temp = {perl(tmp)};\n"
        "$site_name = 'gitweb';\n"
        "@stylesheets = ('/static/gitweb.css');\n"
        "$javascript = '/static/gitweb.js';\n"
        "$logo = '/static/git-logo.png';\n"
        "$favicon = '/static/git-favicon.png';\n"
        "$feature{'blame'}{'default'} = [1];\n"
        "1;\n"
    )


def _gitweb_urls(base: str, p: _Pages) -> dict[str, str | None]:
    def url(action: str, **params: str) -> str:
        query = ";".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())
        return f"{base}/?p={_q(p.repo.slug)}.git;a={action}" + (f";{query}" if query else "")

    head = f"refs/heads/{p.branch}"
    return {
        "home": url("summary"),
        "dir": url("tree", f=p.directory, hb=head),
        "file": url("blob", f=p.file, hb=head),
        "raw": url("blob_plain", f=p.file, hb=head),
        "commits": url("shortlog", h=head),
        "history": url("history", f=p.history_path, hb=head),
        "commit": url("commitdiff", h=p.commit),
        "blame": url("blame", f=p.file, hb=head),
        "explore": f"{base}/",
    }


def _start_cgi(
    launch: _Launch, name: str, port: int, repos: Path, pages: _Pages, git_home: Path, cache: bool
) -> None:
    tmp = launch.tmp
    if any(c.isspace() or c in ";{}\"'" for c in str(tmp)):
        raise ValueError(f"nginx's configuration cannot name {tmp}: choose a plainer workdir")
    sock_dir = tmp
    if len(str(tmp / "fcgiwrap.sock")) > _SOCKET_PATH_MAX:  # a deep workdir: a short /tmp dir
        sock_dir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        launch.cleanup.append(sock_dir)
    socket_path = sock_dir / "fcgiwrap.sock"
    env = _git_env(git_home)
    base = f"http://127.0.0.1:{port}"
    if name == "cgit":
        if cache:
            (tmp / "cgit-cache").mkdir()  # cgit does not create its cache-root
        (tmp / "cgitrc").write_text(_cgitrc(tmp, _bare_repos(repos), cache))
        env["CGIT_CONFIG"] = str(tmp / "cgitrc")
        static = "|".join(p.name.replace(".", r"\.") for p in sorted(CGIT_STATIC.iterdir()))
        locations = (
            f"        location ~ ^/({static})$ {{\n            root {CGIT_STATIC};\n        }}\n"
            + _cgi_location(
                CGIT_CGI,
                "            fastcgi_param PATH_INFO $uri;\n"
                "            fastcgi_param QUERY_STRING $args;\n",
            )
        )
        launch.urls = _cgit_urls(base, pages)
    else:
        (tmp / "gitweb.conf").write_text(_gitweb_conf(tmp, repos))
        env["GITWEB_CONFIG"] = str(tmp / "gitweb.conf")
        env["GITWEB_CONFIG_COMMON"] = str(tmp / "no-common-config")
        locations = (
            f"        location /static/ {{\n            alias {GITWEB_STATIC}/;\n        }}\n"
            + _cgi_location(GITWEB_CGI)
        )
        launch.urls = _gitweb_urls(base, pages)
    (tmp / "nginx.conf").write_text(_nginx_conf(tmp, port, socket_path, locations))
    fcgiwrap, nginx = _which("fcgiwrap"), _which("nginx")
    if fcgiwrap is None or nginx is None:
        raise ContenderError(available(name) or "nginx or fcgiwrap went missing")
    launch.logs = [tmp / "fcgiwrap.log", tmp / "nginx.log", tmp / "nginx-error.log"]
    launch.spawn([fcgiwrap, "-c", str(WORKERS), "-s", f"unix:{socket_path}"], env, launch.logs[0])
    launch.spawn(
        [nginx, "-e", str(launch.logs[2]), "-p", str(tmp), "-c", str(tmp / "nginx.conf"),
         "-g", "daemon off;"],
        {"PATH": env["PATH"]},
        launch.logs[1],
    )  # fmt: skip


# ------------------------------------------------------------------------------- klaus


def _klaus_urls(base: str, p: _Pages) -> dict[str, str | None]:
    prefix = f"~{p.repo.owner}/" if p.repo.owner else ""
    root = f"{base}/{_q(prefix + p.repo.name)}"
    rev = quote(p.branch, safe="")
    return {
        "home": f"{root}/",
        "dir": f"{root}/tree/{rev}/{_q(p.directory)}",
        "file": f"{root}/blob/{rev}/{_q(p.file)}",
        "raw": f"{root}/raw/{rev}/{_q(p.file)}",
        "commits": f"{root}/tree/{rev}/",
        "history": f"{root}/tree/{rev}/{_q(p.history_path)}",
        "commit": f"{root}/commit/{p.commit}/",
        "blame": f"{root}/blame/{rev}/{_q(p.file)}",
        "explore": f"{base}/",
    }


def _start_klaus(launch: _Launch, port: int, repos: Path, pages: _Pages, git_home: Path) -> None:
    tmp = launch.tmp
    namespaces: dict[str | None, list[str]] = {}
    for repo in _bare_repos(repos):
        namespaces.setdefault(repo.owner, []).append(str(repo.path))
    # gunicorn evaluates the factory's arguments with ast.literal_eval.
    app = f"klaus:make_app({namespaces!r}, 'klaus')"
    log = tmp / "gunicorn.log"
    args = [
        sys.executable, "-m", "gunicorn",
        "--bind", f"127.0.0.1:{port}",
        "--workers", str(WORKERS),
        "--graceful-timeout", "2",
        "--error-logfile", str(log),
        "--access-logfile", str(tmp / "gunicorn-access.log"),
        "--chdir", str(tmp),
        app,
    ]  # fmt: skip
    env = _git_env(git_home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    launch.logs = [log]
    launch.urls = _klaus_urls(f"http://127.0.0.1:{port}", pages)
    launch.spawn(args, env, log)


# ------------------------------------------------------------------------------ the API


def start(
    name: str,
    repos: Path,
    repo: str,
    branch: str,
    file: str,
    directory: str,
    history_path: str,
    commit: str,
    git_home: Path,
    workdir: Path,
    cgit_cache: bool = False,
    ready_timeout: float = READY_TIMEOUT,
) -> Contender:
    """Start contender ``name`` over the bare repositories below ``repos`` and wait until it
    answers; ``repo`` ("owner/name", the bare ``repos/owner/name.git``) is the repository
    whose pages ``Contender.urls`` name. Raises ContenderError if it does not come up."""
    reason = available(name)
    if reason is not None:
        raise ContenderError(reason)
    owner, _, short = repo.rpartition("/")
    path = repos / f"{repo}.git"
    if not _is_bare(path):
        raise ValueError(f"{path} is not a bare repository")
    pages = _Pages(
        _Repo(owner or None, short, path.resolve()), branch, file, directory, history_path, commit
    )
    workdir.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while True:
        launch = _Launch(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workdir)))
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        try:
            if name == "klaus":
                _start_klaus(launch, port, repos, pages, git_home)
            else:
                _start_cgi(launch, name, port, repos, pages, git_home, cgit_cache)
            _wait_ready(base_url + "/", launch.procs, launch.logs, ready_timeout)
        except _EarlyExit:
            launch.stop()
            if attempt >= START_ATTEMPTS:  # not a lost race for the port, then
                raise
            attempt += 1
            continue
        except BaseException:
            launch.stop()
            raise
        return Contender(
            name=name,
            base_url=base_url,
            urls=launch.urls,
            pid=launch.procs[-1].pid,
            pids=tuple(p.pid for p in launch.procs),
            directory=launch.tmp,
            _launch=launch,
        )


@contextlib.contextmanager
def running(
    name: str,
    repos: Path,
    repo: str,
    branch: str,
    file: str,
    directory: str,
    history_path: str,
    commit: str,
    git_home: Path,
    workdir: Path,
    cgit_cache: bool = False,
) -> Iterator[Contender]:
    """:func:`start` as a context manager that always stops the contender."""
    contender = start(
        name, repos, repo, branch, file, directory, history_path, commit, git_home, workdir,
        cgit_cache,
    )  # fmt: skip
    try:
        yield contender
    finally:
        contender.stop()
