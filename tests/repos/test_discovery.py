"""Which directories are served, and under which owner and name."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import build_checkout, build_one, git

from floorless.cli import main
from floorless.repos.discovery import discover, git_dir_of
from floorless.web.app import create_app


def found(root: Path) -> dict[str, Path]:
    return {f"{owner}/{name}": path for owner, name, path, _ in discover(root, "local").repos}


def test_layouts(tmp_path: Path) -> None:
    root = tmp_path / "repos"
    build_one(root / "alice" / "bare.git")
    build_checkout(root / "alice" / "work")
    build_one(root / "solo.git")
    build_checkout(root / "loose")
    (root / "alice" / "not-a-repo").mkdir()
    (root / "alice" / "not-a-repo" / "file.txt").write_text("x")
    build_one(root / ".hidden" / "secret.git")
    build_one(root / "bad name" / "x.git")  # owners must be URL-safe names
    build_one(root / "raw" / "x.git")  # a reserved first path segment
    build_one(root / "carol" / ".dot.git")
    assert found(root) == {
        "alice/bare": root / "alice" / "bare.git",
        "alice/work": root / "alice" / "work" / ".git",
        "local/loose": root / "loose" / ".git",
        "local/solo": root / "solo.git",
    }


def test_name_with_and_without_git_suffix_first_wins(tmp_path: Path) -> None:
    root = tmp_path / "repos"
    build_one(root / "bob" / "dup")
    build_one(root / "bob" / "dup.git")
    assert list(found(root)) == ["bob/dup"]


def test_root_itself_a_checkout(tmp_path: Path) -> None:
    """``floorless serve --repos .`` inside a checkout serves that repository."""
    checkout = build_checkout(tmp_path / "project")
    assert found(checkout) == {"local/project": checkout / ".git"}


def test_worktree_style_gitfile(tmp_path: Path) -> None:
    bare = build_one(tmp_path / "store" / "real.git")
    linked = tmp_path / "repos" / "dana" / "linked"
    linked.mkdir(parents=True)
    (linked / ".git").write_text(f"gitdir: {bare}\n")
    assert git_dir_of(linked) == (bare.resolve(), False)
    assert found(tmp_path / "repos") == {"dana/linked": bare.resolve()}


def test_unreadable_and_missing_roots_give_nothing(tmp_path: Path) -> None:
    assert found(tmp_path / "absent") == {}


def test_serving_a_checkout_in_place(tmp_path: Path) -> None:
    checkout = build_checkout(tmp_path / "project")
    forge = start_forge(checkout, tmp_path / "data")
    try:
        wait_indexed(forge)
        client = testing.TestClient(create_app(forge))
        home = client.simulate_get("/local/project")
        assert home.status_code == 200
        assert "README.md" in home.text
        head = git(checkout, "rev-parse", "HEAD").decode().strip()
        assert head[:10] in home.text
    finally:
        forge.stop()


@pytest.mark.parametrize("args", [[], ["--repos", "{repos}"]])
def test_admin_rescan_reports_counts(tmp_path: Path, args: list[str]) -> None:
    repos = tmp_path / "repos"
    build_one(repos / "erin" / "a.git")
    build_one(repos / "erin" / "b.git")
    data = tmp_path / "data"
    if not args:  # the default repositories directory lives in the data directory
        repos = data / "repositories"
        build_one(repos / "erin" / "a.git")
        build_one(repos / "erin" / "b.git")
    argv = ["admin", "rescan", "--data", str(data), *[a.format(repos=repos) for a in args]]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert "2 repositories (2 added, 0 removed)" in result.output
    again = CliRunner().invoke(main, argv)
    assert "2 repositories (0 added, 0 removed)" in again.output
