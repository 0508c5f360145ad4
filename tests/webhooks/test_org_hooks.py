"""An organisation's webhooks in the web settings (``/-/orgs/{org}/hooks``): its owners add,
list, edit and delete them and read their deliveries, sent for every repository of the
organisation to a real receiver on loopback; nobody else reaches them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import support.webhooks
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge, wait_for
from support.webhooks import FAST, Receiver

from floorless.forge import Forge
from floorless.web.app import create_app

# the shared fixtures this module's tests ask for
receiver = support.webhooks.receiver

pytestmark = pytest.mark.network
PAGE = "/-/orgs/acme/hooks"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    (tmp_path / "repos").mkdir()
    forge = start_forge(
        tmp_path / "repos", tmp_path / "data", webhook_allowed_hosts=("loopback",), **FAST
    )
    ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.accounts.create_org("acme", ann)
    forge.registry.create("acme", "tools")
    forge.registry.create("ann", "own")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def signed_in(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser


def test_owners_add_a_hook_that_hears_every_repository_of_the_organisation(
    forge: Forge,
    client: testing.TestClient,
    receiver: Receiver,
) -> None:
    ann = signed_in(client, "ann")
    listed = ann.get(PAGE)
    assert listed.status_code == 200 and "No webhooks." in listed.text
    added = ann.post(
        PAGE,
        {
            "action": "add",
            "url": receiver.url + "/org",
            "content_type": "json",
            "http_method": "POST",
            "event-issues": "on",
            "active": "on",
        },
    )
    assert added.status_code == 303, added.text[:300]
    found = re.fullmatch(r"/-/orgs/acme/hooks/(\d+)", added.headers["location"])
    assert found
    hook_id = int(found.group(1))
    org = forge.accounts.get("acme")
    assert org is not None
    (hook,) = forge.webhooks.hooks(None, org.id)
    assert hook.id == hook_id and hook.events == ("issues",)
    assert receiver.url + "/org" in ann.get(PAGE).text

    # an issue in any repository of acme reaches it; one elsewhere does not
    owner = forge.accounts.get("ann")
    assert owner is not None
    forge.issues.create("ann", "own", owner, "Not theirs", "")
    forge.issues.create("acme", "tools", owner, "Broken", "")
    wait_for(lambda: len(receiver.at("/org")) == 1)
    (delivery,) = receiver.at("/org")
    assert delivery.headers["X-Forgejo-Event"] == "issues"
    assert delivery.json["repository"]["full_name"] == "acme/tools"

    # the hook's page lists the delivery, and sends it again when asked
    detail = ann.get(f"{PAGE}/{hook_id}")
    sent = forge.webhooks.deliveries(hook)
    assert detail.status_code == 200 and sent and sent[0].uuid in detail.text
    again = ann.post(f"{PAGE}/{hook_id}", {"action": "redeliver", "delivery": str(sent[0].id)})
    assert again.status_code == 303
    wait_for(lambda: len(receiver.at("/org")) == 2)
    assert receiver.at("/org")[1].json == delivery.json

    # a test push needs a repository: refused with a reason, nothing sent
    tested = ann.post(f"{PAGE}/{hook_id}", {"action": "test"})
    assert tested.status_code == 400 and "push to one of its repositories" in tested.text
    # bad input: a clear answer, nothing written
    bad = ann.post(PAGE, {"action": "add", "url": "ftp://example.org/in", "active": "on"})
    assert bad.status_code == 400 and "http" in bad.text
    assert len(forge.webhooks.hooks(None, org.id)) == 1
    deleted = ann.post(f"{PAGE}/{hook_id}", {"action": "delete"})
    assert deleted.status_code == 303 and forge.webhooks.hooks(None, org.id) == []


def test_nobody_else_reaches_an_organisations_hooks(
    forge: Forge, client: testing.TestClient
) -> None:
    org = forge.accounts.get("acme")
    assert org is not None
    forge.webhooks.create(None, org.id, url="https://hooks.example.org/in", active=False)
    anonymous = client.simulate_get(PAGE)
    assert anonymous.status_code == 303 and "/-/login" in anonymous.headers["location"]
    ben = signed_in(client, "ben")
    assert ben.get(PAGE).status_code == 403
    assert ben.get(f"{PAGE}/1").status_code == 403
    assert "hooks.example.org" not in ben.get(PAGE).text
    refused = ben.post(PAGE, {"action": "add", "url": "https://evil.example.org/"}, csrf=None)
    assert refused.status_code in (400, 403)
    assert len(forge.webhooks.hooks(None, org.id)) == 1
    ann = signed_in(client, "ann")
    assert ann.get("/-/orgs/ann/hooks").status_code == 404  # a person, not an organisation
    assert ann.get("/-/orgs/nobody/hooks").status_code == 404
    assert ann.get(f"{PAGE}/999").status_code == 404
