"""The unit lane's guard (tests/support/lanes.py) holds: inside a test marked ``unit``, starting
a forge or any process fails the test, so the lane stays a lane of tests that start neither."""

from __future__ import annotations

import os
import subprocess
from typing import cast

import pytest
from support.lanes import UnitLaneError

from floorless.forge import Forge

pytestmark = pytest.mark.unit


def test_a_unit_test_may_not_start_a_forge() -> None:
    with pytest.raises(UnitLaneError, match="started a forge"):
        Forge.start(cast(Forge, None))  # refused before the forge is looked at


def test_nor_a_process() -> None:
    with pytest.raises(UnitLaneError, match="started a process"):
        subprocess.run(["true"], check=False)
    with pytest.raises(UnitLaneError, match="started a process"):
        os.system("true")


def test_the_lane_is_marked(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
