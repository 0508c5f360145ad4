"""The ``floorless`` command line."""

from __future__ import annotations

import click

from floorless import __version__
from floorless.cli.admin import admin
from floorless.cli.doctor import doctor
from floorless.cli.probe import probe
from floorless.cli.serve import serve
from floorless.cli.settings import settings


@click.group()
@click.version_option(__version__, prog_name="floorless")
def main() -> None:
    """floorless: a self-hosted git forge whose pages have no latency floor."""


main.add_command(serve)
main.add_command(admin)
main.add_command(settings)
main.add_command(doctor)
main.add_command(probe)
