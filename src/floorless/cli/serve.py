"""``floorless serve``: start the forge."""

from __future__ import annotations

import os
from pathlib import Path

import click

from floorless.cli.options import load_settings, location_options
from floorless.forge import Forge
from floorless.web.views.base import admin_program


@click.command()
@location_options
@click.option("--host", help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default 3000).")
@click.option("--threads", type=int, help="Request-handling threads (default 4).")
@click.option(
    "--processes",
    type=int,
    help="Server processes (default 1); more than one needs a PostgreSQL database.",
)
def serve(
    config_file: Path | None,
    data: Path | None,
    database: str | None,
    repos: Path | None,
    host: str | None,
    port: int | None,
    threads: int | None,
    processes: int | None,
) -> None:
    """Serve every git repository below the repositories directory."""
    from granian import Granian
    from granian.constants import Interfaces

    settings = load_settings(
        config_file,
        data=data,
        database=database,
        repos=repos,
        host=host,
        port=port,
        threads=threads,
        processes=processes,
    )
    if not settings.repos.is_dir():
        if repos is not None:
            raise click.UsageError(f"--repos {settings.repos}: no such directory")
        settings.repos.mkdir(parents=True, exist_ok=True)
    forge = Forge(settings)
    if settings.processes > 1 and forge.db.dialect != "postgresql":
        # Each process remembers rows, refs and the index between requests and learns of
        # another's writes only through PostgreSQL's notices: on SQLite a second process
        # would serve what the first has already changed.
        raise click.UsageError(
            f"processes = {settings.processes} needs a PostgreSQL database (--database "
            "postgresql://...); on SQLite one process serves"
        )
    forge.prepare()
    forge.registry.scan()
    os.environ.update(settings.as_environ())
    click.echo(
        f"floorless: serving {len(forge.registry.all())} repositories from "
        f"{settings.repos} at http://{settings.host}:{settings.port}/"
    )
    if forge.accounts.first_run():
        given = (
            ("--config", config_file),
            ("--data", data),
            ("--database", database),
            ("--repos", repos),
        )
        options = "".join(f" {flag} {value}" for flag, value in given if value is not None)
        click.echo(
            "floorless: no accounts yet; create the first administrator with\n"
            f"  {admin_program()} admin user create NAME --email EMAIL --admin"
            f" --password-stdin{options}"
        )
    # ``processes`` worker processes (one by default), which granian starts again should one
    # die. On Linux each worker listens on a socket of its own, so while a lone worker starts
    # again connections are refused: a pack file truncated under libgit2's mapping (SIGBUS)
    # fails one request instead (git/sigbus.py, installed by each worker).
    # Each worker builds its own forge (web/asgi.py): on PostgreSQL each is a node as on
    # several machines: one indexes a repository under its lease while the others read what
    # it stores, and a push through one is told to the others before it returns.
    Granian(
        "floorless.web.asgi:application",
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        workers=settings.processes,
        factory=True,
        log_access=False,
        respawn_failed_workers=True,
        respawn_interval=0.5,
    ).serve()
