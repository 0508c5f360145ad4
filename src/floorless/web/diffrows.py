"""A file's diff as table rows: unified (one column of lines) or split (the old side beside
the new), changed words marked, and the gaps between hunks ready to be filled with context.

Rows are built as strings, not in a template loop (a loop over thousands of lines costs more
than the rest of the page), and kept in the diff cache by commit ids: nothing in them may
depend on the repository's name or the page they are shown on. Where a row needs the file's
URL (a link to its lines hidden between hunks), it holds ``FILE_MARK``, which the page
replaces (``with_file_url``): it starts with ``<``, which escaped text never holds.

Changed words: in a hunk, each run of removed lines followed by added lines is paired line by
line (the first removed with the first added, ...), and within a pair the tokens (words,
spaces, single punctuation) that differ are marked, as a sequence match of the two lines'
tokens finds them. The work is bounded: lines longer than ``WORD_LINE_CHARS`` are not
compared, nor pairs so unlike that marking would mark nearly everything.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import NamedTuple

from markupsafe import Markup, escape

from floorless.git import diff as gitdiff
from floorless.web.markup import highlight_lines
from floorless.web.render import text

STYLES = ("unified", "split")
ROW_CLASS = {"+": "add", "-": "del", " ": "ctx"}
FILE_MARK = "<floorless-file>"  # the file's lines URL, put in by the page
WORD_LINE_CHARS = 400  # longer lines are not compared word by word
WORD_MIN_RATIO = 0.3  # pairs less alike than this are not marked: the whole line changed
WORD_MIDDLE_TOKENS = 40  # a longer changed middle is marked whole, not matched token by token
WORD_PAIRS = 400  # pairs of lines compared in one file at most (the rest are not marked)
EXPAND_STEP = 20  # lines of context one click shows
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
# the markup of a row without its numbers and text (the larger of the two styles)
ROW_BYTES = len(
    '<tr class="chg"><td class="ln" data-side="old"></td><td class="code removed"><pre></pre></td>'
    '<td class="ln" data-side="new"></td><td class="code added"><pre></pre></td></tr>'
)


class Options(NamedTuple):
    """How a page shows diffs: its ``?style=`` and ``?w=``."""

    style: str = "unified"
    ignore_whitespace: bool = False

    @property
    def split(self) -> bool:
        return self.style == "split"

    def query(self, style: str | None = None, whitespace: bool | None = None) -> str:
        """The query string of these options with ``style`` or ``whitespace`` changed."""
        style = self.style if style is None else style
        ws = self.ignore_whitespace if whitespace is None else whitespace
        return f"?style={style}" + ("&w=1" if ws else "")

    def carried(self, **more: str) -> dict[str, str | None]:
        """Query parameters carrying what is not the default (for a file's diff loaded on
        its own, shown as its page shows the others), and ``more`` (None: left out)."""
        return {
            "style": "split" if self.split else None,
            "w": "1" if self.ignore_whitespace else None,
            **{k: v or None for k, v in more.items()},
        }


def least_bytes(f: gitdiff.FileDiff) -> int:
    """Bytes a file's rows take at the least: their text, unescaped and unhighlighted."""
    return sum(len(h.header) + ROW_BYTES for h in f.hunks) + sum(
        len(line.text) + ROW_BYTES for h in f.hunks for line in h.lines
    )


def rows(f: gitdiff.FileDiff, highlight_left: int, split: bool = False) -> tuple[Markup, int]:
    """A file's table rows, hunk headers included, as one string, and the lines lexed. Each
    side of the change is highlighted as one text (the lines before it, by the old name, and
    the lines after it, by the new), so that a token spanning lines keeps its colour and a
    removed line never colours an added one; a file that does not fit in ``highlight_left``
    lines is shown as plain text. The old side shows only its removed lines (context comes
    from the new side), so it is lexed up to its last removed line: what comes before sets
    the lexer's state for the removals, what comes after would be lexed for nothing (a file
    with no removals is not lexed on the old side at all)."""
    last = max(
        (
            (n, i)
            for n, h in enumerate(f.hunks)
            for i, line in enumerate(h.lines)
            if line.kind == "-"
        ),
        default=(-1, -1),
    )
    # the old side's lines of each hunk that are lexed: all of them before the hunk of the
    # last removal, up to it in that hunk, none after
    old_upto = [
        len(h.lines) if n < last[0] else last[1] if n == last[0] else -1
        for n, h in enumerate(f.hunks)
    ]
    before = [
        line.text
        for h, upto in zip(f.hunks, old_upto, strict=True)
        for line in h.lines[: upto + 1]
        if line.kind in " -"
    ]
    after = [line.text for h in f.hunks for line in h.lines if line.kind in " +"]
    lexed = len(before) + len(after)
    if lexed > highlight_left:
        old: Iterator[str] = iter(())
        new: Iterator[str] = iter(())
        lexed = 0
    else:
        old = iter(highlight_lines(text(f.old_path), "\n".join(before) + "\n") if before else ())
        new = iter(highlight_lines(text(f.new_path), "\n".join(after) + "\n") if after else ())
    expandable = f.status != "deleted" and not f.truncated
    parts: list[str] = []
    previous_end = 0  # the last line of the new side shown so far
    old_end = 0
    for h, upto in zip(f.hunks, old_upto, strict=True):
        top_new = h.new_start if h.new_lines else h.new_start + 1
        top_old = h.old_start if h.old_lines else h.old_start + 1
        gap = (previous_end + 1, top_new - 1) if expandable and top_new - 1 > previous_end else None
        parts.append(_hunk_row(h.header, gap, top_new - top_old, split))
        htmls = []
        for i, line in enumerate(h.lines):
            if line.kind == "-":
                html = next(old, None)
            elif line.kind == "+":
                html = next(new, None)
            elif line.kind == " ":
                if i < upto:
                    next(old, None)
                html = next(new, None)
            else:
                html = None
            htmls.append(str(escape(line.text)) if html is None else html)
        _mark_words(h.lines, htmls)
        parts.extend(_split_rows(h.lines, htmls) if split else _unified_rows(h.lines, htmls))
        previous_end = h.new_start + h.new_lines - 1 if h.new_lines else h.new_start
        old_end = h.old_start + h.old_lines - 1 if h.old_lines else h.old_start
    if expandable and f.hunks:
        parts.append(_tail_row(previous_end + 1, previous_end - old_end, split))
    return Markup("".join(parts)), lexed  # noqa: S704 - escaped text and Pygments' HTML


def with_file_url(markup: Markup, url: str) -> Markup:
    """A file's rows with its lines URL where they hold ``FILE_MARK``."""
    if FILE_MARK not in markup:
        return markup
    return Markup(str(markup).replace(FILE_MARK, str(escape(url))))  # noqa: S704 - escaped URL


def context_rows(lines: list[str], start: int, delta: int, split: bool) -> Markup:
    """Rows of context (lines of the new side from ``start``, HTML already escaped), each with
    its old line number ``delta`` lines before its new one."""
    parts = []
    for i, html in enumerate(lines):
        new = start + i
        line = gitdiff.Line(" ", new - delta, new, "")
        parts.extend(_split_rows([line], [html]) if split else _unified_rows([line], [html]))
    return Markup("".join(parts))  # noqa: S704 - escaped text and Pygments' HTML


def _cells(split: bool) -> str:
    if split:
        return '<td class="ln"></td><td class="code" colspan="3">'
    return '<td class="ln"></td><td class="ln"></td><td class="code">'


def _hunk_row(header: str, gap: tuple[int, int] | None, delta: int, split: bool) -> str:
    """A hunk's header row; with ``gap`` (the new side's lines hidden above it), a link to
    them, which the page's script turns into rows loaded in place (``data-*``: the lines
    and how far the old side's numbers are behind the new's)."""
    expand = ""
    if gap is not None:
        first, last = gap
        expand = (
            f'<a class="expand" href="{FILE_MARK}#L{first}" data-start="{first}" '
            f'data-end="{last}" data-delta="{delta}" data-where="above" '
            f'title="Show lines {first} to {last}">\u2195 {last - first + 1} hidden lines</a>'
        )
    return f'<tr class="hunk">{_cells(split)}{expand}<pre>{escape(header)}</pre></td></tr>'


def _tail_row(start: int, delta: int, split: bool) -> str:
    """After the last hunk: a link to the lines that follow it (if the file has any)."""
    return (
        f'<tr class="hunk-tail">{_cells(split)}<a class="expand" href="{FILE_MARK}#L{start}" '
        f'data-start="{start}" data-end="0" data-delta="{delta}" data-where="below" '
        f'title="Show the lines after line {start - 1}">'
        f"\u2193 lines after {start - 1}</a></td></tr>"
    )


def _unified_rows(lines: list[gitdiff.Line], htmls: list[str]) -> list[str]:
    out = []
    for line, html in zip(lines, htmls, strict=True):
        # "No newline at end of file" has no mark
        content = html if line.kind == "\\" else f'<span class="mark">{line.kind}</span>{html}'
        out.append(
            f'<tr class="{ROW_CLASS.get(line.kind, "meta")}"><td class="ln">{line.old or ""}</td>'
            f'<td class="ln">{line.new or ""}</td><td class="code"><pre>{content}</pre></td></tr>'
        )
    return out


def _side(kind: str, number: int | None, html: str | None, side: str) -> str:
    if html is None:
        return f'<td class="ln" data-side="{side}"></td><td class="code empty"></td>'
    return (
        f'<td class="ln" data-side="{side}">{number or ""}</td>'
        f'<td class="code {kind}"><pre>{html}</pre></td>'
    )


def _split_rows(lines: list[gitdiff.Line], htmls: list[str]) -> list[str]:
    """Context on both sides of one row; each run of removed lines beside the added lines
    that follow it, row by row, the shorter side padded with empty cells."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.kind == " ":
            out.append(
                '<tr class="ctx">'
                + _side("context", line.old, htmls[i], "old")
                + _side("context", line.new, htmls[i], "new")
                + "</tr>"
            )
            i += 1
            continue
        if line.kind == "\\":
            out.append(
                f'<tr class="meta"><td class="ln"></td><td class="code" colspan="3">'
                f"{htmls[i]}</td></tr>"
            )
            i += 1
            continue
        removed: list[int] = []
        added: list[int] = []
        while i < len(lines) and lines[i].kind in "-\\" and (lines[i].kind == "-" or removed):
            if lines[i].kind == "-":
                removed.append(i)
            i += 1
        while i < len(lines) and lines[i].kind in "+\\":
            if lines[i].kind == "+":
                added.append(i)
            i += 1
        for n in range(max(len(removed), len(added))):
            r = removed[n] if n < len(removed) else None
            a = added[n] if n < len(added) else None
            out.append(
                '<tr class="chg">'
                + _side(
                    "removed",
                    lines[r].old if r is not None else None,
                    htmls[r] if r is not None else None,
                    "old",
                )
                + _side(
                    "added",
                    lines[a].new if a is not None else None,
                    htmls[a] if a is not None else None,
                    "new",
                )
                + "</tr>"
            )
    return out


def _mark_words(lines: list[gitdiff.Line], htmls: list[str]) -> None:
    """Mark, in place, the words that differ between each removed line and the added line
    paired with it (at most ``WORD_PAIRS`` pairs)."""
    budget = WORD_PAIRS
    i = 0
    while i < len(lines):
        if lines[i].kind != "-":
            i += 1
            continue
        removed = []
        while i < len(lines) and lines[i].kind == "-":
            removed.append(i)
            i += 1
        if i < len(lines) and lines[i].kind == "\\":
            i += 1
        added = []
        while i < len(lines) and lines[i].kind == "+":
            added.append(i)
            i += 1
        for r, a in zip(removed, added, strict=False):
            if budget <= 0:
                return
            budget -= 1
            spans = changed_spans(lines[r].text, lines[a].text)
            if spans is not None:
                htmls[r] = mark_spans(htmls[r], spans[0], "del")
                htmls[a] = mark_spans(htmls[a], spans[1], "ins")


def changed_spans(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """The character ranges of ``old`` and of ``new`` whose tokens differ; None when the
    lines are too long to compare, or too unlike for marking to help. The tokens both lines
    begin and end with are set aside first (most changes are local), and only what is left
    between, if short, is matched token by token; a longer middle is one change."""
    if len(old) > WORD_LINE_CHARS or len(new) > WORD_LINE_CHARS or old == new:
        return None
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(mid_a) <= WORD_MIDDLE_TOKENS and len(mid_b) <= WORD_MIDDLE_TOKENS:
        opcodes = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    else:
        opcodes = [("replace", 0, len(mid_a), 0, len(mid_b))]
    kept = a[:head] + a[len(a) - tail :]
    kept += [t for tag, i1, i2, _, _ in opcodes if tag == "equal" for t in mid_a[i1:i2]]
    # how alike the lines are, counting what is not whitespace (spaces match too easily)
    same = sum(len(token.strip()) for token in kept)
    solid = len("".join(old.split())) + len("".join(new.split()))
    if not solid or 2 * same / solid < WORD_MIN_RATIO:
        return None
    start_a = len("".join(a[:head]))
    start_b = len("".join(b[:head]))
    at_a = [start_a]
    for token in mid_a:
        at_a.append(at_a[-1] + len(token))
    at_b = [start_b]
    for token in mid_b:
        at_b.append(at_b[-1] + len(token))
    spans_a: list[tuple[int, int]] = []
    spans_b: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        if i2 > i1:
            spans_a.append((at_a[i1], at_a[i2]))
        if j2 > j1:
            spans_b.append((at_b[j1], at_b[j2]))
    return spans_a, spans_b


def mark_spans(html: str, spans: list[tuple[int, int]], tag: str) -> str:
    """``html`` (escaped text with balanced tags, as Pygments writes a line) with the
    characters of its text in ``spans`` wrapped in ``<tag class="wd">``: closed before each
    tag of ``html`` and opened again after it, so that nesting stays balanced."""
    if not spans:
        return html
    opening, closing = f'<{tag} class="wd">', f"</{tag}>"
    out: list[str] = []
    pos = 0  # characters of text passed
    span = 0
    inside = False
    i = 0
    n = len(html)
    while i < n:
        ch = html[i]
        if ch == "<":
            end = html.find(">", i)
            end = n - 1 if end < 0 else end
            if inside:
                out.append(closing)
            out.append(html[i : end + 1])
            if inside:
                out.append(opening)
            i = end + 1
            continue
        if span < len(spans) and not inside and pos == spans[span][0]:
            out.append(opening)
            inside = True
        if ch == "&":
            end = html.find(";", i)
            end = i if end < 0 or end - i > 10 else end
            out.append(html[i : end + 1])
            i = end + 1
        else:
            out.append(ch)
            i += 1
        pos += 1
        if inside and pos >= spans[span][1]:
            out.append(closing)
            inside = False
            span += 1
    if inside:
        out.append(closing)
    return "".join(out).replace(opening + closing, "")
