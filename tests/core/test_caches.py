"""Every cache has an owner: none is made at a module's level, but the one of object headers
(``git/objects.py`` says why), and the metrics list it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import floorless

pytestmark = pytest.mark.unit

PACKAGE = Path(floorless.__file__).parent
ALLOWED = {("git/objects.py", "HEADERS")}


def module_level_caches() -> set[tuple[str, str]]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_bytes()).body:
            value = getattr(node, "value", None)
            if not isinstance(node, ast.Assign | ast.AnnAssign) or value is None:
                continue
            made = [
                call
                for call in ast.walk(value)
                if isinstance(call, ast.Call) and "Cache" in ast.unparse(call.func)
            ]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if made:
                found |= {(str(path.relative_to(PACKAGE)), ast.unparse(t)) for t in targets}
    return found


def test_no_cache_is_made_at_a_modules_level_but_the_headers() -> None:
    assert module_level_caches() == ALLOWED
