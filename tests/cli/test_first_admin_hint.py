"""The first administrator's command ``floorless serve`` prints works wherever it is pasted:
it names the data and repositories directories the forge reads, absolute, even when the forge
found them by default (relative to where it was started)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from support.serving import clean_env, database_options

from floorless.cli.options import load_settings
from floorless.cli.serve import first_admin_hint
from floorless.db import open_database


def test_the_hint_names_the_directories_the_forge_reads(tmp_path: Path, monkeypatch) -> None:
    started = tmp_path / "started-here"
    started.mkdir()
    monkeypatch.chdir(started)
    settings = load_settings(None, data=Path("data"), repos=Path("repos"))
    (started / "repos").mkdir()
    hint = first_admin_hint(settings, None, None)
    line = hint.splitlines()[1].strip()
    assert f"--data {started / 'data'}" in line and f"--repos {started / 'repos'}" in line
    words = shlex.split(line.replace("NAME", "first").replace("EMAIL", "first@example.org"))
    database = database_options(started / "data")  # on PostgreSQL: the lane's database
    words += database
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        words, input="a long enough password\n", cwd=elsewhere, env=clean_env(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert not any(elsewhere.iterdir())  # nothing made where it was pasted
    url = database[1] if database else None
    db = open_database(load_settings(None, data=started / "data", database=url).database)
    try:
        assert db.one("SELECT name FROM accounts WHERE name = 'first'") is not None
    finally:
        db.close()
