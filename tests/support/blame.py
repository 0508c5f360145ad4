"""A repository whose history gives blame's tools something to show (ages, renames,
ignored revisions), for the blame pages' tests and the browser's."""

from __future__ import annotations

from pathlib import Path

import pygit2

DAY = 86_400


WHEN = 1_600_000_000


LINES = [f"value_{n} = compute({n}, 'text number {n}')" for n in range(1, 13)]


def build(path: Path) -> dict[str, str]:
    """A adds old.py; B renames it to new.py changing line 2; C re-indents every line (a
    change in whitespace alone); D lists C (and an id this repository does not have, and one of
    the other hash's length) in ``.git-blame-ignore-revs``."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")

    def commit(message: str, files: dict[str, bytes], days: int, parents: list) -> pygit2.Oid:
        sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN + days * DAY, 0)
        index = pygit2.Index()
        for name, data in files.items():
            index.add(pygit2.IndexEntry(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
        tree = index.write_tree(repo)
        return repo.create_commit("refs/heads/main", sig, sig, message, tree, parents)

    def text(lines: list[str]) -> bytes:
        return ("\n".join(lines) + "\n").encode()

    a = commit("Add old.py\n", {"old.py": text(LINES)}, 0, [])
    changed = list(LINES)
    changed[1] = "value_2 = compute(2, 'a better text')"
    b = commit("Rename old.py to new.py\n", {"new.py": text(changed)}, 400, [a])
    indented = ["    " + line for line in changed]
    c = commit("Re-indent everything\n", {"new.py": text(indented)}, 800, [b])
    ignore = f"# formatting\n{c}  # re-indent\n{'f' * 40}\n{'0' * 64}\n".encode()
    d = commit(
        "Ignore the re-indent\n",
        {"new.py": text(indented), ".git-blame-ignore-revs": ignore},
        801,
        [c],
    )
    return {"a": str(a), "b": str(b), "c": str(c), "d": str(d)}
