"""Memory an index freed goes back to the system once the indexer is idle (glibc keeps freed
pages in its arenas otherwise: an idle server held its first index's peak for good)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import gc
    from pathlib import Path
    from floorless.core.heap import give_back

    def rss_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    held = [bytearray(4000) for _ in range(25_000)]  # 100 MB from malloc, not pymalloc
    above = bytearray(4000)  # the heap's top stays in use: free() alone trims nothing
    del held
    gc.collect()
    before = rss_mb()
    give_back()
    print(before - rss_mb())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_pages_go_back_to_the_system() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert float(out) > 50  # MB of the 100 freed
