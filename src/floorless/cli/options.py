"""Options every command shares, so the command line and the server agree on where things live."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from floorless.core.config import Settings
from floorless.core.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def location_options(func: F) -> F:
    for option in reversed(
        (
            click.option(
                "--config",
                "config_file",
                type=click.Path(path_type=Path),
                help="TOML settings file (see docs/configuration.md).",
            ),
            click.option(
                "--data",
                type=click.Path(path_type=Path),
                help="Data directory (database, runtime directory).",
            ),
            click.option(
                "--database",
                help="postgresql://… (or an SQLite file); default: the data directory's SQLite.",
            ),
            click.option(
                "--repos",
                type=click.Path(path_type=Path),
                help="Directory of git repositories to serve.",
            ),
        )
    ):
        func = option(func)
    return func


def load_settings(config_file: Path | None, **overrides: Any) -> Settings:
    try:
        return Settings.load(config_file, **overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
