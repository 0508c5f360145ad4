"""``floorless serve``: start the forge."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import click

from floorless.cli.options import load_settings, location_options
from floorless.core.config import Settings


@click.command()
@location_options
@click.option("--host", help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default 3000).")
@click.option("--threads", type=int, help="Request-handling threads (default 4).")
@click.option(
    "--processes",
    type=int,
    help="Server processes (default 1), each using a core of its own.",
)
@click.option(
    "--ssh-port", type=int, help="Port of the built-in SSH server (default 2222; 0: none)."
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
    ssh_port: int | None,
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
        ssh_port=ssh_port,
    )
    _with_allocator(settings.allocator)
    if not settings.repos.is_dir():
        if repos is not None:
            raise click.UsageError(f"--repos {settings.repos}: no such directory")
        settings.repos.mkdir(parents=True, exist_ok=True)
    _in_a_child(lambda: _prepare(settings, config_file, database))
    os.environ.update(settings.as_environ())
    # ``processes`` worker processes (one by default), which granian starts again should one
    # die. On Linux each worker listens on a socket of its own, so while a lone worker starts
    # again connections are refused: a pack file truncated under libgit2's mapping (SIGBUS)
    # fails one request instead (git/sigbus.py, installed by each worker).
    # Each worker builds its own forge (web/asgi.py), a node as on several machines: one
    # indexes a repository under its lease while the others read what it stores, and a push
    # through one is told to the others before it returns (on PostgreSQL by its notices; on
    # SQLite on a board in shared memory, db/board.py).
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


def _prepare(settings: Settings, config_file: Path | None, database: str | None) -> None:
    """The database migrated and the repositories found, before the workers start; the
    first administrator's command when there is none."""
    from floorless.core.errors import FloorlessError
    from floorless.forge import Forge  # (here: see ``_in_a_child``)

    try:
        forge = Forge(settings)
    except FloorlessError as exc:  # (the processes' notice board cannot be made, say)
        raise click.ClickException(str(exc)) from exc
    try:
        forge.prepare()
        forge.registry.scan()
        click.echo(
            f"floorless: serving {len(forge.registry.all())} repositories from "
            f"{settings.repos} at http://{settings.host}:{settings.port}/"
        )
        if settings.ssh_port:
            from floorless.ssh.server import host_keys  # made once, before the workers

            host_keys(settings)
            click.echo(
                f"floorless: git over SSH on {settings.ssh_host or settings.host}:"
                f"{settings.ssh_port}"
            )
        if forge.accounts.first_run():
            click.echo(first_admin_hint(settings, config_file, database))
    finally:
        forge.db.close()


def first_admin_hint(settings: Settings, config_file: Path | None, database: str | None) -> str:
    """The command that makes the first administrator, ready to paste in any directory: the
    data and repositories directories the running forge reads, absolute, whether or not they
    were given (pasted elsewhere, a relative default would make a new, unread one)."""
    from floorless.web.views.base import admin_program  # (here: see ``_in_a_child``)

    given = (
        ("--config", config_file.resolve() if config_file is not None else None),
        ("--data", settings.data.resolve()),
        ("--database", database),
        ("--repos", settings.repos.resolve()),
    )
    options = "".join(f" {flag} {value}" for flag, value in given if value is not None)
    return (
        "floorless: no accounts yet; create the first administrator with\n"
        f"  {admin_program()} admin user create NAME --email EMAIL --admin"
        f" --password-stdin{options}"
    )


def _in_a_child(work: Callable[[], None]) -> None:
    """``work`` in a forked process, waited for: what it imports and reads (the forge, the
    database, every repository's row) stays out of this process, which lives as long as the
    server and whose memory its forked workers start from. Its error is its own to show;
    this process exits with its code."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            work()
        except click.ClickException as error:
            error.show()
            code = error.exit_code
        except SystemExit as leaving:
            code = leaving.code if isinstance(leaving.code, int) else 1
        except BaseException:  # noqa: BLE001 (shown, then the parent exits with it)
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(code if code > 0 else 1)


def _with_allocator(allocator: str) -> None:
    """Start this command again with Python's allocator ``allocator`` (``PYTHONMALLOC``,
    which only an interpreter's start reads), unless it runs with it already: the workers,
    forked from this process, allocate as it does. With the C library's, one arena
    (``MALLOC_ARENA_MAX=1``, unless set already): an arena for each thread that allocates
    held a first index's peak apart (git.git's first visits: 753 MB at most, against 483 in
    one arena and 536 with Python's allocator; at rest 215, 193 and 254 MB), and warm pages
    answer as fast in one (though 16 clients at once were served about 15% fewer requests a
    second than with Python's). Only a process started to serve is started again (a
    ``serve`` called from other Python code is left as it is)."""
    wanted = {"PYTHONMALLOC": "malloc" if allocator == "malloc" else "pymalloc"}
    if allocator == "malloc":
        wanted["MALLOC_ARENA_MAX"] = os.environ.get("MALLOC_ARENA_MAX", "1")
    if os.environ.get("PYTHONMALLOC", "pymalloc") == wanted["PYTHONMALLOC"]:
        return
    if "serve" not in sys.orig_argv[1:]:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    environ = {**os.environ, **wanted}
    os.execve(sys.executable, sys.orig_argv, environ)  # noqa: S606 (this same command again)
