"""A real ``floorless serve`` process on a loopback port, for tests that need real HTTP: git's
own client, a browser, raw sockets. ``floorless admin`` commands run against its data."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.forges import database_for, patience

STARTUP_TIMEOUT = 60.0


def floorless_command() -> str:
    beside = Path(sys.executable).parent / "floorless"
    if beside.is_file():
        return str(beside)
    found = shutil.which("floorless")
    if not found:
        pytest.fail("the `floorless` console script is not installed (pip install -e '.[test]')")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLOORLESS_")}


def database_options(data: Path) -> list[str]:
    """``--database URL`` when the tests run on PostgreSQL."""
    database = database_for(data)
    return ["--database", database] if database else []


def run_admin(data: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``floorless admin ARGS --data DATA`` in a process of its own, as a person would run it."""
    return subprocess.run(
        [floorless_command(), "admin", *args, "--data", str(data), *database_options(data)],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=patience(60),
        check=False,
    )


@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    repos: Path
    data: Path
    log: Path

    def admin(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run ``floorless admin ARGS`` on this server's data; return its standard output."""
        result = run_admin(self.data, *args, "--repos", str(self.repos), stdin=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"floorless admin {' '.join(args)}: {result.stderr}")
        return result.stdout.strip()

    def worker_pids(self) -> list[int]:
        """The server's processes: granian's main process and its worker(s)."""
        pids = [self.proc.pid]
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            pids += [int(p) for p in (task / "children").read_text().split()]
        return pids

    def descendants(self) -> list[int]:
        """Every process below the server's processes (git children, for one)."""
        found: list[int] = []
        todo = self.worker_pids()[1:]
        while todo:
            pid = todo.pop()
            try:
                tasks = list(Path(f"/proc/{pid}/task").iterdir())
            except FileNotFoundError:
                continue
            for task in tasks:
                try:
                    children = [int(p) for p in (task / "children").read_text().split()]
                except FileNotFoundError:
                    continue
                found += children
                todo += children
        return found


@contextmanager
def serving(
    repos: Path, data: Path, *extra: str, database_of: Path | None = None
) -> Iterator[Server]:
    """``floorless serve`` on ``repos`` with the data directory ``data`` and its database, or
    ``database_of``'s (another node's: on PostgreSQL, nodes share one database)."""
    port = free_port()
    log_path = data.parent / f"server-{port}.log"
    command = [
        floorless_command(),
        "serve",
        "--repos",
        str(repos),
        "--data",
        str(data),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *database_options(database_of or data),
        *([] if "--ssh-port" in extra else ["--ssh-port", "0"]),  # (tests asking for SSH say so)
        *extra,
    ]
    repos.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        # Its own session: should it ignore SIGTERM, its group (granian's worker too) is killed.
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=clean_env(),
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + patience(STARTUP_TIMEOUT)
        while not _answers(port):
            if proc.poll() is not None:
                pytest.fail(
                    f"floorless serve exited with {proc.returncode}:\n"
                    f"{log_path.read_text(errors='replace')}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"floorless serve did not answer on port {port} within "
                    f"{STARTUP_TIMEOUT:.0f}s:\n{log_path.read_text(errors='replace')}"
                )
            time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}", port, proc, repos, data, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
