"""The ``clones`` scenario: a clone over SSH beside one over HTTP from the same server, and
beside plain git cloning the directory (``bench.clones``), on the generated ``medium``
repository by default. Asked for by name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench import clones
from bench.harness import Check, Context, Report, Results, Scenario, Standalone, standalone
from bench.repos import SIZES, ensure

HEADING = "## Clones over SSH and HTTP"
SSH_TO_HTTP = 1.5  # a clone over SSH takes at most this many times one over HTTP


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clones-repo",
        default="medium",
        help="repository of the clones scenario (a size or a path)",
    )
    parser.add_argument("--clones-rounds", type=int, default=5, help="rounds (clones scenario)")


def run(context: Context, name: str) -> None:
    options, base = context.options, context.workdir / name
    base.mkdir(parents=True, exist_ok=True)
    spec = options.clones_repo
    source = ensure(spec, options.cache_dir.absolute()).path if spec in SIZES else Path(spec)
    context.log(f"clones: {spec}, {options.clones_rounds} rounds of plain, HTTP and SSH")
    result = clones.measure(source.resolve(), base, options.clones_rounds)
    result["repo"] = spec
    context.log(
        "clones: p50 plain {p} s, HTTP {h} s, SSH {s} s; SSH / HTTP {r}".format(
            p=result["plain"]["p50_s"],
            h=result["http"]["p50_s"],
            s=result["ssh"]["p50_s"],
            r=result["ssh_to_http"],
        )
    )
    context.figures["clones"] = result


def judge(found: dict[str, Any]) -> list[Check]:
    ratio = found["ssh_to_http"]
    per_clone = found["ssh_processes_per_clone"]
    return [
        Check(f"a clone over SSH within {SSH_TO_HTTP}x of one over HTTP", ratio <= SSH_TO_HTTP,
              f"{ratio:.2f}x"),
        Check("one process per SSH clone, none to sign in",
              per_clone == [1] and found["ssh_processes_signing_in"] == [0],
              f"{per_clone} per clone, {found['ssh_processes_signing_in']} signing in"),
    ]  # fmt: skip


def checks(results: Results) -> list[Check]:
    found = results.figures.get("clones")
    return [] if found is None else judge(found)


def figures_section(found: dict[str, Any]) -> list[str]:
    out = [
        f"The `{found['repo']}` repository (a pack of {found['pack_bytes']:,} bytes), cloned"
        f" bare {found['rounds']} times each way after one round of warming up, the order"
        " turning each round; protocol v2. Plain is `git clone --no-local` of the directory.",
        "",
        "| way | p50 s | p95 s |",
        "|---|---|---|",
    ]
    for way, label in (("plain", "plain git"), ("http", "HTTP"), ("ssh", "SSH (built-in)")):
        out.append(f"| {label} | {found[way]['p50_s']:.3f} | {found[way]['p95_s']:.3f} |")
    out += [
        "",
        f"SSH / HTTP {found['ssh_to_http']:.2f}x, HTTP / plain {found['http_to_plain']:.2f}x,"
        f" SSH / plain {found['ssh_to_plain']:.2f}x.",
    ]
    return out


def section(results: Results, command: str) -> list[str]:
    found = results.figures.get("clones")
    return [] if found is None else ["", HEADING, "", *figures_section(found)]


def page_section(results: Results, command: str) -> list[str]:
    found = results.figures["clones"]
    return standalone(results, HEADING, command, judge(found)) + figures_section(found)


SCENARIO = Scenario(
    names=("clones",),
    summary="a clone over SSH beside one over HTTP and plain git: bench.clones",
    arguments=arguments,
    run=run,
    report=Report(checks=checks, section=section, standalone=Standalone(HEADING, page_section)),
    key="clones",
)
