"""A forge with repositories whose commits carry statuses, and its clients, shared by the
status tests and the merge rule tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from falcon import testing

from floorless.forge import Forge
from floorless.web.app import create_app
from support.accounts import PASSWORD
from support.api import BASE
from support.forges import start_forge


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "write")
    forge.policy.set_collaborator(plans, forge.accounts.require("cat"), "read")
    forge.policy.set_collaborator(secret, forge.accounts.require("dan"), "read")
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))
