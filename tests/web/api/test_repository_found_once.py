"""Every resource of one repository gets its repository found before it runs (``FindTarget``):
no responder takes the route's ``owner`` and ``repo`` to look it up again."""

from __future__ import annotations

import inspect

from floorless.web.api.repository import RepoResource
from floorless.web.api.routes import API_ROUTES, REPO


def test_a_repositorys_resources_take_their_repository_found() -> None:
    checked = 0
    for template, kind in API_ROUTES:
        if not template.startswith(REPO):
            continue
        assert issubclass(kind, RepoResource), template
        for name, responder in inspect.getmembers(kind, inspect.isfunction):
            if name.startswith("on_"):
                parameters = inspect.signature(responder).parameters
                assert "target" in parameters, (template, name)
                assert not {"owner", "repo"} & set(parameters), (template, name)
                checked += 1
    assert checked > 90
