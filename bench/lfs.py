"""Git LFS beside plain git and a file copy, and release assets, through a real ``floorless serve``.

``python -m bench.lfs [--files 4] [--file-mb 50] [--rounds 3] [--asset-mb 50] [--docs PAGE]``
starts ``floorless serve`` in a temporary directory with a person and a write token, and then,
each round, makes ``--files`` new random files of ``--file-mb`` MB each and moves their bytes
three ways, the order turning from round to round so that all three share the machine's
moments:

- ``lfs push``: the files tracked by Git LFS, committed and pushed with the real ``git lfs``
  client (its pre-push hook uploads the objects, then git pushes the pointers) into a new
  repository;
- ``plain push``: the same bytes committed as ordinary git files, pushed with ``git push``
  into another new repository;
- ``copy``: ``cp`` of the files into a new directory on the same disk, the floor.

then clones both repositories into fresh directories, in turn: ``lfs pull`` (``git clone``
with the LFS filter, which downloads the objects in one batch) and ``plain clone``. It reports
the medians and their ratios (LFS push / plain push, LFS pull / plain clone, LFS push / copy),
the server's resident memory (its whole process tree, git's children too) before, at its
peak during each way and after, and the processes the server started for the LFS routes, per
object moved, and for each whole push (its ``/-/metrics``).

Then it uploads a ``--asset-mb`` MB file to a release through the API (and with pyforgejo when
it is installed), once as
``multipart/form-data`` and once as a raw ``application/octet-stream`` body, and reports the
server's memory growth (peak minus before) for each: a file is streamed into the store (and
the gateway spools the body to disk), never held whole.

It prints one JSON object, and with ``--docs`` writes the page of its figures
(docs/benchmarks-lfs.md; ``--render JSON --docs PAGE`` writes it again from a run's JSON).
Every child has a deadline, and the rounds stop after ``--max-seconds`` (at least one runs).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import importlib.util
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.cold_suite import server_memory
from bench.harness import ENV_CLEAN, free_port, machine, server_rss_mb, stop_process
from bench.harness import wait_listening as wait_port
from bench.repos import git_env

PASSWORD = "bench password"  # noqa: S105 (a throwaway account of the run)
OWNER = "bench"
WAYS = ("lfs push", "plain push", "copy", "lfs pull", "plain clone")
LFS_WAYS = ("lfs push", "lfs pull")
RATIOS = (  # what the page compares: its name, the figure's key, the two ways
    ("LFS push / plain push", "lfs_push_to_plain_push", "lfs push", "plain push"),
    ("LFS pull / plain clone", "lfs_pull_to_plain_clone", "lfs pull", "plain clone"),
    ("LFS push / file copy", "lfs_push_to_copy", "lfs push", "copy"),
)
CHILD_SECONDS = 300.0  # the longest any one child may run
SAMPLE_SECONDS = 0.02  # how often the server's memory is read while it works
CHUNK = 1 << 20
ASSETS_REPO = "plain-0"  # the repository whose release takes the assets: the first round's

# git's LFS filter, given to each command (never written to a config file the machine shares)
LFS = [
    "-c", "filter.lfs.clean=git-lfs clean -- %f",
    "-c", "filter.lfs.smudge=git-lfs smudge -- %f",
    "-c", "filter.lfs.process=git-lfs filter-process",
    "-c", "filter.lfs.required=true",
]  # fmt: skip


class _Peak:
    """The server's resident memory, read every ``SAMPLE_SECONDS`` on a thread of its own
    while a transfer runs: the highest figures (MB) of its whole tree (``mb``: git's
    children too) and of its worker alone (``worker_mb``: the forge, whose memory an upload
    held whole would grow), and what they were at the start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mb = self.before_mb = server_rss_mb(pid)
        self.worker_mb = self.worker_before_mb = server_memory(pid)["workers"]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _read(self) -> None:
        self.mb = max(self.mb, server_rss_mb(self.pid))
        self.worker_mb = max(self.worker_mb, server_memory(self.pid)["workers"])

    def _watch(self) -> None:
        while not self._done.wait(SAMPLE_SECONDS):
            self._read()

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(10)
        self._read()


def _run(args: list[str], env: dict[str, str], cwd: Path | None = None, stdin: str = "") -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
        timeout=CHILD_SECONDS, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])}: {done.stderr.strip()}")
    return done.stdout.strip()


def _timed(args: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    """Seconds a child took: a blocking wait (a watchdog ends it past ``CHILD_SECONDS``)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    watchdog = threading.Timer(CHILD_SECONDS, proc.kill)
    watchdog.start()
    try:
        _, err = proc.communicate()
    finally:
        watchdog.cancel()
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:6])}: {err.decode(errors='replace').strip()}")
    return elapsed


class Server:
    """The ``floorless serve`` under test, its person and what the API is asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.exe = str(Path(sys.executable).parent / "floorless")
        self.where = ["--data", str(root / "data"), "--repos", str(root / "repos")]
        self.env = {**ENV_CLEAN, "HOME": str(root)}
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""

    def start(self) -> None:
        (self.root / "repos").mkdir()
        admin = [self.exe, "admin"]
        _run([*admin, "user", "create", OWNER, "--email", "bench@example.org",
              "--password-stdin", *self.where], self.env, stdin=PASSWORD + "\n")  # fmt: skip
        self.token = _run(
            [*admin, "token", "create", OWNER, "--scope", "write", *self.where], self.env
        )
        with (self.root / "serve.log").open("wb") as out:
            self.proc = subprocess.Popen(
                [self.exe, "serve", *self.where, "--port", str(self.port), "--ssh-port", "0"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_port(self.port, self.proc, 120)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def git_url(self, name: str) -> str:
        return f"http://{OWNER}:{self.token}@127.0.0.1:{self.port}/{OWNER}/{name}.git"

    def api(self, method: str, path: str, body: object) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
                return json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            raise RuntimeError(f"{method} {path}: {refused.code} {refused.read()!r}") from None

    def counted(self) -> dict[str, dict[str, float]]:
        """From ``/-/metrics``: processes started (``spawned``) and requests answered
        (``requests``) so far, by route."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/metrics", timeout=60) as m:
            text = m.read().decode()
        found: dict[str, dict[str, float]] = {"spawned": {}, "requests": {}}
        for name, route, value in _COUNTED.findall(text):
            into = found["spawned" if name == "spawned_processes" else "requests"]
            into[route] = into.get(route, 0.0) + float(value)
        return found

    def upload(self, release: int, source: Path, multipart: bool) -> int:
        """Send ``source`` to a release's assets as it is read from disk; the answer's status."""
        path = f"/api/v1/repos/{OWNER}/{ASSETS_REPO}/releases/{release}/assets"
        size = source.stat().st_size
        if multipart:
            boundary = secrets.token_hex(16)
            head = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="attachment"; '
                f'filename="{source.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            tail = f"\r\n--{boundary}--\r\n".encode()
            kind = f"multipart/form-data; boundary={boundary}"
        else:
            head, tail, kind = b"", b"", "application/octet-stream"
            path += f"?name={source.name}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CHILD_SECONDS)
        try:
            conn.putrequest("POST", path)
            conn.putheader("Authorization", f"token {self.token}")
            conn.putheader("Content-Type", kind)
            conn.putheader("Content-Length", str(len(head) + size + len(tail)))
            conn.endheaders()
            conn.send(head)
            with source.open("rb") as data:
                while chunk := data.read(CHUNK):
                    conn.send(chunk)
            conn.send(tail)
            answer = conn.getresponse()
            answer.read()
            return answer.status
        finally:
            conn.close()

    def upload_by_client(self, release: int, source: Path) -> int:
        """Send ``source`` as pyforgejo sends a release's asset (the body streamed from an
        iterator of its pieces), then list the release's assets and read the file back
        through the URL the listing gives: 201 when all of it agrees."""
        import httpx  # (pyforgejo's own)
        from pyforgejo import PyforgejoApi  # the test extra's; the way is left out without it

        def pieces() -> Iterator[bytes]:
            with source.open("rb") as data:
                while chunk := data.read(CHUNK):
                    yield chunk

        digest = hashlib.sha256()
        with httpx.Client(timeout=CHILD_SECONDS) as http:
            client = PyforgejoApi(
                base_url=f"http://127.0.0.1:{self.port}/api/v1",
                api_key=self.token,
                httpx_client=http,
            )
            made = client.repository.repo_create_release_attachment(
                OWNER, ASSETS_REPO, release, request=pieces(), name=source.name
            )
            listed = client.repository.repo_list_release_attachments(OWNER, ASSETS_REPO, release)
            (found,) = [a for a in listed if a.id == made.id]
            if found.size != source.stat().st_size or found.browser_download_url is None:
                return 500
            with http.stream("GET", found.browser_download_url) as got:
                for chunk in got.iter_bytes(CHUNK):
                    digest.update(chunk)
        sent = hashlib.sha256(source.read_bytes()).hexdigest()  # (after the measure)
        return 201 if digest.hexdigest() == sent else 500


_COUNTED = re.compile(
    r'^floorless_(spawned_processes|responses)_total\{route="([^"]*)"[^}]*\} (\S+)$', re.M
)


def _lfs_routes(by_route: dict[str, float]) -> float:
    return sum(v for route, v in by_route.items() if "/info/lfs/" in route)


def _random_files(into: Path, files: int, file_mb: int) -> list[Path]:
    into.mkdir(parents=True)
    made = []
    for n in range(files):
        path = into / f"data-{n}.bin"
        with path.open("wb") as out:
            for _ in range(file_mb):
                out.write(os.urandom(CHUNK))
        made.append(path)
    return made


def _committed(work: Path, files: list[Path], env: dict[str, str], lfs: bool) -> None:
    """A new repository at ``work`` whose one commit holds ``files`` (tracked by LFS or not)."""
    git = ["git", *LFS] if lfs else ["git"]
    _run(["git", "init", "-q", "-b", "main", str(work)], env)
    if lfs:
        _run([*git, "lfs", "install", "--local"], env, cwd=work)
        _run([*git, "lfs", "track", "*.bin"], env, cwd=work)
    for path in files:
        shutil.copyfile(path, work / path.name)
    _run([*git, "add", "."], env, cwd=work)
    _run([*git, "commit", "-q", "-m", "Data"], env, cwd=work)


def _one_round(
    server: Server, number: int, files: int, file_mb: int, env: dict[str, str]
) -> dict[str, dict[str, float]]:
    """One round: each way once, the order turned by ``number``; each way's seconds and the
    server's memory peak, and the processes it started."""
    here = server.root / f"round-{number}"
    source = _random_files(here / "source", files, file_mb)
    lfs_name, plain_name = f"lfs-{number}", f"plain-{number}"
    for name in (lfs_name, plain_name):
        server.api("POST", "/user/repos", {"name": name})
    _committed(here / "lfs-work", source, env, lfs=True)
    _committed(here / "plain-work", source, env, lfs=False)
    (here / "copy").mkdir()
    lfs_url, plain_url = server.git_url(lfs_name), server.git_url(plain_name)
    runs = {
        "lfs push": (["git", *LFS, "push", "-q", lfs_url, "main"], here / "lfs-work"),
        "plain push": (["git", "push", "-q", plain_url, "main"], here / "plain-work"),
        "copy": (["cp", *(str(p) for p in source), str(here / "copy")], here),
        "lfs pull": (["git", *LFS, "clone", "-q", lfs_url, str(here / "lfs-clone")], here),
        "plain clone": (["git", "clone", "-q", plain_url, str(here / "plain-clone")], here),
    }
    figures: dict[str, dict[str, float]] = {}
    pushes, pulls = WAYS[:3], WAYS[3:]
    for group in (pushes, pulls):
        turn = number % len(group)
        for way in group[turn:] + group[:turn]:
            args, cwd = runs[way]
            before = server.counted()
            with _Peak(server.pid) as peak:
                seconds = _timed(args, env, cwd)
            after = server.counted()
            figures[way] = {
                "seconds": seconds,
                "peak_mb": peak.mb,
                "worker_peak_mb": peak.worker_mb,
                "spawned": sum(after["spawned"].values()) - sum(before["spawned"].values()),
                "spawned_lfs": _lfs_routes(after["spawned"]) - _lfs_routes(before["spawned"]),
                "requests_lfs": _lfs_routes(after["requests"]) - _lfs_routes(before["requests"]),
            }
    for kind, clone in (("lfs", "lfs-clone"), ("plain", "plain-clone")):
        for path in source:
            if (here / clone / path.name).read_bytes() != path.read_bytes():
                raise RuntimeError(f"the {kind} clone's {path.name} is not the file pushed")
    shutil.rmtree(here)
    return figures


def _assets(server: Server, asset_mb: int) -> dict[str, dict[str, float]]:
    """A release's asset uploaded as multipart and as a raw body: the server's memory before
    and at its peak during each, and the answer."""
    release = server.api(
        "POST",
        f"/repos/{OWNER}/{ASSETS_REPO}/releases",
        {"tag_name": "v1", "target_commitish": "main"},
    )["id"]
    figures: dict[str, dict[str, float]] = {}
    ways = ["multipart", "raw"]
    if importlib.util.find_spec("pyforgejo") is not None:
        ways.append("pyforgejo")
    for way in ways:
        here = server.root / f"asset-{way}"
        (source,) = _random_files(here, 1, asset_mb)
        with _Peak(server.pid) as peak:
            started = time.perf_counter()
            if way == "pyforgejo":
                status = server.upload_by_client(release, source)
            else:
                status = server.upload(release, source, way == "multipart")
            seconds = time.perf_counter() - started
        if status != 201:
            raise RuntimeError(f"the {way} upload answered {status}")
        figures[way] = {
            "seconds": round(seconds, 3),
            "before_mb": round(peak.before_mb, 1),
            "peak_mb": round(peak.mb, 1),
            "growth_mb": round(peak.mb - peak.before_mb, 1),
            "worker_before_mb": round(peak.worker_before_mb, 1),
            "worker_growth_mb": round(peak.worker_mb - peak.worker_before_mb, 1),
        }
        shutil.rmtree(here)
    return figures


def measure(
    root: Path, files: int, file_mb: int, rounds: int, asset_mb: int, max_seconds: float
) -> dict[str, Any]:
    env = {
        **git_env(root / "home"),
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "Bench"), ("EMAIL", "bench@example.org"))},
    }  # fmt: skip
    server = Server(root)
    server.start()
    began = time.monotonic()
    try:
        before = {"tree": server_rss_mb(server.pid), **server_memory(server.pid)}
        kept: list[dict[str, dict[str, float]]] = []
        for number in range(rounds):
            kept.append(_one_round(server, number, files, file_mb, env))
            if time.monotonic() - began > max_seconds:
                break
        after = {"tree": server_rss_mb(server.pid), **server_memory(server.pid)}
        assets = _assets(server, asset_mb)
    finally:
        server.stop()
    p50 = {way: statistics.median(r[way]["seconds"] for r in kept) for way in WAYS}
    return {
        "files": files,
        "file_mb": file_mb,
        "rounds": len(kept),
        **{
            way: {
                "p50_s": round(p50[way], 3),
                "peak_mb": round(max(r[way]["peak_mb"] for r in kept), 1),
                "worker_peak_mb": round(max(r[way]["worker_peak_mb"] for r in kept), 1),
                "spawned_per_round": sorted({int(r[way]["spawned"]) for r in kept}),
            }
            for way in WAYS
        },
        "lfs_push_to_plain_push": round(p50["lfs push"] / p50["plain push"], 2),
        "lfs_pull_to_plain_clone": round(p50["lfs pull"] / p50["plain clone"], 2),
        "lfs_push_to_copy": round(p50["lfs push"] / p50["copy"], 2),
        "lfs_spawned_per_object": sorted(
            {r[w]["spawned_lfs"] / files for r in kept for w in LFS_WAYS}
        ),
        "lfs_requests_per_round": {
            w: sorted({int(r[w]["requests_lfs"]) for r in kept}) for w in LFS_WAYS
        },
        "rss_mb": {
            "before": round(before["tree"], 1),
            "peak": round(max(r[w]["peak_mb"] for r in kept for w in WAYS), 1),
            "peak_lfs": round(max(r[w]["peak_mb"] for r in kept for w in LFS_WAYS), 1),
            "after": round(after["tree"], 1),
            "worker_before": before["workers"],
            "worker_peak_lfs": round(
                max(r[w]["worker_peak_mb"] for r in kept for w in LFS_WAYS), 1
            ),
            "worker_after": after["workers"],
        },
        "asset_mb": asset_mb,
        "assets": assets,
        "machine": machine(),
        "git_lfs": _lfs_version(),
        "measured": datetime.now(UTC).strftime("%Y-%m-%d"),
        "seconds": round(time.monotonic() - began),
    }


def _lfs_version() -> str:
    done = subprocess.run(["git-lfs", "version"], capture_output=True, text=True, check=False)
    found = re.search(r"git-lfs/(\S+)", done.stdout)
    return found.group(1) if found else "unknown"


def page(result: dict[str, Any]) -> str:
    """docs/benchmarks-lfs.md for ``result``."""
    box, rss = result["machine"], result["rss_mb"]
    total = result["files"] * result["file_mb"]
    ways = "\n".join(
        f"| {way} | {result[way]['p50_s']:.2f} | {result[way]['peak_mb']:.0f} |"
        f" {result[way]['worker_peak_mb']:.0f} |"
        f" {', '.join(str(n) for n in result[way]['spawned_per_round'])} |"
        for way in WAYS
    )
    ratios = []
    for name, key, way, other in RATIOS:
        line = f"- {name}: **{result[key]:.2f}x**"
        if result[key] < 1:
            times = result[other]["p50_s"] / result[way]["p50_s"]
            line += f" ({other} takes {times:.1f}x as long)"
        ratios.append(line)
    compared = "\n".join(ratios)
    idle = result["copy"]["worker_peak_mb"]
    per_object = ", ".join(f"{n:g}" for n in result["lfs_spawned_per_object"])
    asked = {w: "/".join(str(n) for n in result["lfs_requests_per_round"][w]) for w in LFS_WAYS}
    pointers = (
        " What an LFS push or pull starts is git's, for the pointers."
        if not any(result["lfs_spawned_per_object"])
        else ""
    )
    assets = "\n".join(
        f"| {way} | {f['seconds']:.2f} | {f['before_mb']:.0f} | {f['growth_mb']:.1f} |"
        f" {f['worker_before_mb']:.0f} | {f['worker_growth_mb']:.1f} |"
        for way, f in result["assets"].items()
    )
    return _reflowed(f"""# Git LFS and uploads

Measured {result["measured"]} on {box["cores"]} cores ({box["cpu"]}), kernel {box["kernel"]},
Python {box["python"]}, {box["git"]}, git-lfs {result["git_lfs"]}; the run took
{result["seconds"]} s.

```sh
{result["command"]}
```

One `floorless serve` (one worker process, SQLite) in a temporary directory on local disk.
Each of {result["rounds"]} rounds makes {result["files"]} new random files of
{result["file_mb"]} MB ({total} MB) and moves them three ways, the order turning from round to
round: pushed with the real `git lfs` client as LFS-tracked files into a new repository (its
pre-push hook uploads the objects, then git pushes the pointers), pushed with `git push` as
ordinary git files into another, and copied with `cp` into a new directory on the same disk.
Then both repositories are cloned into fresh directories, in turn (`git clone` with the LFS
filter, which downloads the objects, and a plain `git clone`), and every file is checked
against the one pushed. Times are medians of the rounds. Memory is resident memory, read
every {SAMPLE_SECONDS * 1000:.0f} ms while a way ran, highest of the rounds: the server's
whole process tree (granian's main process, the worker, git's children) and the worker alone
(the forge, where a file held whole would show). Processes are the server's own count
(`floorless_spawned_processes` in `/-/metrics`), per round.

| way | p50 s | tree RSS peak MB | worker RSS peak MB | processes started |
|---|---|---|---|---|
{ways}

{compared}
- Processes started by the LFS routes (batch, object upload and download, verify, locks),
  per object moved: {per_object}, over {asked["lfs push"]} requests to them a push and
  {asked["lfs pull"]} a pull.{pointers}
- Server RSS, whole tree: {rss["before"]:.0f} MB before the first round, {rss["peak_lfs"]:.0f} MB
  at its peak during the LFS transfers ({rss["peak"]:.0f} MB during any way), {rss["after"]:.0f} MB
  after the last.
- The worker alone: {rss["worker_before"]:.0f} MB before, {rss["worker_peak_lfs"]:.0f} MB at its
  peak during the LFS transfers, {rss["worker_after"]:.0f} MB after. While `cp` ran (nothing
  asked of the server, between two of the other ways) it held up to {idle:.0f} MB: the LFS
  transfers' peak stood {rss["worker_peak_lfs"] - idle:.0f} MB above it, for {total} MB moved.

A plain push packs its files (git deflates every blob and looks for deltas between them); an
LFS push sends their bytes as they are, and the server streams them into its store.

## A {result["asset_mb"]} MB release asset

Uploaded through the API (`POST /api/v1/repos/{{o}}/{{r}}/releases/{{id}}/assets`) to a
release on the same server after the rounds, read from disk and sent as it is read, once as
`multipart/form-data` (field `attachment`), once as a raw `application/octet-stream` body
with `?name=`, and once by pyforgejo's `repo_create_release_attachment` (its body an iterator
of the file's pieces), then listed with `repo_list_release_attachments` and downloaded back
from the URL it gives, the bytes compared (that row's seconds include the check). Growth is
the peak resident memory during the upload minus what it was just before.

| body | seconds | tree RSS before MB | tree growth MB | worker RSS before MB | worker growth MB |
|---|---|---|---|---|---|
{assets}

The gateway spools a body past 1 MiB to an unnamed file of the runtime directory as it
arrives, and the store streams it from there into a part file 1 MiB at a time: a
{result["asset_mb"]} MB file is never held whole.
""")


def _reflowed(text: str, width: int = 95) -> str:
    """``text`` with its paragraphs and list items filled to ``width`` (tables, code and
    headings as they are): the figures make the template's lines uneven."""
    blocks = []
    for block in text.split("\n\n"):
        if block[:1] in "|`#":
            blocks.append(block)
            continue
        items = re.split(r"\n(?=- )", block)
        blocks.append(
            "\n".join(
                textwrap.fill(
                    " ".join(item.split()), width, subsequent_indent="  " * (item[:2] == "- ")
                )
                for item in items
            )
        )
    return "\n\n".join(blocks).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lfs", description=__doc__)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--file-mb", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--asset-mb", type=int, default=50)
    parser.add_argument("--max-seconds", type=float, default=480.0)
    parser.add_argument("--docs", type=Path, help="write the page of the figures here")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: write the page of a run's JSON",
    )
    args = parser.parse_args(argv)
    command = "python -m bench.lfs" + "".join(
        f" {flag} {value}"
        for flag, value in (
            ("--files", args.files), ("--file-mb", args.file_mb),
            ("--rounds", args.rounds), ("--asset-mb", args.asset_mb), ("--docs", args.docs),
        )
        if value is not None
    )  # fmt: skip
    if args.render is not None:
        if args.docs is None:
            parser.error("--render needs --docs")
        args.docs.write_text(page(json.loads(args.render.read_text())))
        return 0
    if shutil.which("git-lfs") is None:
        parser.error("git-lfs is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-lfs-") as tmp:
        result = measure(
            Path(tmp), args.files, args.file_mb, args.rounds, args.asset_mb, args.max_seconds
        )
    result["command"] = command
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    if args.docs is not None:
        args.docs.write_text(page(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
