"""The benchmark run: for each scenario (storage), each contender serves the same repository
and each page is measured; the results become a table, a JSON file and docs/benchmarks.md.

Scenarios put the repositories and the contenders' git HOME on (a) local disk and (b) the
slow-storage simulator (``bench.slowfs``). floorless keeps its data directory (database and
runtime directory, i.e. its git HOME) on local disk in both, as its documentation asks; the
others get the HOME they would have on such a machine: the storage under test. A third
scenario, ``api`` (``bench.api``), measures floorless's ``/api/v1`` reads beside the pages
that show the same thing, on local disk.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import api as bench_api
from bench import measure
from bench import repos as bench_repos
from bench.api import ApiRead
from bench.measure import PageResult

PAGES = ("home", "dir", "file", "raw", "commits", "history", "commit", "blame", "explore")
BROWSE_PAGES = ("home", "dir", "file", "raw", "commits", "history", "commit", "explore")
CONTENDERS = ("floorless", "reference", "cgit", "cgit-cache", "gitweb", "klaus")
STORAGES = ("local", "slow")  # the scenarios that measure every contender's pages
DEFAULT_SCENARIOS = (*STORAGES, "api")
# ``cold`` (bench.cold_suite) indexes the repository several times over, ``search``
# (bench.search) widens it to git.git's tree and indexes its code, ``finder`` (bench.finder)
# builds a tree of git.git's file count: each asked for by name (bench.lookups)
SCENARIOS = (*DEFAULT_SCENARIOS, "cold", "search", "finder")
OWNER = "bench"
ENV_CLEAN = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "LC_ALL": "C",
    # the floorless under test: a checkout's src/ when the caller names one
    **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
}


@dataclass
class Options:
    repo: str = "small"  # a size from bench.repos.SIZES, or a path to a repository
    scenarios: tuple[str, ...] = DEFAULT_SCENARIOS
    contenders: tuple[str, ...] = CONTENDERS
    slow_contenders: tuple[str, ...] | None = None  # None: the same as ``contenders``
    requests: int = 200
    warmup: int = 20
    concurrency: int = 16
    throughput_seconds: float = 3.0
    throughput_pages: tuple[str, ...] = PAGES
    delay_ms: float = 30.0
    jitter_ms: tuple[float, float] | None = None
    cache_seconds: float = 0.0
    page_deadline: float = 120.0
    workdir: Path | None = None
    cache_dir: Path = Path(".bench-cache")
    cold_parts: tuple[str, ...] = ()  # the cold scenario's parts; () for all of them
    cold_runs: int = 3  # runs of its blame and commit pages (medians)
    cold_postgres: str | None = None  # a PostgreSQL server for floorless in the cold scenario
    cold_processes: int = 1  # floorless serve --processes in the cold scenario
    search_files: int = 2500  # files the search scenario adds (git.git's tree with ``large``)
    search_megabytes: float = 39.0  # of text in those files
    search_requests: int = 50  # requests a query in the search scenario
    finder_files: int = 4500  # files of the finder scenario's tree (git.git's count)
    finder_requests: int = 200  # requests a case in the finder scenario


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
    contender: str
    scenario: str
    skipped: str | None = None
    cold_start_ms: float | None = None
    cold_push_ms: float | None = None
    push_visible_after_s: float | None = None
    pages: dict[str, PageResult] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # pages that could not be measured


@dataclass
class PairedRun:
    """floorless on local disk and on slow storage, both up at once, measured with requests
    alternating between them: the comparison the slow-against-local target is judged on.
    Measured one scenario after the other, the two would differ by whatever else changed on
    the machine in between, which at sub-millisecond pages is as large as the effect."""

    local: dict[str, PageResult] = field(default_factory=dict)
    slow: dict[str, PageResult] = field(default_factory=dict)


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


def jsonable(runs: list[ContenderRun]) -> list[dict[str, Any]]:
    return [asdict(run) for run in runs]


@dataclass
class Results:
    repo: dict[str, Any]
    options: dict[str, Any]
    runs: list[ContenderRun]
    machine: dict[str, str]
    started: str
    seconds: float
    paired: PairedRun | None = None
    api: list[ApiRead] | None = None  # the api scenario's reads, each beside its page
    cold: dict[str, Any] | None = None  # the cold scenario's figures (bench.cold_suite)
    search: dict[str, Any] | None = None  # the search scenario's (bench.search.SearchBench)
    finder: dict[str, Any] | None = None  # the finder scenario's (bench.finder.measure)


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
    if name == "floorless":
        served, _ = start_floorless(repos, data, repo, commit)
        return served, served.stop
    if name == "reference":
        served, _ = start_reference(repos, home, repo, commit)
        return served, served.stop
    from bench import contenders

    kind = "cgit" if name == "cgit-cache" else name
    peer = contenders.start(
        kind,
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
    if name in ("floorless", "reference"):
        return None
    from bench import contenders

    return contenders.available("cgit" if name == "cgit-cache" else name)


def run_contender(
    name: str,
    scenario: str,
    options: Options,
    repos: Path,
    home: Path,
    data: Path,
    repo: Target,
    commit: str,
    workdir: Path,
    mount: Any,
    log: Callable[[str], None],
) -> ContenderRun:
    result = ContenderRun(name, scenario)
    reason = skip_reason(name)
    if reason is not None:
        result.skipped = reason
        log(f"  {name}: skipped: {reason}")
        return result
    if mount is not None:
        mount.reset()
    from bench.contenders import ContenderError

    # on slow storage a CGI's first answer (its readiness check) takes tens of seconds
    ready_timeout = 900.0 if mount is not None else 60.0
    try:
        served, stop = start_contender(
            name, repos, home, data, repo, commit, workdir, ready_timeout
        )
    except ContenderError as exc:
        result.skipped = f"did not start: {str(exc).splitlines()[0]}"
        log(f"  {name}: {result.skipped}")
        return result
    try:
        port = int(served.base_url.rsplit(":", 1)[1])
        wait_listening(port, None, 120)
        result.cold_start_ms, _ = measure.first_request_ms(served.urls["home"] or "")
        if name == "floorless":
            wait_floorless_indexed(served, 3600)
        for page in PAGES:
            url = served.urls.get(page)
            if url is None:
                continue
            try:
                outcome = measure.measure_page(
                    page,
                    url,
                    options.requests,
                    options.warmup,
                    slowfs_total=mount.request_total if mount is not None else None,
                    slowfs_reset=mount.reset if mount is not None else None,
                    deadline_seconds=options.page_deadline,
                )
            except (OSError, http.client.HTTPException) as exc:
                result.errors.append(f"{page}: {exc or type(exc).__name__}")
                log(f"  {name:10} {page:8} not measured: {result.errors[-1]}")
                continue
            too_slow = outcome.p50_ms > options.throughput_seconds * 1000 / 4
            if too_slow and page in options.throughput_pages:
                # Requests left queued by the load would still run when the next page is
                # measured and count against it; a page this slow has no throughput to speak of.
                outcome.notes.append("throughput not measured: a request takes too long")
            elif page in options.throughput_pages and outcome.status == 200:
                outcome.throughput_rps = measure.throughput(
                    url, options.concurrency, options.throughput_seconds
                )
            result.pages[page] = outcome
            log(
                f"  {name:10} {page:8} {outcome.status} p50 {outcome.p50_ms:9.2f} ms"
                f"  p95 {outcome.p95_ms:9.2f}  spawns {outcome.spawns_per_request:5.1f}"
                + (
                    f"  fs-ops {outcome.slowfs_ops_per_request:7.1f}"
                    if outcome.slowfs_ops_per_request is not None
                    else ""
                )
                + (f"  {outcome.throughput_rps:8.0f} req/s" if outcome.throughput_rps else "")
            )
        git_dir = repos / OWNER / f"{repo.name}.git"
        with pushed(git_dir, repo.branch, home) as new:
            result.cold_push_ms, _ = measure.first_request_ms(served.urls["home"] or "")
            result.push_visible_after_s = visible_after(served.urls["home"] or "", new[:10], 30)
    finally:
        stop()
    return result


def run_paired(
    options: Options,
    local_repos: Path,
    slow_repos: Path,
    workdir: Path,
    repo: Target,
    commit: str,
    mount: Any,
    log: Callable[[str], None],
) -> PairedRun:
    """Both floorless servers up; every page measured with requests alternating."""
    paired = PairedRun()
    local, _ = start_floorless(local_repos, workdir / "paired-local-data", repo, commit)
    try:
        slow, _ = start_floorless(slow_repos, workdir / "paired-slow-data", repo, commit)
        try:
            for served in (local, slow):
                wait_listening(int(served.base_url.rsplit(":", 1)[1]), None, 120)
                wait_floorless_indexed(served, 3600)
            for page in PAGES:
                local_url, slow_url = local.urls.get(page), slow.urls.get(page)
                if local_url is None or slow_url is None:
                    continue
                mount.reset()
                near, far = measure.measure_interleaved(
                    page,
                    [local_url, slow_url],
                    options.requests,
                    options.warmup,
                    slowfs_total=mount.request_total,
                    slowfs_reset=mount.reset,
                    deadline_seconds=options.page_deadline,
                    on_slowfs=1,
                )
                paired.local[page], paired.slow[page] = near, far
                log(
                    f"  paired     {page:8} local p50 {near.p50_ms:7.3f} ms  slow p50 "
                    f"{far.p50_ms:7.3f} ms  {far.p50_ms / near.p50_ms:5.2f}x  "
                    f"fs-ops {far.slowfs_ops_per_request:5.1f}"
                )
        finally:
            slow.stop()
    finally:
        local.stop()
    return paired


def run_api(
    options: Options,
    base: Path,
    data: Path,
    repo: Target,
    commit: str,
    home: Path,
    log: Callable[[str], None],
) -> list[ApiRead]:
    """The api scenario: floorless alone on local disk, its index complete; each API read
    measured with the page that shows the same thing, requests alternating."""
    repos, _ = prepare_store(base, repo.path, repo.name)
    tree = git(repo.path, "rev-parse", f"refs/heads/{repo.branch}:{repo.directory}", home=home)
    served, _ = start_floorless(repos, data, repo, commit)
    try:
        wait_listening(int(served.base_url.rsplit(":", 1)[1]), None, 120)
        wait_floorless_indexed(served, 3600)
        urls = bench_api.read_urls(
            served.base_url, OWNER, repo.name, repo.branch, repo.file, repo.directory, tree
        )
        return bench_api.measure_reads(
            urls, options.requests, options.warmup, options.page_deadline, log
        )
    finally:
        served.stop()


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


def run(options: Options, log: Callable[[str], None] = print) -> Results:
    from bench import slowfs

    began = time.monotonic()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    workdir = options.workdir or Path(
        subprocess.run(
            ["mktemp", "-d", "-t", "floorless-bench-XXXXXX"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    workdir.mkdir(parents=True, exist_ok=True)
    repo = target_repository(options.repo, options.cache_dir)
    home = workdir / "tip-home"
    home.mkdir(exist_ok=True)
    commit = git(repo.path, "rev-parse", f"refs/heads/{repo.branch}~1", home=home)
    runs: list[ContenderRun] = []
    paired: PairedRun | None = None
    api_reads: list[ApiRead] | None = None
    cold: dict[str, Any] | None = None
    search: dict[str, Any] | None = None
    finder: dict[str, Any] | None = None
    for scenario in options.scenarios:
        log(f"scenario {scenario}: {repo.kind} repository, {options.requests} requests a page")
        base = workdir / scenario
        data_root = workdir / f"{scenario}-floorless-data"
        if scenario == "api":
            api_reads = run_api(options, base, data_root, repo, commit, home, log)
            continue
        if scenario == "cold":
            from bench import cold_suite

            base.mkdir(parents=True, exist_ok=True)
            cold = asdict(
                cold_suite.run(
                    repo,
                    options.cache_dir,
                    base,
                    options.cold_parts or cold_suite.PARTS,
                    options.cold_runs,
                    log=log,
                    postgres=options.cold_postgres,
                    processes=options.cold_processes,
                )
            )
            continue
        if scenario == "search":
            from bench import lookups

            search = lookups.run_search(options, log)
            continue
        if scenario == "finder":
            from bench import lookups

            base.mkdir(parents=True, exist_ok=True)
            finder = lookups.run_finder(options, base, log)
            continue
        if scenario == "local":
            repos, git_home = prepare_store(base, repo.path, repo.name)
            for name in options.contenders:
                runs.append(
                    run_contender(
                        name,
                        scenario,
                        options,
                        repos,
                        git_home,
                        data_root / name,
                        repo,
                        commit,
                        workdir / name,
                        None,
                        log,
                    )
                )
            continue
        reason = slowfs.fuse_available()
        if reason is not None:
            log(f"scenario slow: skipped: {reason}")
            runs.extend(ContenderRun(name, scenario, skipped=reason) for name in options.contenders)
            continue
        store = base / "store"
        prepare_store(store, repo.path, repo.name)
        mountpoint = base / "mnt"
        mountpoint.mkdir(parents=True, exist_ok=True)
        slowfs.cleanup_stale(mountpoint)
        slow_names = options.slow_contenders or options.contenders
        runs.extend(
            ContenderRun(name, scenario, skipped="left out of the slow scenario in this run")
            for name in options.contenders
            if name not in slow_names
        )
        with slowfs.mounted(
            store,
            mountpoint,
            delay_ms=options.delay_ms,
            jitter_ms=options.jitter_ms,
            cache_seconds=options.cache_seconds,
        ) as mount:
            for name in slow_names:
                runs.append(
                    run_contender(
                        name,
                        scenario,
                        options,
                        mountpoint / "repos",
                        mountpoint / "home",
                        data_root / name,
                        repo,
                        commit,
                        workdir / f"slow-{name}",
                        mount,
                        log,
                    )
                )
            if "floorless" in slow_names:
                log("floorless on local disk and slow storage at once, requests alternating")
                local_repos, _ = prepare_store(workdir / "paired", repo.path, repo.name)
                paired = run_paired(
                    options,
                    local_repos,
                    mountpoint / "repos",
                    workdir,
                    repo,
                    commit,
                    mount,
                    log,
                )
    return Results(
        repo={
            "kind": repo.kind,
            "name": repo.name,
            "commits": repo.commits,
            "file": repo.file,
            "directory": repo.directory,
            "history_path": repo.history_path,
            "branch": repo.branch,
        },
        options={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
        runs=runs,
        machine=machine(),
        started=started,
        seconds=time.monotonic() - began,
        paired=paired,
        api=api_reads,
        cold=cold,
        search=search,
        finder=finder,
    )
