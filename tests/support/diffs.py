"""A repository of diffs to view (long lines, whitespace-only changes, renames), for the diff
pages' tests and the browser's."""

from __future__ import annotations

from pathlib import Path

import pygit2

WHEN = 1_700_000_000


LONG = [f"line {n} of the module" for n in range(1, 81)]


def _text(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def _changed() -> list[str]:
    lines = list(LONG)
    lines[9] = "line 10 of the changed module"  # one word changed
    lines[59] = "line 60 of the module, renamed"  # words added
    return lines


def build(path: Path) -> dict[str, str]:
    """main: a base commit, then a commit changing ``code.txt`` in two far-apart places and
    ``spaces.txt`` in its whitespace alone; feature (from the base): ``code.txt`` changed
    and ``other.txt`` added."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)

    def tree(files: dict[str, bytes]) -> pygit2.Oid:
        index = pygit2.Index()
        for name, data in files.items():
            index.add(pygit2.IndexEntry(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
        return index.write_tree(repo)

    base_files = {"code.txt": _text(LONG), "spaces.txt": b"a b\nc d\n"}
    base = repo.create_commit("refs/heads/main", sig, sig, "Base\n", tree(base_files), [])
    change = repo.create_commit(
        "refs/heads/main",
        sig,
        sig,
        "Change\n",
        tree({"code.txt": _text(_changed()), "spaces.txt": b"a  b\n\tc d\n"}),
        [base],
    )
    feature = repo.create_commit(
        "refs/heads/feature",
        sig,
        sig,
        "Feature\n",
        tree({**base_files, "code.txt": _text(_changed()), "other.txt": b"new\n"}),
        [base],
    )
    return {"base": str(base), "change": str(change), "feature": str(feature)}
