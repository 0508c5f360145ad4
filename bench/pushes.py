"""A push into a fork beside a push into a plain repository of the same history.

``python -m bench.pushes [--repo PATH] [--rounds 9]`` copies a repository (``PATH``, e.g. a
bare copy of git.git; else the generated ``small`` one) twice into a new forge: once whole,
and once as the parent of a fork, which borrows its objects (alternates) and has the parent's
refs as its own. Each round commits one changed file on top of the default branch and
pushes it, with the real git client over HTTP, to a new branch of the plain copy and then of
the fork (the order alternating between rounds), so that both pushes share the machine's
moment. Every push passes floorless's pre-receive hook: in the fork it lists what the push
reaches beyond the fork's refs and the parent's (``git/pushgate.py``), in the plain copy
beyond its own.

It prints one JSON object: each side's p50 and p95 in seconds, the ratio of the fork's p50
to the plain copy's, and the number of refs each advertises.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bench.measure import percentile
from bench.repos import ensure, git_env
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

PASSWORD = "bench password"  # noqa: S105 (a throwaway account of the run)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def served(forge: Forge) -> Iterator[str]:
    """The forge's app on a loopback port of the system's choosing, for the real git client."""
    server = make_server("127.0.0.1", 0, create_app(forge), _Server, _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _git(work: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _timed_push(work: Path, env: dict[str, str], url: str, ref: str) -> float:
    """Seconds the push took: a blocking wait, which adds nothing to the child's time."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        ["git", "push", "-q", url, f"HEAD:{ref}"],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, err = proc.communicate()
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"push to {ref}: {err.decode(errors='replace').strip()}")
    return elapsed


def measure(source: Path, root: Path, rounds: int) -> dict[str, Any]:
    repos, data = root / "repos", root / "data"
    plain = repos / "bench" / "plain.git"
    parent = repos / "bench" / "parent.git"
    env = {
        **git_env(root / "home"),
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "Bench"), ("EMAIL", "bench@bench.example"))},
    }  # fmt: skip
    for copy in (plain, parent):
        copy.parent.mkdir(parents=True, exist_ok=True)
        _git(root, env, "clone", "-q", "--bare", "--no-local", str(source), str(copy))
    settings = Settings.load(environ={}, data=data, repos=repos)
    forge = Forge(settings)
    forge.start(background=False)  # no indexer: the two pushes alone share the machine
    try:
        account = forge.accounts.create_user("bench", "bench@bench.example", PASSWORD, True)
        token, _ = forge.accounts.create_token(account, "write")
        fork = forge.lifecycle.fork(forge.registry.get("bench", "parent"), "bench", "fork")
        work = root / "work"
        _git(root, env, "clone", "-q", str(plain), str(work))
        times: dict[str, list[float]] = {"plain": [], "fork": []}
        with served(forge) as host:
            urls = {
                "plain": f"http://bench:{token}@{host}/bench/plain.git",
                "fork": f"http://bench:{token}@{host}/{fork.full_name}.git",
            }
            for number in range(rounds):
                (work / "bench-push.txt").write_text(f"round {number}\n")
                _git(work, env, "add", "bench-push.txt")
                _git(work, env, "commit", "-q", "-m", f"Round {number}")
                order = ("plain", "fork") if number % 2 == 0 else ("fork", "plain")
                for side in order:
                    ref = f"refs/heads/bench-push-{number}"
                    times[side].append(_timed_push(work, env, urls[side], ref))
                _git(work, env, "reset", "-q", "--hard", "HEAD~1")
        refs = {
            side: len(_git(root, env, "--git-dir", str(path), "for-each-ref").splitlines())
            for side, path in (("plain", plain), ("fork", fork.path))
        }
    finally:
        forge.stop()
    return {
        "source": str(source),
        "rounds": rounds,
        "refs": refs,
        **{
            side: {
                "p50_s": round(statistics.median(values), 3),
                "p95_s": round(percentile(values, 0.95), 3),
            }
            for side, values in times.items()
        },
        "fork_to_plain": round(
            statistics.median(times["fork"]) / statistics.median(times["plain"]), 2
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pushes", description=__doc__)
    parser.add_argument("--repo", type=Path, help="a repository to copy (default: small)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-pushes-") as tmp:
        root = Path(tmp)
        source = args.repo or ensure("small", root / "cache").path
        result = measure(source.resolve(), root, args.rounds)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
