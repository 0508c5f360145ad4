"""Highlighting through web/highlight.py gives Pygments' own bytes, for every lexer shape the
forge meets: the joined rules of ``quick`` and the tight loop of ``to_html`` are speed, never
a different page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer, RegexLexer, bygroups, default, include, this, using
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

import floorless
from floorless.web import highlight as fast
from floorless.web.markup import highlight_lines, lexer_class, lexer_for

pytestmark = pytest.mark.unit

SAMPLES = {
    "a.py": 'def f(x, *a, **k):\n    """Doc\n    string <&>"""\n'
    '    return f"{x!r:>3}" + rb"\\d" \'\'\n@deco\nclass C(B, metaclass=M):\n'
    "    lambda: 0x1F + 1_000.5e-3j  # tail\nimport a.b as c\n"
    "from . import (d,\n  e)\nmatch x:\n    case [1, *_]: pass\nprint('unterminated\n",
    "a.c": "#include <stdio.h>\n#if 0\nhidden(\n#endif\n/* block\n comment */\n"
    "static size_t n = 0x1fUL;\nint main(int argc, char **argv) {\n"
    "\tif (argc > 1 && argv[1][0] == '-') { return printf(\"%d\\n\", n); }\n"
    "  uint8_t b; label: goto label; // done\n}\n",
    "a.cpp": 'template <typename T> class X : public Y<T> { int v = R"(raw)"; };\nnamespace q {}\n',
    "a.js": "const a = /re[/]gex/g.test(`t ${b + `n`}`);\nlet c = a ? 1 : 2; // c\n"
    "class D extends E {}\nx = y / 2 / z;\n",
    "a.ts": "interface I { a?: number }\nexport type T<U> = U[] | null;\n",
    "a.css": "a > b:hover { color: #fff; margin: 0 1em !important } /* c */\n@media (x) {}\n",
    "a.html": '<!doctype html><p class="x">a &amp; b<script>if (a < b) {}</script>'
    "<style>p{}</style>\n",
    "a.md": "# Title\n\n* item `code`\n\n```python\nx = 1\n```\n> quote [link](u)\n",
    "a.sh": "for f in *.c; do echo \"$f ${f%.c}\" | sed -e 's/a/b/'; done <<EOF\nbody\nEOF\n",
    "a.rs": 'fn main() -> Result<(), E> { let s = r#"raw"#; println!("{}", s); Ok(()) }\n',
    "a.go": "package main\nfunc main() { ch := make(chan int, 3); go f(`raw`) }\n",
    "a.java": "@Override public static <T> void m(final T[] a) throws E { /** doc */ }\n",
    "a.rb": "def m(a) = a&.b || %w[x y]\nputs <<~HEREDOC\n  text\nHEREDOC\n",
    "a.json": '{"a": [1, 2.5, true, null], "b": {"c": "d\\"e"}}\n',
    "a.yaml": "a: &anchor\n  - b: 'c'\n  - *anchor\n# comment\n",
    "a.toml": '[tool.x]\na = "b"\nc = [1, 2]\n',
    "a.sql": "SELECT a, COUNT(*) FROM t WHERE b = 'x' -- c\nGROUP BY a;\n",
    "Makefile": "all: a.o\n\t$(CC) -o $@ $^\n",
    "a.txt": "plain <text> & more\n",
}
EDGES = ["", "\n", "\n\n\n", "x", "a\r\nb\r\n", "tab\there\n", "é ü ✓ 中\n", "<&>\"'\n"]


def _pygments(text: str, lexer: Lexer) -> str:
    return highlight(text, lexer, HtmlFormatter(nowrap=True))


def _fresh(name: str) -> Lexer:
    """A lexer as Pygments makes it, untouched by ``quick``."""
    cls = lexer_class(name)
    assert cls is not None, name
    return cls(stripnl=False, ensurenl=False)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_samples_match_pygments(name: str) -> None:
    for text in [SAMPLES[name], *EDGES, SAMPLES[name].replace("\n", "\r\n")]:
        assert fast.to_html(lexer_for(name, text).get_tokens(text)) == _pygments(
            text, _fresh(name)
        ), (name, text)


def test_the_forges_own_files_match_pygments() -> None:
    """Real files of several languages, whole: long strings, nested states, callbacks."""
    root = Path(floorless.__file__).parent
    files = [
        *sorted(root.rglob("*.py"))[:40],
        *sorted(root.rglob("*.html"))[:20],
        *sorted(root.rglob("*.js")),
        *sorted(root.rglob("*.css")),
    ]
    assert len(files) > 40
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert fast.to_html(lexer_for(path.name, text).get_tokens(text)) == _pygments(
            text, _fresh(path.name)
        ), path.name


def test_highlight_lines_unchanged_at_line_ends() -> None:
    """One fragment per git line, spans closed at each line's end."""
    lines = highlight_lines("a.py", 's = """one\ntwo"""\nx = 1\n')
    assert lines == [
        '<span class="n">s</span> <span class="o">=</span> <span class="s2">"""one</span>',
        '<span class="s2">two"""</span>',
        '<span class="n">x</span> <span class="o">=</span> <span class="mi">1</span>',
    ]


@pytest.mark.parametrize("name", ["a.py", "a.c", "a.js"])
def test_rules_are_joined(name: str) -> None:
    """The speed comes from fewer rules tried a position: a state of many rules leading to
    the same state is a few joined ones (a regression to one rule each fails here)."""
    plain, cls = _fresh(name), type(lexer_for(name, ""))
    before = sum(len(rules) for rules in plain._tokens.values())  # type: ignore[attr-defined]
    joined = fast._ALONE.get(cls) or fast._RUNS[cls]  # C lexes through Pygments' loop
    after = sum(len(entries) for entries in joined.values())
    assert after < before * 0.7, (before, after)


def test_unjoinable_rules_are_kept_as_they_are() -> None:
    """A back-reference counts groups: such a rule stays a rule of its own."""
    rules = [
        (re.compile(r"(a)\1", re.M).match, None, None),
        (re.compile(r"b", re.M).match, None, None),
        (re.compile(r"c", re.M).match, None, None),
    ]
    joined = fast._joined(rules, re.M, by_state=True)
    assert joined[0] is rules[0]
    assert len(joined) == 2
    assert joined[1][0]("c", 0) is not None


class _Shapes(RegexLexer):
    """Every rule shape Pygments offers a RegexLexer: state pushes and pops (by name, tuple,
    number, ``#push``), callbacks (``bygroups``, ``using(this)``), ``default``, a leading
    ``(?i)``, a back-reference among joinable rules, and an unmatched character."""

    name = "shapes"
    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"(?i)begin\b", Keyword, "block"),
            (r"(\w+)(=)", bygroups(Name.Attribute, Operator)),
            (r"(['\"]).*?\1", String),
            (r"\d+", Number),
            (r"<", Punctuation, ("tag", "#push")),
            (r"\{", Punctuation, "inner"),
            (r"\w+", Name),
        ],
        "block": [
            (r"end\b", Keyword, "#pop"),
            (r"deep\b", Keyword, ("block", "block")),
            (r"out\b", Keyword, "#pop:2"),
            include("root"),
        ],
        "tag": [(r">", Punctuation, "#pop"), (r"[^>]+", Comment), default("#pop")],
        "inner": [(r"\}", Punctuation, "#pop"), (r"[^}]+", using(this))],
    }


def test_joined_lexing_follows_every_rule_shape() -> None:
    text = (
        "BEGIN a=1 'q' \"r'\" deep x out y end end <t> {begin z end} ?! <a\n"
        "begin\n x = 2 end 9 'unclosed\n end <<> >\n"
    )
    expected = list(_Shapes(stripnl=False).get_tokens(text))
    assert list(fast.quick(_Shapes(stripnl=False)).get_tokens(text)) == expected
    assert any(t is Error for t, _ in expected)  # the unmatched characters are there too


@pytest.mark.parametrize(
    ("source", "first"),
    [
        (r"abc", "a"),
        (r"\bfoo", "f"),
        (r"[a-c_]\w*", "abc_"),
        (r"(?=x)y|z", "yz"),
        (r"a*b", "ab"),
        (r"(?:#|//).*$", "#/"),
        (r"\d+", "0123456789" + fast._OTHER),
        (r"é", fast._OTHER),
        (r"(?i:ab)|c", "aAc" + fast._OTHER),  # Unicode folds some characters into ASCII
        (r"(?i:\u017f)|1", "".join(sorted(fast._LETTERS)) + "1" + fast._OTHER),  # long s: s
    ],
)
def test_first_characters_of_a_rule(source: str, first: str) -> None:
    assert fast._first(source, re.M) == frozenset(first)


@pytest.mark.parametrize("source", [r"x*", r"(?=a)", r"$", r"[^a]", r".", r"(a)?\1"])
def test_a_rule_that_may_begin_anywhere_is_tried_everywhere(source: str) -> None:
    """An empty match, a negated set, any character, a back-reference: not known."""
    assert fast._first(source, re.M) is None


def test_a_position_tries_only_the_rules_that_can_begin_with_its_character() -> None:
    """Python's root state is one regex of 56 alternatives; at a space, a quote, a comment,
    a digit or a bracket only a few of them can match, and only those are tried (with the
    same rule chosen: the samples above hold the bytes). Letters share one set of rules
    (those that can begin with any letter), so that a lexer compiles few regexes."""
    root = fast._ALONE[type(lexer_for("a.py", ""))]["root"][0]
    assert isinstance(root, fast._Joined)
    for char in (" ", '"', "#", "1", "(", "x", fast._OTHER):
        picked = fast._for_char(root, char)
        assert picked is not None
        tried = len(picked.rules) if isinstance(picked, fast._Joined) else len(picked)
        assert tried < len(root.rules) * (0.8 if char in "x" + fast._OTHER else 0.2), (char, tried)
    assert fast._for_char(root, "x") is fast._for_char(root, "Q")


class _Anywhere(RegexLexer):
    """Rules that begin anywhere (an empty match, a lookahead, any character) between rules
    that begin with one character: the order of all of them still decides."""

    name = "anywhere"
    tokens = {
        "root": [
            (r"a(?=b)", Keyword),
            (r"(?=c)", Comment, "c"),
            (r"[ab]+", Name),
            (r"é+", String),
            (r"\s+", Whitespace),
            (r"[^\n]", Operator),
        ],
        "c": [(r"c+", Number, "#pop"), (r"", Comment, "#pop")],
    }


def test_joined_lexing_with_rules_that_begin_anywhere() -> None:
    text = "abab cc é ééx a\nbca ab\n"
    expected = list(_Anywhere(stripnl=False).get_tokens(text))
    assert list(fast.quick(_Anywhere(stripnl=False)).get_tokens(text)) == expected
