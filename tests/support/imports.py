"""A package's import graph, read from its source, and the circles in it.

Every import counts, wherever it is written (at the top, under ``TYPE_CHECKING``, inside a
function): a late import is still a dependency, and a circle hidden in one is still a circle.
Relative imports are resolved against the module that writes them."""

from __future__ import annotations

import ast
from pathlib import Path


def modules(package: Path) -> dict[str, Path]:
    """Every module under the directory ``package``, by its dotted name (``bench.harness``;
    a package's ``__init__`` by the package's own name)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports, each named as
    precisely as the import allows (``from bench import harness`` names ``bench.harness``)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    named = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{module}.{alias.name}"
                named.add(full if full in known else module)
        elif isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
    return {found for found in named if found in known and found != name}


def graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found
