"""``floorless ssh``: git over OpenSSH's own server (docs/ssh.md).

``authorized-keys`` is sshd's ``AuthorizedKeysCommand``: it prints, for the key a client
offers (or for every key), the ``authorized_keys`` line that lets it run ``floorless ssh
serve`` and nothing else. ``serve`` is that forced command: it relays the session to the
running forge (``floorless/ssh/relay.py``), which serves it as the built-in server would.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from floorless.cli.options import load_settings, location_options

# ``restrict`` turns off every forwarding, terminals and ~/.ssh/rc, and what later OpenSSH
# releases add; the rest say the same to a reader (and to an sshd older than 7.2).
OPTIONS = "restrict,no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty,no-user-rc"


@click.group()
def ssh() -> None:
    """git over OpenSSH's sshd, instead of the built-in SSH server."""


@ssh.command("authorized-keys")
@location_options
@click.option(
    "--user", "login", default="", help="The login sshd asks about (%u: any, the key decides)."
)
@click.option("--key", "offered", default="", help="The key the client offers (%k: base64).")
@click.option("--program", default="", help="This program's path in the lines (default: this one).")
def authorized_keys(
    config_file: Path | None,
    data: Path | None,
    database: str | None,
    repos: Path | None,
    login: str,
    offered: str,
    program: str,
) -> None:
    """Print the authorized_keys lines for the offered key (or for every key)."""
    from floorless.db import open_database
    from floorless.db.migrations import migrate  # (nothing of the forge but its database)

    settings = load_settings(config_file, data=data, database=database, repos=repos)
    db = open_database(settings.database, 2, settings.database_timeout)
    try:
        migrate(db)
        rows = db.query("SELECT id, content FROM ssh_keys ORDER BY id")
    finally:
        db.close()
    command = [program or _program(), "ssh", "serve"]
    command += _locations(config_file, data, database, repos)
    for row in rows:
        content = row["content"]
        if offered and content.split()[1:2] != [offered.strip()]:
            continue
        forced = shlex.join([*command, f"key-{row['id']}"])
        click.echo(f'command="{forced}",{OPTIONS} {content}')


@ssh.command("serve")
@location_options
@click.argument("key_name", metavar="KEY-ID")
def serve(
    config_file: Path | None,
    data: Path | None,
    database: str | None,
    repos: Path | None,
    key_name: str,
) -> None:
    """Serve the session sshd started, for the key KEY-ID (``key-N``)."""
    from floorless.ssh import wire

    settings = load_settings(config_file, data=data, database=database, repos=repos)
    number = key_name.removeprefix("key-")
    if not (number.isascii() and number.isdigit()):
        raise click.UsageError(f"{key_name!r} is not a key's id (key-N)")
    command = os.environ.get("SSH_ORIGINAL_COMMAND")
    sys.exit(wire.relay(settings, int(number), command, os.environ.get("GIT_PROTOCOL")))


def _program() -> str:
    beside = Path(sys.executable).parent / "floorless"
    return str(beside if beside.is_file() else Path(sys.argv[0]).resolve())


def _locations(
    config_file: Path | None, data: Path | None, database: str | None, repos: Path | None
) -> list[str]:
    """The location options this command was given, for the forced command to get too."""
    found = []
    for flag, value in (("--config", config_file), ("--data", data), ("--database", database)):
        if value is not None:
            found += [flag, str(Path(value).absolute()) if flag != "--database" else str(value)]
    if repos is not None:
        found += ["--repos", str(Path(repos).absolute())]
    return found
