"""Webhook payloads are the composition root's to wire: a forge that serves no web app (a
worker, the command line) sends the events of an issue as one behind ``create_app`` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.accounts import PASSWORD
from support.forges import start_forge, wait_for
from support.webhooks import FAST, Receiver, receiver  # noqa: F401 (a fixture)

pytestmark = pytest.mark.network


def test_a_forge_without_the_web_app_sends_an_issues_event(
    tmp_path: Path,
    receiver: Receiver,  # noqa: F811
) -> None:
    forge = start_forge(
        tmp_path / "repos", tmp_path / "data", webhook_allowed_hosts=("loopback",), **FAST
    )
    try:
        ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        repo = forge.registry.create("ann", "plans")
        forge.webhooks.create(repo.id, None, url=receiver.url + "/hook", events=["issues"])
        forge.issues.create("ann", "plans", ann, "Crash", "on start")
        wait_for(lambda: len(receiver.at("/hook")) == 1)
        (sent,) = receiver.at("/hook")
        assert sent.headers["X-Forgejo-Event"] == "issues"
        assert sent.json["action"] == "opened" and sent.json["issue"]["title"] == "Crash"
        assert sent.json["repository"]["full_name"] == "ann/plans"
    finally:
        forge.stop()
