"""What ``/-/metrics`` says about the process itself: its memory and the garbage collector's
pauses (a full collection over a large heap is a pause every request in flight waits for)."""

from __future__ import annotations

import gc
import re
import threading
import time
from pathlib import Path

from falcon import testing
from support.forges import start_forge

from floorless.core import heap
from floorless.core.metrics import GcPauses
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
        # a cache kept by size says how many bytes it holds
        assert _value(after, "floorless_cache_bytes", '{cache="pages"}') >= 0
        assert _value(after, "floorless_cache_bytes", '{cache="object-headers"}') >= 0
        chosen = 'floorless_gc_chosen_collections_total{gen="2"}'
        heap.collect_everything()  # at a moment of floorless's choosing: told apart
        told = client.simulate_get("/-/metrics", remote_addr="127.0.0.1").text
        assert _value(told, chosen) == _value(after, chosen) + 1
        assert _value(told, full) == _value(after, full)
    finally:
        forge.stop()


def test_pauses_are_counted_by_length_so_a_scraper_can_count_the_long_ones() -> None:
    pauses = GcPauses()  # not installed: fed by hand, lengths chosen
    for generation, length in ((0, 0.0005), (1, 0.03), (1, 0.004), (2, 2.0)):
        pauses._on_gc("start", {})
        pauses._started = time.perf_counter() - length
        pauses._on_gc("stop", {"generation": generation})
    family = next(m for m in pauses.collect() if m.name == "floorless_gc_pause_length_seconds")
    buckets = {
        (s.labels["gen"], s.labels["le"]): s.value
        for s in family.samples
        if s.name.endswith("_bucket")
    }
    assert buckets["0", "0.001"] == 1
    assert (buckets["1", "0.005"], buckets["1", "0.02"], buckets["1", "0.05"]) == (1, 1, 2)
    assert (buckets["2", "1.0"], buckets["2", "+Inf"]) == (0, 1)
    over_20ms = sum(buckets[g, "+Inf"] - buckets[g, "0.02"] for g in "012")
    assert over_20ms == 2


def test_a_collection_started_while_the_pauses_are_reported_does_not_wait_for_itself() -> None:
    """``collect`` allocates while it holds the watcher's lock; a collection the interpreter
    starts there calls the watcher back in the same thread (at one allocation a collection,
    surely): it must go on, not wait on the lock its own thread holds."""
    pauses = GcPauses()
    done = threading.Event()

    def report() -> None:
        thresholds = gc.get_threshold()
        gc.callbacks.append(pauses._on_gc)
        try:
            gc.set_threshold(1)
            for _ in range(20):
                list(pauses.collect())
        finally:
            gc.set_threshold(*thresholds)
            gc.callbacks.remove(pauses._on_gc)
        done.set()

    threading.Thread(target=report, daemon=True).start()
    assert done.wait(60), "reporting the pauses waited for itself"
    assert sum(pauses.count) > 0
