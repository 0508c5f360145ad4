"""The benchmark run: each scenario asked for (``bench.scenarios``) in turn, on one repository;
the results become a table, a JSON file and docs/benchmarks.md (``bench.report``)."""

from __future__ import annotations

import argparse
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import (
    Context,
    Options,
    Results,
    Scenario,
    git,
    machine,
    names,
    target_repository,
)
from bench.scenarios import REGISTRY

BY_NAME: dict[str, Scenario] = {name: s for s in REGISTRY for name in s.names}
DEFAULT_SCENARIOS = tuple(name for s in REGISTRY if s.default for name in s.names)


def parser(description: str | None = None) -> argparse.ArgumentParser:
    """The run's flags: those every scenario shares, then each scenario's own."""
    found = argparse.ArgumentParser(prog="python -m bench", description=description)
    found.add_argument(
        "--repo",
        default="small",
        help="small, medium, large, or the path of a repository (default small)",
    )
    each = ", ".join(
        f"{', '.join(s.names)} ({s.summary}{'' if s.default else '; by name'})" for s in REGISTRY
    )
    found.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        type=names,
        help=f"{each}. Default {','.join(DEFAULT_SCENARIOS)}",
    )
    found.add_argument("--requests", type=int, default=200, help="sequential requests a page")
    found.add_argument("--warmup", type=int, default=20)
    found.add_argument(
        "--page-deadline",
        type=float,
        default=120.0,
        help="seconds one page's sequential requests may take at most",
    )
    found.add_argument("--workdir", type=Path, default=None)
    found.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    for scenario in REGISTRY:
        scenario.arguments(found)
    return found


def problem(options: Options) -> str | None:
    """What is wrong with ``options``, or None."""
    unknown = set(options.scenarios) - set(BY_NAME)
    if unknown:
        return f"unknown scenarios: {', '.join(sorted(unknown))}"
    for scenario in REGISTRY:
        found = scenario.validate(options)
        if found is not None:
            return found
    return None


def options(**given: Any) -> Options:
    """The options of a run as ``python -m bench`` would parse them with no flags, but for
    ``given`` (named as the options are: ``requests=3``, ``cold_parts=("first",)``)."""
    found = parser().parse_args([], namespace=Options())
    for name, value in given.items():
        if name not in vars(found):
            raise TypeError(f"no such option: {name}")
        setattr(found, name, value)
    wrong = problem(found)
    if wrong is not None:
        raise ValueError(wrong)
    return found


def run(options: Options, log: Callable[[str], None] = print) -> Results:
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
    context = Context(options, repo, commit, home, workdir, log)
    for name in options.scenarios:
        log(f"scenario {name}: {repo.kind} repository, {options.requests} requests a page")
        BY_NAME[name].run(context, name)
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
        options=options.record(),
        runs=context.runs,
        machine=machine(),
        started=started,
        seconds=time.monotonic() - began,
        figures=context.figures,
    )
