"""The WSGI entry point a server worker imports: settings from ``FLOORLESS_*`` variables."""

from __future__ import annotations

import atexit
import logging

import falcon

from floorless.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app


def application() -> falcon.App[falcon.Request, falcon.Response]:
    """Factory: build and start a forge from the environment, and return its app."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    forge = Forge(Settings.load())
    forge.start()
    atexit.register(forge.stop)
    return create_app(forge)
