"""The one HTML allow-list for repository and user content: Markdown, reStructuredText,
AsciiDoc and notebooks all pass through ``clean``.

It is modelled on the list GitHub applies to READMEs, so that what renders there renders
here: layout HTML that READMEs use (a centred ``<p align="center">`` logo, ``<kbd>``,
``<br>``, ``<details>``, ``<picture>`` with ``<source>`` for a dark-mode logo, sized and
aligned images) is kept, while everything that can run script or reach outside the
document is dropped: ``<script>``, ``<style>``, forms, frames, ``on*`` handlers, ``style``
attributes, ``javascript:`` and ``data:`` URLs (except a raster image's ``data:`` source,
which a browser never runs). Names and ids that could shadow the page's own (DOM
clobbering) are not kept, except the ids the renderers write themselves: headings' (set
again afterwards, see ``markup.heading_ids``) and footnotes'.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from urllib.parse import unquote_to_bytes, urlsplit

import nh3
from pygments.token import STANDARD_TYPES

TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "blockquote",
        "br",
        "caption",
        "cite",
        "code",
        "dd",
        "del",
        "details",
        "dfn",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "input",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "picture",
        "pre",
        "q",
        "rp",
        "rt",
        "ruby",
        "s",
        "samp",
        "section",
        "small",
        "source",
        "span",
        "strike",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "time",
        "tr",
        "tt",
        "u",
        "ul",
        "var",
        "wbr",
    ]
)
# kept on every allowed tag: presentation that READMEs rely on, and accessibility
_EVERYWHERE = {"align", "title", "dir", "lang", "aria-label", "aria-hidden", "valign"}
ATTRIBUTES: dict[str, set[str]] = {
    "*": _EVERYWHERE,
    "a": {"href", "id", "name"},
    "img": {"src", "alt", "width", "height", "hspace", "vspace", "border"},
    "source": {"srcset", "media", "type", "width", "height"},
    "ol": {"start", "reversed", "type"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "table": {"border"},
    "details": {"open"},
    "blockquote": {"cite"},
    "q": {"cite"},
    "del": {"cite", "datetime"},
    "ins": {"cite", "datetime"},
    "time": {"datetime"},
    "abbr": set(),
    "input": {"checked", "disabled"},
    "pre": {"lang"},
    "li": {"id"},
    "sup": {"id"},
    **{f"h{n}": {"id"} for n in range(1, 7)},
}
# classes the renderers write: footnotes, heading anchors, task lists, highlighted code
# (Pygments' token classes), admonitions of reStructuredText and AsciiDoc; no other class
# is kept, so content cannot borrow the page's own styles
CLASSES: dict[str, set[str]] = {
    "section": {"footnotes"},
    "sup": {"footnote-ref"},
    "a": {"footnote-backref", "anchor"},
    "span": {name for name in STANDARD_TYPES.values() if name},
    "div": {"highlight", "admonition", "note", "tip", "warning", "important", "caution"},
    "pre": {"code", "literal-block"},  # a code block of reStructuredText
}
_FOOTNOTE_ID = re.compile(r"fn(?:ref)?-[\w.-]{1,100}")
_HEADING_ID = re.compile(r"[\w-]{1,200}")
# a raster image inline: decoded by the browser as pixels, never as a document
_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*", re.I)
_INPUT_NOT_CHECKBOX = re.compile(r'<input(?![^>]*\stype="checkbox")[^>]*>')
_IMG_WITHOUT_ALT = re.compile(r'<img(?![^>]*\salt=")(?=[\s>/])')
URL_SCHEMES = frozenset({"http", "https", "mailto", "data"})

Link = Callable[[bytes, bool], str]


def is_relative(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and not url.startswith(("/", "#", "\\"))


def resolve(value: str, link: Link, directory: bytes, image: bool) -> str:
    """A relative URL from a document in ``directory`` as a URL of the forge: ``link(path,
    image)`` makes it (the file page, or the raw file for an image). The path is kept
    inside the repository (``..`` stops at its root)."""
    target, _, fragment = value.partition("#")
    if not target:
        return value
    target = target.partition("?")[0]
    # the URL is percent-encoded already: decode it to the exact bytes, so that the forge's
    # URL encodes them once (a space must become %20, not %2520)
    path = posixpath.normpath(posixpath.join(b"/", directory, unquote_to_bytes(target)))
    url = link(path.lstrip(b"/"), image)
    return url + (f"#{fragment}" if fragment else "")


def _srcset(
    value: str, link: Link | None, directory: bytes, local: Callable[[str], str | None]
) -> str | None:
    """A ``srcset`` whose candidates are all http(s) or relative (resolved), or None."""
    kept = []
    for candidate in value.split(","):
        words = candidate.split()
        if not words:
            continue
        url = words[0]
        inside = local(url)
        if inside is not None:
            if link is None:
                return None
            url = resolve(inside, link, directory, True)
        elif urlsplit(url).scheme.lower() not in ("http", "https"):
            return None
        kept.append(" ".join([url, *words[1:]]))
    return ", ".join(kept) if kept else None


def clean(html: str, link: Link | None = None, directory: bytes = b"", rooted: bool = False) -> str:
    """``html`` with only what the allow-list keeps. With ``link``, relative ``href`` and
    ``src`` (and ``srcset``) URLs are resolved against ``directory`` (see ``resolve``);
    ``rooted``, as GitHub reads a repository's documents, takes a URL that starts with one
    ``/`` from the repository's root too."""

    def local(url: str) -> str | None:
        """The path inside the repository that ``url`` names, relative to ``directory``."""
        if is_relative(url):
            return url
        if rooted and url.startswith("/") and not url.startswith(("//", "/\\")):
            return url  # resolve() joins it to the root, whatever the directory
        return None

    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute == "id":
            pattern = _HEADING_ID if tag[:1] == "h" else _FOOTNOTE_ID
            return value if pattern.fullmatch(value) else None
        if attribute == "name":  # a named anchor: made an id by markup.heading_ids
            return value if _HEADING_ID.fullmatch(value) else None
        if attribute == "srcset":
            return _srcset(value, link, directory, local)
        if attribute in ("href", "src", "cite"):
            stripped = value.strip()
            if stripped[:5].lower() == "data:":
                if tag == "img" and attribute == "src" and _DATA_IMAGE.fullmatch(stripped):
                    return stripped
                return None
            inside = local(stripped) if link is not None and attribute != "cite" else None
            if link is not None and inside is not None:
                return resolve(inside, link, directory, tag in ("img", "source"))
        return value

    kept = nh3.clean(
        html,
        tags=set(TAGS),
        clean_content_tags={"script", "style", "textarea", "title", "noscript", "xmp"},
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        tag_attribute_values={"input": {"type": {"checkbox"}}},
        # a task list's box is shown, never used, and named for those who cannot see it
        set_tag_attribute_values={"input": {"disabled": "disabled", "aria-label": "task"}},
        attribute_filter=keep,
        url_schemes=set(URL_SCHEMES),
        allowed_classes={tag: set(names) for tag, names in CLASSES.items()},
    )
    # a task list's box is the only input kept: one without a type would be a text field
    kept = _INPUT_NOT_CHECKBOX.sub("", kept)
    # an image its author gave no text is marked as decoration, as screen readers otherwise
    # spell out its URL
    return _IMG_WITHOUT_ALT.sub('<img alt=""', kept)
