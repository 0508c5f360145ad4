"""``floorless probe``: time a running forge's pages from outside and report its floor."""

from __future__ import annotations

import click

from floorless.core.errors import DiagnosisError
from floorless.probe import Client, plan, run
from floorless.probe.discover import CLASSES
from floorless.probe.report import EXIT_UNKNOWN, exit_code, to_json, to_text


def _overrides(values: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        key, sep, url = value.partition("=")
        if not sep or key not in CLASSES or not url:
            raise click.BadParameter(
                f"{value!r}: expected CLASS=URL with CLASS one of {', '.join(CLASSES)}",
                param_hint="--url",
            )
        found[key] = url
    return found


@click.command()
@click.argument("url")
@click.option(
    "--repo", metavar="OWNER/NAME", help="The repository to time (default: the first listed)."
)
@click.option(
    "--branch", help="The branch for the raw file and commits (default: found on the home page)."
)
@click.option(
    "--url",
    "urls",
    multiple=True,
    metavar="CLASS=URL",
    help=f"Time this URL (absolute, or a path below the forge) for a class: {', '.join(CLASSES)}.",
)
@click.option(
    "--requests",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="Timed requests per page class.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(0),
    default=60.0,
    show_default=True,
    help="Stop after this long, counting the warm-up (every class is timed once at least).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for one response.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def probe(
    url: str,
    repo: str | None,
    branch: str | None,
    urls: tuple[str, ...],
    requests: int,
    max_seconds: float,
    timeout: float,
    as_json: bool,
) -> None:
    """Time the pages of the forge at URL (floorless, Forgejo, Gitea, cgit) and report its floor.

    Exit status: 0 every page class measured, 1 a class missing or failing, 3 nothing measured.
    """
    overrides = _overrides(urls)
    try:
        with Client(timeout) as client:
            found = plan(client, url, repository=repo, branch=branch, overrides=overrides)
            result = run(found, client, requests, max_seconds)
    except DiagnosisError as exc:
        click.echo(f"floorless probe: {exc}", err=True)
        raise SystemExit(EXIT_UNKNOWN) from None
    click.echo(to_json(result) if as_json else to_text(result), nl=not as_json)
    raise SystemExit(exit_code(result))
