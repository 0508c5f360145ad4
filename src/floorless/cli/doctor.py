"""``floorless doctor``: is this forge slow because of its storage?"""

from __future__ import annotations

from pathlib import Path

import click

from floorless.cli.options import location_options
from floorless.core.config import Settings
from floorless.core.errors import ConfigError, DiagnosisError
from floorless.doctor import Options, diagnose_floorless, diagnose_forge
from floorless.doctor.appini import FORGEJO, GITEA, resolve_layout
from floorless.doctor.report import EXIT_UNKNOWN, to_json, to_text


@click.command()
@location_options
@click.option(
    "--forgejo",
    "forgejo_ini",
    type=click.Path(path_type=Path, readable=False),  # checked by doctor, exit 3
    metavar="APP.INI",
    help="Examine the Forgejo configured by this app.ini instead of floorless.",
)
@click.option(
    "--gitea",
    "gitea_ini",
    type=click.Path(path_type=Path, readable=False),  # checked by doctor, exit 3
    metavar="APP.INI",
    help="Examine the Gitea configured by this app.ini instead of floorless.",
)
@click.option(
    "--work-path",
    type=click.Path(path_type=Path),
    help="The forge's work path, when app.ini has no WORK_PATH (default: guessed from "
    "the app.ini's location).",
)
@click.option("--git", "git", help="The git executable the forge runs (default: git on PATH).")
@click.option(
    "--runs",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Timed runs of each measurement.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(0),
    default=30.0,
    show_default=True,
    help="Stop the git timings after this long (each side still gets 3 runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(
    config_file: Path | None,
    data: Path | None,
    database: str | None,
    repos: Path | None,
    forgejo_ini: Path | None,
    gitea_ini: Path | None,
    work_path: Path | None,
    git: str | None,
    runs: int,
    max_seconds: float,
    as_json: bool,
) -> None:
    """Find where git's time goes on this machine, and say how to fix it.

    Without --forgejo or --gitea, examines floorless's own settings (the same --config,
    --data and --repos as `floorless serve`). Exit status: 0 healthy, 1 warning, 2 problem,
    3 could not measure.
    """
    if forgejo_ini is not None and gitea_ini is not None:
        raise click.UsageError("give --forgejo or --gitea, not both")
    options = Options(runs=runs, max_seconds=max_seconds, git=git)
    try:
        if forgejo_ini is not None or gitea_ini is not None:
            product, ini = (FORGEJO, forgejo_ini) if forgejo_ini is not None else (GITEA, gitea_ini)
            assert ini is not None
            layout = resolve_layout(ini, product, work_path=work_path)
            report = diagnose_forge(layout, options)
        else:
            settings = Settings.load(config_file, data=data, database=database, repos=repos)
            report = diagnose_floorless(settings, options)
    except (DiagnosisError, ConfigError) as exc:
        click.echo(f"floorless doctor: {exc}", err=True)
        raise SystemExit(EXIT_UNKNOWN) from None
    click.echo(to_json(report) if as_json else to_text(report), nl=not as_json)
    raise SystemExit(report.exit_code)
