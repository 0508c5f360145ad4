"""bench.cold_commit on a small generated commit: its forge is warmed by a page that exists
(the parent, asked by its full id), and the figures it reports are counts and phases of that
page, never times asserted."""

from __future__ import annotations

from pathlib import Path

from bench import cold_commit, contenders


def test_phase_is_read_from_server_timing() -> None:
    header = 'git;dur=12.50, db;dur=0.2, render;dur=3, spawn;desc="processes";dur=0'
    assert cold_commit._phase(header, "git") == 12.5
    assert cold_commit._phase(header, "render") == 3.0
    assert cold_commit._phase(header, "total") == 0.0


def test_measure_a_small_commit(tmp_path: Path) -> None:
    repo = cold_commit.build_commit_repo(tmp_path / "big.git", files=6)
    result = cold_commit.measure(repo, "HEAD", runs=1)
    assert result.files_changed == 6
    assert result.files_listed == 6
    assert result.files_shown == 6
    assert result.lines_highlighted > 0
    assert result.page_git_ms > 0 and result.git_ratio > 0
    # the target's measure: the page less the server's own rendering of what it shows
    assert 0 < result.page_render_ms < result.page_ms
    assert result.unrendered_ms > 0 and result.target_ratio > 0
    assert 'spawn;desc="processes";dur=0' in result.server_timing
    if contenders.available("cgit") is None:  # cgit's page of the same commit, beside it
        assert result.cgit_ms is not None and result.cgit_ms > 0
        assert result.cgit_bytes is not None and result.cgit_bytes > 0
    else:
        assert result.cgit_ms is None and result.cgit_bytes is None
