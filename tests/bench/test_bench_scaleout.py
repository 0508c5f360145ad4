"""The scale-out benchmark runs end to end on the small repository for a handful of
requests: one node against two behind deploy/nginx.conf on the slow-storage simulator, on
the suite's database. It asserts statuses and counts, never times."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.forges import POSTGRES
from support.fuse import fuse_or_skip

from bench import proxy, scaleout

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> scaleout.ScaleOut:
    fuse_or_skip()
    if proxy.nginx_path() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have nginx (scripts/install-test-deps.sh)")
        pytest.skip("nginx is not installed (scripts/install-test-deps.sh)")
    work = tmp_path_factory.mktemp("scaleout")
    args = scaleout.parse(
        ["--requests", "3", "--warmup", "1", "--seconds", "0.5", "--concurrency", "4",
         "--throughput-pages", "home", "--delay-ms", "0.3",
         "--database", POSTGRES or "sqlite",
         "--workdir", str(work / "run"), "--cache-dir", str(work / "cache")]
    )  # fmt: skip
    return scaleout.run(args, log=lambda line: None)


def test_every_page_answers_through_the_proxy_and_directly(result) -> None:
    assert result.database == ("postgresql" if POSTGRES else "sqlite")
    assert [p.page for p in result.pages] == list(scaleout.PAGES)
    assert all(p.status == (200, 200, 200, 200) for p in result.pages)


def test_statements_counted_and_no_more_on_the_shared_database(result) -> None:
    for page in result.pages:
        assert page.local_queries is not None and page.proxied_queries is not None
        assert page.proxied_queries <= page.local_queries, page


def test_throughput_for_one_node_and_two(result, tmp_path: Path) -> None:
    assert set(result.throughput) == {
        "one node, direct",
        "one node behind nginx",
        "two nodes behind nginx",
    }
    assert all(rates["home"] > 0 for rates in result.throughput.values())
    text = scaleout.markdown(result, "python -m bench.scaleout --short")
    assert "| explore |" in text and "Throughput at concurrency 4" in text
    assert "No more database statements per warm page" in text
