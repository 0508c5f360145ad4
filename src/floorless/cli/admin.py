"""``floorless admin``: operations on a forge's data, safe while the server runs.

Everything lives in the database and the repositories directory the server reads on every
request, so a command takes effect in a running server at once, with no restart.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from floorless.cli.options import load_settings, location_options
from floorless.core import timing
from floorless.core.errors import FloorlessError
from floorless.db import Database, open_database
from floorless.db import copy as dbcopy
from floorless.db.migrations import SCHEMA_VERSION, version
from floorless.forge import Forge
from floorless.lfs.objects import reachable_pointers
from floorless.lfs.pointers import MAX_POINTER

F = TypeVar("F", bound=Callable[..., Any])


def with_forge(func: F) -> F:
    """Add the location options, build and prepare the forge, and turn floorless's errors into
    a message and exit status 1 instead of a traceback."""

    @location_options
    @wraps(func)
    def wrapper(
        config_file: Path | None,
        data: Path | None,
        database: str | None,
        repos: Path | None,
        **kwargs: Any,
    ) -> Any:
        forge = Forge(load_settings(config_file, data=data, database=database, repos=repos))
        try:
            forge.prepare()
            return func(forge, **kwargs)
        except FloorlessError as exc:
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:
            raise click.ClickException(f"{exc.filename or ''}: {exc.strerror}") from exc

    return wrapper  # type: ignore[return-value]


@click.group()
def admin() -> None:
    """Administer a forge's data (takes effect in a running server at once)."""


@admin.command()
@with_forge
def rescan(forge: Forge) -> None:
    """Scan the repositories directory now and update the repository list.

    A repository missing from the directory is removed from the list when two scans in a row
    find it missing; a directory that cannot be read keeps what lies below it, and makes the
    command exit with status 1.
    """
    result = forge.registry.scan()
    total = len(forge.registry.all())
    line = f"{total} repositories ({result.added} added, {result.removed} removed"
    if result.missing:
        line += f", {result.missing} missing: removed if still missing at the next scan"
    click.echo(line + ")")
    if result.unreadable:
        for path, why in result.unreadable:
            click.echo(f"cannot read {path}: {why}", err=True)
        raise click.ClickException(
            "some directories could not be read; the repositories below them were kept as"
            " they were, and the next scan tries again"
        )


@admin.command()
@click.argument("names", nargs=-1, metavar="[OWNER/NAME]...")
@with_forge
def gc(forge: Forge, names: tuple[str, ...]) -> None:
    """Remove from disk what no branch or tag reaches any more (`git gc --prune=now`), in
    every repository or the ones named."""
    repos = [forge.registry.get(*_owner_and_name(n)) for n in names] or forge.registry.all()
    spawned = timing.spawn_counter()
    before = spawned.total
    done = 0
    for repo in repos:
        if forge.garbage.collect(repo):
            done += 1
            click.echo(f"{repo.full_name}: collected")
        else:
            click.echo(f"{repo.full_name}: skipped (a push is in progress; try again)")
    click.echo(
        f"{done} of {len(repos)} repositories collected ({spawned.total - before} git processes)"
    )


def _owner_and_name(full_name: str) -> tuple[str, str]:
    owner, _, name = full_name.partition("/")
    if not owner or not name:
        raise click.UsageError(f"{full_name!r}: give repositories as OWNER/NAME")
    return owner, name


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise click.UsageError("--password-stdin: no password on standard input")
        return password
    value: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return value


@admin.group()
def user() -> None:
    """People who sign in and push."""


@user.command("create")
@click.argument("name")
@click.option("--email", required=True, help="The person's email address.")
@click.option("--admin", "is_admin", is_flag=True, help="A site administrator.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@with_forge
def user_create(forge: Forge, name: str, email: str, is_admin: bool, password_stdin: bool) -> None:
    """Create the account NAME."""
    account = forge.accounts.create_user(name, email, _read_password(password_stdin), is_admin)
    role = "administrator" if account.is_admin else "user"
    click.echo(f"created {role} {account.name}")


@user.command("password")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@with_forge
def user_password(forge: Forge, name: str, password_stdin: bool) -> None:
    """Set NAME's password and sign them out everywhere."""
    account = forge.accounts.require(name)
    forge.accounts.set_password(account, _read_password(password_stdin))
    forge.accounts.end_sessions(account)
    click.echo(f"password of {account.name} changed")


@admin.group()
def token() -> None:
    """Personal access tokens, for git over HTTP and scripts."""


@token.command("create")
@click.argument("user_name", metavar="USER")
@click.option("--scope", type=click.Choice(["read", "write"]), required=True)
@click.option(
    "--expires", type=click.FloatRange(min=0, min_open=True), help="Days until it expires."
)
@click.option("--name", "token_name", default="", help="A name to tell the token apart.")
@with_forge
def token_create(
    forge: Forge, user_name: str, scope: str, expires: float | None, token_name: str
) -> None:
    """Create a token for USER and print it (only the token, only this once)."""
    account = forge.accounts.require(user_name)
    plain, _ = forge.accounts.create_token(account, scope, token_name, expires)
    click.echo(plain)


@admin.group()
def key() -> None:
    """SSH keys, for git over SSH."""


@key.command("add")
@click.argument("user_name", metavar="USER")
@click.option("--title", default="", help="A name to tell the key apart (default: its comment).")
@with_forge
def key_add(forge: Forge, user_name: str, title: str) -> None:
    """Add the public key on standard input (a .pub file) to USER's keys; print its
    fingerprint."""
    account = forge.accounts.require(user_name)
    added = forge.keys.add_user_key(account, sys.stdin.read(), title)
    click.echo(f"{added.fingerprint} {added.title}")


@key.command("deploy")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--title", default="", help="A name to tell the key apart (default: its comment).")
@click.option("--write", is_flag=True, help="It may push too (default: clone and fetch only).")
@with_forge
def key_deploy(forge: Forge, full_name: str, title: str, write: bool) -> None:
    """Add the public key on standard input as a deploy key of OWNER/NAME (made by its owner);
    print its fingerprint."""
    owner, name = _owner_and_name(full_name)
    found = forge.registry.get(owner, name)
    account = forge.accounts.require(owner)
    added = forge.keys.add_deploy_key(found.id, sys.stdin.read(), title, not write, account)
    click.echo(f"{added.fingerprint} {added.title}")


@key.command("list")
@click.argument("user_name", metavar="USER")
@with_forge
def key_list(forge: Forge, user_name: str) -> None:
    """USER's keys: id, fingerprint, last use and title, one a line."""
    account = forge.accounts.require(user_name)
    for found in forge.keys.of_user(account.id):
        used = "never used" if found.last_used_at is None else f"used {found.last_used_at:.0f}"
        click.echo(f"{found.id} {found.fingerprint} {used} {found.title}")


@key.command("remove")
@click.argument("fingerprint")
@with_forge
def key_remove(forge: Forge, fingerprint: str) -> None:
    """Remove the key (a person's or a deploy key) with this SHA256 fingerprint: it signs in
    no more, from the next connection on."""
    found = forge.keys.by_fingerprint(fingerprint)
    if found is None:
        raise click.ClickException(f"no key {fingerprint}")
    forge.keys.delete(found)
    click.echo(f"removed {found.fingerprint} {found.title}")


@admin.group()
def repo() -> None:
    """Repositories."""


@repo.command("create")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--private", is_flag=True, help="Only its owner, members and collaborators see it.")
@click.option("--description", default="", help="One line shown on the repository's pages.")
@with_forge
def repo_create(forge: Forge, full_name: str, private: bool, description: str) -> None:
    """Create an empty repository; its first push sets its default branch."""
    owner_name, slash, name = full_name.partition("/")
    if not slash:
        raise click.UsageError("give the repository as OWNER/NAME")
    owner = forge.accounts.require(owner_name)
    created = forge.registry.create(owner.name, name, private, description)
    click.echo(f"created {'private' if created.private else 'public'} {created.full_name}")


@admin.group()
def org() -> None:
    """Organisations: owners of repositories that several people share."""


@org.command("create")
@click.argument("name")
@click.option("--owner", "owner_name", required=True, help="A person who administers it.")
@with_forge
def org_create(forge: Forge, name: str, owner_name: str) -> None:
    """Create the organisation NAME."""
    owner = forge.accounts.require(owner_name)
    created = forge.accounts.create_org(name, owner)
    click.echo(f"created organisation {created.name}, owned by {owner.name}")


@org.command("add")
@click.argument("name")
@click.argument("user_name", metavar="USER")
@click.option("--role", type=click.Choice(["owner", "member"]), default="member")
@with_forge
def org_add(forge: Forge, name: str, user_name: str, role: str) -> None:
    """Add USER to the organisation NAME (members push, owners administer)."""
    forge.accounts.add_member(forge.accounts.require(name), forge.accounts.require(user_name), role)
    click.echo(f"{user_name} is now {role} of {name}")


@admin.group("lfs")
def lfs_group() -> None:
    """Git LFS objects: what each repository holds, what its pointers lack."""


@lfs_group.command("fsck")
@click.argument("names", nargs=-1, metavar="[OWNER/NAME]...")
@with_forge
def lfs_fsck(forge: Forge, names: tuple[str, ...]) -> None:
    """Find the Git LFS pointers that every branch and tag reach whose objects the repository
    does not hold (never uploaded, or their bytes gone from the store), in every repository or
    the ones named; exit with status 1 if any."""
    repos = [forge.registry.get(*_owner_and_name(n)) for n in names] or forge.registry.all()
    lacking = 0
    for repo in repos:
        handle = forge.live.open(repo)
        if handle.head_is_unborn and not handle.references:
            continue
        listing = forge.git.run(
            repo.path,
            ["rev-list", "--objects", "--all", f"--filter=blob:limit={MAX_POINTER - 1}"],
            timeout=3600,
        )
        found = list(reachable_pointers(handle, listing))
        missing = {p.oid for p in forge.lfs.missing(repo.id, (p for _, p in found))}
        usage = forge.lfs.usage(repo.id)
        click.echo(
            f"{repo.full_name}: {len(found)} pointers, {len(missing)} missing;"
            f" holds {usage.objects} objects ({usage.bytes} bytes)"
        )
        for path, pointer in found:
            if pointer.oid in missing:
                lacking += 1
                shown = path.decode("utf-8", "replace")
                click.echo(f"  missing {pointer.oid} ({pointer.size} bytes) {shown}")
    if lacking:
        raise click.ClickException(f"{lacking} pointers name objects the forge does not hold")


@admin.group("db")
def db_group() -> None:
    """The database: move an installation to another database, see what one holds."""


@db_group.command("copy")
@click.option(
    "--from",
    "source_url",
    required=True,
    metavar="URL",
    help="The database to copy: sqlite:///PATH (or a path) or postgresql://…",
)
@click.option(
    "--to",
    "target_url",
    required=True,
    metavar="URL",
    help="An empty database to copy it into: postgresql://… or sqlite:///PATH.",
)
@click.option(
    "--verify-only",
    is_flag=True,
    help="Copy nothing: compare the two databases' row counts and checksums.",
)
@click.option(
    "--batch", type=click.IntRange(min=1), default=500, show_default=True, help="Rows per insert."
)
def db_copy(source_url: str, target_url: str, verify_only: bool, batch: int) -> None:
    """Copy a forge's database into an empty one (SQLite or PostgreSQL, either way), then
    verify the rows and a checksum of every table; exit with status 1 if any differs.

    The source may be a running installation's: it is read as one snapshot, and the server
    keeps writing meanwhile. The target is brought to the current schema first, and refused
    if it holds any data.
    """
    with _databases(source_url, target_url) as (source, target):
        if verify_only:
            report = dbcopy.verify(source, target, batch)
        else:
            report = dbcopy.copy(source, target, batch)
        _show_report(report, source.shown, target.shown)


@db_group.command("info")
@location_options
def db_info(
    config_file: Path | None, data: Path | None, database: str | None, repos: Path | None
) -> None:
    """Which database the forge uses, its schema version and the rows in each table."""
    settings = load_settings(config_file, data=data, database=database, repos=repos)
    with _databases(settings.database) as (db,):
        found = version(db)
        click.echo(f"database: {db.shown}")
        click.echo(f"schema version: {found} (this floorless: {SCHEMA_VERSION})")
        counted = dbcopy.counts(db)
        width = max((len(n) for n in counted), default=5)
        for name, rows in counted.items():
            click.echo(f"{name:<{width}}  {rows:>10}")


@contextmanager
def _databases(*urls: str) -> Iterator[tuple[Database, ...]]:
    """The databases named, closed at the end; floorless's errors as a message and status 1."""
    opened: list[Database] = []
    try:
        for i, url in enumerate(urls):
            try:
                db = dbcopy.open_source(url) if i == 0 else open_database(url, max_connections=2)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from exc
            opened.append(db)
        yield tuple(opened)
    except FloorlessError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        for db in opened:
            db.close()


def _show_report(report: dbcopy.Report, source: str, target: str) -> None:
    width = max([len(t) for t in report.tables] + [5])
    click.echo(f"{'table':<{width}}  {'rows':>10}  checksum")
    for name in sorted(report.tables):
        mine, theirs = report.source.get(name), report.target.get(name)
        if mine == theirs and mine is not None:
            click.echo(f"{name:<{width}}  {mine.rows:>10}  {mine.checksum}")
            continue
        rows = "/".join(str(s.rows) if s else "-" for s in (mine, theirs))
        sums = " / ".join(s.checksum if s else "(no table)" for s in (mine, theirs))
        click.echo(f"{name:<{width}}  {rows:>10}  {sums}  DIFFERS")
    differing = report.differing()
    if differing:
        raise click.ClickException(
            f"{len(differing)} of {len(report.tables)} tables differ between {source}"
            f" and {target} (rows and checksums: source / target): {', '.join(differing)}"
        )
    done = "copied" if report.copied else "compared"
    click.echo(
        f"{done} {report.rows} rows in {len(report.tables)} tables: {source} -> {target},"
        " every table's rows and checksum equal"
    )
