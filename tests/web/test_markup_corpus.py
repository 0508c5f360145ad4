"""Rendered documents as GitHub renders them: a Markdown corpus (inline HTML kept or dropped
as GitHub's allow-list does, script removed, relative links resolved, heading ids unique),
reStructuredText, AsciiDoc (by Asciidoctor), CSV/TSV and notebooks with their limits; and
the pages that show them (0 processes, READMEs in every directory, SVG images served only
as images)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.markup import _notebook, build_docs
from support.spawns import counting

from floorless.core.asciidoctor import Asciidoctor
from floorless.web import documents
from floorless.web.app import create_app
from floorless.web.markup import render_markdown, slug


def link(path: bytes, image: bool) -> str:
    return ("/raw/" if image else "/src/") + path.decode()


def md(text: str, directory: bytes = b"docs") -> str:
    return render_markdown(text, link, directory)


# (markdown, what must be in the output, what must not)
CORPUS = [
    # layout HTML that READMEs use is kept
    (
        '<p align="center"><img src="logo.png" width="120" height="40"></p>',
        ['<p align="center"><img alt="" src="/raw/docs/logo.png" width="120" height="40"></p>'],
        [],
    ),
    ('<div align="center">\n\n# Title\n\n</div>', ['<div align="center">', 'id="title"'], []),
    ("Press <kbd>Ctrl</kbd>+<kbd>C</kbd>", ["<kbd>Ctrl</kbd>+<kbd>C</kbd>"], []),
    ("one<br>two", ["one<br>two"], []),
    (
        "<details><summary>More</summary>\n\nHidden *text*\n\n</details>",
        ["<details><summary>More</summary>", "<em>text</em>", "</details>"],
        [],
    ),
    ("H<sub>2</sub>O and x<sup>2</sup>", ["H<sub>2</sub>O", "x<sup>2</sup>"], []),
    (
        '<picture><source media="(prefers-color-scheme: dark)" srcset="dark.png">'
        '<img src="light.png" alt="logo"></picture>',
        [
            '<source media="(prefers-color-scheme: dark)" srcset="/raw/docs/dark.png">',
            '<img src="/raw/docs/light.png" alt="logo">',
        ],
        [],
    ),
    ('<img src="x.png" align="right">', ['align="right"'], []),
    ("<ins>new</ins> <del>old</del> <s>gone</s>", ["<ins>new</ins>", "<del>old</del>"], []),
    # script, handlers, styles, frames and forms are dropped
    ("<script>alert(1)</script>", [], ["<script"]),
    ('<img src="a.png" onerror="alert(1)">', ['<img alt="" src="/raw/docs/a.png">'], ["onerror"]),
    ('<a href="x" onclick="steal()">x</a>', [], ["onclick"]),
    ('<p style="position:fixed">x</p>', ["<p>x</p>"], ["style="]),
    ('<iframe src="https://example.org"></iframe>', [], ["<iframe"]),
    ('<form action="/-/login"><input name="password"></form>', [], ["<form", "<input"]),
    ("<svg><script>alert(1)</script></svg>", [], ["<svg", "<script"]),
    ("<style>body{display:none}</style>", [], ["<style"]),
    ('<object data="x.svg"></object><embed src="x.svg">', [], ["<object", "<embed"]),
    (
        '<div class="navbar" id="main" name="x">d</div>',
        ["d</div>"],
        ['id="main"', "navbar", "name="],
    ),
    # javascript: and data: URLs
    ("[x](javascript:alert(1))", [], ["javascript:"]),
    ('<a href="JaVaScRiPt:alert(1)">x</a>', [], ["javascript", "JaVaScRiPt"]),
    ('<a href=" javascript:alert(1)">x</a>', [], ["javascript"]),
    ('<a href="data:text/html,<script>alert(1)</script>">x</a>', [], ["data:"]),
    ('<img src="data:image/svg+xml;base64,PHN2Zz4=">', [], ["data:"]),
    (
        '<img src="data:image/png;base64,iVBORw0KGgo=">',
        ['src="data:image/png;base64,iVBORw0KGgo="'],
        [],
    ),
    ('<img src="vbscript:x">', [], ["vbscript"]),
    # relative links and images resolve against the file's directory at the same ref
    ("[guide](guide.md)", ['href="/src/docs/guide.md"'], []),
    ("[up](../src/app.py#L3)", ['href="/src/src/app.py#L3"'], []),
    ("[escape](../../../../etc/passwd)", ['href="/src/etc/passwd"'], []),
    ("[dir](sub/)", ['href="/src/docs/sub"'], []),
    ("![shot](img/shot%20one.png)", ['src="/raw/docs/img/shot one.png"'], []),
    ("[abs](https://example.org/x)", ['href="https://example.org/x"'], []),
    ("[site](/alice/demo)", ['href="/alice/demo"'], []),
    ("[here](#usage)", ['href="#usage"'], []),
    ("[mail](mailto:a@example.org)", ['href="mailto:a@example.org"'], []),
    # footnotes and task lists
    (
        "Text[^1].\n\n[^1]: The note.",
        ['href="#fn-1" id="fnref-1"', '<li id="fn-1">', 'href="#fnref-1"'],
        [],
    ),
    (
        "- [ ] todo\n- [x] done",
        ['<input type="checkbox" disabled="disabled" aria-label="task"> todo', 'checked=""'],
        [],
    ),
    (
        '<input type="checkbox" checked> and <input type="text" value="x">',
        ['type="checkbox"'],
        ['type="text"', 'value="x"'],
    ),
    # fenced code highlighted by its info string, unknown ones left plain
    (
        "```python\ndef f(): pass\n```",
        ['<span class="k">def</span>', '<div class="highlight">'],
        [],
    ),
    ("```rs\nfn main() {}\n```", ['<span class="k">fn</span>'], []),
    ("```nosuch\n<b>x</b>\n```", ['<pre data-lang="nosuch"><code>&lt;b&gt;x&lt;/b&gt;'], ["<span"]),
    ("```\nplain\n```", ["<pre><code>plain"], ["<span"]),
]


@pytest.mark.parametrize(("source", "kept", "dropped"), CORPUS)
def test_markdown_corpus(source: str, kept: list[str], dropped: list[str]) -> None:
    html = md(source)
    for piece in kept:
        assert piece in html, (source, html)
    for piece in dropped:
        assert piece.lower() not in html.lower(), (source, html)
    assert not re.search(r"\son\w+=", html), html  # never an event handler


def test_documents_take_rooted_links_from_the_repository_root() -> None:
    source = (
        "[root](/src/app.py#L2) ![i](/img/a.png) [top](/) [away](//example.org/x)\n\n"
        '<picture><source srcset="/img/dark.png"><img src="/img/b.png"></picture>'
    )
    html = documents.render("docs/deep/x.md", source.encode(), link, b"docs/deep", 1 << 20)
    assert html is not None
    assert 'href="/src/src/app.py#L2"' in html
    assert 'src="/raw/img/a.png"' in html and 'src="/raw/img/b.png"' in html
    assert 'srcset="/raw/img/dark.png"' in html
    assert 'href="/src/"' in html
    assert 'href="//example.org/x"' in html  # another host: left as it is
    assert 'href="/alice/demo"' in md("[site](/alice/demo)")  # a comment's stay the site's


def test_heading_ids_are_unique_with_githubs_slugs() -> None:
    html = md("# Usage\n## Usage\n### Usage\n## Hello, World! ✨ Ünïcode_x\n## main\n##   \n")
    ids = re.findall(r'<h\d id="([^"]*)"', html)
    assert ids == ["usage", "usage-1", "usage-2", "hello-world--ünïcode_x", "main-1", "section"]
    assert '<a class="anchor" href="#usage-1"' in html
    assert slug("What's new in 2.0?") == "whats-new-in-20"
    assert slug("foo_bar-baz") == "foo_bar-baz"


def test_heading_ids_never_take_the_pages_own() -> None:
    html = md("# issuecomment-12\n# event-3\n# fn-1\n# checks\n# L12\n# diff-2")
    ids = re.findall(r'<h\d id="([^"]*)"', html)
    assert ids == ["issuecomment-12-1", "event-3-1", "fn-1-1", "checks-1", "l12", "diff-2-1"]


def test_named_anchors_become_ids_unless_taken() -> None:
    html = md(
        '<a name="readme-top"></a>\n\n# Top\n\n<a name="top">x</a> <a name="event-1"></a> '
        '<a id="mine" name="a b">y</a> <a name="L1"></a>\n\n[back](#readme-top)'
    )
    assert '<a id="readme-top"' in html and 'href="#readme-top"' in html
    assert re.findall(r'\sid="([^"]*)"', html) == ["readme-top", "top"]  # L1: a line's
    assert "name=" not in html
    about = re.findall(r'<h\d id="([^"]*)"', md("# About heading\n# Topics help"))
    assert about == ["about-heading-1", "topics-help-1"]  # the about panel's own ids


def test_nesting_past_the_limit_is_shown_as_source() -> None:
    """Sanitizing takes time as the square of the depth: 40,000 quotes deep took 13 s."""
    deep = md(">" * 40_000 + " x <b>bold</b>")
    assert deep.startswith('<pre class="too-deep">') and "&lt;b&gt;bold" in deep
    assert deep.count("<blockquote>") == 0
    assert md(">" * 50 + " x").count("<blockquote>") == 50  # a deep but sane quote renders


def test_raw_heading_ids_are_replaced() -> None:
    html = md('<h2 id="L1">Spoof</h2>\n\n<h2 id="x" onclick="y">Two</h2>')
    assert re.findall(r'<h2 id="([^"]*)"', html) == ["spoof", "two"]


def test_restructuredtext_is_rendered_safely() -> None:
    source = """Title
=====

Some *text*, a `link <other.rst>`_ and ``code``.

.. image:: pic.png

.. code-block:: python

   def f(): pass

.. raw:: html

   <script>alert(1)</script>

.. include:: /etc/passwd

.. csv-table::
   :file: /etc/passwd

Part
----

Part
----
"""
    html = documents.render("README.rst", source.encode(), link, b"docs", 1 << 20)
    assert html is not None
    assert '<h2 id="title">' in html or '<h1 id="title">' in html
    assert 'href="/src/docs/other.rst"' in html
    assert 'src="/raw/docs/pic.png"' in html
    assert '<span class="k">def</span>' in html
    assert "<script" not in html and "alert" not in html
    assert "root:" not in html  # no file was read
    assert re.findall(r'id="(part[^"]*)"', html) == ["part", "part-1"]


ASCIIDOC = """= Manual
:product: Floorless

Intro with *strong*, _em_, `code *kept*`, {product}, https://example.org[a site],
link:other.adoc[another page], linkgit:git-add[1] and <<usage,the usage>>. +
image:icon.png[Icon,16,16]

== Usage

[source,python]
----
def f(x):
    return x < 1
----

* one
** nested
* two

//
. first
. second

//
Term:: Its definition.

NOTE: Read this.

[WARNING]
====
Careful.
====

|===
|Name |Value

|a |1
|===

image::diagram.svg[Diagram]

Options
-------

== Usage

include::/etc/passwd[]
include::../../../../etc/passwd[]
ifeval::[__import__("os").system("touch /tmp/pwned")]
endif::[]
sys::[id]

++++
<p>kept</p><script>alert(1)</script><img src="x.png" onerror="alert(2)">
++++

link:javascript:alert(3)[click] https://example.org/x" onmouseover="alert(4)
"""


@pytest.fixture(scope="module")
def asciidoctor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Asciidoctor]:
    """A real Asciidoctor worker (the Debian package asciidoctor), as a forge keeps one."""
    worker = Asciidoctor("ruby", 60, tmp_path_factory.mktemp("asciidoctor"))
    yield worker
    worker.stop()


def test_asciidoc_is_rendered_without_reaching_outside(asciidoctor: Asciidoctor) -> None:
    html = documents.render(
        "doc/manual.adoc", ASCIIDOC.encode(), link, b"doc", 1 << 20, asciidoctor.convert
    )
    assert html is not None
    assert '<h1 id="manual">' in html
    assert "<strong>strong</strong>" in html and "<em>em</em>" in html
    assert "<code>code <strong>kept</strong></code>" in html  # Asciidoctor's constrained marks
    assert "Floorless" in html  # an attribute the document sets
    assert '<a href="https://example.org" rel="noopener noreferrer">a site</a>' in html
    assert 'href="/src/doc/other.adoc"' in html
    assert 'href="/src/doc/git-add.adoc"' in html and "git-add(1)" in html
    assert 'href="#usage"' in html and "<br>" in html
    assert 'src="/raw/doc/icon.png" alt="Icon" width="16" height="16"' in html
    assert re.findall(r'<h2 id="([^"]*)"', html) == ["usage", "options", "usage-1"]
    assert '<span class="k">def</span>' in html
    flat = re.sub(r"\s+|</?div>|</?p>", "", html)
    assert "<ul><li>one<ul><li>nested</li></ul></li><li>two</li></ul>" in flat
    assert "<ol><li>first</li><li>second</li></ol>" in flat
    assert "<dt>Term</dt><dd>Itsdefinition.</dd>" in flat
    assert '<div class="admonition note">' in html and '<div class="admonition warning">' in html
    assert "<th>Name</th>" in html and "<td><p>a</p></td>" in html
    assert 'src="/raw/doc/diagram.svg"' in html
    assert "<p>kept</p>" in html
    # include:: is a link to the path, inside the repository, never the file's content
    assert "root:" not in html and 'href="/src/etc/passwd"' in html
    for bad in ("import", "pwned", "<script", "onerror", "javascript"):
        assert bad not in html, bad
    assert "sys::[id]" in html  # no system macro: text
    assert not re.search(r"<[^>]*\son\w+=", html), html
    assert ' class=""' not in html


def test_asciidoc_without_asciidoctor_is_not_rendered() -> None:
    assert documents.render("a.adoc", b"= Title\n", link, b"", 1 << 20) is None


def test_tables_and_their_limit() -> None:
    html = documents.render("data.csv", b'name,value\n"<b>x</b>",1\nshort\n', link, b"", 1 << 20)
    assert html is not None
    assert "<thead><tr><th>name</th><th>value</th></tr></thead>" in html
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in html
    assert "<tr><td>short</td><td></td></tr>" in html  # short rows padded
    tsv = documents.render("t.tsv", b"a\tb\n1\t2\n", link, b"", 1 << 20)
    assert tsv is not None and "<td>1</td><td>2</td>" in tsv
    many = "".join(f"{n},x\n" for n in range(documents.MAX_TABLE_ROWS + 50)).encode()
    big = documents.render("big.csv", many, link, b"", 1 << 20)
    assert big is not None
    assert big.count("<tr>") == documents.MAX_TABLE_ROWS + 1
    assert "Only the first" in big
    assert documents.render("big.csv", many, link, b"", len(many) - 1) is None  # too large




def test_notebooks_are_rendered_read_only() -> None:
    html = documents.render("nb/a.ipynb", json.dumps(_notebook()).encode(), link, b"nb", 1 << 20)
    assert html is not None
    assert re.findall(r'<h1 id="([^"]*)"', html) == ["analysis", "analysis-1"]
    assert 'href="/src/nb/data.csv"' in html
    assert "In [3]:" in html
    assert '<span class="kn">import</span>' in html
    assert "&lt;b&gt;2&lt;/b&gt;" in html
    assert '<img alt="output" src="data:image/png;base64,iVBORw0KGgo=">' in html
    assert "<svg" not in html and "<pre>fig</pre>" in html  # SVG output: its text instead
    assert "<td>1</td>" in html and "onclick" not in html
    assert "<script" not in html and "alert(2)" not in html
    assert "Traceback &lt;x&gt;" in html and "\x1b" not in html
    assert "&lt;script&gt;alert(3)" in html  # a raw cell is text
    assert documents.render("x.ipynb", b"not json", link, b"", 1 << 20) is None
    assert documents.render("x.ipynb", b'{"cells": 3}', link, b"", 1 << 20) is None
    deep = b"[" * 50_000 + b"]" * 50_000  # past the JSON parser's stack: the source is shown
    assert documents.render("x.ipynb", deep, link, b"", 1 << 20) is None


def test_every_renderer_has_a_limit(asciidoctor: Asciidoctor) -> None:
    convert = asciidoctor.convert
    for name in ("a.md", "a.rst", "a.adoc", "a.csv", "a.ipynb"):
        data = b"x" * 100
        assert documents.render(name, data, link, b"", 99, convert) is None
    assert documents.render("a.txt", b"x", link, b"", 100) is None  # not a document
    for kind, ceiling in documents.CEILINGS.items():  # slower parsers stop sooner
        name = {"rst": "a.rst", "asciidoc": "a.adoc"}[kind]
        text = b"Some text.\n\n" * (ceiling // 12 + 1)
        assert documents.render(name, text[:ceiling], link, b"", 1 << 30, convert) is not None
        assert documents.render(name, text[: ceiling + 1], link, b"", 1 << 30, convert) is None


# ------------------------------------------------------------------------------ pages





@pytest.fixture(scope="module")
def docs_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.TestClient]:
    root = tmp_path_factory.mktemp("docs")
    build_docs(root / "repos" / "alice" / "docs.git")
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    yield testing.TestClient(create_app(forge))
    forge.stop()


def get(client: testing.TestClient, url: str, **headers: str) -> testing.Result:
    with counting() as events:
        result = client.simulate_get(url, headers=headers)
    assert result.status_code == 200, (url, result.status_code, result.text[:300])
    assert events == [], (url, events)  # a reading page spawns no process
    return result


def test_readmes_in_every_directory(docs_client: testing.TestClient) -> None:
    home = get(docs_client, "/alice/docs").text
    assert '<h1 id="demo-docs">' in home
    assert 'href="/alice/docs/src/branch/main/docs/guide.md"' in home
    assert 'src="/alice/docs/raw/branch/main/logo.svg"' in home
    docs = get(docs_client, "/alice/docs/src/branch/main/docs").text
    assert "<em>docs</em>" in docs  # docs/README.rst rendered
    assert 'href="/alice/docs/src/branch/main/docs/guide.md"' in docs
    manual = get(docs_client, "/alice/docs/src/branch/main/manual").text
    assert '<h1 id="manual">' in manual
    assert 'href="/alice/docs/src/branch/main/manual/git-add.adoc"' in manual
    sub = get(docs_client, "/alice/docs/src/branch/main/docs/sub").text
    assert '<h1 id="deep">' in sub and 'href="/alice/docs/src/branch/main/docs/guide.md"' in sub


def test_document_pages(docs_client: testing.TestClient) -> None:
    guide = get(docs_client, "/alice/docs/src/branch/main/docs/guide.md").text
    assert '<h2 id="usage">' in guide
    assert 'href="/alice/docs/src/branch/main/README.md"' in guide
    assert 'src="/alice/docs/raw/branch/main/logo.svg"' in guide
    assert '<span class="n">x</span>' in guide
    table = get(docs_client, "/alice/docs/src/branch/main/docs/data.csv").text
    assert "<th>a</th><th>b</th>" in table
    nb = get(docs_client, "/alice/docs/src/branch/main/docs/nb.ipynb").text
    assert "In [3]:" in nb and "<script>alert" not in nb
    page = get(docs_client, "/alice/docs/src/branch/main/manual/git-add.adoc").text
    assert '<h1 id="git-add1">' in page and '<h2 id="name">' in page
    svg = get(docs_client, "/alice/docs/src/branch/main/logo.svg").text
    assert '<img src="/alice/docs/raw/branch/main/logo.svg"' in svg


def test_svg_is_an_image_only_to_an_image_fetch(docs_client: testing.TestClient) -> None:
    url = "/alice/docs/raw/branch/main/logo.svg"
    image = get(docs_client, url, **{"Sec-Fetch-Dest": "image"})
    assert image.headers["content-type"] == "image/svg+xml"
    assert image.headers["content-security-policy"] == (
        "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    )
    assert image.headers["x-content-type-options"] == "nosniff"
    assert "Sec-Fetch-Dest" in image.headers["vary"]
    for dest in ("document", "iframe", "object", "embed", None):
        headers = {"Sec-Fetch-Dest": dest} if dest else {}
        other = get(docs_client, url, **headers)
        assert other.headers["content-type"].startswith("text/plain"), dest
        assert other.headers["content-security-policy"] == "default-src 'none'; sandbox"
        assert other.headers["etag"] != image.headers["etag"]
        assert "Sec-Fetch-Dest" in other.headers["vary"]
    # an ETag of one form never revalidates the other
    again = docs_client.simulate_get(
        url, headers={"If-None-Match": image.headers["etag"], "Sec-Fetch-Dest": "document"}
    )
    assert again.status_code == 200 and again.headers["content-type"].startswith("text/plain")


def test_svg_without_fetch_metadata_is_judged_by_accept(docs_client: testing.TestClient) -> None:
    url = "/alice/docs/raw/branch/main/logo.svg"
    image = get(docs_client, url, Accept="image/avif,image/webp,image/svg+xml,*/*;q=0.8")
    assert image.headers["content-type"] == "image/svg+xml"
    page = get(docs_client, url, Accept="text/html,application/xhtml+xml,image/svg+xml,*/*")
    assert page.headers["content-type"].startswith("text/plain")
    # the fetch metadata, when there, decides
    framed = get(docs_client, url, Accept="image/svg+xml", **{"Sec-Fetch-Dest": "iframe"})
    assert framed.headers["content-type"].startswith("text/plain")
