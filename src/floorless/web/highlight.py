"""Highlighting with Pygments, faster, to the same bytes: its lexers with their rules joined
(``quick``) and its HTML made in one tight loop (``to_html``).

A cold commit page highlights up to a thousand diff lines and a cold file page a whole file,
at 70-100 µs a line of C, Python or JavaScript through Pygments: most of it the lexer trying
a state's rules one Python call each at every position, the rest the formatter looking up,
for each token, options this forge never sets (tag files, inline styles, debug titles).
Pygments stays the owner of the languages and the classes (its stylesheet,
``markup.stylesheet``, applies unchanged); tests/test_highlight.py holds the output to its
own, byte for byte.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pygments.formatters import HtmlFormatter
from pygments.lexer import ExtendedRegexLexer, Lexer, RegexLexer
from pygments.token import _TokenType

# -- HTML ----------------------------------------------------------------------------------------

_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})  # element text: quotes stay
_CLASSES = HtmlFormatter(nowrap=True)
_OPENERS: dict[_TokenType, str] = {}


def _opener(ttype: _TokenType) -> str:
    """``<span class="...">`` for a token type ('' for plain text), as Pygments writes it."""
    opener = _OPENERS.get(ttype)
    if opener is None:
        css: str = _CLASSES._get_css_classes(ttype)  # type: ignore[attr-defined]
        opener = _OPENERS[ttype] = f'<span class="{css}">' if css else ""
    return opener


def to_html(tokens: Iterable[tuple[_TokenType, str]]) -> str:
    """``tokens`` (a lexer's ``get_tokens``) as ``pygments.highlight`` with
    ``HtmlFormatter(nowrap=True)`` writes them: each line ends with a newline, a span never
    crosses a line's end, and consecutive tokens of one class share their span."""
    out: list[str] = []
    line: list[str] = []
    open_span = ""  # the span open on ``line``, '' for none
    openers = _OPENERS
    for ttype, value in tokens:
        span = openers.get(ttype)
        if span is None:
            span = _opener(ttype)
        if "\n" not in value:
            if value:
                if span != open_span:
                    if open_span:
                        line.append("</span>")
                    line.append(span)
                    open_span = span
                line.append(value.translate(_ESCAPE))
            continue
        parts = value.translate(_ESCAPE).split("\n")
        last = len(parts) - 1
        for i, part in enumerate(parts):
            if part:
                if span != open_span:
                    if open_span:
                        line.append("</span>")
                    line.append(span)
                    open_span = span
                line.append(part)
            if i < last:
                if open_span:
                    line.append("</span>")
                line.append("\n")
                out.append("".join(line))
                line = []
                open_span = ""
    if line:
        if open_span:
            line.append("</span>")
        line.append("\n")
        out.append("".join(line))
    return "".join(out)


# -- lexing ------------------------------------------------------------------------------------

_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(|\\g<")
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_FLAG = {"a": re.A, "i": re.I, "L": re.L, "m": re.M, "s": re.S, "u": re.U, "x": re.X}
_Rule = tuple[Callable[..., Any], Any, Any]  # Pygments' (match, action, new state)
_Tokendefs = dict[str, list[_Rule]]
_JOINED: dict[type[Lexer], _Tokendefs] = {}
_JOINED_LOCK = threading.Lock()


def quick(lexer: Lexer) -> Lexer:
    """``lexer``, lexing the same tokens faster: a ``RegexLexer`` tries a state's rules one
    regex match each, in order, at every position, and most fail, each failure a call from
    Python (~70 µs a line of C or Python). Here each run of consecutive rules that lead to the
    same state is one regex of alternatives, in the same order, so the regex engine does the
    trying; the alternative that matched (``lastindex``: each is a group of its own) gives the
    rule whose action runs. Subclasses that post-process the tokens (C's types) still do, as
    they read the rules from ``_tokens``."""
    if not isinstance(lexer, RegexLexer) or isinstance(lexer, ExtendedRegexLexer):
        return lexer  # an extended lexer's actions take a context, not only a match
    cls = type(lexer)
    tokendefs = _JOINED.get(cls)
    if tokendefs is None:
        with _JOINED_LOCK:
            tokendefs = _JOINED.get(cls)
            if tokendefs is None:
                tokendefs = _JOINED[cls] = {
                    state: _joined(rules, lexer.flags)
                    for state, rules in lexer._tokens.items()  # type: ignore[attr-defined]
                }
    lexer._tokens = tokendefs  # type: ignore[attr-defined]  # the instance's: the loop reads it
    return lexer


def _joined(rules: list[_Rule], lexer_flags: int) -> list[_Rule]:
    """A state's rules with each run of consecutive joinable rules that lead to the same
    state as one rule."""
    flags = re.compile("", lexer_flags).flags
    out: list[_Rule] = []
    run: list[tuple[_Rule, str, int]] = []

    def flush() -> None:
        joined = _join(run, flags) if len(run) > 1 else None
        if joined is None:
            out.extend(rule for rule, _, _ in run)
        else:
            out.append(joined)
        run.clear()

    for rule in rules:
        source = _source(rule, flags)
        if source is None:
            flush()
            out.append(rule)
            continue
        if run and run[0][0][2] != rule[2]:
            flush()
        run.append((rule, source, rule[0].__self__.groups))  # type: ignore[attr-defined]
    flush()
    return out


def _source(rule: _Rule, flags: int) -> str | None:
    """A rule's regex as it can stand among others (a leading ``(?i)`` made ``(?i:...)``),
    or None when it cannot: back-references and conditionals count groups, and its flags
    must be the lexer's."""
    pattern = getattr(rule[0], "__self__", None)
    if not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str):
        return None
    source, own = pattern.pattern, pattern.flags
    leading = _LEADING_FLAGS.match(source)
    if leading:
        source = f"(?{leading.group(1)}:{source[leading.end() :]})"
        for letter in leading.group(1):
            own &= ~_FLAG[letter]
    if (source and own != flags) or _BACKREFERENCE.search(source):
        return None
    return source


def _join(run: list[tuple[_Rule, str, int]], flags: int) -> _Rule | None:
    table: dict[int, _Rule] = {}
    group = 1
    for rule, _, groups in run:
        table[group] = rule
        group += 1 + groups
    try:
        regex = re.compile("|".join(f"({source})" for _, source, _ in run), flags)
    except re.error:  # group names used twice, or flags Python does not scope
        return None
    if regex.groups != group - 1:
        return None

    def action(lexer: Lexer, m: re.Match[str]) -> Iterator[tuple[int, _TokenType, str]]:
        rule = table[m.lastindex or 0]
        if type(rule[1]) is _TokenType:
            yield m.start(), rule[1], m.group()
        elif rule[1] is not None:  # a callback reads its rule's own groups
            yield from rule[1](lexer, rule[0](m.string, m.start()))

    return (regex.match, action, run[0][0][2])
