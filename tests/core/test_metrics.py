"""What ``/-/metrics`` says about the process itself: its memory and the garbage collector's
pauses (a full collection over a large heap is a pause every request in flight waits for)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

from falcon import testing
from support.forges import start_forge

from floorless.core import heap
from floorless.web.app import create_app


def _value(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name + labels)} ([0-9.e+-]+)$", text, re.M)
    assert found, name + labels
    return float(found.group(1))


def test_metrics_count_gc_pauses_and_resident_memory(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        client = testing.TestClient(create_app(forge))
        before = client.simulate_get("/-/metrics", remote_addr="127.0.0.1").text
        gc.collect()
        gc.collect()
        after = client.simulate_get("/-/metrics", remote_addr="127.0.0.1").text
        full = 'floorless_gc_collections_total{gen="2"}'
        assert _value(after, full) >= _value(before, full) + 2
        assert _value(after, "floorless_gc_longest_pause_seconds", '{gen="2"}') > 0
        assert _value(after, "process_resident_memory_bytes") > 10 * 1024 * 1024
        chosen = 'floorless_gc_chosen_collections_total{gen="2"}'
        heap.collect_everything()  # at a moment of floorless's choosing: told apart
        told = client.simulate_get("/-/metrics", remote_addr="127.0.0.1").text
        assert _value(told, chosen) == _value(after, chosen) + 1
        assert _value(told, full) == _value(after, full)
    finally:
        forge.stop()
