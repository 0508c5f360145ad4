"""``floorless admin``: operations on a forge's data, safe while the server runs."""

from __future__ import annotations

from pathlib import Path

import click

from floorless.cli.options import load_settings, location_options
from floorless.forge import Forge


@click.group()
def admin() -> None:
    """Administer a forge's data (takes effect in a running server at once)."""


@admin.command()
@location_options
def rescan(config_file: Path | None, data: Path | None, repos: Path | None) -> None:
    """Scan the repositories directory now and update the repository list."""
    settings = load_settings(config_file, data=data, repos=repos)
    forge = Forge(settings)
    forge.prepare()
    added, removed = forge.registry.scan()
    total = len(forge.registry.all())
    click.echo(f"{total} repositories ({added} added, {removed} removed)")
