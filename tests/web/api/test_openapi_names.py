"""The description (``/swagger.v1.json``) names every operation as Forgejo's does: its
``operationId`` and its tag, so that a client generated from floorless's description has the
methods (``repository.repo_get_pull_request``) of one generated from Forgejo's.

The expected names are ``forgejo_operations.txt`` beside this file (where they come from is
written at its top); the installed pyforgejo, generated from Forgejo's description, is asked
as well, so a row of that file cannot name a method Forgejo's clients lack."""

from __future__ import annotations

import re
from pathlib import Path

from pyforgejo import PyforgejoApi

from floorless.web.api.openapi import describe
from floorless.web.api.routes import API_ROUTES

NAMES = Path(__file__).with_name("forgejo_operations.txt")


def _shape(path: str) -> str:
    """A path with its parameters unnamed: floorless calls Forgejo's ``{filepath}`` a tail."""
    return re.sub(r"{\w+}", "{}", path)


def forgejo_names() -> dict[tuple[str, str], tuple[str, str]]:
    """(method, path) -> (operationId, tag), as Forgejo names them."""
    found = {}
    for line in NAMES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            method, path, operation_id, tag = line.split()
            found[(method.lower(), _shape(path))] = (operation_id, tag)
    return found


def floorless_names() -> dict[tuple[str, str], tuple[str, str]]:
    document = describe(API_ROUTES, "http://forge.test")
    return {
        (method, _shape(path)): (entry["operationId"], *entry["tags"])
        for path, methods in document["paths"].items()
        for method, entry in methods.items()
    }


def test_every_operation_has_forgejos_id_and_tag() -> None:
    ours, forgejos = floorless_names(), forgejo_names()
    assert {key: ours[key] for key in ours if ours[key] != forgejos.get(key)} == {}
    assert set(forgejos) == set(ours), "a row for a route floorless no longer has"
    ids = [operation_id for operation_id, _ in ours.values()]
    assert len(ids) == len(set(ids)), "an operation id given twice"


def _fern(operation_id: str, tag: str) -> str:
    """The method name Fern (pyforgejo's generator) makes of an operation id in a tag."""
    words = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", operation_id)
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", words).lower()
    return snake.removeprefix(f"{tag}_")


def test_forgejos_client_has_a_method_for_each_operation() -> None:
    client = PyforgejoApi(base_url="http://forge.test/api/v1", api_key="token x")
    missing = [
        f"{tag}.{_fern(operation_id, tag)}"
        for operation_id, tag in floorless_names().values()
        if not callable(getattr(getattr(client, tag, None), _fern(operation_id, tag), None))
    ]
    assert missing == []
    assert _fern("getGeneralAPISettings", "settings") == "get_general_api_settings"
    assert _fern("repoGetRawFileOrLFS", "repository") == "repo_get_raw_file_or_lfs"
