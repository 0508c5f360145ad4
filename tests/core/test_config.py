"""Settings: one table, loaded from TOML, environment and overrides, validated, documented."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.forges import database_for

from floorless.cli import main
from floorless.cli.settings import reference_markdown
from floorless.core.config import SETTINGS, Settings
from floorless.core.errors import ConfigError

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_is_a_field_and_documented() -> None:
    fields = [f.name for f in dataclasses.fields(Settings)]
    assert fields == [s.name for s in SETTINGS]
    text = DOCS.read_text()
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text
        assert f"`FLOORLESS_{setting.name.upper()}`" in text
        assert setting.help


def test_reference_file_is_the_generated_one() -> None:
    assert DOCS.read_text() == reference_markdown(), (
        "docs/configuration.md is stale: run `floorless settings --markdown > "
        "docs/configuration.md`"
    )


def test_precedence_defaults_file_environment_overrides(tmp_path: Path) -> None:
    config = tmp_path / "floorless.toml"
    config.write_text('port = 4000\nsite_name = "from file"\nthreads = 3\n')
    settings = Settings.load(
        config, environ={"FLOORLESS_PORT": "5000", "FLOORLESS_THREADS": "4"}, threads=6
    )
    assert settings.site_name == "from file"
    assert settings.port == 5000
    assert settings.threads == 6
    assert settings.host == "127.0.0.1"


def test_derived_directories_follow_data(tmp_path: Path) -> None:
    settings = Settings.load(environ={}, data=tmp_path / "d")
    assert settings.repos == tmp_path / "d" / "repositories"
    assert settings.runtime_dir == tmp_path / "d" / "run"
    assert settings.database == (
        database_for(tmp_path / "d") or str(tmp_path / "d" / "floorless.sqlite3")
    )


def test_config_named_by_environment(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("port = 4100\n")
    assert Settings.load(environ={"FLOORLESS_CONFIG": str(config)}).port == 4100


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("port = 'abc'\n", "expected int"),
        ("port = -1\n", "at least"),
        ("colour = 'blue'\n", "unknown setting"),
        ("port = [\n", "not valid TOML"),
        ("ref_check_interval = 0\n", "at least"),
    ],
)
def test_bad_config_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(ConfigError, match=message):
        Settings.load(config, environ={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.load(tmp_path / "absent.toml", environ={})


def test_bad_environment_value() -> None:
    with pytest.raises(ConfigError, match="threads"):
        Settings.load(environ={"FLOORLESS_THREADS": "many"})


def test_command_line_reports_bad_config_without_traceback(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("port = 'x'\n")
    result = CliRunner().invoke(main, ["admin", "rescan", "--config", str(config)])
    assert result.exit_code == 2
    assert "expected int" in result.output
    assert "Traceback" not in result.output


def test_settings_command_lists_every_setting() -> None:
    result = CliRunner().invoke(main, ["settings"])
    assert result.exit_code == 0
    for setting in SETTINGS:
        assert setting.name in result.output


def test_a_former_name_is_still_read_and_the_new_one_wins(tmp_path: Path) -> None:
    config = tmp_path / "old.toml"
    config.write_text("dear_threads = 3\n")
    assert Settings.load(config, environ={}).expensive_threads == 3
    assert Settings.load(environ={"FLOORLESS_DEAR_THREADS": "5"}).expensive_threads == 5
    both = {"FLOORLESS_DEAR_THREADS": "5", "FLOORLESS_EXPENSIVE_THREADS": "6"}
    assert Settings.load(config, environ=both).expensive_threads == 6
    config.write_text("dear_threads = 3\nexpensive_threads = 4\n")
    assert Settings.load(config, environ={}).expensive_threads == 4
