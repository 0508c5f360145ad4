"""The ``floorless`` command line.

Each command's module is imported when that command runs, not before: ``floorless serve``'s
own process, which only watches the server's workers, then holds no more than the settings
and granian (30 MB instead of 74 resident; the workers import the forge themselves)."""

from __future__ import annotations

import importlib

import click

from floorless import __version__

# command -> the module defining it (a click command of the same name)
COMMANDS = {
    "serve": "floorless.cli.serve",
    "admin": "floorless.cli.admin",
    "settings": "floorless.cli.settings",
    "doctor": "floorless.cli.doctor",
    "probe": "floorless.cli.probe",
    "ssh": "floorless.cli.ssh",
}


class Commands(click.Group):
    """A group whose commands are imported when asked for (by name, or by ``--help``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command = getattr(importlib.import_module(module), cmd_name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=Commands)
@click.version_option(__version__, prog_name="floorless")
def main() -> None:
    """floorless: a self-hosted git forge whose pages have no latency floor."""
