"""Highlighting with Pygments, faster, to the same bytes: its lexers with their rules joined
(``quick``) and its HTML made in one tight loop (``to_html``).

A cold commit page highlights up to a thousand diff lines and a cold file page a whole file,
at 70-100 µs a line of C, Python or JavaScript through Pygments: most of it the lexer trying
a state's rules one Python call each at every position, the rest the formatter looking up,
for each token, options this forge never sets (tag files, inline styles, debug titles).
Pygments stays the owner of the languages and the classes (its stylesheet,
``markup.stylesheet``, applies unchanged); tests/web/test_highlight.py holds the output to its
own, byte for byte.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, cast

from pygments.formatters import HtmlFormatter
from pygments.lexer import ExtendedRegexLexer, Lexer, RegexLexer
from pygments.lexers.c_cpp import CFamilyLexer
from pygments.token import Error, Keyword, Name, Whitespace, _TokenType

try:
    from re import _parser  # type: ignore[attr-defined]  # the parser ``re.compile`` runs
except ImportError:  # another Python's: rules are not sorted by their first character
    _parser = None

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
_Token = tuple[int, _TokenType, str]


class _Joined(NamedTuple):
    """Rules joined as one regex of alternatives, in their order, each a group of its own:
    the group that took part (``lastindex``) names the rule that matched.

    ``firsts``: the characters each rule can begin its match with (``_first``; None: any, or
    none at all), read when first needed; ``by_char``: for a character, the rules that can
    begin with it (None: no rule can), made when first needed (``_for_char``); ``subsets``:
    those joined, by the rules' places."""

    match: Callable[[str, int], re.Match[str] | None]
    rules: dict[int, _Rule]
    run: list[tuple[_Rule, str, int]]
    firsts: list[frozenset[str] | None]
    flags: int
    by_char: dict[str, _Found]
    subsets: dict[tuple[int, ...], _Joined]


# what a joined regex tries at a character: nothing, a few rules one by one, or a regex
_Found = tuple[_Rule, ...] | _Joined | None
_ONE_BY_ONE = 4  # rules at most tried one by one rather than as one regex


_Entry = _Rule | _Joined
_ALONE: dict[type[Lexer], dict[str, list[_Entry]]] = {}  # for lexing here (``_lex``)
_RUNS: dict[type[Lexer], dict[str, list[_Rule]]] = {}  # for Pygments' own loop
_LOCK = threading.Lock()


def quick(lexer: Lexer) -> Lexer:
    """``lexer``, lexing the same tokens faster. A ``RegexLexer`` tries a state's rules one
    regex match each, in order, at every position, and most fail, each failure a call from
    Python (~70 µs a line of C or Python). Joined into one regex of alternatives in the same
    order, the regex engine does the trying, and the alternative that matched gives the rule
    whose action and state change apply. A plain ``RegexLexer`` lexes here (``_lex``), each
    state's joinable rules all joined, and so do the C family's lexers, whose only change to
    the tokens (type names) is made after (``_c_types``); any other subclass that lexes
    through ``RegexLexer``'s loop and changes the tokens keeps that loop, which reads the
    rules from ``_tokens``: it gets each run of consecutive rules leading to the same state
    joined."""
    if not isinstance(lexer, RegexLexer) or isinstance(lexer, ExtendedRegexLexer):
        return lexer  # an extended lexer's actions take a context, not only a match
    cls = type(lexer)
    own = cls.get_tokens_unprocessed
    c_family = isinstance(lexer, CFamilyLexer) and own is CFamilyLexer.get_tokens_unprocessed
    here = own is RegexLexer.get_tokens_unprocessed or c_family
    made = (_ALONE if here else _RUNS).get(cls)
    if made is None:
        with _LOCK:
            rules: dict[str, list[_Rule]] = lexer._tokens  # type: ignore[attr-defined]
            if here:
                made = _ALONE[cls] = {
                    state: _joined(state_rules, lexer.flags, by_state=False)
                    for state, state_rules in rules.items()
                }
            else:
                made = _RUNS[cls] = {
                    state: [
                        entry if not isinstance(entry, _Joined) else _as_rule(entry)
                        for entry in _joined(state_rules, lexer.flags, by_state=True)
                    ]
                    for state, state_rules in rules.items()
                }
    if not here:
        lexer._tokens = made  # type: ignore[attr-defined]  # the instance's: the loop reads it
        return lexer
    tokendefs = cast(dict[str, list[_Entry]], made)
    if c_family:
        types = _c_types(cast(CFamilyLexer, lexer))

        def lex(text: str, stack: Iterable[str] = ("root",)) -> Iterator[_Token]:
            for pos, ttype, value in _lex(lexer, tokendefs, text, stack):
                yield pos, Keyword.Type if ttype is Name and value in types else ttype, value

    else:

        def lex(text: str, stack: Iterable[str] = ("root",)) -> Iterator[_Token]:
            return _lex(lexer, tokendefs, text, stack)

    lexer.get_tokens_unprocessed = lex  # type: ignore[method-assign]
    return lexer


def _c_types(lexer: CFamilyLexer) -> frozenset[str]:
    """The names a C family lexer shows as types beside the keywords: those of the standard
    library, C99, C11 atomics and the platform, each unless the lexer's option turns it off."""
    sets = (
        ("stdlibhighlighting", "stdlib_types"),
        ("c99highlighting", "c99_types"),
        ("c11highlighting", "c11_atomic_types"),
        ("platformhighlighting", "linux_types"),
    )
    return frozenset().union(
        *(getattr(lexer, names) for option, names in sets if getattr(lexer, option))
    )


def _joined(rules: list[_Rule], lexer_flags: int, by_state: bool) -> list[_Entry]:
    """A state's rules with each run of consecutive joinable rules as one (``by_state``: only
    rules that lead to the same state)."""
    flags = re.compile("", lexer_flags).flags
    out: list[_Entry] = []
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
        if by_state and run and run[0][0][2] != rule[2]:
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


def _join(run: list[tuple[_Rule, str, int]], flags: int) -> _Joined | None:
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
    return _Joined(regex.match, table, list(run), [], flags, {}, {})


# -- which rules can match where -------------------------------------------------------------
#
# A joined regex tries its alternatives in order at a position, and a lexer's busiest state
# has dozens (Python's root: 56), most of which cannot begin with the character there. The
# rules that can are joined again, in the same order, for each character met: the first of
# them to match is the first of all to match, since the others cannot match there at all.

_OTHER = "\x80"  # the key of every character past ASCII: rules are sorted for them together
_ASCII = [chr(code) for code in range(128)]
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
_CLASS = {c: _LETTERS for c in _LETTERS} | {c: _DIGITS for c in _DIGITS}


def _for_char(joined: _Joined, char: str) -> _Found:
    """``joined``'s rules that can match at a position holding ``char`` (a key of
    ``by_char``: an ASCII character or ``_OTHER``): None when none can, a few as they are
    (tried one by one, no regex to compile), more joined again. Those are chosen for the
    character's class (letters, digits), so that its characters share one regex: each such
    regex costs milliseconds to compile, and a lexer makes a few dozen."""
    if not joined.firsts:  # read when the state is first lexed (most states rarely are)
        joined.firsts[:] = [_first(source, joined.flags) for _, source, _ in joined.run]
    members = _CLASS.get(char) or frozenset(char)
    picked = tuple(
        i for i, first in enumerate(joined.firsts) if first is None or not first.isdisjoint(members)
    )
    found: _Found
    if not picked:
        found = None
    elif len(picked) <= _ONE_BY_ONE:
        found = tuple(joined.run[i][0] for i in picked)
    elif len(picked) == len(joined.run):
        found = joined
    else:
        found = joined.subsets.get(picked)
        if found is None:
            found = _join([joined.run[i] for i in picked], joined.flags) or joined
            joined.subsets[picked] = found
    joined.by_char[char] = found
    return found


def _first(source: str, flags: int) -> frozenset[str] | None:
    """The characters a match of ``source`` can begin with (ASCII ones, and ``_OTHER`` for
    any past ASCII), or None when that is not known or it can match nothing at all (an empty
    match begins anywhere). Read from the parsed regex (``re._parser``, Python's own)."""
    try:
        parsed = _parser.parse(source, flags)
        chars, empty = _first_of(list(parsed), bool(flags & re.IGNORECASE))
    except Exception:  # noqa: BLE001 - any doubt (a parser of another Python): every char
        return None
    if chars is None or empty:
        return None
    return frozenset(chars)


_Firsts = tuple[set[str] | None, bool]  # the first characters, and whether it may be empty


def _first_of(items: list[Any], icase: bool) -> _Firsts:
    """The first characters of a sequence of parsed regex items: each item's, up to the first
    that cannot match empty (``icase``: in either case)."""
    chars: set[str] = set()
    for op, av in items:
        found, empty = _first_item(str(op), av, icase)
        if found is None:
            return None, False
        chars |= found
        if not empty:
            return chars, False
    return chars, True


def _first_item(op: str, av: Any, icase: bool) -> _Firsts:
    if op == "LITERAL":
        return _cased({_key(av)}, icase), False
    if op == "IN":
        found = _first_in(av)
        return (None if found is None else _cased(found, icase)), False
    if op == "BRANCH":
        chars: set[str] = set()
        empty = False
        for branch in av[1]:
            found, may = _first_of(list(branch), icase)
            if found is None:
                return None, False
            chars |= found
            empty = empty or may
        return chars, empty
    if op == "SUBPATTERN":
        _group, add_flags, del_flags, items = av
        scoped = (icase or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
        return _first_of(list(items), scoped)
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        least, _most, items = av
        found, empty = _first_of(list(items), icase)
        return found, empty or least == 0
    if op == "ATOMIC_GROUP":
        return _first_of(list(av), icase)
    if op in ("AT", "ASSERT", "ASSERT_NOT"):  # takes no character: the next item's first
        return set(), True
    return None, False  # any character (., a negated literal), a back-reference, ...


def _cased(chars: set[str], icase: bool) -> set[str]:
    """``chars``, and when case is ignored their other case too; and any character past
    ASCII, or any ASCII letter when one past it is there: Unicode's case folding joins some
    of each (the Kelvin sign and k, the long s and s)."""
    if not icase:
        return chars
    other = _LETTERS if _OTHER in chars else frozenset()
    return chars | {c.swapcase() for c in chars if c != _OTHER} | other | {_OTHER}


def _first_in(av: list[tuple[Any, Any]]) -> set[str] | None:
    """A character set's members (past ASCII: ``_OTHER``), None for a negated one."""
    chars: set[str] = set()
    for op, value in av:
        kind = str(op)
        if kind == "LITERAL":
            chars.add(_key(value))
        elif kind == "RANGE":
            low, high = value
            chars.update(_ASCII[low : min(high, 127) + 1])
            if high > 127:
                chars.add(_OTHER)
        elif kind == "CATEGORY":
            members = _CATEGORIES.get(str(value))
            if members is None:
                return None
            chars |= members
        else:  # NEGATE, or what is not known here
            return None
    return chars


def _key(code: int) -> str:
    return _ASCII[code] if code < 128 else _OTHER


_CATEGORIES = {
    name: {c for c in _ASCII if re.fullmatch(pattern, c)} | {_OTHER}
    for name, pattern in (
        ("CATEGORY_DIGIT", r"\d"),
        ("CATEGORY_SPACE", r"\s"),
        ("CATEGORY_WORD", r"\w"),
        ("CATEGORY_UNI_DIGIT", r"\d"),
        ("CATEGORY_UNI_SPACE", r"\s"),
        ("CATEGORY_UNI_WORD", r"\w"),
    )
}


def _as_rule(joined: _Joined) -> _Rule:
    """Joined rules (that lead to the same state) as one rule of Pygments' loop: its action
    runs the action of the rule that matched."""
    table = joined.rules
    new_state = next(iter(table.values()))[2]

    def action(lexer: Lexer, m: re.Match[str]) -> Iterator[_Token]:
        rule = table[m.lastindex or 0]
        if type(rule[1]) is _TokenType:
            yield m.start(), rule[1], m.group()
        elif rule[1] is not None:  # a callback reads its rule's own groups
            yield from rule[1](lexer, rule[0](m.string, m.start()))

    return (joined.match, action, new_state)


def _lex(
    lexer: RegexLexer, tokendefs: dict[str, list[_Entry]], text: str, stack: Iterable[str]
) -> Iterator[_Token]:
    """What ``RegexLexer.get_tokens_unprocessed`` yields, from joined rules."""
    pos = 0
    end = len(text)
    states = list(stack)
    entries = tokendefs[states[-1]]
    while True:
        for entry in entries:
            if isinstance(entry, _Joined):
                found: _Found = entry
                if pos < end:  # only the rules that can begin with the character here
                    char = text[pos]
                    if char >= _OTHER:
                        char = _OTHER
                    try:
                        found = entry.by_char[char]
                    except KeyError:
                        found = _for_char(entry, char)
                if found is None:
                    continue
                if isinstance(found, _Joined):
                    m = found.match(text, pos)
                    if m is None:
                        continue
                    rule = found.rules[m.lastindex or 0]
                    if type(rule[1]) is not _TokenType and rule[1] is not None:
                        m = rule[0](text, pos)  # a callback reads its rule's own groups
                else:  # a few rules: each tried in turn, as Pygments does
                    for rule in found:
                        m = rule[0](text, pos)
                        if m:
                            break
                    else:
                        continue
            else:
                m = entry[0](text, pos)
                if not m:
                    continue
                rule = entry
            _, action, new_state = rule
            if type(action) is _TokenType:
                yield pos, action, m.group()
            elif action is not None:
                yield from action(lexer, m)
            pos = m.end()
            if new_state is not None:
                _change(states, new_state)
                entries = tokendefs[states[-1]]
            break
        else:  # no rule matches here
            if pos >= len(text):
                return
            if text[pos] == "\n":  # a line's end starts again from the root state
                states = ["root"]
                entries = tokendefs["root"]
                yield pos, Whitespace, "\n"
            else:
                yield pos, Error, text[pos]
            pos += 1


def _change(states: list[str], new_state: object) -> None:
    """Pygments' state changes: push names, ``#pop``, ``#push``, or pop a number of states
    (the root stays)."""
    if isinstance(new_state, tuple):
        for name in new_state:
            if name == "#pop":
                if len(states) > 1:
                    states.pop()
            elif name == "#push":
                states.append(states[-1])
            else:
                states.append(name)
    elif isinstance(new_state, int):
        if abs(new_state) >= len(states):
            del states[1:]
        else:
            del states[new_state:]
    elif new_state == "#push":
        states.append(states[-1])
    else:
        raise ValueError(f"a state change Pygments does not define: {new_state!r}")
