"""Site-wide fixes: GitHub-shaped and ref-for-commit URLs redirected, 404s inside a readable
repository under its header, one error style, the first administrator's command as it can be
pasted, and code colours with AA contrast on every background code sits on."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import database_for, start_forge
from support.gitfixtures import git_text
from support.spawns import counting

from floorless.core.errors import BadRequest
from floorless.forge import Forge
from floorless.web import markup
from floorless.web.app import create_app

STYLE = Path(markup.__file__).parent / "static" / "style.css"


SPACES = "/alice/demo/src/branch/main/name%20with%20spaces.txt"


def _location(client: testing.TestClient, url: str) -> str:
    result = client.simulate_get(url)
    assert result.status_code == 302, (url, result.status_code, result.text[:200])
    return result.headers["Location"]


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("/alice/demo/tree/main", "/alice/demo/src/branch/main"),
        ("/alice/demo/tree/main/src", "/alice/demo/src/branch/main/src"),
        ("/alice/demo/blob/main/src/app.py", "/alice/demo/src/branch/main/src/app.py"),
        ("/alice/demo/blob/feature/x/README.md", "/alice/demo/src/branch/feature/x/README.md"),
        ("/alice/demo/tree/v2.0/docs", "/alice/demo/src/tag/v2.0/docs"),
        (
            "/alice/demo/blob/main/name%20with%20spaces.txt",
            "/alice/demo/src/branch/main/name%20with%20spaces.txt",
        ),
    ],
)
def test_github_shapes_redirect_to_floorless_pages(
    client: testing.TestClient, url: str, target: str
) -> None:
    assert _location(client, url) == target
    assert client.simulate_get(target).status_code == 200


def test_github_shapes_by_commit_id(client: testing.TestClient, fixture_root: Path) -> None:
    head = git_text(fixture_root / "alice" / "demo.git", "rev-parse", "main").strip()
    location = _location(client, f"/alice/demo/tree/{head[:12]}/docs")
    assert location == f"/alice/demo/src/commit/{head}/docs"


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/alice/demo/tree/nosuch/src", 404),
        ("/alice/demo/blob/main/../../etc/passwd", 400),
        ("/alice/demo/tree/main/%00", 400),
        ("/alice/nothing/tree/main", 404),
        ("/alice/demo/commit/nosuch", 404),
        ("/alice/demo/commit/nosuch.diff", 404),
        ("/alice/demo/commit/" + "ab" * 20, 404),
        ("/alice/demo/commit/feature/nosuch", 404),
        ("/alice/demo/commit/feature/x/../y", 400),
        ("/alice/nothing/commit/feature/x", 404),
    ],
)
def test_redirects_refuse_what_does_not_exist(
    client: testing.TestClient, url: str, status: int
) -> None:
    result = client.simulate_get(url)
    assert result.status_code == status, (url, result.text[:300])


def test_a_missing_path_is_the_page_s_own_404(client: testing.TestClient) -> None:
    # as for an older kind-less link: the ref decides the redirect, the page the path
    target = _location(client, "/alice/demo/blob/main/no/such/file")
    assert target == "/alice/demo/src/branch/main/no/such/file"
    assert client.simulate_get(target).status_code == 404


def test_a_ref_where_a_commit_id_belongs(client: testing.TestClient, fixture_root: Path) -> None:
    repo = fixture_root / "alice" / "demo.git"
    # a branch before a tag of the same name ("release"), as floorless's kind-less URLs take
    for ref, full in (
        ("main", "heads/main"),
        ("release", "heads/release"),
        ("v2.0", "tags/v2.0"),
        ("feature/x", "heads/feature/x"),  # a name with a / in it: a route of its own
    ):
        commit = git_text(repo, "rev-parse", f"refs/{full}^{{commit}}").strip()
        assert _location(client, f"/alice/demo/commit/{ref}") == f"/alice/demo/commit/{commit}"
        assert _location(client, f"/alice/demo/commit/{ref}.patch") == (
            f"/alice/demo/commit/{commit}.patch"
        )
    # an id, abbreviated or not, is a commit's page as ever
    main = git_text(repo, "rev-parse", "main").strip()
    assert client.simulate_get(f"/alice/demo/commit/{main[:10]}").status_code == 200


def test_a_404_inside_a_repository_keeps_its_header(client: testing.TestClient) -> None:
    inside = client.simulate_get("/alice/demo/src/branch/main/no/such/file")
    assert inside.status_code == 404
    assert 'class="repo-title"' in inside.text and 'aria-label="Repository"' in inside.text
    assert 'class="error-page"' in inside.text
    outside = client.simulate_get("/alice/nothing/src/branch/main/no/such/file")
    assert outside.status_code == 404
    assert "repo-title" not in outside.text and "alice/demo" not in outside.text


def test_one_error_style() -> None:
    css = STYLE.read_text()
    rules = re.findall(r"^\s*\.error(?![-\w])[^{]*\{", css, re.MULTILINE)
    assert len(rules) == 1, rules
    assert not re.search(r"#c0392b", css)  # the old red: 3.5:1 on the dark theme


def test_the_first_administrator_command_works_when_pasted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    forge = start_forge(tmp_path / "repos", data)
    try:
        client = testing.TestClient(create_app(forge))
        for page in ("/", "/-/login"):
            text = client.simulate_get(page).text
            found = re.search(r'<pre class="command"[^>]*>(.*?)</pre>', text)
            assert found, page
            command = html.unescape(found.group(1))
            assert f"--data {data}" in command
        database = database_for(data)
        command = command.replace("NAME", "first").replace("EMAIL", "first@example.org")
        if database:  # on PostgreSQL the page names the option, never the URL
            assert "--database DATABASE_URL" in command and database not in command
            command = command.replace("DATABASE_URL", database)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        run = subprocess.run(  # pasted in another directory, as a person would
            ["bash", "-c", command],
            input="a long enough password\n",
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert not forge.accounts.first_run()
        assert forge.accounts.get("first") is not None
        assert not any(elsewhere.iterdir())  # nothing made where it was pasted
    finally:
        forge.stop()


def test_markdown_code_and_task_boxes_are_accessible() -> None:
    rendered = markup.render_markdown(
        "```python\nx = 1\n```\n\n- [x] done\n- [ ] to do\n", lambda path, image: "/x"
    )
    assert " lang=" not in rendered  # lang names a human language
    assert 'data-lang="python"' in rendered and 'class="highlight"' in rendered
    assert rendered.count('aria-label="task"') == 2


def _colours(css: str) -> list[tuple[int, ...]]:
    found = re.findall(r"(?<![-\w])color: #([0-9a-fA-F]{6})\b", css)
    return [tuple(int(h[i : i + 2], 16) for i in (0, 2, 4)) for h in found]


def test_code_colours_read_on_every_background() -> None:
    light, _, dark = markup.stylesheet().partition("@media (prefers-color-scheme: dark)")
    for css, backgrounds in ((light, markup.LIGHT_BACKGROUNDS), (dark, markup.DARK_BACKGROUNDS)):
        colours = _colours(css)
        assert len(colours) > 20
        for colour in colours:
            for background in backgrounds:
                rgb = tuple(int(background[i : i + 2], 16) for i in (1, 3, 5))
                assert markup.contrast(colour, rgb) >= 4.5, (colour, background)


def test_the_stylesheet_names_the_backgrounds_code_is_checked_on() -> None:
    css = STYLE.read_text()
    light, _, dark = css.partition("@media (prefers-color-scheme: dark)")
    for name, index in (("--bg", 0), ("--panel", 1), ("--add", 2), ("--del", 3), ("--hunk", 4)):
        assert f"{name}: {markup.LIGHT_BACKGROUNDS[index]};" in light, name
        assert f"{name}: {markup.DARK_BACKGROUNDS[index]};" in dark.split("}")[0], name


def test_releases_are_annotated_tags_newest_first(
    client: testing.TestClient, fixture_root: Path
) -> None:
    repo = fixture_root / "alice" / "demo.git"
    annotated = git_text(
        repo,
        "for-each-ref",
        "--sort=-taggerdate",
        "--format=%(refname:lstrip=2) %(objecttype)",
        "refs/tags",
    ).splitlines()
    expected = [line.split()[0] for line in annotated if line.endswith(" tag")]
    assert expected == ["v2.0", "release"]  # v1.0 is a lightweight tag: no release
    page = client.simulate_get("/alice/demo/releases")
    assert page.status_code == 200
    names = re.findall(
        r'<article class="release">\s*<h3><a href="[^"]+/src/tag/([^"]+)"', page.text
    )
    assert names == expected
    # the message's first line is the title, the rest rendered; the archives beside it
    assert '<span class="release-title">Version 2.0</span>' in page.text
    assert "<p>With feature X.</p>" in page.text
    assert 'href="/alice/demo/archive/v2.0.zip"' in page.text
    assert 'href="/alice/demo/archive/v2.0.tar.gz"' in page.text
    assert client.simulate_get("/alice/demo/releases?page=0").status_code == 400
    assert client.simulate_get("/alice/demo/releases?page=x").status_code == 400
    assert "No releases on this page" in client.simulate_get("/alice/demo/releases?page=9").text


def test_the_home_page_offers_the_archives(client: testing.TestClient) -> None:
    home = client.simulate_get("/alice/demo").text
    assert 'href="/alice/demo/archive/main.zip"' in home
    assert 'href="/alice/demo/archive/main.tar.gz"' in home


@pytest.mark.parametrize("inline", [1_000, 3], ids=["small-tree", "large-tree"])
def test_the_language_bar(forge: Forge, monkeypatch: pytest.MonkeyPatch, inline: int) -> None:
    """A small tree is counted by the page itself; a larger one in the background, the page
    showing a placeholder meanwhile (``inline`` entries: what a page may walk)."""
    from support.forges import wait_for

    from floorless.web import languages

    monkeypatch.setattr(languages, "INLINE", inline)
    client = testing.TestClient(create_app(forge))  # a renderer of its own: nothing counted
    repo = forge.registry.get("alice", "demo")
    handle = forge.live.open(repo)
    tree = handle.revparse_single("main").peel(pygit2.Tree)
    expected = languages.count(handle, tree)
    assert expected and expected[0].name == "Python"  # src/app.py; the Markdown is prose
    with counting() as spawned:
        first = client.simulate_get("/alice/demo").text
    assert spawned == []  # the count is no process
    assert ("languages-pending" in first) == (inline == 3)
    wait_for(lambda: "languages-pending" not in client.simulate_get("/alice/demo").text)
    page = client.simulate_get("/alice/demo").text
    shown = re.findall(r'</span> ([^<]+) <span class="muted">([0-9.]+)%</span></li>', page)
    assert [name for name, _ in shown] == [s.name for s in expected]
    assert [float(p) for _, p in shown] == [round(s.percent, 1) for s in expected]
    assert page.count("<rect ") == len(expected)
    assert languages.count(handle, tree, 3, whole=True) is None


def test_the_about_panel_is_edited_in_the_settings(tmp_path: Path, fixture_root: Path) -> None:
    target = tmp_path / "repos" / "alice" / "demo.git"
    shutil.copytree(fixture_root / "alice" / "demo.git", target)
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        repo = forge.registry.get("alice", "demo")
        client = testing.TestClient(create_app(forge))
        assert 'class="website"' not in client.simulate_get("/alice/demo").text
        forge.registry.set_about(repo, " https://example.org/demo ", "Web, git  forge,web")
        repo = forge.registry.get("alice", "demo")
        assert repo.website == "https://example.org/demo"
        assert repo.topics == ("web", "git", "forge")
        home = client.simulate_get("/alice/demo").text
        assert 'href="https://example.org/demo" rel="nofollow ugc noopener"' in home
        assert re.findall(r'<li class="topic">([^<]+)</li>', home) == ["web", "git", "forge"]
        for website, topics in (
            ("javascript:alert(1)", ""),
            ("https://exa mple.org", ""),
            ("https://example.org/" + "x" * 300, ""),
            ("", "not_a_topic"),
            ("", " ".join(f"t{n}" for n in range(21))),
        ):
            with pytest.raises(BadRequest):
                forge.registry.set_about(repo, website, topics)
        assert forge.registry.get("alice", "demo").website == "https://example.org/demo"
        forge.registry.set_about(repo, "", "")
        assert forge.registry.get("alice", "demo").topics == ()
        # through the settings page, by its owner
        forge.accounts.create_user("alice", "alice@example.org", PASSWORD)
        alice = Browser(client)
        alice.sign_in("alice")
        about = {"action": "about", "website": "https%3A%2F%2Fexample.org", "topics": "a+b-c"}
        assert alice.post("/alice/demo/settings", about).status_code == 303
        assert 'value="https://example.org"' in alice.get("/alice/demo/settings").text
        assert forge.registry.get("alice", "demo").topics == ("a", "b-c")
        refused = alice.post("/alice/demo/settings", {**about, "website": "ftp%3A%2F%2Fx"})
        assert refused.status_code == 400 and 'class="error"' in refused.text
        assert forge.registry.get("alice", "demo").website == "https://example.org"
    finally:
        forge.stop()
