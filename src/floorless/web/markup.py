"""Turning repository content into safe HTML: Markdown (GFM, sanitized) and highlighted code.

Both are pure functions of an object's bytes and so are cached by object id.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from urllib.parse import unquote_to_bytes, urlsplit

import cmarkgfm
import nh3
from cmarkgfm.cmark import Options
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

MARKDOWN_NAMES = (".md", ".markdown", ".mdown", ".mkd")
_TAGS = set(nh3.ALLOWED_TAGS) | {"input"}
_ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "input": {"checked", "disabled"},
    "code": {"class"},
    "pre": {"lang"},
    "th": {"align"},
    "td": {"align"},
    "h1": {"id"},
    "h2": {"id"},
    "h3": {"id"},
    "h4": {"id"},
}


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_NAMES)


def render_markdown(text: str, link: Callable[[bytes, bool], str], directory: bytes = b"") -> str:
    """GitHub-flavoured Markdown to sanitized HTML. A relative link is taken from
    ``directory`` (the file's own, in the repository) and made a URL by ``link(path,
    image)``: a file page, or the raw file for an image's source."""
    html = cmarkgfm.github_flavored_markdown_to_html(
        text, options=Options.CMARK_OPT_GITHUB_PRE_LANG | Options.CMARK_OPT_FOOTNOTES
    )

    def rewrite(tag: str, attribute: str, value: str) -> str | None:
        if attribute in ("href", "src") and _is_relative(value):
            target, _, fragment = value.partition("#")
            if not target:
                return value
            # cmark has percent-encoded the target already: decode it to the exact bytes, so
            # that the URL encodes them once (a space must become %20, not %2520)
            path = posixpath.normpath(posixpath.join(b"/", directory, unquote_to_bytes(target)))
            url = link(path.lstrip(b"/"), tag == "img")
            return url + (f"#{fragment}" if fragment else "")
        return value

    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        tag_attribute_values={"input": {"type": {"checkbox"}}},
        set_tag_attribute_values={"input": {"disabled": "disabled"}},
        attribute_filter=rewrite,
        url_schemes={"http", "https", "mailto"},
    )


def _is_relative(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and not url.startswith(("/", "#"))


def lexer_for(name: str, text: str) -> Lexer:
    """The lexer for a file, chosen by its name alone (content guessing is slow)."""
    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


_FORMATTER = HtmlFormatter(nowrap=True)


def highlight_lines(name: str, text: str, enabled: bool = True) -> list[str]:
    """One balanced HTML fragment per line of ``text``."""
    # Pygments reads a lone CR as a line break and git does not: keep one fragment per git
    # line, or line numbers, blame and diff lines would show the wrong text
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    text = text.replace("\r", "\u240d")
    lexer = lexer_for(name, text) if enabled else TextLexer(stripnl=False, ensurenl=False)
    html = highlight(text, lexer, _FORMATTER)
    lines = html.split("\n")
    if lines and lines[-1] == "" and len(lines) > len(text.split("\n")):
        lines.pop()
    return lines


def stylesheet() -> str:
    """Pygments' CSS for the light and the dark theme."""
    light = HtmlFormatter(style="default").get_style_defs(".code")  # type: ignore[no-untyped-call]
    dark = HtmlFormatter(style="monokai").get_style_defs(".code")  # type: ignore[no-untyped-call]
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def numbered_rows(lines: Sequence[str], first: int = 1) -> Markup:
    """Table rows for highlighted lines, with ``#L<n>`` anchors, as one string: a template
    loop over thousands of lines costs more than everything else on a page. ``lines`` are
    Pygments output, HTML already escaped."""
    return Markup(  # noqa: S704 - built only from escaped fragments and numbers
        "".join(
            f'<tr id="L{n}"><td class="ln"><a href="#L{n}">{n}</a></td>'
            f'<td class="src"><pre>{html}</pre></td></tr>'
            for n, html in enumerate(lines, first)
        )
    )
