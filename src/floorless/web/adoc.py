"""AsciiDoc to HTML: the part of the language that READMEs and project documentation use.

Why not a library: both Python implementations tried read files of the server from the
document. ``asciidoc`` (asciidoc-py) honours ``include::/etc/passwd[]`` in its safe mode when
the text comes from memory, evaluates ``ifeval::[]`` conditions with ``eval`` outside it,
and swaps ``sys.stdout`` for the whole process while it writes; ``asciidoctrine`` includes
local files by default and took seconds to build its parser. A document from a repository
must never reach the server's files, so this renderer has no include, no attribute read
from the environment, no system macro at all: it only turns text into markup, and its
output goes through the allow-list (``sanitize``) like every other document.

What it renders: the document title and sections (``=`` to ``======``), paragraphs with
hard breaks (`` +``), ``*strong*``, ``_emphasis_``, `` `code` ``, ``#mark#``, ``^sup^``,
``~sub~``, links (``https://…[text]``, ``link:target[text]``, ``mailto:``, ``<<id,text>>``,
git's ``linkgit:git-add[1]``), inline and block images, unordered, ordered and description
lists (nested by marker), listing (``----``, highlighted with ``[source,lang]``), literal
(``....`` and indented), quote, example, sidebar, open and passthrough blocks, tables
(``|===``), admonitions (``NOTE:`` and ``[NOTE]``), block titles (``.Title``), anchors,
comments, and ``{attribute}`` references to attributes the document sets.
"""

from __future__ import annotations

import re
from html import escape

# the delimiters of blocks whose lines are kept verbatim, and those holding other blocks
_VERBATIM = {"----": "listing", "....": "literal", "++++": "pass", "////": "comment"}
_COMPOUND = {"____": "quote", "====": "example", "****": "sidebar", "--": "open"}
_ADMONITIONS = ("NOTE", "TIP", "IMPORTANT", "WARNING", "CAUTION")
_SECTION = re.compile(r"(={1,6}|#{1,6})\s+(\S.*?)\s*$")
_ATTRIBUTE_ENTRY = re.compile(r":(!?[\w-]+!?):(?:\s+(.*))?$")
_LIST_ITEM = re.compile(r"(\s*)(\*{1,5}|-|\.{1,5}|\d{1,3}\.)\s+(.*)$")
_DESCRIPTION = re.compile(r"(.*?\S)(:{2,4}|;;)(?:\s+(.*))?$")
_BLOCK_IMAGE = re.compile(r"image::([^\[\s]+)\[(.*)\]\s*$")
_ADMONITION_PARAGRAPH = re.compile(rf"({'|'.join(_ADMONITIONS)}):\s+(.*)$")
_ANCHOR = re.compile(r"\[\[([\w:.-]+)(?:,.*)?\]\]\s*$")
_BLOCK_ATTRIBUTES = re.compile(r"\[([^\[\]]*)\]\s*$")
_BLOCK_TITLE = re.compile(r"\.([^\s.].*)$")
_MAX_DEPTH = 20  # of blocks inside blocks
# inline marks, in the order they apply
_TRIPLE_PLUS = re.compile(r"\+\+\+(.+?)\+\+\+")
_PASS = re.compile(r"pass:\[(.*?)\]")
_MONO = re.compile(r"(?<![\w`])`\+?(.+?)\+?`(?![\w`])")
_INLINE_IMAGE = re.compile(r"image:([^\s\[:][^\s\[]*)\[([^\]]*)\]")
_LINKGIT = re.compile(r"linkgit:([\w.-]+)\[(\d+)\]")
_LINK_MACRO = re.compile(r"(?:link:|mailto:(?=[^\s\[]+\[))([^\s\[]+)\[([^\]]*)\]")
_URL = re.compile(r"(?<![\w\"'=/])((?:https?|ftp)://[^\s\[<>]+)(?:\[([^\]]*)\])?")
_XREF = re.compile(r"<<([\w:.-]+)(?:,\s*([^>]*))?>>")
_INLINE_ANCHOR = re.compile(r"\[\[([\w:.-]+)\]\]")
_HARD_BREAK = re.compile(r" \+\n")
_HARD_BREAK_END = re.compile(r" \+$")
_KEPT = re.compile(r"\x00(\d+)\x00")
_ATTRIBUTE_REFERENCE = re.compile(r"\{([\w-]+)\}")
_MARKS = (
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), "strong"),
    (re.compile(r"\*\*(.+?)\*\*"), "strong"),
    (re.compile(r"(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])"), "em"),
    (re.compile(r"__(.+?)__"), "em"),
    (re.compile(r"(?<![\w'])'(?!\s)([^'\n]+?)(?<!\s)'(?![\w'])"), "em"),  # old AsciiDoc emphasis
    (re.compile(r"(?<![\w#])#(?!\s)(.+?)(?<!\s)#(?![\w#])"), "mark"),
    (re.compile(r"\^(\S+?)\^"), "sup"),
    (re.compile(r"~(\S+?)~"), "sub"),
)


_UNDERLINES = "=-~^+"  # a two-line title's underline, by level


def _underlined(line: str, under: str) -> bool:
    """Whether ``line`` is a two-line title: text, then a line of one of ``_UNDERLINES``
    about as long (two characters either way)."""
    text, under = line.rstrip(), under.rstrip()
    return (
        len(under) >= 2
        and under[0] in _UNDERLINES
        and under == under[0] * len(under)
        and abs(len(under) - len(text)) <= 2
        and bool(text)
        and not text.startswith((" ", "[", ".", "/", "|", "*", "-", "=", "+"))
    )


def to_html(text: str) -> str:
    """``text`` as HTML (unsanitized: the caller passes it through ``sanitize.clean``)."""
    lines = text.replace("\r\n", "\n").replace("\t", "    ").split("\n")
    return _Renderer().blocks(lines, 0)


class _Renderer:
    def __init__(self) -> None:
        self.attributes: dict[str, str] = {}

    # ---------------------------------------------------------------------- blocks

    def blocks(self, lines: list[str], depth: int) -> str:
        out: list[str] = []
        i = 0
        pending: dict[str, str] = {}  # block attributes, title and anchor for the next block
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if not stripped:
                i += 1
                continue
            if stripped.startswith("//") and not stripped.startswith("////"):
                i += 1  # a comment line
                continue
            if stripped.startswith(("include::", "ifdef::", "ifndef::", "ifeval::", "endif::")):
                i += 1  # nothing from outside the text; conditions are not evaluated
                continue
            entry = _ATTRIBUTE_ENTRY.match(stripped)
            if entry and line.startswith(":"):
                name = entry.group(1)
                if name.startswith("!") or name.endswith("!"):
                    self.attributes.pop(name.strip("!"), None)
                else:
                    self.attributes[name] = entry.group(2) or ""
                i += 1
                continue
            anchor = _ANCHOR.match(stripped)
            if anchor:
                pending["id"] = anchor.group(1)
                i += 1
                continue
            title = _BLOCK_TITLE.match(stripped)
            if title and not stripped.startswith(".."):
                pending["title"] = title.group(1)
                i += 1
                continue
            attrs = _BLOCK_ATTRIBUTES.match(stripped)
            if attrs and stripped.startswith("[") and not stripped.startswith("[["):
                pending["attrs"] = attrs.group(1)
                i += 1
                continue
            if i + 1 < len(lines) and _underlined(line, lines[i + 1]):
                level = _UNDERLINES.index(lines[i + 1].strip()[0]) + 1
                out.append(f"<h{level}>{self.inline(stripped)}</h{level}>")
                pending.clear()
                i += 2
                continue
            section = _SECTION.match(line)
            if section and not line.startswith(" "):
                level = min(6, len(section.group(1)))
                out.append(f"<h{level}>{self.inline(section.group(2))}</h{level}>")
                pending.clear()
                i += 1
                continue
            delimiter = self._delimiter(stripped)
            if delimiter:
                end = i + 1
                while end < len(lines) and lines[end].strip() != stripped:
                    end += 1
                inner = lines[i + 1 : end]
                out.append(self._delimited(delimiter, inner, pending, depth))
                pending.clear()
                i = end + 1
                continue
            if stripped.startswith("|==="):
                end = i + 1
                while end < len(lines) and not lines[end].strip().startswith("|==="):
                    end += 1
                out.append(self._table(lines[i + 1 : end], pending))
                pending.clear()
                i = end + 1
                continue
            image = _BLOCK_IMAGE.match(stripped)
            if image:
                out.append(f"<div>{self._image(*image.groups())}</div>")
                pending.clear()
                i += 1
                continue
            if stripped in ("'''", "---", "***", "<<<"):
                out.append("<hr>")
                i += 1
                continue
            if _LIST_ITEM.match(line) or self._description(line):
                end = self._list_end(lines, i)
                out.append(self._title(pending) + self._list(lines[i:end], depth))
                pending.clear()
                i = end
                continue
            if line.startswith(" "):  # an indented paragraph: literal
                end = i
                while end < len(lines) and lines[end].strip():
                    end += 1
                body = "\n".join(x[1:] if x.startswith(" ") else x for x in lines[i:end])
                out.append(f"{self._title(pending)}<pre>{escape(body)}</pre>")
                pending.clear()
                i = end
                continue
            end = i
            while end < len(lines) and self._continues(lines[end], end == i):
                end += 1
            out.append(self._paragraph(lines[i:end], pending))
            pending.clear()
            i = end
        return "\n".join(out)

    def _delimiter(self, stripped: str) -> str | None:
        for mark, kind in (*_VERBATIM.items(), *_COMPOUND.items()):
            if stripped == mark or (
                len(mark) == 4 and len(stripped) > 4 and stripped == mark[0] * len(stripped)
            ):
                return kind
        return None

    def _continues(self, line: str, first: bool) -> bool:
        stripped = line.strip()
        if not stripped:
            return False
        if first:
            return True
        return not (
            self._delimiter(stripped)
            or stripped.startswith(("|===", "image::", "[", "//"))
            or _LIST_ITEM.match(line)
            or (_SECTION.match(line) and not line.startswith(" "))
        )

    def _delimited(self, kind: str, inner: list[str], pending: dict[str, str], depth: int) -> str:
        attrs = [a.strip() for a in pending.get("attrs", "").split(",")]
        style = attrs[0] if attrs else ""
        title = self._title(pending)
        if kind == "comment":
            return ""
        if kind == "pass":
            return "\n".join(inner)  # raw HTML: the allow-list decides what stays
        if kind == "listing" or kind == "literal":
            body = escape("\n".join(inner), quote=False)
            if style == "source" or (kind == "listing" and len(attrs) > 1 and attrs[1]):
                language = attrs[1] if len(attrs) > 1 else ""
                if language:
                    lang = escape(re.sub(r"[^\w+#.-]", "", language), quote=True)
                    return f'{title}<pre lang="{lang}"><code>{body}</code></pre>'
            return f"{title}<pre><code>{body}</code></pre>"
        content = self.blocks(inner, depth + 1) if depth < _MAX_DEPTH else ""
        if style in _ADMONITIONS:
            return self._admonition(style, content, title)
        if kind == "quote":
            return f"{title}<blockquote>{content}</blockquote>"
        if kind == "example" or kind == "sidebar":
            return f"<div>{title}{content}</div>"
        return f"{title}{content}"

    def _admonition(self, kind: str, content: str, title: str = "") -> str:
        label = kind.capitalize()
        return (
            f'<div class="admonition {kind.lower()}"><p><strong>{label}</strong></p>'
            f"{title}{content}</div>"
        )

    def _title(self, pending: dict[str, str]) -> str:
        title = pending.get("title")
        return f"<p><strong>{self.inline(title)}</strong></p>" if title else ""

    def _paragraph(self, lines: list[str], pending: dict[str, str]) -> str:
        text = "\n".join(line.strip() for line in lines)
        admonition = _ADMONITION_PARAGRAPH.match(text)
        style = pending.get("attrs", "").split(",")[0].strip()
        if admonition:
            return self._admonition(
                admonition.group(1), f"<p>{self.inline(admonition.group(2))}</p>"
            )
        if style in _ADMONITIONS:
            return self._admonition(style, f"<p>{self.inline(text)}</p>")
        if style == "source" or style == "listing" or style == "literal":
            return f"<pre><code>{escape(text, quote=False)}</code></pre>"
        if style == "quote":
            return f"<blockquote><p>{self.inline(text)}</p></blockquote>"
        return f"{self._title(pending)}<p>{self.inline(text)}</p>"

    # ----------------------------------------------------------------------- lists

    def _description(self, line: str) -> re.Match[str] | None:
        found = _DESCRIPTION.match(line)
        if found is None or line.startswith(" ") or "://" in found.group(1)[-3:]:
            return None
        return found

    def _list_end(self, lines: list[str], start: int) -> int:
        """The line after a list: it runs to a blank line followed by something that is
        neither an item, a continuation (``+``) nor indented text."""
        end = start + 1
        while end < len(lines):
            line = lines[end]
            if not line.strip():
                after = end
                while after < len(lines) and not lines[after].strip():
                    after += 1
                following = lines[after] if after < len(lines) else ""
                if not (
                    _LIST_ITEM.match(following)
                    or self._description(following)
                    or following.startswith(" ")
                ):
                    return end
            elif self._delimiter(line.strip()) and lines[end - 1].strip() != "+":
                return end
            end += 1
        return end

    def _list(self, lines: list[str], depth: int) -> str:
        """Items of one or more lists, nested by their markers (``*``, ``**``, ``.``,
        ``term::``, ``term:::``), with their continuation lines."""
        items: list[tuple[str, str, str, list[str]]] = []  # (kind, marker, head, body)
        for line in lines:
            item = _LIST_ITEM.match(line)
            description = None if item else self._description(line)
            if item:
                marker = item.group(2)
                kind = "ol" if marker[0] == "." or marker[0].isdigit() else "ul"
                if marker[0].isdigit():
                    marker = "1."
                items.append((kind, marker, item.group(3), []))
            elif description:
                items.append(("dl", description.group(2), description.group(1), []))
                if description.group(3):
                    items[-1][3].append(description.group(3))
            elif items:
                items[-1][3].append("" if line.strip() == "+" else line.strip())
        out: list[str] = []
        stack: list[tuple[str, str]] = []  # open lists: (kind, marker)
        for kind, marker, head, body in items:
            key = (kind, marker)
            if key in stack:  # another item of an open list: close what nests in it
                while stack[-1] != key:
                    out.append(self._close(stack.pop()[0]))
                if kind != "dl":
                    out.append("</li>")
            elif len(stack) < _MAX_DEPTH:  # a list nested in the item before
                out.append(f"<{kind}>")
                stack.append(key)
            text = self.blocks(body, depth + 1) if body and depth < _MAX_DEPTH else ""
            if kind == "dl":
                out.append(f"<dt>{self.inline(head)}</dt><dd>{text}</dd>")
            else:
                box = re.match(r"\[([ xX*])\]\s+(.*)", head)
                if box:
                    checked = " checked" if box.group(1) != " " else ""
                    head = box.group(2)
                    out.append(f'<li><input type="checkbox" disabled{checked}> ')
                    out.append(f"{self.inline(head)}{text}")
                else:
                    out.append(f"<li>{self.inline(head)}{text}")
        while stack:
            out.append(self._close(stack.pop()[0]))
        return "".join(out)

    @staticmethod
    def _close(kind: str) -> str:
        return "</dl>" if kind == "dl" else f"</li></{kind}>"

    # ---------------------------------------------------------------------- tables

    def _table(self, lines: list[str], pending: dict[str, str]) -> str:
        options = pending.get("attrs", "")
        cells: list[str] = []
        for line in lines:
            if not line.strip():
                continue
            if line.lstrip().startswith("|"):
                cells += [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:]]
            elif cells:
                cells[-1] += " " + line.strip()
        first = next((x for x in lines if x.strip()), "")
        columns = len(re.split(r"(?<!\\)\|", first.strip())[1:]) or 1
        cols = re.search(r'cols="?([^"\]]*)"?', options)
        if cols:
            spec = cols.group(1)
            count = re.fullmatch(r"(\d+)\*.*", spec)
            columns = int(count.group(1)) if count else len(spec.split(",")) or columns
        columns = max(1, min(columns, 100))
        rows = [cells[n : n + columns] for n in range(0, len(cells), columns)]
        header = "header" in options or (
            len(lines) > 1 and lines[0].strip() and not lines[1].strip() and len(rows) > 1
        )
        out = [self._title(pending), "<table>"]
        for n, row in enumerate(rows):
            tag = "th" if header and n == 0 else "td"
            out.append(
                "<tr>"
                + "".join(
                    f"<{tag}>{self.inline(c.replace(chr(92) + '|', '|'))}</{tag}>" for c in row
                )
                + "</tr>"
            )
        out.append("</table>")
        return "".join(out)

    # ---------------------------------------------------------------------- inline

    def _image(self, target: str, attributes: str) -> str:
        parts = [p.strip() for p in attributes.split(",")] if attributes else []
        alt = parts[0] if parts and "=" not in parts[0] else target.rsplit("/", 1)[-1]
        size = ""
        positional = [p for p in parts[1:] if "=" not in p]
        named = dict(p.split("=", 1) for p in parts if "=" in p)
        width = named.get("width", positional[0] if positional else "").strip('"')
        height = named.get("height", positional[1] if len(positional) > 1 else "").strip('"')
        if width.isdigit():
            size += f' width="{width}"'
        if height.isdigit():
            size += f' height="{height}"'
        src = escape(self._substitute(target), quote=True)
        return f'<img src="{src}" alt="{escape(alt.strip(chr(34)), quote=True)}"{size}>'

    def _substitute(self, text: str) -> str:
        return _ATTRIBUTE_REFERENCE.sub(lambda m: self.attributes.get(m.group(1), m.group()), text)

    def inline(self, text: str) -> str:
        """One paragraph's text as HTML: escaped, then marked up."""
        text = self._substitute(text)
        kept: list[str] = []  # pieces already HTML, kept out of later substitutions

        def keep(html: str) -> str:
            kept.append(html)
            return f"\x00{len(kept) - 1}\x00"

        text = text.replace("\x00", "")
        # monospace and passthroughs first: nothing inside them is marked up
        text = _TRIPLE_PLUS.sub(lambda m: keep(m.group(1)), text)
        text = _PASS.sub(lambda m: keep(m.group(1)), text)
        text = _MONO.sub(
            lambda m: keep(f"<code>{escape(m.group(1), quote=False)}</code>"),
            text,
        )
        text = _INLINE_IMAGE.sub(
            lambda m: keep(self._image(m.group(1), m.group(2))),
            text,
        )

        def anchor(url: str, label: str) -> str:
            shown = self.inline(label) if label else escape(url)
            return keep(f'<a href="{escape(url, quote=True)}">{shown}</a>')

        text = _LINKGIT.sub(
            lambda m: anchor(f"{m.group(1)}.adoc", f"{m.group(1)}({m.group(2)})"),
            text,
        )
        text = _LINK_MACRO.sub(
            lambda m: anchor(
                ("mailto:" if m.group(0).startswith("mailto:") else "") + m.group(1),
                m.group(2).split(",")[0].strip('"'),
            ),
            text,
        )
        text = _URL.sub(
            lambda m: anchor(m.group(1), (m.group(2) or "").split(",")[0].strip('"')),
            text,
        )
        text = _XREF.sub(
            lambda m: anchor(f"#{m.group(1)}", m.group(2) or m.group(1)),
            text,
        )
        text = _INLINE_ANCHOR.sub("", text)
        text = escape(text, quote=False)
        for pattern, tag in _MARKS:
            text = pattern.sub(rf"<{tag}>\1</{tag}>", text)
        text = _HARD_BREAK.sub("<br>\n", text)
        text = _HARD_BREAK_END.sub("<br>", text)
        return _KEPT.sub(lambda m: kept[int(m.group(1))], text)
