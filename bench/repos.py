"""Deterministic benchmark repositories, and the pages to measure in any real repository.

``build(kind, dest)`` writes a bare repository with ONE ``git fast-import`` run under an
isolated git environment (``HOME`` in a temporary directory, ``GIT_CONFIG_NOSYSTEM=1``,
``GIT_CONFIG_GLOBAL=/dev/null``, ``LC_ALL=C``, ``TZ=UTC``), a fixed author and committer,
commit ``i`` dated ``EPOCH + 60 * i``, and content drawn from ``random.Random`` generators
with fixed seeds: the same kind always yields the same commit ids.

=========  =======  =====  ==========  ==================================================
kind       commits  files  max depth   the ~500-line file (``BenchRepo.file``)
=========  =======  =====  ==========  ==================================================
small          500    200  3           ``src/core/engine.py``
medium      10,000  2,000  6           ``src/core/runtime/scheduler/backends/local/engine.py``
large      100,000  2,000  6           the same deep path
wide       100,000  2,000  6           the same deep path
=========  =======  =====  ==========  ==================================================

``wide`` is ``large`` with a root shaped like git.git's: 440 more files at the root (~450
entries), a third of which only the root commit has (unchanged since, as many of git.git's
root files are for years), the others changed as any file is.

Every kind has:

- ``README.md`` at the root and ``src/core/engine.py``, a ~500-line Python module that
  changes every 50 commits (commits 50, 100, ...), a few statements at a time, so that blame
  shows many groups. In medium and large the deep ``.../local/engine.py`` is the benchmark's
  file and changes every 50 commits too (commits 25, 75, ...); ``src/core/engine.py`` stays
  available at the same path in every kind.
- ``docs/rare.md``: created by the root commit and changed twice more (at 40% and 85% of the
  history), so ``git log -- docs/rare.md`` walks the whole history for 3 commits.
- a side branch merged every 200 commits: ``refs/heads/feature`` forks from ``main`` at
  commit 200k+120, gets commits 200k+120/140/160 and is merged into ``main`` at 200k+180;
  ``git rev-list --count main`` is exactly the kind's commit count (the last ``feature``
  tip is merged too).
- every other commit changes 1-4 ordinary files (``.py``, ``.md``, ``.txt``, ``.toml``).

The stream lists every blob first, grouped by path and in version order, then the commits,
which refer to blobs by mark: fast-import deltas each blob against the one stored just
before it, so consecutive versions of a file delta against each other and the pack stays
small. The pack fast-import writes is kept as it is (no ``git repack``, no ``git gc``);
afterwards ``git commit-graph write --reachable --changed-paths`` writes a commit-graph with
Bloom filters, the best case for the contenders that run git. The marker file
(``bench-repo.json``, the :class:`BenchRepo` minus its path) is written last: a directory
without it is an incomplete build, which :func:`ensure` removes and builds again.

``from_path(path)`` picks the same pages in any real repository (see its docstring).

Command line: ``python -m bench.repos build KIND DEST`` (also ``ensure KIND CACHE_DIR`` and
``inspect PATH``); each prints the :class:`BenchRepo` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

SIZES: dict[str, tuple[int, int]] = {
    "small": (500, 200),
    "medium": (10_000, 2_000),
    "large": (100_000, 2_000),
    "wide": (100_000, 2_000),
}
MAX_DEPTH = {"small": 3, "medium": 6, "large": 6, "wide": 6}
ROOT_FILES = {"wide": 440}  # more files at the root; every third is never changed again

BRANCH = "main"
SIDE_BRANCH = "feature"
README = "README.md"
ENGINE = "src/core/engine.py"
DEEP_ENGINE = "src/core/runtime/scheduler/backends/local/engine.py"
RARE_PATH = "docs/rare.md"
MARKER = "bench-repo.json"
FORMAT = 1  # bump when the generator changes: cached repositories are rebuilt

EPOCH = 1_700_000_000
STEP = 60
AUTHOR = "Bench Author <author@bench.example>"
COMMITTER = "Bench Committer <committer@bench.example>"
SEED = 20_240_601
ENGINE_EVERY = 50
MERGE_EVERY = 200
SIDE_AT = (120, 140, 160)  # offsets within each MERGE_EVERY block
MERGE_AT = 180
RARE_AT = (0.40, 0.85)  # fractions of the history
ENGINE_LINES = 500
# Files changed only on their own schedule (never as one of a commit's "few files").
_FIXED = frozenset({README, "LICENSE", "pyproject.toml", ENGINE, DEEP_ENGINE, RARE_PATH})

_GIT = shutil.which("git") or "/usr/bin/git"


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_NOUNS = _words(
    "cache queue worker session buffer token index record batch stream handler request response "
    "config schema snapshot segment cursor ledger router channel payload policy registry signal "
    "task timer window digest lease quota shard replica journal"
)
_VERBS = _words(
    "load flush merge split resolve encode decode validate refresh publish collect render parse "
    "dispatch compact rotate prune sync retry restore drain seal"
)
_ADJS = _words(
    "pending stale active local remote cached dirty primary shadow default partial frozen"
)
_DIRS = _words(
    "api auth cache cli config db events http io jobs models net parser plugins render schema "
    "server storage tasks ui utils web workers hooks codec metrics admin billing search sync mail "
    "queue"
)
_TYPES = ("int", "str", "float", "bool", "bytes", "list[str]", "dict[str, int]", "Task", "Lease")
_EXTS = (".py", ".py", ".py", ".py", ".md", ".txt", ".toml")


@dataclass
class BenchRepo:
    """A repository to benchmark and the paths its pages use (all relative to its root)."""

    path: Path  # the git directory
    kind: str
    branch: str
    file: str  # a ~500-line text file: the file, raw and blame pages
    directory: str  # a subdirectory: the tree page
    history_path: str  # the path-history page
    commits: int  # commits reachable from ``branch``


# ------------------------------------------------------------------------------ running git


def git_env(home: Path) -> dict[str, str]:
    """The isolated environment every git command of this module runs with."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        "TZ": "UTC",
    }


def fast_import(dest: Path, branch: str, write: Callable[[IO[bytes]], None]) -> None:
    """A new bare repository at ``dest`` on ``branch``, filled by one ``git fast-import``
    whose input ``write`` writes (up to and including ``done``), in an isolated git HOME."""
    git = shutil.which("git") or "git"
    with tempfile.TemporaryDirectory(prefix="bench-git-home-") as tmp:
        env = git_env(Path(tmp))
        subprocess.run(
            [git, "init", "--quiet", "--bare", f"--initial-branch={branch}", str(dest)],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )
        proc = subprocess.Popen(
            [git, f"--git-dir={dest}", "fast-import", "--quiet", "--done"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        assert proc.stdin is not None
        with proc.stdin:
            write(proc.stdin)
        if proc.wait() != 0:
            raise RuntimeError("git fast-import failed")


def _git(git_dir: Path, home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [_GIT, f"--git-dir={git_dir}", *args],
        env=git_env(home),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"git {' '.join(args)} failed ({proc.returncode}): {err}")
    return proc.stdout


# ------------------------------------------------------------------------------ content


def _plural(noun: str) -> str:
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_ADJS)}_{rng.choice(_NOUNS)}"


def _statement(rng: random.Random) -> str:
    """One line of plausible Python (a complete statement, valid at any indentation)."""
    a, b = _name(rng), _name(rng)
    noun, verb, num = rng.choice(_NOUNS), rng.choice(_VERBS), rng.randint(1, 512)
    choice = rng.randrange(10)
    if choice == 0:
        return f"{a} = self._{_plural(noun)}.get({b!r}, {num})"
    if choice == 1:
        return f"{a} = [item.{noun} for item in {b} if item.{rng.choice(_ADJS)}]"
    if choice == 2:
        return f"self._{_plural(noun)}[{a}] = {b}"
    if choice == 3:
        return f'log.debug("{verb} %s {noun} in %.3fs", {a}, time.monotonic() - {b})'
    if choice == 4:
        return f"{a} = max({b}, self.{noun}_limit - {num})"
    if choice == 5:
        return f"{a} += len(self._{_plural(noun)}) * {num}"
    if choice == 6:
        return f"{a} = self.{verb}_{noun}({b}, retries={num % 7})"
    if choice == 7:
        return f"if {a} is None: {a} = {b}"
    if choice == 8:
        return f"{a}.extend({b}[:{num}])"
    return f'assert {a} >= 0, "{noun} underflow"'


@dataclass
class _Function:
    header: list[str]  # the def line and the docstring
    body: list[str]  # statements, indentation included
    footer: list[str]  # the return line and a blank line


class _Engine:
    """A ~500-line Python module whose function bodies are rewritten a few lines at a time."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        self.parts: list[list[str] | _Function] = [
            [
                '"""Execution engine: schedules tasks onto workers, with retries and leases."""',
                "",
                "from __future__ import annotations",
                "",
                "import logging",
                "import threading",
                "import time",
                "from collections import deque",
                "from dataclasses import dataclass, field",
                "",
                "log = logging.getLogger(__name__)",
                "",
                f"MAX_RETRIES = {rng.randint(3, 9)}",
                f"LEASE_SECONDS = {rng.randint(10, 90)}.0",
                f"QUEUE_LIMIT = {rng.randint(64, 4096)}",
                "",
            ]
        ]
        lines = sum(len(p) for p in self.parts if isinstance(p, list))
        while lines < ENGINE_LINES - 10:
            adj, noun, verb = rng.choice(_ADJS), rng.choice(_NOUNS), rng.choice(_VERBS)
            cls = f"{adj.title()}{noun.title()}{verb.title()}er"
            kept = _plural(rng.choice(_NOUNS))
            head = [
                "",
                f"class {cls}:",
                f'    """Keeps {rng.choice(_ADJS)} {kept} for the {noun} loop."""',
                "",
                f"    def __init__(self, capacity: int = {rng.randint(8, 256)}) -> None:",
                "        self.capacity = capacity",
                "        self._lock = threading.Lock()",
                "        self._pending: deque[object] = deque()",
                "",
            ]
            self.parts.append(head)
            lines += len(head)
            for _ in range(rng.randint(5, 9)):
                function = self._function(rng, "    ")
                self.parts.append(function)
                lines += len(function.header) + len(function.body) + len(function.footer)
                if lines >= ENGINE_LINES - 10:
                    break

    @staticmethod
    def _function(rng: random.Random, indent: str) -> _Function:
        verb, noun, adj = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_ADJS)
        arg, kind = _name(rng), rng.choice(_TYPES)
        inner = indent + "    "
        return _Function(
            header=[
                f"{indent}def {verb}_{noun}(self, {arg}: {kind}, limit: int = {rng.randint(1, 99)})"
                f" -> {rng.choice(_TYPES)}:",
                f'{inner}"""{verb.title()} the {adj} {noun} of ``{arg}``,'
                ' at most ``limit`` at once."""',
            ],
            body=[inner + _statement(rng) for _ in range(rng.randint(5, 10))],
            footer=[f"{inner}return {arg}", ""],
        )

    def text(self) -> bytes:
        out: list[str] = []
        for part in self.parts:
            out.extend(part if isinstance(part, list) else part.header + part.body + part.footer)
        while out and not out[-1]:
            out.pop()
        return ("\n".join(out) + "\n").encode()

    def lines(self) -> int:
        return sum(
            len(p) if isinstance(p, list) else len(p.header) + len(p.body) + len(p.footer)
            for p in self.parts
        )

    def change(self) -> None:
        """Rewrite 2-5 consecutive statements of one function; keep the length near 500."""
        rng = self.rng
        functions = [p for p in self.parts if isinstance(p, _Function)]
        body = rng.choice(functions).body
        indent = body[0][: len(body[0]) - len(body[0].lstrip())]
        count = min(len(body), rng.randint(2, 5))
        start = rng.randrange(len(body) - count + 1)
        for index in range(start, start + count):
            body[index] = indent + _statement(rng)
        total = self.lines()
        if total < ENGINE_LINES - 10 or (total < ENGINE_LINES + 10 and rng.random() < 0.3):
            body.insert(start, indent + _statement(rng))
        elif len(body) > 3 and (total > ENGINE_LINES + 10 or rng.random() < 0.3):
            del body[start]


def _filler_line(rng: random.Random, ext: str) -> str:
    words = " ".join(rng.choice(_NOUNS + _VERBS + _ADJS) for _ in range(rng.randint(3, 8)))
    if ext == ".py":
        return f"{_name(rng).upper()} = {rng.choice([str(rng.randint(0, 9999)), repr(words)])}"
    if ext == ".toml":
        return f'{_name(rng)} = "{words}"'
    return words.capitalize() + "."


def _filler_versions(path: str, count: int) -> Iterator[bytes]:
    """``count`` successive versions of an ordinary file: each changes, adds or drops a line."""
    rng = random.Random(f"{SEED}:{path}")
    ext = os.path.splitext(path)[1]
    title = os.path.basename(path)
    if ext == ".py":
        head = [
            f'"""{title}: {rng.choice(_VERBS)} helpers for {_plural(rng.choice(_NOUNS))}."""',
            "",
        ]
    elif ext == ".toml":
        head = [f"[{rng.choice(_NOUNS)}]"]
    else:
        head = [f"# {title}", ""]
    body = [_filler_line(rng, ext) for _ in range(rng.randint(6, 24))]
    for version in range(count):
        if version:
            roll = rng.random()
            if roll < 0.2 and len(body) < 40:
                body.insert(rng.randrange(len(body) + 1), _filler_line(rng, ext))
            elif roll < 0.3 and len(body) > 4:
                del body[rng.randrange(len(body))]
            else:
                body[rng.randrange(len(body))] = _filler_line(rng, ext)
        yield ("\n".join(head + body) + "\n").encode()


def _readme_versions(kind: str, count: int) -> Iterator[bytes]:
    commits, files = SIZES[kind]
    text = f"""# bench-{kind}

A deterministic repository for the floorless benchmark: {commits:,} commits, {files:,} files.

## Layout

- `src/` holds the code; `src/core/engine.py` is the module whose history blame shows.
- `docs/` holds the documentation; `docs/rare.md` changes three times in all.
- `tests/` holds the tests.

## Building

```sh
python -m bench.repos build {kind} /tmp/{kind}.git
```

Every commit is dated 60 s after the one before it, all by the same author.
"""
    for _ in range(count):
        yield text.encode()


def _rare_versions(count: int) -> Iterator[bytes]:
    text = "# Rarely changed\n\nThis page changes three times in the whole history.\n"
    for version in range(count):
        if version:
            text += f"\n## Revision {version + 1}\n\nChanged once more.\n"
        yield text.encode()


def _engine_versions(path: str, count: int) -> Iterator[bytes]:
    engine = _Engine(f"{SEED}:{path}")
    for version in range(count):
        if version:
            engine.change()
        yield engine.text()


# ------------------------------------------------------------------------------ layout


def _layout(kind: str) -> tuple[list[str], str, str]:
    """Every file path (special files first), the benchmark file, the tree page's directory."""
    _, files = SIZES[kind]
    depth = MAX_DEPTH[kind]
    rng = random.Random(f"{SEED}:{kind}:layout")
    deep = depth >= 6
    main_file = DEEP_ENGINE if deep else ENGINE
    directory = "src/core/runtime/scheduler" if deep else "src/core"
    dirs = ["src", "src/core", "tests", "docs", "tools"]
    if deep:
        parts = DEEP_ENGINE.split("/")[:-1]
        dirs += ["/".join(parts[:n]) for n in range(3, len(parts) + 1)]
    for _ in range(files // 10 - len(dirs)):
        parent = rng.choice([d for d in dirs if d.count("/") + 1 < depth])
        dirs.append(f"{parent}/{rng.choice(_DIRS)}")
    dirs = list(dict.fromkeys(dirs))
    special = [README, "LICENSE", "pyproject.toml", "CHANGELOG.md", ENGINE, RARE_PATH]
    if deep:
        special.append(DEEP_ENGINE)
    taken = set(special)
    paths = list(special)

    def add(folder: str) -> None:
        while True:
            name = f"{rng.choice(_NOUNS)}_{rng.choice(_VERBS)}{rng.choice(_EXTS)}"
            path = f"{folder}/{name}" if folder else name
            if path not in taken:
                taken.add(path)
                paths.append(path)
                return

    for _ in range(12):  # the tree page's directory lists a screenful
        add(directory)
    for _ in range(ROOT_FILES.get(kind, 0)):
        add("")
    while len(paths) < files:
        add(rng.choice(dirs))
    return paths, main_file, directory


# ------------------------------------------------------------------------------ history


@dataclass
class _Commit:
    number: int
    parents: list[int]
    branch: str
    message: str
    changes: list[tuple[int, int]]  # (path index, version index)


def _schedule(kind: str, paths: Sequence[str]) -> tuple[list[_Commit], list[int]]:
    """Every commit in order and the number of versions of every path."""
    total, _ = SIZES[kind]
    rng = random.Random(f"{SEED}:{kind}:history")
    index = {path: n for n, path in enumerate(paths)}
    if DEEP_ENGINE in index:  # the deep engine at 50, 100, ...; src/core/engine.py at 25, 75, ...
        engines = {0: index[DEEP_ENGINE], ENGINE_EVERY // 2: index[ENGINE]}
    else:
        engines = {0: index[ENGINE]}
    rare_at = set()
    for fraction in RARE_AT:
        at = round(total * fraction) + 3
        while _role(at, total) != "main":
            at += 1
        rare_at.add(at)
    frozen = set()
    if kind in ROOT_FILES:  # every third of the root's added files: the root commit's alone
        added = [n for n, path in enumerate(paths) if "/" not in path and path not in _FIXED]
        frozen = set(added[1::3])
    pool = [n for n, path in enumerate(paths) if path not in _FIXED and n not in frozen]
    versions = [1] * len(paths)
    commits = [_Commit(1, [], BRANCH, "Initial import", [(n, 0) for n in range(len(paths))])]
    main_tip, side_tip = 1, 0
    reserved: list[int] = []
    touched: set[int] = set()

    def bump(path: int) -> tuple[int, int]:
        versions[path] += 1
        return (path, versions[path] - 1)

    for number in range(2, total + 1):
        role = _role(number, total)
        if role == "merge":
            changes = [(p, versions[p] - 1) for p in sorted(touched)]
            commits.append(
                _Commit(
                    number,
                    [main_tip, side_tip],
                    BRANCH,
                    f"Merge branch '{SIDE_BRANCH}' into {BRANCH}",
                    changes,
                )
            )
            main_tip, reserved, touched = number, [], set()
            continue
        if role == "side":
            if number % MERGE_EVERY == SIDE_AT[0]:
                reserved, side_tip = rng.sample(pool, 6), main_tip
            picked = rng.sample(reserved, rng.randint(1, 2))
            touched.update(picked)
            verb, noun = rng.choice(_VERBS), _plural(rng.choice(_NOUNS))
            message = f"{_area(paths[picked[0]])}: {verb} {noun} early"
            commits.append(
                _Commit(number, [side_tip], SIDE_BRANCH, message, [bump(p) for p in picked])
            )
            side_tip = number
            continue
        changed: list[int] = []
        engine = engines.get(number % ENGINE_EVERY)
        if engine is not None:
            changed.append(engine)
        if number in rare_at:
            changed.append(index[RARE_PATH])
        extra = rng.choice((0, 1)) if changed else rng.choice((1, 1, 2, 2, 3, 4))
        while extra:
            candidate = rng.choice(pool)
            if candidate not in reserved and candidate not in changed:
                changed.append(candidate)
                extra -= 1
        verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
        message = f"{_area(paths[changed[0]])}: {verb} {rng.choice(_ADJS)} {_plural(noun)}"
        if rng.random() < 0.3:
            message += f"\n\n{verb.title()} each {noun} once per {rng.choice(_NOUNS)} from now on."
        commits.append(_Commit(number, [main_tip], BRANCH, message, [bump(p) for p in changed]))
        main_tip = number
    return commits, versions


def _role(number: int, total: int) -> str:
    block = number - number % MERGE_EVERY
    if block + MERGE_AT > total:  # no side branch that would not be merged in time
        return "main"
    offset = number % MERGE_EVERY
    if offset in SIDE_AT:
        return "side"
    return "merge" if offset == MERGE_AT else "main"


def _area(path: str) -> str:
    parts = path.split("/")
    return parts[-2] if len(parts) > 1 else parts[0].split(".")[0].lower()


def _versions(kind: str, path: str, count: int) -> Iterator[bytes]:
    if path == README:
        return _readme_versions(kind, count)
    if path == RARE_PATH:
        return _rare_versions(count)
    if path in (ENGINE, DEEP_ENGINE):
        return _engine_versions(path, count)
    return _filler_versions(path, count)


def _write_stream(out: IO[bytes], kind: str, paths: Sequence[str]) -> None:
    """The whole fast-import stream: blobs grouped by path, then the commits."""
    commits, versions = _schedule(kind, paths)
    first_blob = len(commits) + 1
    offsets: list[int] = []
    running = first_blob
    for count in versions:
        offsets.append(running)
        running += count
    for n, path in enumerate(paths):
        for version, data in enumerate(_versions(kind, path, versions[n])):
            out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (offsets[n] + version, len(data), data))
    for commit in commits:
        when = EPOCH + STEP * commit.number
        message = commit.message.encode() + b"\n"
        chunk = [
            b"commit refs/heads/%s\nmark :%d\n" % (commit.branch.encode(), commit.number),
            b"author %s %d +0000\n" % (AUTHOR.encode(), when),
            b"committer %s %d +0000\n" % (COMMITTER.encode(), when),
            b"data %d\n%s" % (len(message), message),
        ]
        if commit.parents:
            chunk.append(b"from :%d\n" % commit.parents[0])
        chunk.extend(b"merge :%d\n" % parent for parent in commit.parents[1:])
        chunk.extend(
            b"M 100644 :%d %s\n" % (offsets[p] + v, paths[p].encode()) for p, v in commit.changes
        )
        chunk.append(b"\n")
        out.write(b"".join(chunk))
    out.write(b"done\n")


# ------------------------------------------------------------------------------ building


def build(kind: str, dest: Path) -> BenchRepo:
    """Build the ``kind`` repository as a new bare repository at ``dest`` (absent or empty)."""
    if kind not in SIZES:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(SIZES)}")
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty")
    paths, main_file, directory = _layout(kind)
    with tempfile.TemporaryDirectory(prefix="bench-git-home-") as tmp:
        home = Path(tmp)
        subprocess.run(
            [_GIT, "init", "--quiet", "--bare", f"--initial-branch={BRANCH}", str(dest)],
            env=git_env(home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                [_GIT, f"--git-dir={dest}", "fast-import", "--quiet", "--done"],
                env=git_env(home),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
            assert proc.stdin is not None
            try:
                with proc.stdin:
                    _write_stream(proc.stdin, kind, paths)
            finally:
                code = proc.wait()
            if code != 0:
                errors.seek(0)
                text = errors.read().decode("utf-8", "replace").strip()
                raise RuntimeError(f"git fast-import failed ({code}): {text}")
        _git(dest, home, "commit-graph", "write", "--reachable", "--changed-paths")
        commits = int(_git(dest, home, "rev-list", "--count", BRANCH))
    repo = BenchRepo(dest, kind, BRANCH, main_file, directory, main_file, commits)
    _write_marker(repo)
    return repo


def _write_marker(repo: BenchRepo) -> None:
    fields = {k: v for k, v in asdict(repo).items() if k != "path"}
    marker = repo.path / MARKER
    partial = marker.with_suffix(".tmp")
    partial.write_text(json.dumps({"format": FORMAT, **fields}, indent=2) + "\n")
    partial.replace(marker)


def _read_marker(path: Path, kind: str) -> BenchRepo | None:
    try:
        fields = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(fields, dict) or fields.pop("format", None) != FORMAT:
        return None
    if fields.get("kind") != kind:
        return None
    try:
        return BenchRepo(path=path, **fields)
    except TypeError:
        return None


def ensure(kind: str, cache_dir: Path) -> BenchRepo:
    """The ``kind`` repository at ``cache_dir/KIND.git``, built once and then reused."""
    if kind not in SIZES:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(SIZES)}")
    final = cache_dir / f"{kind}.git"
    cached = _read_marker(final, kind)
    if cached is not None:
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{kind}.", suffix=".building", dir=cache_dir))
    try:
        repo = build(kind, building)
        if final.exists() and _read_marker(final, kind) is None:  # an incomplete build
            shutil.rmtree(final)
        building.rename(final)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        finished = _read_marker(final, kind)  # another process finished first
        if finished is None:
            raise
        return finished
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    repo.path = final
    return repo


# ------------------------------------------------------------------------------ any repository


def _git_dir(path: Path) -> Path:
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    if (path / ".git" / "HEAD").is_file():
        return path / ".git"
    raise ValueError(f"{path} is not a git repository")


def from_path(path: Path) -> BenchRepo:
    """The pages to measure in the real repository at ``path`` (bare or a checkout).

    - ``branch``: the branch ``HEAD`` names (else ``main``, ``master``, or the first branch);
    - ``file``: the text file of 200 to 2,000 lines with the most lines among those at most
      two directories deep (else at any depth; else the largest text file);
    - ``directory``: the file's directory, or else the top-level directory with the most
      entries (``""``, the root, in a repository without directories);
    - ``history_path``: ``file``. ``kind`` is the directory name without ``.git``.
    """
    git_dir = _git_dir(path)
    with tempfile.TemporaryDirectory(prefix="bench-git-home-") as tmp:
        home = Path(tmp)
        branch = _default_branch(git_dir, home)
        listing = _git(git_dir, home, "ls-tree", "-r", "-l", "-z", f"refs/heads/{branch}")
        blobs: list[tuple[str, str, int]] = []  # (path, id, size)
        for record in listing.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, kind, oid, size = meta.split()
            if kind == b"blob" and mode in (b"100644", b"100755"):
                blobs.append((name.decode("utf-8", "surrogateescape"), oid.decode(), int(size)))
        file = _pick_file(git_dir, home, blobs)
        commits = int(_git(git_dir, home, "rev-list", "--count", f"refs/heads/{branch}"))
    directory = file.rpartition("/")[0] or _widest_directory([p for p, _, _ in blobs])
    return BenchRepo(
        path=git_dir,
        kind=path.name.removesuffix(".git") or "repo",
        branch=branch,
        file=file,
        directory=directory,
        history_path=file,
        commits=commits,
    )


def _default_branch(git_dir: Path, home: Path) -> str:
    heads = (
        _git(git_dir, home, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/")
        .decode("utf-8", "surrogateescape")
        .splitlines()
    )
    if not heads:
        raise ValueError(f"{git_dir} has no branches")
    head = (git_dir / "HEAD").read_text(errors="replace").strip()
    named = head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else ""
    for candidate in (named, "main", "master"):
        if candidate in heads:
            return candidate
    return heads[0]


def _line_counts(git_dir: Path, home: Path, ids: Sequence[str]) -> dict[str, int | None]:
    """Lines of each blob, or None for a binary or non-UTF-8 one (one ``cat-file`` run)."""
    out = _git(git_dir, home, "cat-file", "--batch", stdin="".join(f"{i}\n" for i in ids).encode())
    counts: dict[str, int | None] = {}
    at = 0
    for oid in ids:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        data = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            counts[oid] = None
            continue
        counts[oid] = None if b"\0" in data else data.count(b"\n") + (not data.endswith(b"\n"))
    return counts


def _pick_file(git_dir: Path, home: Path, blobs: Sequence[tuple[str, str, int]]) -> str:
    fitting = sorted((b for b in blobs if 200 <= b[2] <= 500_000), key=lambda b: (-b[2], b[0]))
    shallow = [b for b in fitting if b[0].count("/") <= 2][:300]
    deeper = [b for b in fitting if b[0].count("/") > 2][:300]
    for group in (shallow, deeper):
        if not group:
            continue
        counts = _line_counts(git_dir, home, list(dict.fromkeys(b[1] for b in group)))
        ranked = [(lines, b[0]) for b in group if (lines := counts[b[1]]) and 200 <= lines <= 2000]
        if ranked:
            return max(ranked, key=lambda r: (r[0], [-ord(c) for c in r[1]]))[1]
    text = sorted((b for b in blobs if b[2] <= 1_000_000), key=lambda b: (-b[2], b[0]))[:300]
    if text:
        counts = _line_counts(git_dir, home, list(dict.fromkeys(b[1] for b in text)))
        for path, oid, _ in text:
            if counts[oid]:
                return path
    raise ValueError(f"{git_dir} has no text file to show")


def _widest_directory(paths: Sequence[str]) -> str:
    entries: dict[str, set[str]] = {}
    for path in paths:
        top, _, rest = path.partition("/")
        if rest:
            entries.setdefault(top, set()).add(rest.split("/")[0])
    if not entries:
        return ""
    return max(sorted(entries), key=lambda top: len(entries[top]))


# ------------------------------------------------------------------------------ command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.repos", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("build", help="build KIND as a new bare repository at DEST")
    one.add_argument("kind", choices=list(SIZES))
    one.add_argument("dest", type=Path)
    cached = sub.add_parser("ensure", help="build KIND into CACHE_DIR/KIND.git unless there")
    cached.add_argument("kind", choices=list(SIZES))
    cached.add_argument("cache_dir", type=Path)
    seen = sub.add_parser("inspect", help="the pages from_path picks in a real repository")
    seen.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    began = time.monotonic()
    if args.command == "build":
        repo = build(args.kind, args.dest.absolute())
    elif args.command == "ensure":
        repo = ensure(args.kind, args.cache_dir.absolute())
    else:
        repo = from_path(args.path.absolute())
    fields = {**asdict(repo), "path": str(repo.path)}
    print(json.dumps({**fields, "seconds": round(time.monotonic() - began, 2)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
