"""The package's shape, held: imports point downwards only, nothing imports in a circle, and
the README's map lists exactly the packages there are. Every import counts, wherever it is
written (``support.imports`` reads them)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from support import imports

pytestmark = pytest.mark.unit  # reads source files alone

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "floorless"
README = PACKAGE.parent.parent / "README.md"

# Lowest first. A module may import its own layer's packages and any below; packages of one
# layer may use each other only where no circle comes of it (checked below).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("git", "db"),
    ("repos",),
    ("accounts", "index", "search", "files", "lfs"),
    ("collab", "webhooks"),
    ("forgejo",),
    ("forge",),  # the composition root: builds the services below and wires them
    ("gitservice",),  # git's services whatever the transport: access, a push's effects
    ("web", "ssh"),
    ("cli", "doctor", "probe", "__main__"),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
# What may sit at the package's root besides the packages of LAYERS.
ROOT_MODULES = {"__init__", "__main__", "forge"}


def modules() -> dict[str, Path]:
    return imports.modules(PACKAGE)


def graph() -> dict[str, set[str]]:
    return imports.graph(PACKAGE)


def unit(module: str) -> str:
    """The package (``floorless.web.api`` is ``web``) or root module a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_has_a_layer() -> None:
    units = {unit(name) for name in modules()} - {"__init__"}
    assert units - RANK.keys() == set(), "a package with no place in LAYERS"
    root = {path.stem for path in PACKAGE.glob("*.py")}
    assert root <= ROOT_MODULES, f"modules at the root: {sorted(root - ROOT_MODULES)}"


def test_imports_point_downwards() -> None:
    upward = [
        f"{module} imports {target}"
        for module, targets in sorted(graph().items())
        for target in sorted(targets)
        if unit(target) != "__init__" and RANK[unit(target)] > RANK[unit(module)]
    ]
    assert upward == []


def test_no_module_imports_in_a_circle() -> None:
    assert imports.circles(graph()) == []


def test_no_packages_import_in_a_circle() -> None:
    """Also among the web layer's parts: the API's resources and the HTML views each count as
    one, beside the web package's own modules (the app above them, rendering below), and
    neither the resources nor the views use the other."""
    edges: dict[str, set[str]] = defaultdict(set)

    def part(module: str) -> str:
        parts = module.split(".")
        if parts[1:2] == ["web"]:
            return ".".join(parts[:3])
        return unit(module)

    for module, targets in graph().items():
        for target in targets:
            if part(target) != part(module):
                edges[part(module)].add(part(target))
    assert imports.circles(edges) == []


def test_circles_are_found() -> None:
    """The check itself: a circle of three and a self-standing pair are both reported."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert imports.circles(edges) == [["a", "b", "c"], ["d", "e"]]


def test_readme_map_lists_the_packages() -> None:
    """The architecture map in the README names every package (and no package that is gone)."""
    text = README.read_text()
    section = text[text.index("## Architecture") :]
    start = section.index("```\nsrc/floorless/")
    block = section[start : section.index("\n```\n", start + 4)]
    listed = set(re.findall(r"^  ([a-z_]+)/", block, re.MULTILINE))
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert listed == packages
