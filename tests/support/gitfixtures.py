"""Deterministic git repositories for the floorless test-suite.

Every repository is built with the git CLI under an isolated environment (a private
``HOME``, no system or global config, ``LC_ALL=C``, fixed identities and explicit dates), so
the same code always yields the same commit ids.  Most repositories are written with one
``git fast-import`` run, which gives full control over path bytes, file modes (symlinks,
gitlinks), merges and dates, and is fast enough for the 10,500-commit history.

``build_all(root)`` lays out::

    root/alice/empty.git      bare, no commits, HEAD -> refs/heads/main
    root/alice/one.git        bare, one commit with README.md
    root/alice/demo.git       bare, rich repository (odd paths, modes, tags, a merge)
    root/alice/history.git    bare, 10,500 first-parent commits on main
    root/alice/corrupt.git    bare, one commit whose root tree object is missing
    root/bob/merges.git       bare, merge-heavy history for ``git log -- path`` tests
    root/carol/checkout       non-bare working copy, two commits on main
    root/solo.git             bare, one commit, directly below root

Use :func:`git` to ask the git CLI for reference answers, e.g.
``git(repo, "log", "--format=%H", "--", "lib/b.txt")``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

AUTHOR_NAME = "Ada Author"
AUTHOR_EMAIL = "ada@example.org"
COMMITTER_NAME = "Cy Committer"
COMMITTER_EMAIL = "cy@example.org"
EPOCH_START = 1_700_000_000
EPOCH_STEP = 60

MODE_FILE = "100644"
MODE_EXEC = "100755"
MODE_SYMLINK = "120000"
MODE_GITLINK = "160000"

DEMO_INVALID_UTF8_PATH = b"bad\xffname.txt"
DEMO_UNICODE_PATH = "\u00fcn\u00efc\u00f8d\u00e9.txt"
DEMO_GITLINK_COMMIT = "0123456789abcdef0123456789abcdef01234567"
DEMO_SUBMODULE_URL = "https://example.org/lib.git"
DEMO_BIG_TXT_MIN_SIZE = 2_500_000

HISTORY_COMMITS = 10_500
HISTORY_FILES = 50
HISTORY_MERGE_EVERY = 500
HISTORY_MERGE_OFFSET = 250
HISTORY_RARE_COMMITS = (3, 4000, 9000)
HISTORY_README_COMMITS = (1, 2500, 5000, 7500, 10000)

GitPath: TypeAlias = str | bytes


class GitError(RuntimeError):
    """A git command exited with a non-zero status."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: bytes) -> None:
        self.returncode = returncode
        self.stderr = stderr
        text = stderr.decode("utf-8", "replace").strip()
        super().__init__(f"git {' '.join(args)} failed ({returncode}): {text}")


# --------------------------------------------------------------------------- running git


@functools.cache
def _isolated_home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="floorless-git-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def git_env(when: int | None = None) -> dict[str, str]:
    """Return the isolated environment every fixture git command runs with."""
    home = str(_isolated_home())
    stamp = f"{EPOCH_START if when is None else when} +0000"
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": AUTHOR_NAME,
        "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": COMMITTER_NAME,
        "GIT_COMMITTER_EMAIL": COMMITTER_EMAIL,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }


def _run(
    args: Sequence[str], cwd: Path, input: bytes | None = None, when: int | None = None
) -> bytes:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=git_env(when),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr)
    return proc.stdout


def _repo_args(repo: Path) -> list[str]:
    if (repo / ".git").exists():
        return ["-C", str(repo)]
    return [f"--git-dir={repo}"]


def git(repo: Path, *args: str, input: bytes | None = None, when: int | None = None) -> bytes:
    """Run ``git`` on ``repo`` (bare or not) in the isolated env and return its stdout.

    ``when`` sets the author and committer dates (epoch seconds, +0000); it defaults to
    ``EPOCH_START`` so that commits made through this helper stay deterministic too.
    Raises :class:`GitError` (with stderr) on a non-zero exit status.
    """
    cwd = repo if repo.is_dir() else repo.parent
    return _run([*_repo_args(repo), *args], cwd=cwd, input=input, when=when)


def git_text(repo: Path, *args: str) -> str:
    """Like :func:`git` but decoded and stripped, for ids and counts."""
    return git(repo, *args).decode("utf-8", "surrogateescape").strip()


class Clock:
    """Hands out commit timestamps: ``start``, ``start + step``, ..."""

    def __init__(self, start: int = EPOCH_START, step: int = EPOCH_STEP) -> None:
        self._next = start
        self._step = step

    def tick(self) -> int:
        now = self._next
        self._next += self._step
        return now


# ------------------------------------------------------------------ fast-import streams


@dataclass(frozen=True)
class Entry:
    """A tree entry: blob content (or a hex commit id for gitlinks) plus its mode."""

    data: bytes
    mode: str = MODE_FILE


FileValue: TypeAlias = bytes | Entry | None  # None deletes the path


def _as_bytes(path: GitPath) -> bytes:
    return path.encode("utf-8") if isinstance(path, str) else path


def quote_path(path: GitPath) -> bytes:
    """C-style quote ``path`` for fast-import; every non-printable byte becomes ``\\ooo``."""
    out = bytearray(b'"')
    for byte in _as_bytes(path):
        if 0x20 <= byte < 0x7F and byte not in b'"\\':
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    out += b'"'
    return bytes(out)


def _person(role: str, name: str, email: str, when: int) -> bytes:
    return f"{role} {name} <{email}> {when} +0000\n".encode()


class FastImportStream:
    """Builds a ``git fast-import`` stream; commits and blobs are identified by marks."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self._chunks: list[bytes] = []
        self._next_mark = 1
        self._blobs: dict[bytes, int] = {}

    def _mark(self) -> int:
        mark = self._next_mark
        self._next_mark += 1
        return mark

    def _data(self, payload: bytes) -> None:
        self._chunks += [b"data %d\n" % len(payload), payload, b"\n"]

    def blob(self, content: bytes) -> int:
        """Emit ``content`` once and return its mark."""
        if content not in self._blobs:
            mark = self._mark()
            self._chunks.append(b"blob\nmark :%d\n" % mark)
            self._data(content)
            self._blobs[content] = mark
        return self._blobs[content]

    def _file_op(self, path: GitPath, value: FileValue) -> bytes:
        quoted = quote_path(path)
        if value is None:
            return b"D " + quoted + b"\n"
        entry = value if isinstance(value, Entry) else Entry(value)
        mode = entry.mode.encode()
        if entry.mode == MODE_GITLINK:
            return b"M " + mode + b" " + entry.data + b" " + quoted + b"\n"
        return b"M %s :%d %s\n" % (mode, self.blob(entry.data), quoted)

    def commit(
        self,
        ref: str,
        message: str,
        parents: Sequence[int] = (),
        files: Mapping[GitPath, FileValue] | None = None,
        renames: Iterable[tuple[GitPath, GitPath]] = (),
        deleteall: bool = False,
        when: int | None = None,
    ) -> int:
        """Emit a commit on ``ref``; the tree starts from ``parents[0]`` (empty if none)."""
        ops = [self._file_op(path, value) for path, value in (files or {}).items()]
        stamp = self.clock.tick() if when is None else when
        mark = self._mark()
        if not parents:
            self._chunks.append(f"reset {ref}\n\n".encode())
        self._chunks.append(f"commit {ref}\nmark :{mark}\n".encode())
        self._chunks.append(_person("author", AUTHOR_NAME, AUTHOR_EMAIL, stamp))
        self._chunks.append(_person("committer", COMMITTER_NAME, COMMITTER_EMAIL, stamp))
        self._data(message.encode())
        self._chunks += [b"from :%d\n" % parents[0]] if parents else []
        self._chunks += [b"merge :%d\n" % parent for parent in parents[1:]]
        self._chunks += [b"deleteall\n"] if deleteall else []
        self._chunks += [
            b"R " + quote_path(old) + b" " + quote_path(new) + b"\n" for old, new in renames
        ]
        self._chunks += [*ops, b"\n"]
        return mark

    def reset(self, ref: str, mark: int) -> None:
        """Point ``ref`` (a branch or a lightweight tag) at commit ``mark``."""
        self._chunks.append(f"reset {ref}\nfrom :{mark}\n\n".encode())

    def tag(self, name: str, mark: int, message: str, when: int | None = None) -> None:
        """Emit an annotated tag ``refs/tags/<name>`` pointing at commit ``mark``."""
        stamp = self.clock.tick() if when is None else when
        self._chunks.append(f"tag {name}\nfrom :{mark}\n".encode())
        self._chunks.append(_person("tagger", COMMITTER_NAME, COMMITTER_EMAIL, stamp))
        self._data(message.encode())

    def getvalue(self) -> bytes:
        return b"".join([*self._chunks, b"done\n"])

    def run(self, repo: Path) -> None:
        """Feed the stream to ``git fast-import`` in the bare repository ``repo``."""
        git(repo, "fast-import", "--quiet", "--done", input=self.getvalue())


# ----------------------------------------------------------------------- small helpers


def _check_fresh(path: Path) -> None:
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"refusing to build a fixture into non-empty {path}")


def _init_bare(path: Path) -> Path:
    _check_fresh(path)
    path.mkdir(parents=True, exist_ok=True)
    _run(["init", "--quiet", "--bare", "-b", "main", str(path)], cwd=path.parent)
    return path


def _plumbing_commit(repo: Path, files: Mapping[str, bytes], message: str, when: int) -> str:
    """Write a root commit of flat ``files`` as loose objects and point main at it."""
    lines = []
    for name, content in sorted(files.items()):
        blob = git_text_input(repo, content, "hash-object", "-w", "--stdin")
        lines.append(f"{MODE_FILE} blob {blob}\t{name}\n")
    tree = git_text_input(repo, "".join(lines).encode(), "mktree")
    commit = git(repo, "commit-tree", tree, "-m", message, when=when).decode().strip()
    git(repo, "update-ref", "refs/heads/main", commit)
    return commit


def git_text_input(repo: Path, data: bytes, *args: str) -> str:
    """Run git with ``data`` on stdin and return its stripped stdout as text."""
    return git(repo, *args, input=data).decode().strip()


def png_bytes(pixels: Sequence[Sequence[tuple[int, int, int]]]) -> bytes:
    """Encode rows of RGB ``pixels`` as a minimal valid PNG (8-bit truecolour)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    height, width = len(pixels), len(pixels[0])
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)
    # level 0 (stored blocks) keeps the bytes independent of the zlib version
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


# ------------------------------------------------------------------ small repositories


def build_empty(path: Path) -> Path:
    """Bare repository without commits; HEAD is the unborn refs/heads/main."""
    return _init_bare(path)


def build_one(path: Path) -> Path:
    """Bare repository with a single commit adding README.md."""
    _init_bare(path)
    _plumbing_commit(path, {"README.md": b"# One\n\nHello.\n"}, "Initial commit", EPOCH_START)
    return path


def build_solo(path: Path) -> Path:
    """Bare repository with a single commit, meant to live directly below the root."""
    _init_bare(path)
    _plumbing_commit(path, {"README.md": b"# Solo\n\nNo owner.\n"}, "Initial commit", EPOCH_START)
    return path


def build_corrupt(path: Path) -> Path:
    """Bare one-commit repository (loose objects) whose root tree object is deleted."""
    _init_bare(path)
    files = {"README.md": b"# Corrupt\n", "data.txt": b"soon unreadable\n"}
    commit = _plumbing_commit(path, files, "Initial commit", EPOCH_START)
    tree = git_text(path, "rev-parse", f"{commit}^{{tree}}")
    (path / "objects" / tree[:2] / tree[2:]).unlink()
    return path


def build_checkout(path: Path) -> Path:
    """Non-bare working copy with two commits on main and a clean work tree."""
    _check_fresh(path)
    path.mkdir(parents=True, exist_ok=True)
    _run(["init", "--quiet", "-b", "main", str(path)], cwd=path.parent)
    clock = Clock()
    (path / "README.md").write_bytes(b"# Checkout\n\nA working copy.\n")
    git(path, "add", "README.md")
    git(path, "commit", "--quiet", "-m", "Initial commit", when=clock.tick())
    (path / "README.md").write_bytes(b"# Checkout\n\nA working copy with notes.\n")
    (path / "notes.txt").write_bytes(b"some notes\n")
    git(path, "add", "-A")
    git(path, "commit", "--quiet", "-m", "Add notes", when=clock.tick())
    return path


# ----------------------------------------------------------------------------- demo.git

DEMO_README = """\
# Demo

A demonstration repository for **floorless**, with *every* markdown feature we render.

| Feature | Supported | Notes |
| ------- | :-------: | ----- |
| Tables  | yes       | GFM   |
| Code    | yes       | fenced |

```python
def greet(name: str) -> str:
    return f"Hello, {name}!"
```

- [x] write the fixtures
- [ ] ship the forge

<script>alert(1)</script>

<img src=x onerror=alert(1)>

See [the guide](docs/guide.md) and the logo: ![logo](images/logo.png)
"""

DEMO_README_V2 = (
    DEMO_README
    + """
## Changes

- Merged `feature/x`.
- ~~Nothing else~~ yet.
"""
)

DEMO_APP_V1 = '''\
"""A tiny demo application for the floorless fixtures."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass


@dataclass
class Greeting:
    """A greeting for somebody."""

    name: str
    excited: bool = False

    def render(self) -> str:
        mark = "!" if self.excited else "."
        return f"Hello, {self.name}{mark}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Greet people.")
    parser.add_argument("names", nargs="*", default=["world"])
    parser.add_argument("--excited", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    return parser.parse_args(argv)


def greetings(names: list[str], excited: bool) -> list[Greeting]:
    return [Greeting(name, excited) for name in names]


def render_all(items: list[Greeting], repeat: int) -> str:
    lines = []
    for item in items:
        for _ in range(repeat):
            lines.append(item.render())
    return "\\n".join(lines)


class Counter:
    """Counts how often main() ran."""

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> int:
        self.value += 1
        return self.value


COUNTER = Counter()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    COUNTER.bump()
    print(render_all(greetings(args.names, args.excited), args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

DEMO_APP_V2 = DEMO_APP_V1.replace(
    '        mark = "!" if self.excited else "."\n',
    '        mark = "!" if self.excited else "."\n        if not self.name:\n'
    '            return "Hello?"\n',
).replace(
    "COUNTER = Counter()\n",
    'COUNTER = Counter()\n\n\ndef shout(text: str) -> str:\n    return text.upper() + "!"\n',
)

DEMO_GUIDE_V1 = """\
# Guide

1. Clone the repository.
2. Run `python src/app.py Ada --excited`.

> Note: this guide is deliberately short.
"""

DEMO_GUIDE_V2 = (
    DEMO_GUIDE_V1
    + """
## Feature X

Feature X lives in [feature.md](feature.md).
"""
)

DEMO_GITMODULES = f"""\
[submodule "vendor/lib"]
\tpath = vendor/lib
\turl = {DEMO_SUBMODULE_URL}
"""


def _big_txt() -> bytes:
    lines: list[bytes] = []
    size, number = 0, 0
    while size < DEMO_BIG_TXT_MIN_SIZE:
        line = b"%07d the quick brown fox jumps over the lazy dog %05d\n" % (
            number,
            number * 7919 % 10007,
        )
        lines.append(line)
        size += len(line)
        number += 1
    return b"".join(lines)


def _demo_files() -> dict[str, Mapping[GitPath, FileValue]]:
    """The file changes of each main commit of demo.git, in order."""
    logo = png_bytes([[(255, 0, 0), (0, 255, 0)], [(0, 0, 255), (255, 255, 255)]])
    return {
        "Initial commit": {"README.md": DEMO_README.encode(), "src/app.py": DEMO_APP_V1.encode()},
        "Add the guide": {
            "docs/guide.md": DEMO_GUIDE_V1.encode(),
            "old_name.txt": b"This file gets renamed.\nIts content stays the same.\n",
        },
        "Add binary files": {
            "data/blob.bin": bytes(range(256)) * 16,
            "images/logo.png": logo,
        },
        "Add a big file": {"big.txt": _big_txt()},
        "Add awkward file names": {
            "no_newline.txt": b"this line has no trailing newline",
            "name with spaces.txt": b"spaces in the name\n",
            DEMO_UNICODE_PATH: "\u00fcn\u00efc\u00f8d\u00e9 content \u2713\n".encode(),
        },
        "Add an invalid UTF-8 name and a symlink": {
            DEMO_INVALID_UTF8_PATH: b"latin bytes\n",
            "link-to-readme": Entry(b"README.md", MODE_SYMLINK),
        },
        "Vendor lib as a submodule": {
            ".gitmodules": DEMO_GITMODULES.encode(),
            "vendor/lib": Entry(DEMO_GITLINK_COMMIT.encode(), MODE_GITLINK),
        },
    }


def _demo_stream() -> FastImportStream:
    stream = FastImportStream()
    main = "refs/heads/main"
    marks: list[int] = []
    for message, files in _demo_files().items():
        marks.append(stream.commit(main, message + "\n", marks[-1:], files))
        if message == "Add awkward file names":
            feature_files: dict[GitPath, FileValue] = {
                "docs/guide.md": DEMO_GUIDE_V2.encode(),
                "docs/feature.md": b"# Feature X\n\nIt does X.\n",
            }
            feature = stream.commit(
                "refs/heads/feature/x", "Add feature X\n", marks[-1:], feature_files
            )
    stream.reset("refs/tags/v1.0", marks[-2])
    renamed = stream.commit(
        main,
        "Rename old_name.txt to docs/renamed.txt\n",
        marks[-1:],
        renames=[("old_name.txt", "docs/renamed.txt")],
    )
    stream.tag("release", renamed, "The release tag (not the release branch)\n")
    deep = stream.commit(
        main, "Add a deep tree\n", [renamed], {"a/b/c/d/e/f/g/h/deep.txt": b"deep down\n"}
    )
    stream.reset("refs/heads/release", deep)
    improved = stream.commit(main, "Improve app.py\n", [deep], {"src/app.py": DEMO_APP_V2.encode()})
    merged = stream.commit(main, "Merge branch 'feature/x'\n", [improved, feature], feature_files)
    final = stream.commit(main, "Update README\n", [merged], {"README.md": DEMO_README_V2.encode()})
    stream.tag("v2.0", final, "Version 2.0\n\nWith feature X.\n")
    return stream


def build_demo(path: Path) -> Path:
    """Bare repository exercising paths, modes, binaries, renames, tags and a merge."""
    _init_bare(path)
    _demo_stream().run(path)
    return path


# --------------------------------------------------------------------------- merges.git


class _TreeCommits:
    """Commits whose full tree is tracked here and written with ``deleteall``."""

    def __init__(self, stream: FastImportStream) -> None:
        self.stream = stream
        self.trees: dict[int, dict[str, bytes]] = {}

    def commit(
        self,
        ref: str,
        message: str,
        parents: Sequence[int] = (),
        changes: Mapping[str, bytes | None] | None = None,
        when: int | None = None,
    ) -> int:
        """Commit ``parents[0]``'s tree with ``changes`` applied (None deletes)."""
        tree = dict(self.trees[parents[0]]) if parents else {}
        for path, content in (changes or {}).items():
            if content is None:
                del tree[path]
            else:
                tree[path] = content
        files: dict[GitPath, FileValue] = dict(tree.items())
        mark = self.stream.commit(
            f"refs/heads/{ref}", message + "\n", parents, files, deleteall=True, when=when
        )
        self.trees[mark] = tree
        return mark


def _merges_topics(repo: _TreeCommits) -> dict[str, int]:
    """main plus topic-a/b/c merged in various orders, with evil merges and a rename."""
    c = repo.commit
    m1 = c(
        "main",
        "Initial commit",
        [],
        {
            "README": b"merges fixture\n",
            "lib/a.txt": b"a1\n",
            "lib/c.txt": b"c1\n",
            "top.txt": b"top1\n",
        },
    )
    m2 = c("main", "Change top", [m1], {"top.txt": b"top2\n"})
    m3 = c("main", "Change README", [m2], {"README": b"merges fixture v2\n"})
    a1 = c("topic-a", "topic-a: change lib/a.txt", [m3], {"lib/a.txt": b"a2 (topic-a)\n"})
    a2 = c("topic-a", "topic-a: change lib/c.txt", [a1], {"lib/c.txt": b"c2 (topic-a)\n"})
    b1 = c("topic-b", "topic-b: change top", [m2], {"top.txt": b"top3 (topic-b)\n"})
    m4 = c("main", "README v3", [m3], {"README": b"merges fixture v3\n"})
    b2 = c("topic-b", "topic-b: change lib/c.txt", [b1], {"lib/c.txt": b"c1\nc-b\n"})
    # lib/a.txt: TREESAME to the second parent only
    m_a = c(
        "main",
        "Merge branch 'topic-a'",
        [m4, a2],
        {"lib/a.txt": b"a2 (topic-a)\n", "lib/c.txt": b"c2 (topic-a)\n"},
    )
    b3 = c(
        "topic-b", "Merge an old main into topic-b", [b2, m3], {"README": b"merges fixture v2\n"}
    )
    m5 = c("main", "Delete top.txt", [m_a], {"top.txt": None})
    c1 = c("topic-c", "topic-c: add lib/d.txt", [m1], {"lib/d.txt": b"d1\n"})
    c2 = c("topic-c", "topic-c: change top", [c1], {"top.txt": b"top (topic-c)\n"})
    # evil merge: top.txt and lib/c.txt differ from every parent
    m_b = c(
        "main",
        "Merge branch 'topic-b'",
        [m5, b3],
        {"top.txt": b"top resolved\n", "lib/c.txt": b"c2 (topic-a)\nc-b\n"},
    )
    m6 = c(
        "main",
        "Rename lib/a.txt to lib/b.txt",
        [m_b],
        {"lib/a.txt": None, "lib/b.txt": b"a2 (topic-a)\n"},
    )
    c3 = c(
        "topic-c",
        "Merge main into topic-c",
        [c2, m_a],
        {
            "lib/a.txt": b"a2 (topic-a)\n",
            "lib/c.txt": b"c2 (topic-a)\n",
            "README": b"merges fixture v3\n",
        },
    )
    m_c = c("main", "Merge branch 'topic-c'", [m6, c3], {"lib/d.txt": b"d1\n"})
    return {"b3": b3, "m6": m6, "main": m_c}


def _merges_crossing(repo: _TreeCommits, marks: dict[str, int]) -> dict[str, int]:
    """A criss-cross merge, equal timestamps, a deleted and re-added file, topic-b again."""
    c = repo.commit
    m7 = c("main", "Extend lib/d.txt", [marks["main"]], {"lib/d.txt": b"d1\nd-main\n"})
    x1 = c("cross-x", "cross-x: add lib/x.txt", [m7], {"lib/x.txt": b"x1\n"})
    y1 = c("cross-y", "cross-y: add lib/y.txt", [m7], {"lib/y.txt": b"y1\n"})
    x2 = c("cross-x", "Merge cross-y into cross-x", [x1, y1], {"lib/y.txt": b"y1\n"})
    y2 = c("cross-y", "Merge cross-x into cross-y", [y1, x1], {"lib/x.txt": b"x1\n"})
    same = repo.stream.clock.tick()
    x3 = c("cross-x", "cross-x: change lib/x.txt", [x2], {"lib/x.txt": b"x2\n"}, when=same)
    y3 = c("cross-y", "cross-y: change lib/y.txt", [y2], {"lib/y.txt": b"y2\n"}, when=same)
    m8 = c("main", "Delete lib/c.txt", [m7], {"lib/c.txt": None})
    m_x = c(
        "main", "Merge branch 'cross-x'", [m8, x3], {"lib/x.txt": b"x2\n", "lib/y.txt": b"y1\n"}
    )
    m_y = c("main", "Merge branch 'cross-y'", [m_x, y3], {"lib/y.txt": b"y2\n"})
    m9 = c("main", "Re-add lib/c.txt", [m_y], {"lib/c.txt": b"c reborn\n"})
    d1 = c(
        "topic-d",
        "topic-d: change lib/c.txt",
        [marks["m6"]],
        {"lib/c.txt": b"c2 (topic-a)\nc-b\nc-d\n"},
    )
    d2 = c("topic-d", "topic-d: change README", [d1], {"README": b"merges fixture v3\ntopic-d\n"})
    # lib/c.txt: TREESAME to the first parent only (topic-d's change is dropped)
    m_d = c("main", "Merge branch 'topic-d'", [m9, d2], {"README": b"merges fixture v3\ntopic-d\n"})
    m10 = c("main", "Change top again", [m_d], {"top.txt": b"top5\n"})
    b4 = c(
        "topic-b", "topic-b: change top again", [marks["b3"]], {"top.txt": b"top (topic-b again)\n"}
    )
    m_b2 = c(
        "main", "Merge branch 'topic-b' again", [m10, b4], {"top.txt": b"top (topic-b again)\n"}
    )
    return {"main": c("main", "Final README", [m_b2], {"README": b"merges fixture, the end\n"})}


def _merges_stream() -> FastImportStream:
    repo = _TreeCommits(FastImportStream())
    _merges_crossing(repo, _merges_topics(repo))
    return repo.stream


def build_merges(path: Path) -> Path:
    """Bare repository stressing ``git log -- path`` history simplification.

    35 commits in all (branches main, topic-a..topic-d, cross-x, cross-y).  Highlights:
    topic-a's merge is TREESAME to its second parent for lib/a.txt; topic-b is merged twice
    and its first merge is evil (top.txt and lib/c.txt differ from both parents; top.txt had
    been deleted on main); lib/a.txt is renamed to lib/b.txt; main is merged into topic-c
    before main merges topic-c; cross-x and cross-y merge each other (criss-cross) and their
    tips share one timestamp; lib/c.txt is deleted and re-added on main; topic-d's lib/c.txt
    change is dropped by its merge (TREESAME to the first parent only).
    """
    _init_bare(path)
    _merges_stream().run(path)
    return path


# -------------------------------------------------------------------------- history.git


def history_path(number: int) -> str:
    """The path that history.git's main commit ``number`` changes."""
    index = number % HISTORY_FILES
    return f"dir{index % 5}/file{index:02d}.txt"


def _history_content(number: int) -> bytes:
    return b"%s\nlast changed by commit %d\n" % (history_path(number).encode(), number)


def _history_changes(number: int) -> dict[GitPath, FileValue]:
    changes: dict[GitPath, FileValue] = {history_path(number): _history_content(number)}
    if number == 1:
        changes.update({history_path(i): b"initial\n" for i in range(HISTORY_FILES)})
    if number in HISTORY_RARE_COMMITS:
        changes["rare.txt"] = b"rare change in commit %d\n" % number
    if number in HISTORY_README_COMMITS:
        changes["README.md"] = b"# History\n\nREADME as of commit %d.\n" % number
    return changes


def _history_side(
    stream: FastImportStream, number: int, base: int
) -> tuple[int, dict[GitPath, FileValue]]:
    """A two-commit side branch off ``base``; returns its tip and its combined changes."""
    # main commits number-3..number-1 touch files 47..49; stay clear of those
    shared = history_path(5 + (number // HISTORY_MERGE_EVERY) % 40)
    first: dict[GitPath, FileValue] = {f"side/topic{number}.txt": b"side topic %d\n" % number}
    second: dict[GitPath, FileValue] = {
        shared: b"%s\nchanged on side %d\n" % (shared.encode(), number)
    }
    one = stream.commit("refs/heads/side", f"side {number}: add a topic file\n", [base], first)
    two = stream.commit("refs/heads/side", f"side {number}: change {shared}\n", [one], second)
    return two, {**first, **second}


def _history_stream() -> FastImportStream:
    stream = FastImportStream()
    marks: list[int] = []
    for number in range(1, HISTORY_COMMITS + 1):
        if number % HISTORY_MERGE_EVERY == HISTORY_MERGE_OFFSET:
            tip, changes = _history_side(stream, number, marks[-4])
            message = f"commit {number}: merge side branch\n"
            marks.append(stream.commit("refs/heads/main", message, [marks[-1], tip], changes))
            continue
        parents = marks[-1:]
        message = f"commit {number}\n"
        marks.append(stream.commit("refs/heads/main", message, parents, _history_changes(number)))
    return stream


def build_history(path: Path) -> Path:
    """Bare repository with 10,500 first-parent commits on main (one fast-import run).

    Main commit ``n`` has the subject ``commit n`` and changes :func:`history_path` ``(n)``;
    every 500th commit (n % 500 == 250) instead merges a two-commit side branch.
    ``rare.txt`` changes only in commits 3, 4000 and 9000.
    """
    _init_bare(path)
    _history_stream().run(path)
    return path


# ------------------------------------------------------------------------- many refs


def many_refs_tag(number: int) -> str:
    """The name of many-refs tag ``number`` (on main's commit ``number``): unpadded, so that
    names sort otherwise than dates (rel-10 before rel-9)."""
    return f"rel-{number}"


def many_refs_branch(number: int) -> str:
    return f"topic/b{number}"


def build_many_refs(path: Path, tags: int, branches: int, commits: int = 1000) -> Path:
    """Bare repository with ``commits`` commits on main (the first adds README.md and src/,
    each later one changes counter.txt), ``tags`` tags (tag ``n`` on commit ``n``, every tenth
    annotated) and ``branches`` branches besides main (branch ``n`` on commit ``7n % commits``,
    so that the branches' dates run otherwise than their names). The same ``commits`` give
    the same main, whatever the refs: pages of two such repositories differ in refs alone."""
    if not 0 <= tags <= commits:
        raise ValueError("at most one tag a commit")
    _init_bare(path)
    stream = FastImportStream()
    marks = [
        stream.commit(
            "refs/heads/main",
            "commit 1\n",
            files={
                "README.md": b"# Many refs\n",
                "src/app.py": b"print('hello')\n",
                "src/util.py": b"def util():\n    return 1\n",
                "counter.txt": b"1\n",
            },
        )
    ]
    for number in range(2, commits + 1):
        change: dict[GitPath, FileValue] = {"counter.txt": b"%d\n" % number}
        marks.append(stream.commit("refs/heads/main", f"commit {number}\n", marks[-1:], change))
    for number in range(1, tags + 1):
        name, mark = many_refs_tag(number), marks[number - 1]
        if number % 10 == 0:
            stream.tag(name, mark, f"release {number}\n")
        else:
            stream.reset(f"refs/tags/{name}", mark)
    for number in range(1, branches + 1):
        stream.reset(f"refs/heads/{many_refs_branch(number)}", marks[(7 * number) % commits])
    stream.run(path)
    return path


# ---------------------------------------------------------------------------- build_all

BUILDERS: dict[str, Callable[[Path], Path]] = {
    "alice/empty.git": build_empty,
    "alice/one.git": build_one,
    "alice/demo.git": build_demo,
    "alice/history.git": build_history,
    "alice/corrupt.git": build_corrupt,
    "bob/merges.git": build_merges,
    "carol/checkout": build_checkout,
    "solo.git": build_solo,
}


def build_all(root: Path) -> dict[str, Path]:
    """Build every fixture repository below ``root``; keys are paths relative to root."""
    return {name: builder(root / name) for name, builder in BUILDERS.items()}
