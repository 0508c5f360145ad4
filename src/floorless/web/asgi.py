"""The entry point a server worker imports: settings from ``FLOORLESS_*`` variables.

granian calls ``application()`` once in each worker process (and again in a worker it starts
after one died); the forge starts there, and stops when the server shuts the worker down.
"""

from __future__ import annotations

import atexit
import logging

from floorless.core import heap
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.git import sigbus
from floorless.ssh import server
from floorless.web import auth
from floorless.web.app import create_app
from floorless.web.gateway import Gateway, Limits


def application() -> Gateway:
    """Factory: build and start a forge from the environment, and return its gateway."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings.load()
    # a pack truncated under libgit2's mapping fails a request, not the worker (SIGBUS)
    sigbus.guard()
    forge = Forge(settings)
    forge.start()
    stop_ssh = server.start_in_process(forge)  # git over SSH: built-in, and OpenSSH's relay

    def stop() -> None:
        stop_ssh()
        forge.stop()

    atexit.register(stop)
    limits = Limits(
        client_timeout=settings.client_timeout,
        push_bytes=settings.max_push_bytes,
        fetch_bytes=settings.max_fetch_request_bytes,
        form_bytes=settings.max_form_bytes,
        upload_bytes=settings.attachment_max_bytes + (1 << 20),  # and its form's framing
        lfs_bytes=settings.lfs_max_bytes or 1 << 40,  # (0: no limit of its own)
    )
    app = create_app(forge)
    heap.settle()  # modules, templates, settings: alive as long as the worker
    return Gateway(
        app,
        limits,
        settings.threads,
        forge.git.tmp,
        stop,
        expensive_threads=settings.expensive_threads,
        on_request=forge.activity.seen,
        admit=auth.Authenticator(forge).may_send,
    )
