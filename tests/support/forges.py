"""Starting forges and waiting on them: a forge over given directories, its index complete, a
deadline scaled to the machine's load, and on PostgreSQL a database of each data directory's
own (``FLOORLESS_TEST_POSTGRES``)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from floorless.core.config import Settings
from floorless.forge import Forge

ROOT = Path(__file__).resolve().parents[2]


SERVER = os.environ.get("FLOORLESS_TEST_POSTGRES", "")  # the cluster ./check started, if any
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under pytest-xdist
# The suite's own database on that cluster (what the tests that share one database use): one for
# each xdist worker, so that workers running at once never see each other's rows.
POSTGRES = f"{SERVER.rsplit('/', 1)[0]}/suite_{WORKER}" if SERVER and WORKER else SERVER


def make_suite_database() -> None:
    """Create this worker's suite database (``POSTGRES``) on the cluster if it is not there."""
    if POSTGRES and POSTGRES != SERVER:
        _create_database(POSTGRES.rsplit("/", 1)[1])


def _create_database(name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(SERVER, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def database_for(data: Path) -> str | None:
    """The PostgreSQL database of a data directory when the tests run on PostgreSQL (made
    empty the first time it is asked for), or None on SQLite."""
    if not POSTGRES:
        return None
    # the data directory's path tells it apart, also between xdist workers (each has a
    # temporary directory of its own)
    name = "t_" + hashlib.sha1(str(Path(data).absolute()).encode()).hexdigest()[:24]
    _create_database(name)
    return SERVER.rsplit("/", 1)[0] + "/" + name


def copy_test_database(source: Path, target: Path) -> None:
    """On PostgreSQL, make ``target`` data directory's database a copy of ``source``'s (what
    copying the data directory does on SQLite); nothing on SQLite."""
    if not POSTGRES:
        return
    import psycopg
    from psycopg import sql

    source_url, target_url = database_for(source), database_for(target)
    assert source_url and target_url
    with psycopg.connect(SERVER, autocommit=True) as conn:
        names = [sql.Identifier(url.rsplit("/", 1)[1]) for url in (source_url, target_url)]
        conn.execute(  # a template must have no one connected
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (source_url.rsplit("/", 1)[1],),
        )
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(names[1]))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(names[1], names[0]))


def stored_bytes(forge: Forge) -> bytes:
    """Everything the forge's database holds, as bytes to search: the SQLite file and its
    log, or every row of every table as PostgreSQL prints it."""
    if forge.db.dialect == "sqlite":
        path = Path(forge.settings.database)
        files = (path, path.with_name(path.name + "-wal"))
        return b"".join(p.read_bytes() for p in files if p.exists())
    tables = forge.db.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    return b"".join(
        str(row[0]).encode()
        for table in tables
        for row in forge.db.query(f'SELECT t::text FROM "{table[0]}" AS t')
    )


def patience(seconds: float) -> float:
    """A deadline for work whose duration depends on the machine: ``seconds`` on an idle one
    with cores to spare, longer in proportion to the load on a busy or small one. Deadlines
    only catch a hang; no test asserts how fast anything was."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] / cores
    return seconds * max(1.0, load) * (2.0 if cores <= 2 else 1.0)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until it is true, failing after ``timeout`` seconds (scaled by
    ``patience`` to the machine)."""
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def start_forge(repos: Path, data: Path, **overrides) -> Forge:
    settings = Settings.load(environ={}, data=data, repos=repos, **overrides)
    forge = Forge(settings)
    forge.start()
    return forge


def wait_indexed(forge: Forge) -> None:
    """Wait until every readable repository is fully indexed."""
    for repo in forge.registry.all():
        try:
            snapshot = forge.live.snapshot(repo)
        except Exception:  # a broken repository is never indexed
            continue
        tips = snapshot.tips()
        wait_for(
            lambda r=repo, t=tips: (
                r.id in forge.indexer.failures or all(forge.indexer.ready(r.id, c) for c in t)
            )
        )
    wait_for(forge.indexer.idle)
