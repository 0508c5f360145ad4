"""The ``/api/v1`` tests' client: pyforgejo over an in-process WSGI transport, a token for a
person, and the error an answer carries; with the forge those API tests share."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pyforgejo import PyforgejoApi

from floorless.forge import Forge
from floorless.forgejo import schema
from floorless.web.app import create_app
from support.accounts import PASSWORD
from support.forges import start_forge

BASE = "http://forge.test"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.accounts.create_user("root", "root@example.org", PASSWORD, admin=True)
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


def basic(name: str, password: str = PASSWORD) -> dict[str, str]:
    pair = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def api(http: httpx.Client, token: str = "") -> PyforgejoApi:
    # without a key pyforgejo refuses to start; a blank one sends "Authorization: token ",
    # which Forgejo (and floorless) take as anonymous
    return PyforgejoApi(base_url=BASE + "/api/v1", api_key=token or " ", httpx_client=http)


def token_for(http: httpx.Client, name: str, scopes: list[str] | None = None) -> str:
    """A new token, made as Forgejo's clients make one: with the password over Basic."""
    made = api(http).user.create_token(
        name,
        name=f"t-{secrets.token_hex(4)}",
        scopes=scopes or ["write:repository", "write:user", "write:organization"],
        request_options={"additional_headers": basic(name)},
    )
    assert made.sha1 and made.token_last_eight == made.sha1[-8:]
    return made.sha1


def error_of(answer: httpx.Response) -> str:
    assert answer.headers["content-type"] == "application/json; charset=utf-8", answer.text
    body = answer.json()
    assert set(body) == {"message", "url"}, body
    assert body["url"].endswith("/api/swagger")
    return str(body["message"])


@dataclass(frozen=True)
class Declared:
    """A field of a request shape as the tests send it: its type in a 422's words and
    whether it is required."""

    kind: str
    required: bool


def declared(shape: type | None) -> dict[str, Declared]:
    """The fields a body shape (``Operation.body``, a ``TypedDict``) declares."""
    if shape is None:
        return {}
    needed = schema.required(shape)
    return {
        name: Declared(schema.kind_name(kind), name in needed)
        for name, kind in schema.fields(shape).items()
    }
