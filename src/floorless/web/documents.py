"""Documents shown rendered: Markdown, reStructuredText, AsciiDoc, CSV/TSV tables and
Jupyter notebooks, on file pages and as READMEs.

Each renderer is a pure function of the file's bytes and where its relative links resolve
(so the result is cached by blob id with that context), runs in-process (no process is
spawned: a browse page spawns none; AsciiDoc is converted by the forge's one Asciidoctor
worker, see ``floorless.core.asciidoctor``), and stops at a size limit past which the page shows
the source instead. What a renderer makes of repository content goes through the one
allow-list in ``sanitize``; what is built here from escaped pieces (tables, notebook
frames) needs none.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import logging
import re
from collections.abc import Callable
from html import escape, unescape
from typing import Any

from floorless.web import sanitize
from floorless.web.markup import (
    MAX_NESTING,
    heading_ids,
    highlight_blocks,
    is_markdown,
    nesting,
    render_markdown,
    slug,
)
from floorless.web.sanitize import Link

log = logging.getLogger(__name__)

RST_NAMES = (".rst", ".rest")
ASCIIDOC_NAMES = (".adoc", ".asciidoc", ".asc")
TABLE_NAMES = {".csv": ",", ".tsv": "\t"}
NOTEBOOK_NAMES = (".ipynb",)
# Slower parsers stop sooner: docutils parses ~50 KB a second on the development machine, so a
# larger file would hold the interpreter, and every other request, for seconds; Asciidoctor
# converts 100-200 KB a second in its worker (Markdown ~10 MB here), while other AsciiDoc
# documents wait for it, and its HTML can be 30 times the size of the source
CEILINGS = {"rst": 128 * 1024, "asciidoc": 256 * 1024}
MAX_TABLE_ROWS = 1000  # of a CSV/TSV file: the rest is in its source and raw file
MAX_TABLE_COLUMNS = 100
MAX_NOTEBOOK_OUTPUT = 256 * 1024  # bytes of one output's text or image kept in a notebook


def kind(name: str) -> str | None:
    """Which renderer shows a file named ``name``, or None for none."""
    lowered = name.lower()
    if is_markdown(lowered):
        return "markdown"
    if lowered.endswith(RST_NAMES):
        return "rst"
    if lowered.endswith(ASCIIDOC_NAMES):
        return "asciidoc"
    if lowered.endswith(tuple(TABLE_NAMES)):
        return "table"
    if lowered.endswith(NOTEBOOK_NAMES):
        return "notebook"
    return None


def largest(found: str | None, limit: int) -> int:
    """The largest document of the kind ``found`` that is rendered, in bytes."""
    return min(limit, CEILINGS.get(found or "", limit))


Convert = Callable[[str], str | None]


def render(
    name: str,
    data: bytes,
    link: Link,
    directory: bytes,
    limit: int,
    asciidoc: Convert | None = None,
) -> str | None:
    """``data``, the content of the file ``name`` in ``directory``, as safe HTML; None when
    it is of no rendered kind, larger than ``limit`` bytes, or cannot be rendered (the page
    then shows the source). AsciiDoc is converted to HTML by ``asciidoc`` (the forge's
    ``Asciidoctor.convert``); without it, it is not rendered."""
    found = kind(name)
    if found is None or len(data) > largest(found, limit):
        return None
    text = data.decode("utf-8", "replace")
    if found == "asciidoc":
        return _asciidoc(text, link, directory, asciidoc)
    renderer = RENDERERS[found]
    return renderer(text, name, link, directory)


def _markdown(text: str, name: str, link: Link, directory: bytes) -> str | None:
    return render_markdown(text, link, directory, rooted=True)


# docutils read from nothing but the text: no configuration files, no file or URL
# inclusion (``include``, ``raw``'s ``:file:``, ``csv-table``'s ``:url:``), no raw HTML, and
# no report written anywhere; a document it cannot parse is shown as its source
_RST_SETTINGS = {
    "_disable_config": True,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "traceback": True,
    "input_encoding": "unicode",
    "output_encoding": "unicode",
    # code blocks are highlighted afterwards like Markdown's fences (``highlight_blocks``):
    # docutils looks its lexer up anew for each block, ~5 ms apiece
    "syntax_highlight": "none",
    "doctitle_xform": False,  # the first title stays a heading, as on GitHub
    "embed_stylesheet": False,
    "math_output": "HTML",
}


_RST_CODE = re.compile(r'<pre class="code ([\w+#.-]{1,40}) literal-block"><code>')


def _rst(text: str, name: str, link: Link, directory: bytes) -> str | None:
    from docutils.core import publish_parts

    try:
        parts = publish_parts(source=text, writer="html5", settings_overrides=dict(_RST_SETTINGS))
    except Exception:
        log.info("reStructuredText not rendered: %s", name, exc_info=True)
        return None
    body = _RST_CODE.sub(r'<pre lang="\1"><code>', str(parts["body"]))
    return highlight_blocks(heading_ids(sanitize.clean(body, link, directory, rooted=True)))


_SECTION = re.compile(r'<h([1-6]) id="([^"<>]{1,200})">(.*?)</h\1>', re.S)
_TAGS = re.compile(r"<[^>]*>")


def _asciidoc(text: str, link: Link, directory: bytes, convert: Convert | None) -> str | None:
    html = convert(text) if convert is not None else None
    if html is None:
        return None
    if nesting(html) > MAX_NESTING:  # the sanitizer's time: the depth squared (as Markdown)
        return f'<pre class="too-deep">{escape(text)}</pre>'

    def named(match: re.Match[str]) -> str:
        """A heading whose id Asciidoctor took from the document (``[[install]]``) and not
        from its text keeps it as a named anchor: headings are numbered anew by their text
        (``heading_ids``), and ``<<install>>`` still leads there."""
        level, given, inner = match.groups()
        made = slug(unescape(_TAGS.sub("", inner)))
        if re.fullmatch(rf"{re.escape(made)}(?:-\d+)?", given):  # its own, numbered or not
            return match.group()
        return f'<h{level} id="{given}"><a name="{given}"></a>{inner}</h{level}>'

    html = sanitize.clean(_SECTION.sub(named, html), link, directory, rooted=True)
    # Asciidoctor classes every block, and the allow-list keeps the attribute empty
    return highlight_blocks(heading_ids(html.replace(' class=""', "")))


def _table(text: str, name: str, link: Link, directory: bytes) -> str | None:
    delimiter = next(d for ext, d in TABLE_NAMES.items() if name.lower().endswith(ext))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[list[str]] = []
    more = False
    try:
        for row in reader:
            if len(rows) > MAX_TABLE_ROWS:
                more = True
                break
            rows.append(row[:MAX_TABLE_COLUMNS])
    except csv.Error:
        return None  # not a table after all (a NUL, an unclosed field past the limit)
    if not rows:
        return None
    head, body = rows[0], rows[1:]
    width = max(len(row) for row in rows)

    def cells(row: list[str], tag: str) -> str:
        padded = row + [""] * (width - len(row))
        return "".join(f"<{tag}>{escape(cell)}</{tag}>" for cell in padded)

    out = [
        '<div class="table-scroll"><table class="data">',
        f"<thead><tr>{cells(head, 'th')}</tr></thead><tbody>",
        *(f"<tr>{cells(row, 'td')}</tr>" for row in body),
        "</tbody></table></div>",
    ]
    if more:
        out.append(
            f'<p class="notice">Only the first {MAX_TABLE_ROWS} rows are shown: '
            "the rest are in the source.</p>"
        )
    return "".join(out)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_IMAGE_OUTPUTS = ("image/png", "image/jpeg")


def _joined(value: object) -> str:
    """A notebook's multi-line string: one string, or a list of lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(part for part in value if isinstance(part, str))
    return ""


def _output(output: dict[str, Any], link: Link, directory: bytes) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return (
            f'<pre class="stream">{escape(_joined(output.get("text"))[:MAX_NOTEBOOK_OUTPUT])}</pre>'
        )
    if kind == "error":
        lines = output.get("traceback")
        trace = "\n".join(x for x in lines if isinstance(x, str)) if isinstance(lines, list) else ""
        trace = trace or f"{output.get('ename', '')}: {output.get('evalue', '')}"
        return f'<pre class="traceback">{escape(_ANSI.sub("", trace)[:MAX_NOTEBOOK_OUTPUT])}</pre>'
    data = output.get("data")
    if not isinstance(data, dict):
        return ""
    for mime in _IMAGE_OUTPUTS:  # a raster image, only: it cannot run anything
        encoded = _joined(data.get(mime))
        if encoded and len(encoded) <= MAX_NOTEBOOK_OUTPUT and _BASE64.fullmatch(encoded):
            try:
                base64.b64decode("".join(encoded.split()), validate=True)
            except binascii.Error:
                continue
            return f'<img alt="output" src="data:{mime};base64,{"".join(encoded.split())}">'
    html = _joined(data.get("text/html"))
    if html and len(html) <= MAX_NOTEBOOK_OUTPUT:
        return (
            f'<div class="html-output">{sanitize.clean(html, link, directory, rooted=True)}</div>'
        )
    plain = _joined(data.get("text/plain"))
    if plain:
        return f"<pre>{escape(plain[:MAX_NOTEBOOK_OUTPUT])}</pre>"
    return ""


def _language(notebook: dict[str, Any]) -> str:
    """The language of a notebook's code cells, as its metadata names it."""
    metadata = notebook.get("metadata")
    if isinstance(metadata, dict):
        info, spec = metadata.get("language_info"), metadata.get("kernelspec")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            return str(info["name"])
        if isinstance(spec, dict) and isinstance(spec.get("language"), str):
            return str(spec["language"])
    return "python"


def _notebook(text: str, name: str, link: Link, directory: bytes) -> str | None:
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
        return None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None  # nbformat 4 (every notebook since 2015) keeps its cells at the top
    lang = escape(re.sub(r"[^\w+#.-]", "", _language(notebook))[:40] or "text", quote=True)
    out = ['<div class="notebook">']
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        source = _joined(cell.get("source"))
        kind = cell.get("cell_type")
        if kind == "markdown":
            cell_html = render_markdown(source, link, directory, anchors=False, rooted=True)
            out.append(f'<div class="cell markdown-cell">{cell_html}</div>')
        elif kind == "code":
            count = cell.get("execution_count")
            prompt = f"[{count}]" if isinstance(count, int) else "[ ]"
            code = f'<pre lang="{lang}"><code>{escape(source, quote=False)}</code></pre>'
            out.append(
                f'<div class="cell code-cell"><div class="prompt">In {prompt}:</div>'
                f"{highlight_blocks(code)}"
            )
            outputs = cell.get("outputs")
            for output in outputs if isinstance(outputs, list) else []:
                if isinstance(output, dict):
                    shown = _output(output, link, directory)
                    if shown:
                        out.append(f'<div class="output">{shown}</div>')
            out.append("</div>")
        elif kind == "raw":
            out.append(f'<div class="cell raw-cell"><pre>{escape(source)}</pre></div>')
    out.append("</div>")
    return heading_ids("".join(out))


RENDERERS: dict[str, Callable[[str, str, Link, bytes], str | None]] = {
    "markdown": _markdown,
    "rst": _rst,
    "table": _table,
    "notebook": _notebook,
}
