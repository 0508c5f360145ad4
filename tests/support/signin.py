"""Signing in under attack: a forge with its limits and the forms and credentials the
hardening tests and the shared sign-in tests send."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from falcon import testing

from floorless.forge import Forge
from support.forges import start_forge

PASSWORD = "a long password"


WRONG = "not the password"


FORM = "application/x-www-form-urlencoded"


ATTACKER = "203.0.113.66"


def basic(name: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{secret}".encode()).decode()}


def sign_in(client: testing.TestClient, name: str, password: str, address: str) -> testing.Result:
    """The sign-in form, as a browser at ``address`` sends it."""
    page = client.simulate_get("/-/login", remote_addr=address)
    csrf = re.search(r'name="csrf" value="([^"]*)"', page.text).group(1)
    cookie = page.cookies["floorless_csrf"].value
    return client.simulate_post(
        "/-/login",
        body=f"csrf={csrf}&name={name}&password={password.replace(' ', '+')}",
        headers={"Content-Type": FORM, "Cookie": f"floorless_csrf={cookie}"},
        remote_addr=address,
    )


def make_forge(tmp_path: Path, **overrides) -> Forge:
    forge = start_forge(tmp_path / "repos", tmp_path / "data", **overrides)
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    return forge


LIMITS = {"signin_attempts": 3, "signin_address_attempts": 8, "signin_account_attempts": 6}
