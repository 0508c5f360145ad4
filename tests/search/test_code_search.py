"""Code search: the index follows pushes (only new blobs are read), queries find the right
lines and link to them, filters narrow, private repositories never show to those who may not
read them (site-wide or per repository, in results or their counts), bad queries get a clear
400, and no search starts a process."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import git, git_env, git_text
from support.spawns import counting

from floorless.forge import Forge
from floorless.repos.registry import Repo
from floorless.search import grams
from floorless.search.index import MAX_SEGMENTS, pack_numbers, unpack_numbers
from floorless.web.app import create_app

MAX_FILE = 4096


@dataclass
class Site:
    forge: Forge
    client: testing.TestClient
    tokens: dict[str, str]
    work: Path


def push(site: Site, repo: Repo, files: dict[str, bytes | None], message: str) -> str:
    """Commit ``files`` (None deletes one) in a work tree of ``repo`` and push it to the
    repository on disk, then tell the forge as its git-over-HTTP push does; wait until the
    code index has the new commit."""
    work = site.work / f"{repo.owner}-{repo.name}"
    if not work.exists():
        work.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], env=git_env(), check=True)
    for name, data in files.items():
        target = work / name
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", "--force", str(repo.path), "HEAD:refs/heads/main")
    head = git_text(work, "rev-parse", "HEAD")
    site.forge.moves.after_push(repo)  # the ref listeners queue the code index
    wait_for(
        lambda: (
            (found := site.forge.code.indexed(repo.id)) is not None and found.commit.hex() == head
        )
    )
    return head


@pytest.fixture(scope="module")
def site(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("codesearch")
    shutil.copytree(fixture_root / "alice" / "demo.git", root / "repos" / "alice" / "demo.git")
    forge = start_forge(root / "repos", root / "data", search_max_file_bytes=MAX_FILE)
    wait_indexed(forge)
    accounts = forge.accounts
    people = {
        name: accounts.create_user(name, f"{name}@example.org", "long enough")
        for name in ("alice", "reader", "other")
    }
    tokens = {name: accounts.create_token(people[name], "write")[0] for name in people}
    secret = forge.registry.create("alice", "secret", private=True)
    forge.policy.set_collaborator(secret, people["reader"], "read")
    forge.registry.create("alice", "open")
    result = Site(forge, testing.TestClient(create_app(forge)), tokens, root / "work")
    push(
        result,
        secret,
        {
            "plans/launch.md": b"# Launch\n\nThe codeword is zanzibar-falcon.\n"
            b"Shared word: pelican\n",
            "src/keys.py": b"def zanzibar():\n    return 'falcon'\n",
        },
        "Secret plans",
    )
    push(
        result,
        forge.registry.get("alice", "open"),
        {
            "README.md": b"# Open\n\nShared word: pelican\n",
            "lib/util.py": b"import os\n\n\ndef helper_one():\n    return 1\n\n\n"
            b"def helper_two():\n    return 2\n",
            "lib/util.c": b"int helper_one(void) { return 1; }\n",
            "notes.txt": b"Mixed Case Word\nmixed case word\n",
        },
        "Open code",
    )
    demo = forge.registry.get("alice", "demo")
    forge.code.index(demo)
    yield result
    forge.stop()


def get(site: Site, url: str, viewer: str | None = None) -> testing.Result:
    path, _, query = url.partition("?")
    headers = {"Authorization": f"token {site.tokens[viewer]}"} if viewer else {}
    return site.client.simulate_get(path, query_string=query, headers=headers)


def found_paths(result: testing.Result) -> list[str]:
    """The files a result page lists (their links to the file at the commit)."""
    return re.findall(
        r'<h3>(?:<a href="[^"]+">[^<]+</a> · )?<a href="[^"]+/src/commit/[0-9a-f]+/([^"]+)"',
        result.text,
    )


def line_links(result: testing.Result) -> list[str]:
    return re.findall(r'<td class="ln"><a href="([^"]+)"', result.text)


def test_a_literal_finds_its_line_and_links_to_it(site: Site) -> None:
    main = git_text(site.forge.registry.get("alice", "demo").path, "rev-parse", "main")
    source = git(site.forge.registry.get("alice", "demo").path, "show", "main:src/app.py").decode()
    number = next(i for i, line in enumerate(source.split("\n"), 1) if "class Greeting" in line)
    result = get(site, "/alice/demo/search?q=class+Greeting")
    assert result.status_code == 200
    assert found_paths(result) == ["src/app.py"]
    assert f"/alice/demo/src/commit/{main}/src/app.py#L{number}" in line_links(result)
    assert "<mark>class Greeting</mark>" in result.text
    page = get(site, f"/alice/demo/src/commit/{main}/src/app.py")
    assert page.status_code == 200 and f'id="L{number}"' in page.text  # the anchor exists


def test_case_is_ignored_unless_asked(site: Site) -> None:
    either = get(site, "/alice/open/search?q=mixed+case+word")
    assert either.text.count("<mark>") == 2
    exact = get(site, "/alice/open/search?q=mixed+case+word+case:yes")
    assert exact.text.count("<mark>") == 1
    assert "<mark>mixed case word</mark>" in exact.text


def test_regular_expressions(site: Site) -> None:
    result = get(site, "/alice/open/search?q=/def+helper_(one|two)/")
    assert found_paths(result) == ["lib/util.py"]
    assert result.text.count("<mark>") == 2
    same = get(site, "/alice/open/search?q=def+helper_(one|two)&mode=regex")
    assert found_paths(same) == ["lib/util.py"]
    # no literal run of three characters: every file is read, and matched
    loose = get(site, "/alice/open/search?q=/h.l?p/")
    assert set(found_paths(loose)) == {"lib/util.py", "lib/util.c"}


def test_filters_by_path_language_and_repository(site: Site) -> None:
    assert set(found_paths(get(site, "/alice/open/search?q=helper_one"))) == {
        "lib/util.py",
        "lib/util.c",
    }
    assert found_paths(get(site, "/alice/open/search?q=helper_one+lang:python")) == ["lib/util.py"]
    assert found_paths(get(site, "/alice/open/search?q=helper_one+lang:c")) == ["lib/util.c"]
    assert found_paths(get(site, "/alice/open/search?q=helper_one+path:*.c")) == ["lib/util.c"]
    assert found_paths(get(site, "/alice/open/search?q=pelican+path:lib/")) == []
    everywhere = get(site, "/-/search?q=pelican", "alice")
    assert sorted(found_paths(everywhere)) == ["README.md", "plans/launch.md"]
    only = get(site, "/-/search?q=pelican+repo:alice/open", "alice")
    assert found_paths(only) == ["README.md"]


@pytest.mark.parametrize("viewer", [None, "other"])
def test_private_content_never_shows_to_those_who_may_not_read_it(
    site: Site, viewer: str | None
) -> None:
    for url in ("/-/search?q=zanzibar", "/-/search?q=/zanz.bar/", "/-/search?q=pelican"):
        result = get(site, url, viewer)
        assert result.status_code == 200
        for secret in ("alice/secret", "plans/launch.md", "keys.py", "zanzibar-falcon", "def "):
            assert secret not in result.text, (url, secret)
    assert found_paths(get(site, "/-/search?q=pelican", viewer)) == ["README.md"]
    assert "1 file matching" in get(site, "/-/search?q=pelican", viewer).text
    assert "No files match" in get(site, "/-/search?q=zanzibar", viewer).text
    assert "No files match" in get(site, "/-/search?q=zanzibar+repo:alice/secret", viewer).text
    hidden = get(site, "/alice/secret/search?q=zanzibar", viewer)
    missing = get(site, "/alice/nothing/search?q=zanzibar", viewer)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content


@pytest.mark.parametrize("viewer", ["alice", "reader"])
def test_those_who_may_read_a_private_repository_find_its_content(site: Site, viewer: str) -> None:
    assert sorted(found_paths(get(site, "/-/search?q=zanzibar", viewer))) == [
        "plans/launch.md",
        "src/keys.py",
    ]
    assert len(found_paths(get(site, "/-/search?q=pelican", viewer))) == 2
    per_repo = get(site, "/alice/secret/search?q=zanzibar", viewer)
    assert per_repo.status_code == 200
    assert sorted(found_paths(per_repo)) == ["plans/launch.md", "src/keys.py"]


def test_a_push_replaces_what_was_found(site: Site) -> None:
    repo = site.forge.registry.create("alice", "moving")
    push(site, repo, {"a.txt": b"first ostrich\n", "b.txt": b"steady ostrich\n"}, "one")
    assert sorted(found_paths(get(site, "/alice/moving/search?q=ostrich"))) == ["a.txt", "b.txt"]
    read = site.forge.code.blobs_read
    head = push(site, repo, {"a.txt": b"now a flamingo\n"}, "two")
    assert site.forge.code.blobs_read == read + 1  # only the changed file was read
    assert found_paths(get(site, "/alice/moving/search?q=ostrich")) == ["b.txt"]
    found = get(site, "/alice/moving/search?q=flamingo")
    assert found_paths(found) == ["a.txt"]
    assert f"/alice/moving/src/commit/{head}/a.txt#L1" in line_links(found)
    push(site, repo, {"a.txt": None}, "three")
    assert found_paths(get(site, "/alice/moving/search?q=flamingo")) == []


def test_binary_and_large_files_are_left_out(site: Site) -> None:
    repo = site.forge.registry.create("alice", "sizes")
    push(
        site,
        repo,
        {
            "small.txt": b"needle in a small file\n",
            "large.txt": b"needle in a large file\n" + b"x" * MAX_FILE,
            "data.bin": b"needle\0in a binary file\n",
        },
        "sizes",
    )
    assert found_paths(get(site, "/alice/sizes/search?q=needle")) == ["small.txt"]
    kinds = {
        row["kind"] for row in site.forge.db.query("SELECT kind FROM search_blobs WHERE size > 0")
    }
    assert {"text", "binary", "large"} <= kinds


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("q=%00", "NUL"),
        ("q=" + "a" * 600, "at most"),
        ("q=/[unclosed/", "not a valid regular expression"),
        ("q=/(a%2B)%2B$/", "exponential"),
        ("q=/(a|ab)*c/", "exponential"),
        ("q=/(x)\\1/", "back-references"),
        ("q=path:src/", "type some text"),
        ("q=word&page=nope", "page must be a number"),
        ("q=word&page=1000", "page must be between"),
        ("q=word&mode=fuzzy", "mode is"),
        ("q=-path:x+word", "not supported"),
    ],
)
def test_bad_queries_are_refused_clearly(site: Site, query: str, message: str) -> None:
    for url in ("/alice/open/search", "/-/search"):
        result = site.client.simulate_get(url, query_string=query)
        assert result.status_code == 400, (url, query)
        assert message in result.text, (url, query)


def test_an_empty_query_shows_the_form(site: Site) -> None:
    for url in ("/alice/open/search", "/-/search", "/alice/open/search?q=+++"):
        result = get(site, url)
        assert result.status_code == 200
        assert 'role="search"' in result.text and 'name="q"' in result.text


def test_the_forms_are_plain_get_forms(site: Site) -> None:
    home = get(site, "/alice/open")
    assert re.search(
        r'<form class="repo-search" role="search" method="get" action="/alice/open/search">',
        home.text,
    )
    explore = get(site, "/?q=pelican")
    assert 'href="/-/search?q=pelican"' in explore.text


def test_searching_starts_no_process(site: Site) -> None:
    for url in (
        "/alice/demo/search?q=greet",
        "/alice/demo/search?q=/gre+t/",
        "/-/search?q=pelican",
        "/-/search?q=/h.l?p/",
    ):
        with counting() as events:
            result = get(site, url, "alice")
        assert result.status_code == 200
        assert events == [], url


def test_postings_round_trip_and_segments_are_merged(site: Site) -> None:
    assert unpack_numbers(pack_numbers([9, 3, 700000, 4])) == [3, 4, 9, 700000]
    code = site.forge.code
    repo = site.forge.registry.create("alice", "many")
    for n in range(MAX_SEGMENTS + 2):
        push(site, repo, {f"f{n}.txt": f"segment word kiwi{n}\n".encode()}, f"c{n}")
    segments = site.forge.db.one("SELECT COUNT(*) AS n FROM search_segments")
    assert segments is not None and int(segments["n"]) <= MAX_SEGMENTS
    result = get(site, "/alice/many/search?q=segment+word")
    assert len(found_paths(result)) == MAX_SEGMENTS + 2
    assert found_paths(get(site, "/alice/many/search?q=kiwi3")) == ["f3.txt"]
    assert code.size()["search_postings_rows"] > 0


def test_regex_plans_need_the_literal_runs() -> None:
    plan = grams.regex_plan("foo(alpha|omega)+x*")
    assert isinstance(plan, grams.AllOf)
    assert plan.parts[0] == grams.literal_plan(b"foo")
    assert isinstance(plan.parts[1], grams.AnyOf)
    assert grams.regex_plan("a.b") is None
    either = grams.regex_plan("alpha|omega")
    assert isinstance(either, grams.AnyOf)
    assert grams.regex_plan("(abc)?def") == grams.literal_plan(b"def")
    with pytest.raises(grams.PatternRefused):
        grams.check_pattern("(x+)*y")
    # a match that cannot cross a line is looked for on the lines holding its anchor only
    assert grams.single_line(r"\w+_parse_9\d\d\b")
    assert grams.anchor(grams.regex_plan(r"\w+_parse_9\d\d\b")) == b"_parse_9"
    for crossing in (r"foo\s+bar", r"[^x]y", r"(?s)a.b", r"x\ny", r"\Wabc", r"(?=x\n)abc"):
        assert not grams.single_line(crossing), crossing
    grams.check_pattern("(foo)+bar\\w*")
    # runs too short for a trigram narrow nothing in the index, but sieve a file's bytes
    assert grams.regex_plan(r"\bq[a-z]*zx\b") is None
    assert grams.regex_plan(r"\bq[a-z]*zx\b", shortest=2) == grams.Grams((), b"zx")
    assert grams.text_plan("Ab", shortest=2) == grams.Grams((), b"ab")


def test_a_pattern_without_a_trigram_reads_only_files_with_its_short_runs(site: Site) -> None:
    from floorless.search import query as code

    repo = site.forge.registry.get("alice", "open")
    indexed = site.forge.code.indexed(repo.id)
    assert indexed is not None
    target = code.Target(repo, indexed, site.forge.live.open(repo))
    calls: list[bytes] = []
    pattern = code.Query.pattern

    class Counted:  # the pattern, counting the files it is run on
        def __init__(self, real):
            self.real = real

        def search(self, raw, *args, **kwargs):
            calls.append(raw)
            return self.real.search(raw, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.real, name)

    code.Query.pattern = lambda self: Counted(pattern(self))  # type: ignore[method-assign]
    try:
        query = code.parse(r"/h[ex]lp[ex]r_[ox]n[ex]/")  # runs "h", "lp", "r_", "n": no trigram
        found = code.search(site.forge.code, [target], query, 1, 60.0)
    finally:
        code.Query.pattern = pattern  # type: ignore[method-assign]
    assert sorted(f.path for f in found.files) == [b"lib/util.c", b"lib/util.py"]
    # every file a candidate, the pattern run on the two that hold "lp" and "r_"
    assert found.candidates == 4 and len(calls) == 2


def test_file_trigrams_are_every_window_of_three_bytes() -> None:
    import random

    rng = random.Random(7)
    for size in [*range(12), 97, 1000]:
        data = bytes(rng.choice(b"abcXYZ_\n\x00\xff") for _ in range(size))
        lower = data.lower()
        every = {grams.gram(lower[i : i + 3]) for i in range(len(lower) - 2)}
        assert grams.file_grams(data) == every, size


def test_results_show_each_match_with_a_line_around_it(site: Site) -> None:
    result = get(site, "/alice/open/search?q=helper+path:util.py")
    numbers = [int(link.rsplit("#L", 1)[1]) for link in line_links(result)]
    assert numbers == [3, 4, 5, 7, 8, 9]  # two snippets: 4 and 8, a line either side
    assert result.text.count('<table class="search-lines">') == 2
    hits = re.findall(r'<tr class="hit"><td class="ln"><a href="[^"]+#L(\d+)"', result.text)
    assert hits == ["4", "8"]
    across = get(site, "/alice/open/search?q=/one\\(\\):\\n\\s%2Breturn/")
    hits = re.findall(r'<tr class="hit"><td class="ln"><a href="[^"]+#L(\d+)"', across.text)
    assert found_paths(across) == ["lib/util.py"] and hits == ["4", "5"]
    assert "<mark>one():</mark>" in across.text and "<mark>    return</mark>" in across.text


def test_a_search_out_of_time_says_it_is_partial(site: Site) -> None:
    from floorless.search import query as code

    repo = site.forge.registry.get("alice", "open")
    indexed = site.forge.code.indexed(repo.id)
    assert indexed is not None
    target = code.Target(repo, indexed, site.forge.live.open(repo))
    spent = code.search(site.forge.code, [target], code.parse("/h.l?p/"), 1, budget=0.0)
    assert spent.partial and spent.read == 0 and not spent.files
    whole = code.search(site.forge.code, [target], code.parse("/h.l?p/"), 1, budget=60.0)
    assert not whole.partial and whole.read == whole.candidates == 4


def test_a_pattern_that_backtracks_spends_its_budget_not_the_process(site: Site) -> None:
    """Consecutive unbounded repeats pass the pattern check (no repeat inside a repeat) but
    backtrack as a power of the line's length: run to the end, this one would take hours on
    3,000 letters. The match is cut at the budget, and the search says it is partial."""
    from floorless.search import query as code

    repo = site.forge.registry.create("alice", "backtracks")
    push(site, repo, {"letters.txt": b"a" * 3000 + b"\n"}, "Many letters")
    indexed = site.forge.code.indexed(repo.id)
    assert indexed is not None
    target = code.Target(repo, indexed, site.forge.live.open(repo))
    query = code.parse(r"/\w*\w*\w*\w*\w*\d/")
    found = code.search(site.forge.code, [target], query, 1, budget=0.3)
    assert found.partial and found.read == 1 and not found.files


def test_a_repository_made_private_leaves_the_results_at_once(site: Site) -> None:
    assert found_paths(get(site, "/-/search?q=pelican")) == ["README.md"]
    site.forge.registry.set_private("alice", "open", True)
    try:
        assert "No files match" in get(site, "/-/search?q=pelican").text
        assert get(site, "/alice/open/search?q=pelican").status_code == 404
        assert len(found_paths(get(site, "/-/search?q=pelican", "alice"))) == 2
    finally:
        site.forge.registry.set_private("alice", "open", False)


def test_another_branch_is_indexed_when_first_asked_for(site: Site) -> None:
    repo = site.forge.registry.create("alice", "branches")
    push(site, repo, {"main.txt": b"on main: a wallaby\n"}, "main")
    work = site.work / "alice-branches"
    git(work, "switch", "-q", "-c", "topic")
    (work / "topic.txt").write_bytes(b"on topic: a kangaroo\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "topic")
    git(work, "push", "-q", str(repo.path), "topic:refs/heads/topic")
    site.forge.moves.after_push(repo)
    tip = git_text(work, "rev-parse", "HEAD")
    tree = bytes.fromhex(git_text(work, "rev-parse", "HEAD^{tree}"))
    assert found_paths(get(site, "/alice/branches/search?q=kangaroo")) == []
    first = get(site, "/alice/branches/search?ref=topic&q=kangaroo")
    assert first.status_code == 200
    assert "being indexed" in first.text or found_paths(first) == ["topic.txt"]
    wait_for(lambda: site.forge.code.stored_tree(tree) is not None)
    found = get(site, "/alice/branches/search?ref=topic&q=kangaroo")
    assert found_paths(found) == ["topic.txt"]
    assert f"/alice/branches/src/commit/{tip}/topic.txt#L1" in line_links(found)
    assert 'name="ref" value="topic"' in found.text
    both = get(site, "/alice/branches/search?ref=topic&q=/a+(wallaby|kangaroo)/")
    assert sorted(found_paths(both)) == ["main.txt", "topic.txt"]
    for ref in ("nothing", "%00", "x" * 5000, "%FF%FE", "../main"):
        assert get(site, f"/alice/branches/search?ref={ref}&q=kangaroo").status_code == 404
    assert get(site, "/alice/secret/search?ref=main&q=zanzibar").status_code == 404
