"""Sign-in throttling shared by every node: failures made through one forge count on another
over the same database (on SQLite, two forges over one file; on PostgreSQL, over one
database), a restart forgets none, the table stays bounded, and a sign-in costs a few queries."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import pytest
from falcon import testing
from support.forges import start_forge
from support.signin import ATTACKER, FORM, LIMITS, PASSWORD, WRONG, basic, make_forge, sign_in

from floorless.forge import Forge
from floorless.web.app import create_app


def second_node(tmp_path: Path, first: Forge) -> Forge:
    """Another forge over ``first``'s repositories and database, with data of its own but the
    same secret key (what nodes share)."""
    data = tmp_path / "b" / "data"
    data.mkdir(parents=True)
    shutil.copy(first.settings.data / "secret.key", data / "secret.key")
    return start_forge(first.settings.repos, data, database=first.settings.database, **LIMITS)


def guess(client: testing.TestClient, name: str, address: str) -> int:
    return client.simulate_get("/", headers=basic(name, WRONG), remote_addr=address).status_code


def test_failures_through_one_node_throttle_on_another_and_outlive_a_restart(
    tmp_path: Path,
) -> None:
    a = make_forge(tmp_path / "a", **LIMITS)
    b = second_node(tmp_path, a)
    try:
        node_a, node_b = (testing.TestClient(create_app(f)) for f in (a, b))
        # one account from one address: three guesses through A, and B makes it wait
        assert [guess(node_a, "ann", ATTACKER) for _ in range(3)] == [401] * 3
        refused = node_b.simulate_get("/", headers=basic("ann", WRONG), remote_addr=ATTACKER)
        assert refused.status_code == 429 and 0 < int(refused.headers["retry-after"]) <= 301
        assert sign_in(node_b, "ann", PASSWORD, ATTACKER).status_code == 429
        # one address guessing at many accounts, by turns through A and B
        other = "203.0.113.99"
        assert [guess((node_a, node_b)[n % 2], f"user{n}", other) for n in range(8)] == [401] * 8
        assert sign_in(node_a, "ben", PASSWORD, other).status_code == 429
        assert sign_in(node_b, "ben", PASSWORD, other).status_code == 429
        # one account from many addresses: ann has 3 failures; 3 more through B fill it
        assert [guess(node_b, "ann", f"198.51.100.{n}") for n in range(3)] == [401] * 3
        assert sign_in(node_a, "ann", PASSWORD, "192.0.2.200").status_code == 429
        # ben, elsewhere, is untouched on either node
        assert sign_in(node_a, "ben", PASSWORD, "192.0.2.201").status_code == 303
    finally:
        b.stop()
        a.stop()
    # a restart forgets nothing
    a = start_forge(tmp_path / "a" / "repos", tmp_path / "a" / "data", **LIMITS)
    try:
        node_a = testing.TestClient(create_app(a))
        assert sign_in(node_a, "ann", PASSWORD, ATTACKER).status_code == 429
        assert sign_in(node_a, "ben", PASSWORD, "203.0.113.99").status_code == 429
        # the names tried and the addresses are not stored as text
        assert b"203.0.113" not in b"".join(
            bytes(row["key"]) for row in a.db.query("SELECT key FROM signin_failures")
        )
    finally:
        a.stop()


def test_failures_older_than_the_window_are_pruned(tmp_path: Path) -> None:
    forge = make_forge(tmp_path, **LIMITS)
    try:
        client = testing.TestClient(create_app(forge))
        for n in range(4):
            guess(client, f"user{n}", ATTACKER)
        assert forge.db.one("SELECT COUNT(*) AS n FROM signin_failures")["n"] == 12
        # age them past the window: the next failure prunes them all
        forge.db.execute("UPDATE signin_failures SET at = at - ?", (LIMITS_WINDOW + 1,))
        assert guess(client, "ann", "192.0.2.77") == 401
        assert forge.db.one("SELECT COUNT(*) AS n FROM signin_failures")["n"] == 3
        # and aged failures no longer count
        assert sign_in(client, "ben", PASSWORD, ATTACKER).status_code == 303
    finally:
        forge.stop()


LIMITS_WINDOW = 300.0  # the signin_window default


def test_a_sign_in_costs_a_few_queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forge = make_forge(tmp_path, **LIMITS)
    try:
        client = testing.TestClient(create_app(forge))
        statements: list[str] = []
        # this request's statements only: the forge's background work (the webhook
        # deliveries' recovery at start, the indexer) runs on threads of its own
        here = threading.get_ident()
        for name in ("_fetch", "_execute", "_executemany"):
            original = getattr(forge.db, name)

            def counted(sql, params, original=original):
                if threading.get_ident() == here:
                    statements.append(" ".join(sql.split()[:3]))
                return original(sql, params)

            monkeypatch.setattr(forge.db, name, counted)

        def post(name: str, password: str, address: str) -> int:
            page = client.simulate_get("/-/login", remote_addr=address)
            csrf = re.search(r'name="csrf" value="([^"]*)"', page.text).group(1)
            cookie = page.cookies["floorless_csrf"].value
            statements.clear()
            return client.simulate_post(
                "/-/login",
                body=f"csrf={csrf}&name={name}&password={password.replace(' ', '+')}",
                headers={"Content-Type": FORM, "Cookie": f"floorless_csrf={cookie}"},
                remote_addr=address,
            ).status_code

        # the first sign-in from a new place reads and records the place
        assert post("ann", PASSWORD, "192.0.2.10") == 303
        first = list(statements)
        # a sign-in from a place known to this node: the failures read, the password checked,
        # the session started
        assert post("ann", PASSWORD, "192.0.2.10") == 303
        assert statements == [
            "SELECT key, at",
            "SELECT * FROM",
            "DELETE FROM sessions",
            "INSERT INTO sessions",
        ]
        assert len(first) == 8, first  # and the place: read twice, written in a transaction
        # after a failure, the success clears the pair's window: one statement more
        assert post("ben", WRONG, "192.0.2.10") == 401
        assert [s for s in statements if "signin_failures" in s] == [
            "DELETE FROM signin_failures",  # what aged out
            "INSERT INTO signin_failures",  # the three keys, in one statement
        ]
        assert post("ben", PASSWORD, "192.0.2.10") == 303
        assert "DELETE FROM signin_failures" in statements
    finally:
        forge.stop()
