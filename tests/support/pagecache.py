"""Serving a page through the page cache, for the cache tests."""

from __future__ import annotations

import dataclasses

import pytest
from falcon import testing

import floorless.web.app
from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.web.render import Renderer


def serve(forge: Forge, **settings: object) -> tuple[testing.TestClient, Renderer]:
    """A client of a new app over ``forge`` (with a page cache of its own), and the app's
    renderer, which holds the caches."""
    made: list[Renderer] = []

    class Recording(Renderer):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(floorless.web.app, "Renderer", Recording)
        app = create_app(forge)
    (renderer,) = made
    if settings:
        renderer.configure(dataclasses.replace(forge.settings, **settings))
    return testing.TestClient(app), renderer
