"""``resolve`` (a ``{kind}/{ref}/{path}`` URL tail -> ref, commit, path) and ``check_path``:
pure functions, checked against a table."""

from __future__ import annotations

import pytest

from floorless.core.errors import BadRequest, UnknownRevision
from floorless.git.refs import MAX_PATH, RefSnapshot, Resolved, Tag, check_path, resolve

pytestmark = pytest.mark.unit


def _commit(n: int) -> bytes:
    return bytes([n]) * 20


MAIN, FEATURE, FEATURE_X, RELEASE_BRANCH, A, A_B_C = (_commit(n) for n in range(1, 7))
RELEASE_TAG, V1, DEEP_TAG = _commit(7), _commit(8), _commit(9)
FULL = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"

SNAPSHOT = RefSnapshot(
    head=b"refs/heads/main",
    branches={
        b"main": MAIN,
        b"feature": FEATURE,
        b"feature/x": FEATURE_X,
        b"release": RELEASE_BRANCH,
        b"a": A,
        b"a/b/c": A_B_C,
    },
    tags={
        b"release": Tag(b"release", RELEASE_TAG, _commit(17), annotated=True),
        b"v1.0": Tag(b"v1.0", V1, V1, annotated=False),
        b"tree-tag": Tag(b"tree-tag", None, _commit(19), annotated=True),
        b"feature/x/deep": Tag(b"feature/x/deep", DEEP_TAG, DEEP_TAG, annotated=False),
    },
)


def _expand(prefix: bytes) -> bytes | None:
    """A repository holding FULL and OTHER: unique prefixes expand, others do not."""
    matches = [c for c in (FULL, OTHER) if c.startswith(prefix.decode())]
    return matches[0].encode() if len(matches) == 1 else None


RESOLVES = [
    # kind, tail, (ref, commit, path)
    ("branch", b"main", (b"main", MAIN, b"")),
    ("branch", b"main/", (b"main", MAIN, b"")),
    ("branch", b"/main/src/app.py/", (b"main", MAIN, b"src/app.py")),
    ("branch", b"main/src//app.py", (b"main", MAIN, b"src/app.py")),
    ("branch", b"main/...", (b"main", MAIN, b"...")),
    ("branch", b"main/a..b/.c", (b"main", MAIN, b"a..b/.c")),
    ("branch", b"main/bad\xffname.txt", (b"main", MAIN, b"bad\xffname.txt")),
    # a branch with a slash, and the longest ref that prefixes the tail wins
    ("branch", b"feature", (b"feature", FEATURE, b"")),
    ("branch", b"feature/x", (b"feature/x", FEATURE_X, b"")),
    ("branch", b"feature/x/", (b"feature/x", FEATURE_X, b"")),
    ("branch", b"feature/x/docs/a.md", (b"feature/x", FEATURE_X, b"docs/a.md")),
    ("branch", b"feature/y/docs/a.md", (b"feature", FEATURE, b"y/docs/a.md")),
    ("branch", b"feature/xy", (b"feature", FEATURE, b"xy")),  # whole segments only
    ("branch", b"feature/x/deep", (b"feature/x", FEATURE_X, b"deep")),  # that one is a tag
    ("branch", b"a/b/c/d", (b"a/b/c", A_B_C, b"d")),
    ("branch", b"a/b/c", (b"a/b/c", A_B_C, b"")),
    ("branch", b"a/b/d", (b"a", A, b"b/d")),
    ("branch", b"a/b", (b"a", A, b"b")),
    # a tag and a branch of the same name: the kind picks
    ("branch", b"release/notes.md", (b"release", RELEASE_BRANCH, b"notes.md")),
    ("tag", b"release/notes.md", (b"release", RELEASE_TAG, b"notes.md")),
    ("tag", b"release", (b"release", RELEASE_TAG, b"")),
    ("tag", b"v1.0/src", (b"v1.0", V1, b"src")),
    ("tag", b"feature/x/deep/file", (b"feature/x/deep", DEEP_TAG, b"file")),
    # commit ids: full, upper case, abbreviated through ``expand``, with a path
    ("commit", FULL.encode(), (FULL.encode(), bytes.fromhex(FULL), b"")),
    ("commit", FULL.upper().encode(), (FULL.encode(), bytes.fromhex(FULL), b"")),
    ("commit", FULL.encode() + b"/src/app.py", (FULL.encode(), bytes.fromhex(FULL), b"src/app.py")),
    ("commit", b"0123", (FULL.encode(), bytes.fromhex(FULL), b"")),
    ("commit", b"fedcba98/docs/", (OTHER.encode(), bytes.fromhex(OTHER), b"docs")),
    ("commit", b"FEDCBA98/docs", (OTHER.encode(), bytes.fromhex(OTHER), b"docs")),
]


@pytest.mark.parametrize(("kind", "tail", "expected"), RESOLVES)
def test_resolve(kind: str, tail: bytes, expected: tuple[bytes, bytes, bytes]) -> None:
    ref, commit, path = expected
    assert resolve(SNAPSHOT, kind, tail, _expand) == Resolved(kind, ref, commit, path)


UNKNOWN = [
    ("branch", b"nope"),
    ("branch", b"nope/main"),  # refs match from the start only
    ("branch", b"feat"),
    ("branch", b""),
    ("tag", b"main"),  # a branch, not a tag
    ("tag", b"feature/x"),
    ("tag", b"tree-tag"),  # a tag of a tree: no commit
    ("tag", b"tree-tag/file"),
    ("commit", b"0000"),  # hex, but no such commit
    ("commit", b"0000000000000000000000000000000000000000"[:39]),
    ("commit", b"abc"),  # too short to be an abbreviation
    ("commit", b"xyz0123"),  # not hex
    ("commit", b"g123456789abcdef0123456789abcdef01234567"),
    ("commit", FULL.encode() + b"0"),  # 41 digits
    ("commit", b""),
    ("commit", b"main"),
    ("remote", b"main"),
    ("", b"main"),
]


@pytest.mark.parametrize(("kind", "tail"), UNKNOWN)
def test_unknown_revisions(kind: str, tail: bytes) -> None:
    with pytest.raises(UnknownRevision):
        resolve(SNAPSHOT, kind, tail, _expand)


def test_an_abbreviation_needs_expand() -> None:
    with pytest.raises(UnknownRevision):
        resolve(SNAPSHOT, "commit", b"0123")
    seen: list[bytes] = []

    def expand(prefix: bytes) -> bytes | None:
        seen.append(prefix)
        return FULL.encode()

    assert resolve(SNAPSHOT, "commit", b"0123ABCD/x", expand).commit == bytes.fromhex(FULL)
    assert seen == [b"0123abcd"]  # lower-cased before the lookup


BAD = [
    ("branch", b"main/../secret"),
    ("branch", b"main/.."),
    ("branch", b"main/./a"),
    ("branch", b"main/a/."),
    ("branch", b"feature/x/docs/../../y"),
    ("tag", b"release/.."),
    ("commit", FULL.encode() + b"/.."),
    ("branch", b"main/a\0b"),
    ("branch", b"ma\0in"),
    ("commit", b"0123\0"),
    ("branch", b"main/" + b"x" * MAX_PATH),
    ("tag", b"release/" + b"a/" * (MAX_PATH // 2)),
    ("commit", FULL.encode() + b"/" + b"x" * MAX_PATH),
]


@pytest.mark.parametrize(("kind", "tail"), BAD)
def test_bad_requests(kind: str, tail: bytes) -> None:
    with pytest.raises(BadRequest):
        resolve(SNAPSHOT, kind, tail, _expand)


def test_longest_allowed_tail() -> None:
    tail = b"main/" + b"x" * (MAX_PATH - len(b"main/"))
    assert len(tail) == MAX_PATH
    assert resolve(SNAPSHOT, "branch", tail).path == b"x" * (MAX_PATH - 5)


CHECK_PATH = [
    (b"", b""),
    (b"/", b""),
    (b"a", b"a"),
    (b"a/b/c.txt", b"a/b/c.txt"),
    (b"/a//b/", b"a/b"),
    (b"...", b"..."),
    (b".hidden/..x/x..", b".hidden/..x/x.."),
    (b"bad\xffname", b"bad\xffname"),
    (b"name with spaces/%2e%2e", b"name with spaces/%2e%2e"),  # no URL decoding here
    (b"x" * MAX_PATH, b"x" * MAX_PATH),
]


@pytest.mark.parametrize(("path", "expected"), CHECK_PATH)
def test_check_path_accepts(path: bytes, expected: bytes) -> None:
    assert check_path(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        b".",
        b"..",
        b"a/..",
        b"../a",
        b"a/./b",
        b"a/../b",
        b"//..//",
        b"a\0",
        b"\0",
        b"x" * (MAX_PATH + 1),
    ],
)
def test_check_path_rejects(path: bytes) -> None:
    with pytest.raises(BadRequest):
        check_path(path)
