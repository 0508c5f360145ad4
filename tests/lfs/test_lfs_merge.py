"""A pull request merged from a fork brings the LFS objects its commits point to into the base
repository, and only those: what else the fork holds stays the fork's."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

from falcon import testing
from support.accounts import PASSWORD
from support.forges import start_forge
from support.merging import settle

from floorless.lfs.pointers import Pointer
from floorless.web.app import create_app


def _git(work: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(work), "-c", "user.name=A", "-c", "user.email=a@example.org", *args],
        check=True,
        capture_output=True,
    )


def _auth(who: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{who}:{PASSWORD}".encode()).decode()}


def test_a_merged_fork_brings_its_pointed_objects(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        for name in ("ann", "cat"):
            forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
        plans = forge.registry.create("ann", "plans")
        work = tmp_path / "work"
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        (work / "README.md").write_text("# plans\n")
        _git(work, "add", ".")
        _git(work, "commit", "-q", "-m", "start")
        _git(work, "push", "-q", str(plans.path), "main")
        forge.moves.after_push(plans)
        fork = forge.lifecycle.fork(plans, "cat", "plans")
        model, other = os.urandom(9000), os.urandom(9000)
        pointer = Pointer(hashlib.sha256(model).hexdigest(), len(model))
        for data in (model, other):
            forge.lfs.upload(
                fork.id, hashlib.sha256(data).hexdigest(), len(data), io.BytesIO(data).read
            )
        _git(work, "checkout", "-q", "-b", "art")
        (work / "model.bin").write_bytes(pointer.text())
        _git(work, "add", ".")
        _git(work, "commit", "-q", "-m", "a model")
        _git(work, "push", "-q", str(fork.path), "art")
        forge.maintenance.check_refs()
        settle(forge)
        client = testing.TestClient(create_app(forge))
        made = client.simulate_post(
            "/api/v1/repos/ann/plans/pulls",
            json={"head": "cat:art", "base": "main", "title": "A model"},
            headers=_auth("cat"),
        )
        assert made.status_code == 201, made.text
        assert forge.lfs.held(plans.id, [pointer.oid]) == {}  # not before the merge
        settle(forge)
        merged = client.simulate_post(
            f"/api/v1/repos/ann/plans/pulls/{made.json['number']}/merge",
            json={"Do": "merge"},
            headers=_auth("ann"),
        )
        assert merged.status_code == 200, merged.text
        assert forge.lfs.held(plans.id, [pointer.oid, hashlib.sha256(other).hexdigest()]) == {
            pointer.oid: len(model)
        }
        batch = client.simulate_post(
            "/ann/plans.git/info/lfs/objects/batch",
            body=json.dumps(
                {"operation": "download", "objects": [{"oid": pointer.oid, "size": len(model)}]}
            ),
            headers={"Content-Type": "application/vnd.git-lfs+json"},
        )
        assert "download" in batch.json["objects"][0]["actions"]
        page = client.simulate_get("/ann/plans/media/branch/main/model.bin")
        assert page.content == model
    finally:
        forge.stop()
