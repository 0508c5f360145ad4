"""Numbers in URLs and forms are ASCII digits: ``²`` and its kin count as digits to Python's
``str.isdigit`` but are no number ``int`` reads, and once made a 500 wherever an id was
checked that way. Each answers a 4xx now."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge

from floorless.web.app import create_app

ODD = ["\u00b2", "\u2463"]  # a superscript two, a circled four: digits int() cannot read


def test_odd_digits_are_no_number(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        forge.accounts.create_user("ann", "ann@example.org", PASSWORD, admin=True)
        forge.registry.create("ann", "plans")
        client = testing.TestClient(create_app(forge))
        basic = base64.b64encode(f"ann:{PASSWORD}".encode()).decode()
        auth = {"Authorization": f"Basic {basic}"}
        browser = Browser(client)
        assert browser.sign_in("ann").status_code == 303
        for odd in ODD:
            text = quote(odd)
            for path in (
                f"/api/v1/user/keys/{text}",
                f"/api/v1/repos/ann/plans/keys/{text}",
                f"/api/v1/repos/ann/plans/pulls/1/reviews/{text}",
            ):
                got = client.simulate_get(
                    path.partition("?")[0], query_string=path.partition("?")[2], headers=auth
                )
                assert 400 <= got.status_code < 500, (path, got.status_code, got.text[:200])
            page = browser.get(f"/ann/plans/settings/hooks/{text}")
            assert 400 <= page.status_code < 500, (odd, page.status_code)
    finally:
        forge.stop()
