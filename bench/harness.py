"""What every measurement of the benchmark shares: the scenarios of ``python -m bench``
(``bench.scenarios``) and the tools run on their own (``bench.load``, ``bench.sweep``...).

- the repository under test (``Target``), its copies (``prepare_store``) and git run with a
  clean environment (``git``, ``pushed``);
- the servers measured: floorless, the spawn-per-page reference (``bench.reference``) and the
  peers of ``bench.contenders``, each on a free loopback port, polled until it listens, and
  stopped with its whole process group (``start_contender``, ``wait_listening``...);
- the record of a run (``Options``, ``Context``, ``ContenderRun``, ``Results``), the judging
  of its figures against the targets (``Check``), and what a scenario is (``Scenario``,
  ``Report``): its flags, its run and its part of the report.

It imports no scenario and no report: those import it, so the benchmark's imports point one
way (tests/bench/test_bench_shape.py holds that).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bench import contenders, measure
from bench import repos as bench_repos
from bench.measure import PageResult

# the pages every contender serves, by the names the report gives them (see ``page_urls``)
PAGES = ("home", "dir", "file", "raw", "commits", "history", "commit", "blame", "explore")
CONTENDERS = ("floorless", "reference", "cgit", "cgit-cache", "gitweb", "klaus")
OWNER = "bench"
ENV_CLEAN = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "LC_ALL": "C",
    # the floorless under test: a checkout's src/ when the caller names one
    **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
}


# -- the run and its record -------------------------------------------------------------------


class Options(argparse.Namespace):
    """A run's options, as ``python -m bench`` parses them (``bench.run.parser``). Those every
    scenario reads are typed here; each scenario's own flags (``--cold-parts``...) are
    attributes too, named as argparse names them."""

    repo: str  # a size from bench.repos.SIZES, or a path to a repository
    scenarios: tuple[str, ...]
    requests: int  # sequential requests a page
    warmup: int
    page_deadline: float  # seconds one page's requests may take at most
    workdir: Path | None
    cache_dir: Path

    def record(self) -> dict[str, Any]:
        """The options as the JSON keeps them."""
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class Target:
    """The repository under test, and the paths its pages use."""

    name: str
    path: Path
    kind: str
    branch: str
    file: str
    directory: str
    history_path: str
    commits: int


@dataclass
class ContenderRun:
    """One contender's pages measured on one storage (the ``local`` and ``slow`` scenarios)."""

    contender: str
    scenario: str
    skipped: str | None = None
    cold_start_ms: float | None = None
    cold_push_ms: float | None = None
    push_visible_after_s: float | None = None
    pages: dict[str, PageResult] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # pages that could not be measured


@dataclass
class Context:
    """What a scenario's run is given, and where it leaves what it measured."""

    options: Options
    repo: Target
    commit: str  # the commit page's commit: the branch tip's parent
    home: Path  # a git HOME for the benchmark's own git commands
    workdir: Path  # the run's scratch directory; a scenario works in ``workdir / name``
    log: Callable[[str], None]
    runs: list[ContenderRun] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)  # each scenario's, under its key


@dataclass
class Results:
    repo: dict[str, Any]
    options: dict[str, Any]
    runs: list[ContenderRun]
    machine: dict[str, str]
    started: str
    seconds: float
    # each scenario's figures under its ``Scenario.key`` (the JSON has them at its top level)
    figures: dict[str, Any] = field(default_factory=dict)

    def ran(self, scenario: Scenario) -> bool:
        return any(name in self.options["scenarios"] for name in scenario.names)


@dataclass
class Check:
    """A target and whether the run met it (None: not measured in this run)."""

    target: str
    passed: bool | None
    detail: str


# -- what a scenario is -----------------------------------------------------------------------


def names(text: str) -> tuple[str, ...]:
    """A flag's comma-separated list (``--scenarios local,api``; '' for none)."""
    return tuple(name for name in text.split(",") if name)


def _none(results: Results) -> list[str]:
    return []


def _as_is(raw: Any) -> Any:
    return raw


def _fine(options: Options) -> str | None:
    return None


@dataclass(frozen=True)
class Standalone:
    """A section that can replace its own in a page another run wrote (see
    ``bench.report.write_docs``): its heading, and the section with its run's header."""

    heading: str
    section: Callable[[Results, str], list[str]]


@dataclass(frozen=True)
class Report:
    """A scenario's part of the report. Each says nothing of a run without the scenario,
    except the checks a scenario always states (as "not measured")."""

    checks: Callable[[Results], list[Check]]  # its targets, judged
    section: Callable[[Results, str], list[str]]  # its part of docs/benchmarks.md (command)
    table: Callable[[Results], list[str]] = _none  # its lines of the terminal table
    intro: Callable[[Results], list[str]] = _none  # lines under the page's repository line
    standalone: Standalone | None = None


@dataclass(frozen=True)
class Scenario:
    """One entry of the registry (``bench.scenarios.REGISTRY``)."""

    names: tuple[str, ...]  # what --scenarios calls it (the storage scenarios: local, slow)
    summary: str  # what it measures, for --help
    arguments: Callable[[argparse.ArgumentParser], None]  # adds its own flags
    run: Callable[[Context, str], None]  # measures, given the name it was asked by
    report: Report
    key: str | None = None  # where its figures are kept, in Results.figures and the JSON
    decode: Callable[[Any], Any] = _as_is  # its figures from the JSON
    default: bool = False  # run when --scenarios is not given
    validate: Callable[[Options], str | None] = _fine  # what is wrong with its flags


# -- repositories and git ---------------------------------------------------------------------


def target_repository(spec: str, cache_dir: Path) -> Target:
    """The repository a run measures: a generated size (built once into ``cache_dir``) or
    the path of any repository."""
    if spec in bench_repos.SIZES:
        built = bench_repos.ensure(spec, cache_dir.absolute())
        name = spec
    else:
        built = bench_repos.from_path(Path(spec).absolute())
        name = Path(spec).name.removesuffix(".git") or "repo"
    return Target(
        name=name,
        path=built.path,
        kind=built.kind,
        branch=built.branch,
        file=built.file,
        directory=built.directory,
        history_path=built.history_path,
        commits=built.commits,
    )


def prepare_store(store: Path, source_repo: Path, name: str) -> tuple[Path, Path]:
    """A repositories directory holding a copy of the benchmark repository, and a git HOME
    with the config files git reads at start-up."""
    repos = store / "repos"
    target = repos / OWNER / f"{name}.git"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source_repo, target, symlinks=True)
    home = store / "home"
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.org\n")
    (home / ".config" / "git" / "config").write_text("[core]\n\tquotePath = true\n")
    return repos, home


def git(git_dir: Path, *args: str, home: Path, stdin: bytes | None = None) -> str:
    env = {
        **ENV_CLEAN,
        "HOME": str(home),
        "GIT_AUTHOR_NAME": "Bench",
        "GIT_AUTHOR_EMAIL": "bench@example.org",
        "GIT_COMMITTER_NAME": "Bench",
        "GIT_COMMITTER_EMAIL": "bench@example.org",
    }
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        env=env,
        input=stdin,
        capture_output=True,
        check=True,
        timeout=300,
    )
    return out.stdout.decode().strip()


@contextlib.contextmanager
def pushed(git_dir: Path, branch: str, home: Path) -> Iterator[str]:
    """A new commit on ``branch`` (as a push would leave it); the branch is put back after."""
    old = git(git_dir, "rev-parse", f"refs/heads/{branch}", home=home)
    tree = git(git_dir, "rev-parse", f"{old}^{{tree}}", home=home)
    new = git(git_dir, "commit-tree", tree, "-p", old, "-m", "bench: a pushed commit", home=home)
    git(git_dir, "update-ref", f"refs/heads/{branch}", new, old, home=home)
    try:
        yield new
    finally:
        git(git_dir, "update-ref", f"refs/heads/{branch}", old, new, home=home)


# -- the servers --------------------------------------------------------------------------------


@dataclass
class Served:
    """A started contender: its URLs per page, and how to stop it."""

    base_url: str
    urls: dict[str, str | None]
    stop: Callable[[], None]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes] | None, deadline: float) -> None:
    """Poll until something accepts connections on ``port`` (no request is sent)."""
    stop_at = time.monotonic() + deadline
    while time.monotonic() < stop_at:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listening on port {port} after {deadline:.0f} s")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """End a server we started, and its children (it leads its own process group)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def page_urls(base: str, repo: Target, commit: str) -> dict[str, str | None]:
    """The Forgejo-shaped URLs floorless and the reference forge both answer."""
    r = f"{base}/{OWNER}/{repo.name}"
    b = repo.branch
    return {
        "home": r,
        "dir": f"{r}/src/branch/{b}/{repo.directory}",
        "file": f"{r}/src/branch/{b}/{repo.file}",
        "raw": f"{r}/raw/branch/{b}/{repo.file}",
        "commits": f"{r}/commits/branch/{b}",
        "history": f"{r}/commits/branch/{b}/{repo.history_path}",
        "commit": f"{r}/commit/{commit}",
        "blame": f"{r}/blame/branch/{b}/{repo.file}",
        "explore": f"{base}/",
    }


def start_floorless(
    repos: Path, data: Path, repo: Target, commit: str, extra: tuple[str, ...] = ()
) -> tuple[Served, subprocess.Popen[bytes]]:
    """``floorless serve`` on a free loopback port; ``extra``: more options (``--database``)."""
    port = free_port()
    exe = Path(sys.executable).parent / "floorless"
    proc = subprocess.Popen(
        [
            str(exe),
            "serve",
            "--repos",
            str(repos),
            "--data",
            str(data),
            "--port",
            str(port),
            *([] if "--ssh-port" in extra else ["--ssh-port", "0"]),
            *extra,
        ],
        env={**ENV_CLEAN, "HOME": str(data)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    return Served(base, page_urls(base, repo, commit), lambda: stop_process(proc)), proc


def start_reference(
    repos: Path, home: Path, repo: Target, commit: str
) -> tuple[Served, subprocess.Popen[bytes]]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.reference",
            "--repos",
            str(repos),
            "--home",
            str(home),
            "--port",
            str(port),
        ],
        env={**ENV_CLEAN, "HOME": str(home), "PYTHONPATH": str(Path(__file__).parent.parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    return Served(base, page_urls(base, repo, commit), lambda: stop_process(proc)), proc


def start_contender(
    name: str,
    repos: Path,
    home: Path,
    data: Path,
    repo: Target,
    commit: str,
    workdir: Path,
    ready_timeout: float,
) -> tuple[Served, Callable[[], None]]:
    """Any of ``CONTENDERS`` serving ``repo`` (``cgit-cache``: cgit with its cache)."""
    if name == "floorless":
        served, _ = start_floorless(repos, data, repo, commit)
        return served, served.stop
    if name == "reference":
        served, _ = start_reference(repos, home, repo, commit)
        return served, served.stop
    peer = contenders.start(
        "cgit" if name == "cgit-cache" else name,
        repos,
        f"{OWNER}/{repo.name}",
        repo.branch,
        repo.file,
        repo.directory,
        repo.history_path,
        commit,
        git_home=home,
        workdir=workdir,
        cgit_cache=name == "cgit-cache",
        ready_timeout=ready_timeout,
    )
    return Served(peer.base_url, dict(peer.urls), peer.stop), peer.stop


def skip_reason(name: str) -> str | None:
    """Why contender ``name`` cannot run on this machine, or None."""
    if name in ("floorless", "reference"):
        return None
    return contenders.available("cgit" if name == "cgit-cache" else name)


def wait_floorless_indexed(served: Served, deadline: float) -> None:
    """The index is complete when the home page's last-commit column and the path history
    answer, and the indexer has nothing left to do (the benchmark measures warm pages, not
    indexing: on slow storage the indexer's reads would hold the interpreter meanwhile)."""
    client = measure.Client(served.base_url)
    stop_at = time.monotonic() + deadline
    try:
        while time.monotonic() < stop_at:
            _, home, _ = client.get(served.urls["home"] or "")
            _, history, _ = client.get(served.urls["history"] or "")
            _, metrics, _ = client.get(served.base_url + "/-/metrics")
            idle = b"\nfloorless_index_pending 0.0\n" in metrics
            if b'data-ready="yes"' in home and b"being prepared" not in history and idle:
                return
            time.sleep(0.1)
    finally:
        client.close()
    raise RuntimeError("floorless did not finish indexing in time")


def visible_after(url: str, needle: str, deadline: float) -> float | None:
    """Seconds until ``needle`` shows on ``url`` (polling), or None."""
    began = time.monotonic()
    client = measure.Client(url)
    try:
        while time.monotonic() - began < deadline:
            _, body, _ = client.get(url)
            if needle.encode() in body:
                return time.monotonic() - began
            time.sleep(0.05)
    finally:
        client.close()
    return None


def server_rss_mb(root_pid: int) -> float:
    """Resident memory of the server's processes below ``root_pid`` (granian's and its worker)."""
    total = 0
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(p) for p in (task / "children").read_text().split()]
    return total / 1024


def fresh_database(server: str, name: str) -> str:
    """An empty database ``name`` on the PostgreSQL server at ``server``; its URL."""
    import psycopg  # only the runs on PostgreSQL need it
    from psycopg import sql

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.rsplit("/", 1)[0] + "/" + name


def load_average() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes (``/proc/loadavg``): what else was
    running beside a measurement."""
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def machine() -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "git": git_version,
    }


# -- what every report section uses -----------------------------------------------------------


def num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def figure_at(tree: Any, *keys: str) -> Any:
    """The figure under ``keys`` in a scenario's figures (nested dicts, as the JSON has them),
    or None when any key is missing."""
    for key in keys:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def within(value: float | None, limit: float) -> bool | None:
    """A figure held to at most ``limit`` (None: not measured)."""
    return None if value is None else value <= limit


def why_missing(figures: dict[str, Any], part: str) -> str:
    """Why a part of a run made of parts (``figures["parts"]``, its failures in
    ``figures["errors"]``: bench.cold_suite's) gave no figure."""
    error = figures.get("errors", {}).get(part)
    if error:
        return f"the {part} part failed: {error}"
    if part not in figures.get("parts", []):
        return f"the {part} part was not run"
    return f"the {part} part gave no figure"


def page_result(raw: Any) -> PageResult:
    """A page's figures from the JSON (keys a newer PageResult no longer has are left out)."""
    known = {f.name for f in fields(PageResult)}
    return PageResult(**{k: v for k, v in raw.items() if k in known})


def judged(checks: list[Check]) -> list[str]:
    """The checks as the page lists them."""
    marks = {True: "met", False: "**missed**", None: "not measured"}
    return [f"- {c.target}: {marks[c.passed]} ({c.detail})" for c in checks]


def measuring(results: Results) -> list[str]:
    """The page's lines on how pages were measured: requests, warm-up, throughput, storage."""
    options = results.options
    return [
        f"Slow storage: every filesystem operation delayed {options['delay_ms']} ms"
        + (f" (random {options['jitter_ms']})" if options["jitter_ms"] else "")
        + f", kernel attribute cache {options['cache_seconds']} s.",
        f"{options['requests']} sequential requests a page after "
        f"{options['warmup']} to warm up; throughput at concurrency "
        f"{options['concurrency']} for {options['throughput_seconds']} s.",
    ]


def standalone(
    results: Results, heading: str, command: str, checks: list[Check], git: bool = False
) -> list[str]:
    """A section's head as it stands on its own in a page another run wrote: its run, its
    command and its targets (``git``: the git version too)."""
    python = f"Python {results.machine['python']}" + (f", {results.machine['git']}" if git else "")
    return [
        heading,
        "",
        f"Measured {results.started} on {results.machine['cores']} cores "
        f"({results.machine['cpu']}), {python}; the run took {results.seconds:.0f} s.",
        "",
        "```sh",
        command,
        "```",
        "",
        "Targets:",
        "",
        *judged(checks),
        "",
    ]
