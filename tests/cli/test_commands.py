"""The command line imports a command's module when that command runs: ``floorless serve``'s
own process, which lives as long as the server and whose memory its forked workers start
from, holds the settings and granian, not the forge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from support.serving import serving

from floorless.cli import COMMANDS, main

HEAVY = ("floorless.forge", "floorless.web.app", "pygit2", "jinja2", "falcon", "psycopg")


def test_the_serve_command_imports_no_forge() -> None:
    """What ``floorless serve`` has imported by the time it hands the process to granian
    (the preparation runs in a forked child): none of the forge's modules."""
    script = (
        "import json, sys\n"
        "from floorless.cli import main\n"
        "command = main.get_command(None, 'serve')\n"
        "import granian\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert json.loads(found.stdout) == []


def test_every_command_is_listed_and_runs() -> None:
    runner = CliRunner()
    listed = runner.invoke(main, ["--help"])
    assert listed.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in listed.output
        assert runner.invoke(main, [name, "--help"]).exit_code == 0
    unknown = runner.invoke(main, ["nope"])
    assert unknown.exit_code == 2 and "No such command 'nope'" in unknown.output


def test_a_served_forge_watches_lean_and_allocates_as_set(tmp_path: Path) -> None:
    """``floorless serve``'s own process maps no libgit2; with ``allocator = "malloc"`` it
    starts again with the C library's allocator in one arena, which its workers inherit, and
    by default with Python's own."""
    config = tmp_path / "malloc.toml"
    config.write_text('allocator = "malloc"\n')
    for extra, expected in (((), None), (("--config", str(config)), b"malloc")):
        data = tmp_path / f"data-{len(extra)}"
        with serving(tmp_path / "repos", data, *extra) as server:
            workers = server.worker_pids()[1:]  # (the first is granian's own process)
            assert workers
            for pid in [server.proc.pid, *workers]:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                if expected is None:
                    assert not any(e.startswith(b"PYTHONMALLOC=") for e in environ), pid
                else:
                    assert b"PYTHONMALLOC=malloc" in environ, pid
                    assert b"MALLOC_ARENA_MAX=1" in environ, pid
            assert "libgit2" not in Path(f"/proc/{server.proc.pid}/maps").read_text()
            assert all("libgit2" in Path(f"/proc/{pid}/maps").read_text() for pid in workers)
