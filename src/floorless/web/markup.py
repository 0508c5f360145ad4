"""Turning repository content into safe HTML: Markdown (GFM, sanitized) and highlighted code.

Both are pure functions of an object's bytes and so are cached by object id.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import posixpath
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from html import escape, unescape
from typing import Any, Protocol

import cmarkgfm
from cmarkgfm.cmark import Options
from markupsafe import Markup
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import find_lexer_class, get_all_lexers, get_lexer_by_name
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

from floorless.web import sanitize
from floorless.web.highlight import quick, to_html
from floorless.web.sanitize import Link

MARKDOWN_NAMES = (".md", ".markdown", ".mdown", ".mkd")
# ids the pages themselves use beside rendered documents (file and tree pages, issue and pull
# request conversations), and footnotes': a heading never takes one
RESERVED = frozenset(
    {
        "i-tree",
        "i-blob",
        "i-link",
        "i-submodule",
        "main",
        "content",
        "issue-body",
        "checks",
        "merge-box",
        "event-gap",
        "protection",
        "compare-branches",
        "about-heading",
        "topics-help",
        "finder-list",  # the file finder's list (static/finder.js), on every repository page
    }
)
# ... and the families of ids pages number: comments, events, diffs, footnotes, the finder's
# results (``finder-3``: its input names the one selected), and ``L12``, the line anchors file
# and blame pages and their scripts look up
_RESERVED_ID = re.compile(
    r"(?:issuecomment|event|diff|discussion_r|pullrequestreview|label|fn|fnref|finder)"
    r"-?[\w.-]*\d[\w.-]*"
    r"|L\d+"
)
# Elements nested deeper than this (a README of 40,000 ``>``) are shown as source: the
# sanitizer's time grows as the square of the depth (0.5 s at 10,000, 13 s at 40,000).
MAX_NESTING = 100
_ELEMENT = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*?(/?)>")
_VOID = frozenset(
    {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_NAMES)


def render_markdown(
    text: str,
    link: Link | None = None,
    directory: bytes = b"",
    anchors: bool = True,
    rooted: bool = False,
) -> str:
    """GitHub-flavoured Markdown to sanitized HTML, as GitHub renders it: inline HTML through
    the allow-list (``sanitize``), headings with ids and anchor links, footnotes, task lists,
    fenced code highlighted by its info string. A relative link is taken from ``directory``
    (the file's own, in the repository) and made a URL by ``link(path, image)``: a file
    page, or the raw file for an image's source. Without ``anchors``, headings are left
    for the caller to number (a notebook numbers those of all its cells at once). A
    repository's document is ``rooted``: ``/path`` links name a file from its root, as
    GitHub reads them (in a comment they stay the site's)."""
    html = cmarkgfm.github_flavored_markdown_to_html(
        text,
        options=Options.CMARK_OPT_GITHUB_PRE_LANG
        | Options.CMARK_OPT_FOOTNOTES
        | Options.CMARK_OPT_UNSAFE,  # raw HTML is kept for the allow-list to judge
    )
    if nesting(html) > MAX_NESTING:
        return f'<pre class="too-deep">{escape(text)}</pre>'
    html = sanitize.clean(html, link, directory, rooted)
    return highlight_blocks(heading_ids(html) if anchors else html)


def nesting(html: str) -> int:
    """How deep ``html``'s elements nest, at most (one pass over its tags; a stray closing
    tag never takes the count below the top)."""
    depth = deepest = 0
    for match in _ELEMENT.finditer(html):
        closing, name, empty = match.groups()
        if closing:
            depth = max(depth - 1, 0)
        elif not empty and name.lower() not in _VOID:
            depth += 1
            deepest = max(deepest, depth)
    return deepest


_HEADING = re.compile(r"<h([1-6])((?:\s[^>]*)?)>(.*?)</h\1>", re.S)
# ``<a name="top"></a>``, the in-page target READMEs write by hand (after the sanitizer, whose
# output quotes every attribute and keeps only names of word characters and -)
_NAMED_ANCHOR = re.compile(r'(<a(?:\s[^>]*?)?)\sname="([\w-]+)"')
_ID_ATTRIBUTE = re.compile(r'\sid="[^"]*"')
_NOT_SLUG = re.compile(r"[^\w\- ]")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation and symbols dropped
    (letters, digits, ``_`` and ``-`` of any script stay), each space a ``-``."""
    return _NOT_SLUG.sub("", heading.strip().lower()).replace(" ", "-")


def heading_ids(html: str, reserved: frozenset[str] = RESERVED) -> str:
    """Sanitized ``html`` with an id on each heading (its slug; a repeated one ``-1``, ``-2``
    as GitHub numbers them) and a link to it, so that ``#usage`` links work without
    script; a named anchor's name becomes its id, unless a heading or the page has it."""
    used: set[str] = set(reserved)

    def number(match: re.Match[str]) -> str:
        level, attributes, inner = match.groups()
        words = unescape(_TAG.sub("", inner))
        base = slug(words) or "section"
        anchor, n = base, 0
        while anchor in used or (n == 0 and _RESERVED_ID.fullmatch(anchor)):
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        attributes = _ID_ATTRIBUTE.sub("", attributes)
        label = escape(f"Link to this section: {words.strip()}", quote=True)
        return (
            f'<h{level} id="{anchor}"{attributes}>{inner}'
            f'<a class="anchor" href="#{anchor}" aria-label="{label}"></a></h{level}>'
        )

    def name(match: re.Match[str]) -> str:
        wanted = match.group(2)
        if wanted in used or _RESERVED_ID.fullmatch(wanted):
            return match.group(1)  # taken: the anchor stays, without a name
        used.add(wanted)
        return f'{match.group(1)} id="{wanted}"'

    return _NAMED_ANCHOR.sub(name, _HEADING.sub(number, html))


_FENCE = re.compile(r'<pre lang="([^"]{1,100})"><code>(.*?)</code></pre>', re.S)


@functools.lru_cache(maxsize=512)
def fence_lexer(info: str) -> type[Lexer] | None:
    """The lexer a fenced block's info string names: a Pygments alias (``python``, ``sh``)
    or a file extension (``py``, ``rs``)."""
    word = unescape(info).strip().lower()
    try:
        return type(get_lexer_by_name(word))
    except ClassNotFound:
        return lexer_class(f"x.{word}")


def highlight_blocks(html: str) -> str:
    """Sanitized ``html`` with its fenced code blocks highlighted by their info string.
    Pygments escapes what it is given, so its output needs no second sanitizing."""

    def colour(match: re.Match[str]) -> str:
        # The info string is kept as ``data-lang``: ``lang`` names a human language, and
        # "python" there fails accessibility checks and misleads screen readers.
        found = fence_lexer(match.group(1))
        if found is None:
            return f'<pre data-lang="{match.group(1)}"><code>{match.group(2)}</code></pre>'
        code = unescape(match.group(2))
        HIGHLIGHTED.add(code.count("\n") + 1)
        inner = to_html(quick(found(stripnl=False, ensurenl=False)).get_tokens(code))
        return (
            f'<div class="highlight"><pre data-lang="{match.group(1)}"><code>{inner}</code></pre>'
            "</div>"
        )

    return _FENCE.sub(colour, html)


# A tag of nh3's output, whose attribute values are always double-quoted (and may hold ">").
_TAG = re.compile(r'<[^>"]*(?:"[^"]*"[^>"]*)*>')
_SKIPPED = frozenset(("a", "code", "pre"))  # no reference is linked inside these
# ``owner/repo#12``, ``#12``, ``@ann``, a commit id of 7 to 64 hex digits: standing alone, not
# inside a word, an e-mail address, a URL's path or an HTML character reference.
_REFERENCE = re.compile(
    r"(?<![\w&/#@.-])(?:([A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9._-]{1,100}#[0-9]{1,9})"
    r"|#([0-9]{1,9})|@([A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?)"
    r"|([0-9a-f]{7,64}))(?![\w@#-])"
)
KINDS = ("elsewhere", "issue", "user", "commit")  # what a reference names, as ``lookup`` sees
REFERENCES_MAX = 50  # of each kind, looked up per text


def _kind(match: re.Match[str]) -> tuple[str, str]:
    for kind, value in zip(KINDS, match.groups(), strict=True):
        if value is not None:
            return kind, value
    raise AssertionError(match)


class Memo(Protocol):
    """Where ``link_references`` keeps what it worked out (``caches.Cache`` is one)."""

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any: ...


def link_references(
    htmls: list[str],
    lookup: Callable[[dict[str, set[str]]], dict[tuple[str, str], str]],
    memo: Memo | None = None,
) -> list[str]:
    """Sanitized HTML documents (an issue's body and its comments) with their ``#N``,
    ``owner/repo#N`` (kind "elsewhere"), ``@user`` and commit ids linked, where ``lookup``
    (given what was found in all of them, by kind: one lookup for the whole page) says they
    exist, to the URL it gives. Text inside
    links, code and preformatted blocks is left as it is; a changed document is sanitized
    again. With ``memo``, each document is cut up once, and linked once for each set of links
    that apply to it: a page shown again does neither."""

    def parsed(html: str) -> tuple[list[tuple[str, bool]], dict[str, set[str]]]:
        found: dict[str, set[str]] = {kind: set() for kind in KINDS}
        return _linkable_pieces(html, found), found

    def memoized(key: Hashable, make: Callable[[], Any]) -> Any:
        return make() if memo is None else memo.get_or_make(key, make)

    digests = [hashlib.blake2b(html.encode(), digest_size=16).digest() for html in htmls]
    split = [
        memoized(("pieces", digest), functools.partial(parsed, html))
        for html, digest in zip(htmls, digests, strict=True)
    ]
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for _, refs in split:  # at most REFERENCES_MAX of a kind in all, as in one document
        for kind, values in refs.items():
            room = REFERENCES_MAX - len(found[kind])
            found[kind].update(sorted(values - found[kind])[: max(0, room)])
    if not any(found.values()):
        return htmls
    links = lookup(found)

    def replace(match: re.Match[str]) -> str:
        url = links.get(_kind(match))
        if url is None:
            return match.group()
        return f'<a href="{escape(url, quote=True)}">{match.group()}</a>'

    def linked(pieces: list[tuple[str, bool]]) -> str:
        text = "".join(_REFERENCE.sub(replace, text) if can else text for text, can in pieces)
        return sanitize.clean(text)

    done = []
    for html, digest, (pieces, refs) in zip(htmls, digests, split, strict=True):
        used = tuple(
            sorted(
                (kind, value, links[kind, value])
                for kind in refs
                for value in refs[kind]
                if (kind, value) in links
            )
        )
        if not used:  # nothing in it to link: as it came, sanitized already
            done.append(html)
            continue
        done.append(memoized(("linked", digest, used), functools.partial(linked, pieces)))
    return done


def _linkable_pieces(html: str, found: dict[str, set[str]]) -> list[tuple[str, bool]]:
    """``html`` cut at its tags, each piece with whether references in it may be linked (text
    outside links, code and preformatted blocks); what those pieces refer to goes in
    ``found``."""
    pieces: list[tuple[str, bool]] = []
    position = depth = 0
    for tag in [*_TAG.finditer(html), None]:
        text = html[position : tag.start() if tag else len(html)]
        pieces.append((text, depth == 0))
        if depth == 0:
            for match in _REFERENCE.finditer(text):
                kind, value = _kind(match)
                if len(found[kind]) < REFERENCES_MAX:
                    found[kind].add(value)
        if tag is None:
            break
        piece = tag.group()
        name = re.match(r"</?([A-Za-z0-9]+)", piece)
        if name and name.group(1).lower() in _SKIPPED and not piece.endswith("/>"):
            depth = max(0, depth + (-1 if piece.startswith("</") else 1))
        pieces.append((piece, False))
        position = tag.end()
    return pieces


def lexer_for(name: str, text: str) -> Lexer:
    """The lexer for a file, chosen by its name alone (content guessing is slow)."""
    found = lexer_class(posixpath.basename(name))
    return quick((found or TextLexer)(stripnl=False, ensurenl=False))


_SIMPLE_PATTERN = re.compile(r"\*\.[^*?\[\]]+")


@functools.cache
def _name_patterns() -> tuple[
    dict[str, list[tuple[str, str]]], list[tuple[re.Pattern[str], str, str]]
]:
    """Pygments' file name patterns, read once: the ``*.ext`` ones (nearly all) by what follows
    the dot, the others as Pygments matches them (``fnmatch``, case-sensitive)."""
    by_suffix: dict[str, list[tuple[str, str]]] = {}
    others: list[tuple[re.Pattern[str], str, str]] = []
    for name, _aliases, patterns, _types in get_all_lexers(plugins=True):
        for pattern in patterns:
            if _SIMPLE_PATTERN.fullmatch(pattern):
                by_suffix.setdefault(pattern[2:], []).append((name, pattern))
            else:
                others.append((re.compile(fnmatch.translate(pattern)), name, pattern))
    return by_suffix, others


@functools.lru_cache(maxsize=4096)
def lexer_class(basename: str) -> type[Lexer] | None:
    """The lexer class Pygments picks for a file name without looking at its content (as
    ``find_lexer_class_for_filename(basename)`` does), in microseconds: Pygments matches the
    name against each of its ~900 patterns in turn and scans installed plugins, ~1 ms a name,
    so the 300 different names of a large commit cost 0.3 s."""
    by_suffix, others = _name_patterns()
    matches = [
        match
        for i, char in enumerate(basename)
        if char == "."
        for match in by_suffix.get(basename[i + 1 :], ())
    ]
    matches += [(name, pattern) for regex, name, pattern in others if regex.match(basename)]
    best: tuple[float, str] | None = None
    chosen = None
    for name, pattern in matches:
        cls = find_lexer_class(name)
        if cls is None:
            continue
        # Pygments' rating without content: its priority, and a bonus for an exact name
        rating = (cls.priority + (0.5 if "*" not in pattern else 0), cls.__name__)
        if best is None or rating >= best:  # the last of equals, as Pygments' sort leaves it
            best, chosen = rating, cls
    return chosen


@dataclass
class HighlightCount:
    """Highlighting done since the process started: calls and lines given to a lexer (for
    tests and reports: a page's highlighting is budgeted in lines)."""

    calls: int = 0
    lines: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, lines: int) -> None:
        with self._lock:
            self.calls += 1
            self.lines += lines


HIGHLIGHTED = HighlightCount()


def highlight_lines(name: str, text: str, enabled: bool = True) -> list[str]:
    """One balanced HTML fragment per line of ``text``."""
    # Pygments reads a lone CR as a line break and git does not: keep one fragment per git
    # line, or line numbers, blame and diff lines would show the wrong text
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    text = text.replace("\r", "\u240d")
    lexer = lexer_for(name, text) if enabled else TextLexer(stripnl=False, ensurenl=False)
    HIGHLIGHTED.add(text.count("\n") + 1)
    html = to_html(lexer.get_tokens(text))
    lines = html.split("\n")
    if lines and lines[-1] == "" and len(lines) > len(text.split("\n")):
        lines.pop()
    return lines


# The backgrounds code is shown on in each theme (style.css's --bg, --panel, and the tints of
# added, deleted, hunk and highlighted lines): every token's colour must read on all of them.
LIGHT_BACKGROUNDS = ("#ffffff", "#f6f8fa", "#dafbe1", "#ffebe9", "#ddf4ff", "#fff8c5")
DARK_BACKGROUNDS = ("#0d1117", "#151b23", "#1a4a2c", "#5a1e24", "#122844", "#3b3000")
_CSS_COLOR = re.compile(r"(?<![-\w])color: #([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b")


def stylesheet() -> str:
    """Pygments' CSS for the light and the dark theme, each token colour moved (towards black
    in the light theme, white in the dark one) until it has WCAG AA contrast, 4.5:1, on every
    background code sits on: monokai's comments were 2.4:1 on an added line."""
    scopes = [".code", ".highlight"]  # code pages, and code blocks in rendered documents
    light = HtmlFormatter(style="default").get_style_defs(scopes)  # type: ignore[no-untyped-call]
    dark = HtmlFormatter(style="monokai").get_style_defs(scopes)  # type: ignore[no-untyped-call]
    light = _readable(light, LIGHT_BACKGROUNDS, (0, 0, 0))
    dark = _readable(dark, DARK_BACKGROUNDS, (255, 255, 255))
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def _readable(css: str, backgrounds: Sequence[str], towards: tuple[int, int, int]) -> str:
    def fix(match: re.Match[str]) -> str:
        rgb = _rgb(match.group(1))
        for step in range(21):  # 5% at a time: the least change that reads
            mixed = tuple(round(c + (t - c) * step / 20) for c, t in zip(rgb, towards, strict=True))
            if all(contrast(mixed, _rgb(b.lstrip("#"))) >= 4.5 for b in backgrounds):
                break
        return "color: #" + "".join(f"{c:02x}" for c in mixed)

    return _CSS_COLOR.sub(fix, css)


def _rgb(hex_digits: str) -> tuple[int, ...]:
    if len(hex_digits) == 3:
        hex_digits = "".join(d * 2 for d in hex_digits)
    return tuple(int(hex_digits[i : i + 2], 16) for i in (0, 2, 4))


def contrast(a: Sequence[int], b: Sequence[int]) -> float:
    """WCAG 2's contrast ratio of two sRGB colours, from 1 to 21."""

    def luminance(rgb: Sequence[int]) -> float:
        linear = [c / 255 / 12.92 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


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
