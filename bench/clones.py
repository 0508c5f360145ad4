"""A clone over SSH beside a clone over HTTP from the same ``floorless serve``, and beside
plain git cloning the same repository straight from its directory.

``python -m bench.clones [--repo medium|PATH] [--rounds 5] [--processes 1]`` copies a
repository (a generated size, built once into ``--cache``, or any bare repository) into a new
forge served by a real ``floorless serve`` with its built-in SSH server, makes a person, their
SSH key and a token, and then, each round, clones it three ways, the order turning from round
to round so that all three share the machine's moments:

- ``plain``: ``git clone --bare --no-local DIR``: git's own upload-pack through a pipe, the
  floor any server stands on;
- ``http``: ``git clone --bare http://...`` (protocol v2, a token);
- ``ssh``: ``git clone --bare ssh://...`` (protocol v2, OpenSSH's client, the key).

It prints one JSON object: each way's p50 and p95 in seconds, the ratios of the p50s
(``ssh_to_http``, ``http_to_plain``, ``ssh_to_plain``), the pack's size, and the processes
floorless started for each SSH clone and for signing in (read from its log).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import ENV_CLEAN, free_port, stop_process, wait_listening
from bench.measure import percentile
from bench.repos import SIZES, ensure

PASSWORD = "bench password"  # noqa: S105 (a throwaway account of the run)
WAYS = ("plain", "http", "ssh")


def _run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        list(args), input=stdin, capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])}: {done.stderr.strip()}")
    return done.stdout.strip()


def _timed(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{args[1:3]}: {done.stderr.decode(errors='replace').strip()}")
    return elapsed


def measure(source: Path, root: Path, rounds: int, processes: int = 1) -> dict[str, Any]:
    exe = str(Path(sys.executable).parent / "floorless")
    repos, data = root / "repos", root / "data"
    target = repos / "bench" / "repo.git"
    target.parent.mkdir(parents=True)
    shutil.copytree(source, target, symlinks=True)
    where = ["--data", str(data), "--repos", str(repos)]
    env = {**ENV_CLEAN, "HOME": str(root)}
    _run(exe, "admin", "user", "create", "bench", "--email", "bench@example.org",
         "--password-stdin", *where, stdin=PASSWORD + "\n", env=env)  # fmt: skip
    key = root / "id_ed25519"
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    _run(exe, "admin", "key", "add", "bench", *where, stdin=key.with_suffix(".pub").read_text(),
         env=env)  # fmt: skip
    token = _run(exe, "admin", "token", "create", "bench", "--scope", "read", *where, env=env)
    port, ssh_port = free_port(), free_port()
    log = root / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [exe, "serve", *where, "--port", str(port), "--ssh-port", str(ssh_port),
             "--processes", str(processes)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_listening(port, proc, 120)
        wait_listening(ssh_port, proc, 120)
        ssh = (
            f"ssh -i {key} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no"
            f" -o UserKnownHostsFile={root / 'known_hosts'} -F /dev/null"
        )
        git_env = {**env, "GIT_SSH_COMMAND": ssh, "GIT_TERMINAL_PROMPT": "0"}
        urls = {
            "plain": str(target),
            "http": f"http://bench:{token}@127.0.0.1:{port}/bench/repo.git",
            "ssh": f"ssh://git@127.0.0.1:{ssh_port}/bench/repo.git",
        }
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for n in range(rounds + 1):  # the first round warms every way up, and is not kept
            order = WAYS[n % 3 :] + WAYS[: n % 3]
            for way in order:
                into = root / f"clone-{way}-{n}.git"
                extra = ["--no-local"] if way == "plain" else []
                args = ["git", "-c", "protocol.version=2", "clone", "-q", "--bare", *extra]
                elapsed = _timed([*args, urls[way], str(into)], git_env)
                if n:
                    times[way].append(elapsed)
                pack_bytes = sum(p.stat().st_size for p in (into / "objects" / "pack").glob("*"))
                shutil.rmtree(into)
        spawned = re.findall(
            r"git-upload-pack \S+: exit 0 in [0-9.]+ s, processes: (\d+) \(signing in: (\d+)\)",
            log.read_text(errors="replace"),
        )
    finally:
        stop_process(proc)
    p50 = {way: statistics.median(times[way]) for way in WAYS}
    result: dict[str, Any] = {
        "rounds": rounds,
        "processes": processes,
        "pack_bytes": pack_bytes,
        **{
            way: {"p50_s": round(p50[way], 4), "p95_s": round(percentile(times[way], 0.95), 4)}
            for way in WAYS
        },
        "ssh_to_http": round(p50["ssh"] / p50["http"], 3),
        "http_to_plain": round(p50["http"] / p50["plain"], 3),
        "ssh_to_plain": round(p50["ssh"] / p50["plain"], 3),
        "ssh_processes_per_clone": sorted({int(a) for a, _ in spawned}),
        "ssh_processes_signing_in": sorted({int(b) for _, b in spawned}),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clones", description=__doc__)
    parser.add_argument("--repo", default="medium", help=f"{', '.join(SIZES)} or a path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    args = parser.parse_args(argv)
    source = (
        ensure(args.repo, args.cache_dir.absolute()).path if args.repo in SIZES else Path(args.repo)
    )
    with tempfile.TemporaryDirectory(prefix="bench-clones-") as tmp:
        result = measure(source.resolve(), Path(tmp), args.rounds, args.processes)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
